//! What the simulator's MOCC tests share: the shipped model and a policy that runs it.

use polycc_algorithms::mocc::{MoccConfig, ModelSlot};
use polycc_algorithms::model_file::load_model;
use polycc_algorithms::{AlgorithmConfig, Policy};
use std::path::Path;

/// The shipped model, `onnx/mocc.onnx`.
pub fn shipped_model() -> ModelSlot {
    let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../onnx/mocc.onnx"));
    ModelSlot::new(load_model(path).unwrap_or_else(|e| panic!("{e}")))
}

/// A MOCC flow at preference `weights` running `slot`'s model.
pub fn mocc(weights: [f64; 3], slot: &ModelSlot) -> Policy {
    Policy::Single(AlgorithmConfig::Mocc(MoccConfig {
        weights: weights.to_vec(),
        slot: Some(slot.clone()),
        ..MoccConfig::default()
    }))
}
