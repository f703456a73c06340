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

/// A MOCC flow at preference `weights` running `slot`'s model, as deployed.
#[allow(dead_code)] // each test file that includes this module uses one of the two
pub fn mocc(weights: [f64; 3], slot: &ModelSlot) -> Policy {
    mocc_sharing(weights, slot, MoccConfig::default().fair_share)
}

/// ... with its share probe (`mocc::share`) on or off.
#[allow(dead_code)] // each test file that includes this module uses one of the two
pub fn mocc_sharing(weights: [f64; 3], slot: &ModelSlot, fair_share: bool) -> Policy {
    Policy::Single(AlgorithmConfig::Mocc(MoccConfig {
        weights: weights.to_vec(),
        slot: Some(slot.clone()),
        fair_share,
        ..MoccConfig::default()
    }))
}
