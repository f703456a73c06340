//! Small hand-built ONNX models in MOCC's format, for tests and benchmarks that must not depend
//! on a trained model: `action = tanh(obs . weights + bias) x clip`, a real ONNX graph
//! (MatMul, Add, Tanh, Mul) with the metadata of [`REQUIRED_METADATA`].

use super::*;
use prost::Message;
use tract_onnx::pb;

/// ONNX `TensorProto.DataType.FLOAT`.
const FLOAT: i32 = 1;

/// Metadata a valid model carries (action clip 2).
pub fn metadata() -> Vec<(String, String)> {
    [
        ("polycc.format", MODEL_FORMAT),
        (
            "polycc.obs_layout",
            "w_thr, w_lat, w_loss, then 10 MIs oldest first x (send_ratio, latency_ratio, latency_gradient)",
        ),
        ("polycc.history", "10"),
        ("polycc.action_alpha", "0.025"),
        ("polycc.action_clip", "2"),
        ("polycc.normalization", "{\"kind\": \"none\"}"),
        ("polycc.train_command", "synthetic (algorithms/src/mocc.rs)"),
        ("polycc.seed", "0"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

fn value_info(name: &str, dims: &[Option<i64>]) -> pb::ValueInfoProto {
    use pb::tensor_shape_proto::{dimension::Value, Dimension};
    pb::ValueInfoProto {
        name: name.into(),
        r#type: Some(pb::TypeProto {
            denotation: String::new(),
            value: Some(pb::type_proto::Value::TensorType(pb::type_proto::Tensor {
                elem_type: FLOAT,
                shape: Some(pb::TensorShapeProto {
                    dim: dims
                        .iter()
                        .map(|d| Dimension {
                            denotation: String::new(),
                            value: Some(match d {
                                Some(n) => Value::DimValue(*n),
                                None => Value::DimParam("N".into()),
                            }),
                        })
                        .collect(),
                }),
            })),
        }),
        doc_string: String::new(),
    }
}

fn tensor(name: &str, dims: &[i64], data: Vec<f32>) -> pb::TensorProto {
    pb::TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: FLOAT,
        float_data: data,
        ..Default::default()
    }
}

fn node(op: &str, inputs: &[&str], output: &str) -> pb::NodeProto {
    pb::NodeProto {
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![output.into()],
        name: output.into(),
        op_type: op.into(),
        ..Default::default()
    }
}

/// The bytes of an ONNX model `tanh(obs . weights + bias) x clip` whose input has
/// `weights.len()` columns, with `metadata`.
pub fn model_bytes(weights: &[f32], bias: f32, clip: f32, metadata: &[(String, String)]) -> Vec<u8> {
    let n = weights.len() as i64;
    let graph = pb::GraphProto {
        name: "mocc-synthetic".into(),
        node: vec![
            node("MatMul", &["obs", "w"], "h"),
            node("Add", &["h", "b"], "z"),
            node("Tanh", &["z"], "t"),
            node("Mul", &["t", "clip"], OUTPUT_NAME),
        ],
        initializer: vec![
            tensor("w", &[n, 1], weights.to_vec()),
            tensor("b", &[1], vec![bias]),
            tensor("clip", &[1], vec![clip]),
        ],
        input: vec![value_info(INPUT_NAME, &[None, Some(n)])],
        output: vec![value_info(OUTPUT_NAME, &[None, Some(1)])],
        ..Default::default()
    };
    let proto = pb::ModelProto {
        ir_version: 8,
        opset_import: vec![pb::OperatorSetIdProto { domain: String::new(), version: 13 }],
        producer_name: "polycc-algorithms".into(),
        graph: Some(graph),
        metadata_props: metadata
            .iter()
            .map(|(k, v)| pb::StringStringEntryProto { key: k.clone(), value: v.clone() })
            .collect(),
        ..Default::default()
    };
    proto.encode_to_vec()
}

/// A valid model: more throughput weight and a lower latency ratio push the rate up.
pub fn valid_model_bytes() -> Vec<u8> {
    let mut w = vec![0.0f32; MODEL_INPUT_LEN];
    w[0] = 1.0; // w_thr
    w[1] = -1.0; // w_lat
    for i in 0..HISTORY {
        w[WEIGHTS + FEATURES * i] = -0.1; // send ratio
        w[WEIGHTS + FEATURES * i + 1] = -0.2; // latency ratio
        w[WEIGHTS + FEATURES * i + 2] = -1.0; // latency gradient
    }
    model_bytes(&w, 2.5, 2.0, &metadata())
}
