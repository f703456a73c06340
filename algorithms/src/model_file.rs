//! A MOCC model file at a boundary: where `--model` looks by default, reading and validating
//! the file, and what to tell the user when it cannot be used. The one file read in this crate,
//! on behalf of the flags (`polycc-portus`, `polycc-sim`, `mocc-targets`) and the control
//! socket's `model_load`; never on a flow's path (flows share the loaded model, [`ModelSlot`]).
//!
//! [`ModelSlot`]: crate::mocc::ModelSlot

use crate::mocc::{MoccModel, ModelError};
use std::path::{Path, PathBuf};

/// Where MOCC's model is looked for without --model: the working directory's onnx/mocc.onnx,
/// then the one in this source tree.
pub const DEFAULT_MODEL: &str = "onnx/mocc.onnx";

/// A MOCC model file that cannot be used: what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum ModelLoadError {
    #[error(
        "no MOCC model at {tried}: pass --model PATH, or train and export one (`make train` writes onnx/mocc.onnx)"
    )]
    Missing { tried: String },
    #[error("cannot read the MOCC model {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path}: {source}")]
    Invalid { path: String, source: ModelError },
}

/// Read and validate a MOCC model file.
pub fn load_model(path: &Path) -> Result<MoccModel, ModelLoadError> {
    let bytes = std::fs::read(path).map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => ModelLoadError::Missing { tried: path.display().to_string() },
        _ => ModelLoadError::Read { path: path.display().to_string(), source },
    })?;
    MoccModel::from_bytes(&bytes).map_err(|source| ModelLoadError::Invalid { path: path.display().to_string(), source })
}

/// The model file `--model` names, or the default one that exists.
pub fn model_path(flag: Option<&Path>) -> Result<PathBuf, ModelLoadError> {
    if let Some(p) = flag {
        return Ok(p.to_path_buf());
    }
    let candidates =
        [PathBuf::from(DEFAULT_MODEL), Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(DEFAULT_MODEL)];
    candidates.iter().find(|p| p.is_file()).cloned().ok_or_else(|| ModelLoadError::Missing {
        tried: candidates.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" or "),
    })
}
