//! MOCC's model: an ONNX policy loaded and checked once ([`MoccModel`]), run by tract, and the
//! slot every MOCC flow reads it from, which a `model_load` swaps without stopping flows
//! ([`ModelSlot`]).

use super::*;

/// A model file that cannot be used, with what to do about it.
#[derive(Debug, Error)]
pub enum ModelError {
    #[error("the MOCC model is not a readable ONNX file ({0}): re-export it (`PYTHONPATH=onnx/python python3 -m mocc.export`) or pass another --model")]
    Corrupt(String),
    #[error("the MOCC model has {found} inputs and {outputs} outputs: expected one input `obs` [N, 33] and one output `action` [N, 1]")]
    Arity { found: usize, outputs: usize },
    #[error(
        "the MOCC model's input has shape {found}: expected [N, {MODEL_INPUT_LEN}] (3 weights + 10 MIs x 3 features)"
    )]
    InputShape { found: String },
    #[error("the MOCC model's output has shape {found}: expected [N, 1] (the policy's mean action)")]
    OutputShape { found: String },
    #[error("the MOCC model lacks metadata {missing:?}: export it with `python3 -m mocc.export` (onnx/python), which writes all of {REQUIRED_METADATA:?}")]
    MissingMetadata { missing: Vec<String> },
    #[error("the MOCC model's metadata {key} = `{value}` is invalid: {reason}")]
    BadMetadata { key: &'static str, value: String, reason: String },
    #[error("the MOCC model cannot be prepared for inference ({0}): an operator tract does not support?")]
    Unsupported(String),
    #[error("MOCC inference failed: {0}")]
    Inference(String),
}

/// A validated MOCC policy network, ready to run. Built once at a boundary; shared by flows.
pub struct MoccModel {
    pub(super) plan: Arc<TypedSimplePlan>,
    /// The inference state and input buffer reused from decision to decision: tract's
    /// `SimplePlan::run` builds a state (one slot per node, op states) and drops it on every call,
    /// and a fresh input tensor is one more allocation. A decision that finds it in use by another
    /// thread runs on a state of its own (`SimplePlan::run`) instead of waiting.
    pub(super) runner: Mutex<Runner>,
    action_clip: f64,
    /// The latency ratio its observation carries ([`RTT_BASE_KEY`]).
    rtt_base: RttBase,
    metadata: BTreeMap<String, String>,
    size_bytes: usize,
}

/// A reusable tract state and the `[1, MODEL_INPUT_LEN]` input tensor it is fed.
pub(super) struct Runner {
    state: TypedSimpleState,
    /// Shared with the state only during a run; unique again afterwards, so it is refilled in place.
    input: Arc<Tensor>,
}

impl Runner {
    fn new(plan: &Arc<TypedSimplePlan>) -> TractResult<Runner> {
        Ok(Runner { state: plan.spawn()?, input: Arc::new(Tensor::zero::<f32>(&[1, MODEL_INPUT_LEN])?) })
    }

    fn run(&mut self, input: &[f32; MODEL_INPUT_LEN]) -> TractResult<TVec<TValue>> {
        match Arc::get_mut(&mut self.input) {
            Some(t) => t.try_as_plain_ram_mut()?.as_slice_mut::<f32>()?.copy_from_slice(input),
            None => self.input = Arc::new(Tensor::from_shape(&[1, MODEL_INPUT_LEN], input)?),
        }
        let out = self.state.run(tvec!(TValue::from_const(self.input.clone())));
        if out.is_err() {
            // A failed run leaves the turn's values behind: start the next one clean.
            self.state.reset_turn()?;
        }
        out
    }
}

impl fmt::Debug for MoccModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MoccModel")
            .field("action_clip", &self.action_clip)
            .field("size_bytes", &self.size_bytes)
            .field("seed", &self.metadata.get("polycc.seed"))
            .finish()
    }
}

fn dims_of(v: &tract_onnx::pb::ValueInfoProto) -> Option<Vec<Option<i64>>> {
    use tract_onnx::pb::tensor_shape_proto::dimension::Value;
    use tract_onnx::pb::type_proto::Value as Type;
    let Some(Type::TensorType(t)) = v.r#type.as_ref()?.value.as_ref() else { return None };
    Some(
        t.shape
            .as_ref()?
            .dim
            .iter()
            .map(|d| match d.value {
                Some(Value::DimValue(n)) => Some(n),
                _ => None,
            })
            .collect(),
    )
}

fn shape_text(dims: &Option<Vec<Option<i64>>>) -> String {
    match dims {
        None => "unknown".into(),
        Some(d) => format!(
            "[{}]",
            d.iter().map(|x| x.map_or("N".to_string(), |n| n.to_string())).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// `[N, len]` with N free or any size.
fn is_batch_of(dims: &Option<Vec<Option<i64>>>, len: i64) -> bool {
    matches!(dims, Some(d) if d.len() == 2 && d[1] == Some(len))
}

impl MoccModel {
    /// Parse and validate an ONNX model (the bytes of `onnx/mocc.onnx`).
    pub fn from_bytes(bytes: &[u8]) -> Result<MoccModel, ModelError> {
        let onnx = tract_onnx::onnx();
        let proto = onnx.proto_model_for_read(&mut &bytes[..]).map_err(|e| ModelError::Corrupt(format!("{e:#}")))?;
        let graph = proto.graph.as_ref().ok_or_else(|| ModelError::Corrupt("no graph in the file".into()))?;
        // Initializers may be listed as inputs by old exporters: the real inputs are the others.
        let inits: Vec<&str> = graph.initializer.iter().map(|t| t.name.as_str()).collect();
        let inputs: Vec<_> = graph.input.iter().filter(|i| !inits.contains(&i.name.as_str())).collect();
        if inputs.len() != 1 || graph.output.len() != 1 {
            return Err(ModelError::Arity { found: inputs.len(), outputs: graph.output.len() });
        }
        let in_dims = dims_of(inputs[0]);
        if !is_batch_of(&in_dims, MODEL_INPUT_LEN as i64) {
            return Err(ModelError::InputShape { found: shape_text(&in_dims) });
        }
        let out_dims = dims_of(&graph.output[0]);
        if !is_batch_of(&out_dims, 1) {
            return Err(ModelError::OutputShape { found: shape_text(&out_dims) });
        }
        let metadata: BTreeMap<String, String> =
            proto.metadata_props.iter().map(|e| (e.key.clone(), e.value.clone())).collect();
        let missing: Vec<String> =
            REQUIRED_METADATA.iter().filter(|k| !metadata.contains_key(**k)).map(|k| k.to_string()).collect();
        if !missing.is_empty() {
            return Err(ModelError::MissingMetadata { missing });
        }
        let get = |k: &str| metadata[k].trim().to_string();
        if get("polycc.format") != MODEL_FORMAT {
            return Err(ModelError::BadMetadata {
                key: "polycc.format",
                value: get("polycc.format"),
                reason: format!("this build runs `{MODEL_FORMAT}` models"),
            });
        }
        if get("polycc.history").parse::<usize>().ok() != Some(HISTORY) {
            return Err(ModelError::BadMetadata {
                key: "polycc.history",
                value: get("polycc.history"),
                reason: format!("the observation holds {HISTORY} MIs"),
            });
        }
        let alpha = get("polycc.action_alpha").parse::<f64>().ok();
        if alpha.is_none_or(|a| (a - ACTION_ALPHA).abs() > 1e-12) {
            return Err(ModelError::BadMetadata {
                key: "polycc.action_alpha",
                value: get("polycc.action_alpha"),
                reason: format!(
                    "the rate update uses alpha = {ACTION_ALPHA}; a model trained with another would mis-step"
                ),
            });
        }
        let action_clip = match get("polycc.action_clip").parse::<f64>() {
            Ok(c) if c.is_finite() && c > 0.0 => c,
            _ => {
                return Err(ModelError::BadMetadata {
                    key: "polycc.action_clip",
                    value: get("polycc.action_clip"),
                    reason: "must be a positive number".into(),
                })
            }
        };
        let rtt_base = RttBase::from_metadata(metadata.get(RTT_BASE_KEY).map(String::as_str)).map_err(|reason| {
            ModelError::BadMetadata {
                key: RTT_BASE_KEY,
                value: metadata.get(RTT_BASE_KEY).cloned().unwrap_or_default(),
                reason,
            }
        })?;
        let model = onnx
            .model_for_proto_model(&proto)
            .and_then(|m| m.with_input_fact(0, f32::fact([1, MODEL_INPUT_LEN]).into()))
            .map_err(|e| ModelError::Corrupt(format!("{e:#}")))?;
        let plan = model
            .into_optimized()
            .and_then(|m| m.into_runnable())
            .map_err(|e| ModelError::Unsupported(format!("{e:#}")))?;
        let runner = Mutex::new(Runner::new(&plan).map_err(|e| ModelError::Unsupported(format!("{e:#}")))?);
        let m = MoccModel { plan, runner, action_clip, rtt_base, metadata, size_bytes: bytes.len() };
        // One inference on a neutral observation proves the graph runs and yields one action.
        let probe = MoccCore::new(FlowInfo::default(), None).model_input(&Preference::default());
        let a = m.infer(&probe)?;
        if !a.is_finite() {
            return Err(ModelError::Inference(format!("the model maps a neutral observation to {a}")));
        }
        Ok(m)
    }

    /// The mean action for one input, before clipping.
    pub fn infer(&self, input: &[f32; MODEL_INPUT_LEN]) -> Result<f32, ModelError> {
        let out = match self.runner.try_lock() {
            Ok(mut runner) => runner.run(input),
            // A panic elsewhere while holding the lock cannot corrupt the state: `run` resets it.
            Err(TryLockError::Poisoned(p)) => p.into_inner().run(input),
            Err(TryLockError::WouldBlock) => {
                Tensor::from_shape(&[1, MODEL_INPUT_LEN], input).and_then(|t| self.plan.run(tvec!(t.into_tvalue())))
            }
        }
        .map_err(|e| ModelError::Inference(format!("{e:#}")))?;
        let view = out.first().ok_or_else(|| ModelError::Inference("no output".into()))?;
        let view = view.to_plain_array_view::<f32>().map_err(|e| ModelError::Inference(e.to_string()))?;
        if view.len() != 1 {
            return Err(ModelError::Inference(format!("{} output values for one input, expected 1", view.len())));
        }
        Ok(view.iter().copied().next().unwrap_or(f32::NAN))
    }

    /// The action a flow applies: the mean action clipped to `[-clip, clip]`.
    pub fn action(&self, input: &[f32; MODEL_INPUT_LEN]) -> Result<f64, ModelError> {
        let a = self.infer(input)? as f64;
        if !a.is_finite() {
            return Err(ModelError::Inference(format!("non-finite action {a}")));
        }
        Ok(a.clamp(-self.action_clip, self.action_clip))
    }

    /// The latency ratio the model was trained on.
    pub fn rtt_base(&self) -> RttBase {
        self.rtt_base
    }

    pub fn action_clip(&self) -> f64 {
        self.action_clip
    }

    /// The model's `metadata_props`.
    pub fn metadata(&self) -> &BTreeMap<String, String> {
        &self.metadata
    }

    pub fn size_bytes(&self) -> usize {
        self.size_bytes
    }

    /// Operations in the optimized plan tract runs per decision (sources and constants included).
    pub fn plan_nodes(&self) -> usize {
        self.plan.model().nodes().len()
    }

    /// The optimized plan's operations, one `name (op)` per node, in evaluation order.
    pub fn plan_ops(&self) -> Vec<String> {
        let m = self.plan.model();
        self.plan
            .order_without_consts()
            .iter()
            .map(|&n| format!("{} ({})", m.node(n).name, m.node(n).op.name()))
            .collect()
    }
}

/// The model every MOCC flow of a process uses, swappable live: flows read it at each decision.
#[derive(Clone, Default)]
pub struct ModelSlot(Arc<RwLock<Option<Arc<MoccModel>>>>);

impl ModelSlot {
    pub fn new(model: MoccModel) -> ModelSlot {
        ModelSlot(Arc::new(RwLock::new(Some(Arc::new(model)))))
    }

    /// The model now in the slot.
    pub fn get(&self) -> Option<Arc<MoccModel>> {
        match self.0.read() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Put a (validated) model in the slot; returns the one it replaces.
    pub fn replace(&self, model: MoccModel) -> Option<Arc<MoccModel>> {
        let mut g = match self.0.write() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        g.replace(Arc::new(model))
    }
}

impl fmt::Debug for ModelSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.get() {
            Some(m) => write!(f, "ModelSlot({m:?})"),
            None => f.write_str("ModelSlot(empty)"),
        }
    }
}

impl PartialEq for ModelSlot {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
