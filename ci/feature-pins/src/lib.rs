//! No code: this crate's manifest pins the features of shared dependencies so that every build
//! `make test` runs reuses one compiled copy of each (see its Cargo.toml).
