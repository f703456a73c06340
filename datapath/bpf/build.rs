//! Compiles src/bpf/polycc.bpf.c with clang and generates its Rust skeleton into OUT_DIR.
//!
//! Needs clang (any version that targets BPF; Debian 12's 14 does) and libelf (libelf-dev) for
//! the vendored libbpf. The kernel types come from src/bpf/vmlinux_min.h (CO-RE), so nothing
//! here reads the build host's kernel.

use libbpf_cargo::SkeletonBuilder;
use std::env;
use std::path::PathBuf;

const SRC: &str = "src/bpf/polycc.bpf.c";
const REJECT_SRC: &str = "src/bpf/reject_test.bpf.c";
/// ccp_prr.h (the loss episode's window reduction) is ccp.ko's, shared: one copy for both datapaths.
const MODULE_DIR: &str = "..";

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("polycc.skel.rs");
    let arch = match env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
        Ok("x86_64") => "x86",
        Ok("aarch64") => "arm64",
        Ok(other) => panic!("polycc-bpf: no BPF target arch mapping for {other}"),
        Err(_) => "x86",
    };
    if let Err(e) = SkeletonBuilder::new()
        .source(SRC)
        // v3: atomic fetch-and-add (flow ids, counters); kernels >= 5.12.
        .clang_args([
            "-mcpu=v3".to_string(),
            format!("-D__TARGET_ARCH_{arch}"),
            "-Isrc/bpf".to_string(),
            format!("-I{MODULE_DIR}"),
        ])
        .build_and_generate(&out)
    {
        // The whole chain, so clang's diagnostics reach the user.
        panic!("polycc-bpf: building {SRC} failed (needs clang and libelf-dev): {e:#}");
    }
    // A program the verifier must refuse, for the test that a rejected build is reported.
    let reject = out.with_file_name("reject_test.bpf.o");
    if let Err(e) = SkeletonBuilder::new()
        .source(REJECT_SRC)
        .obj(&reject)
        .clang_args([format!("-D__TARGET_ARCH_{arch}"), "-Isrc/bpf".to_string()])
        .build()
    {
        panic!("polycc-bpf: building {REJECT_SRC} failed: {e:#}");
    }
    for f in [SRC, REJECT_SRC, "src/bpf/polycc.h", "src/bpf/vmlinux_min.h", "../ccp_prr.h"] {
        println!("cargo:rerun-if-changed={f}");
    }
}
