//! What the agent's boundary parsers promise, checked on whatever the fuzz targets feed them.
//!
//! (Over 800 lines on purpose: the fuzz targets and the stable-Rust replay test share these
//! checks and their input generators, which cargo-fuzz's separate crate keeps in one library.)
//!
//! The parsers are the control socket's request line ([`parse_request`]), one rule or policy
//! as JSON ([`parse_rule`], [`parse_policy`]: the control socket's `policy_add`,
//! `policy_replace` and `flow_set`) and the policy file ([`parse_file`]). Beyond "never
//! panics", each check asserts:
//!
//! - an error names the problem: a non-empty message, the rule's field for a rule error, the
//!   file for a file error;
//! - what parses round-trips through its writer: a request through serde, a rule through
//!   [`Rule::to_json`], a policy through [`policy_to_json`], a rule set through [`to_toml`]
//!   (the file the agent persists must load back as the rules it holds, whichever way a rule
//!   came in);
//! - the policy file parsed in pieces of one rule means what the whole text means (the
//!   piecewise parse of issue 16 A2).
//!
//! The generators (`arbitrary`) build well-formed requests, rules and policy files with random
//! field values and an oracle for what each field must parse to; [`check_rule_spec`] and
//! [`check_file_spec`] compare the parsers against it.

use arbitrary::{Arbitrary, Unstructured};
use polycc_agent::control::{parse_request, ErrorCode, Request};
use polycc_agent::policy_file::{parse_file, parse_file_in_pieces, to_toml, PolicyFileError};
use polycc_agent::policy_rules::{
    parse_policy, parse_rule, policy_to_json, PortRange, RuleErrorKind, RuleSet, RULE_FIELDS,
};
use polycc_algorithms::{AlgorithmConfig, AlgorithmKind, FuseOn, FusionFn, FusionPolicy, Policy, TargetCwnd};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;

/// The path the policy file errors name.
pub const FILE: &str = "fuzz.toml";

// ---------------------------------------------------------------------------------------------
// Properties of the parsers, on any input.

/// The `control_request` target: any bytes as a request line ([`check_request`]), and where
/// they are JSON, as the rule or policy a request carries ([`check_rule`], [`check_policy`]).
pub fn control_request_input(data: &[u8]) {
    check_request(data);
    if let Ok(v) = serde_json::from_slice::<Value>(data) {
        check_rule(&v);
        check_policy(&v);
    }
}

/// The `policy_file` target: any bytes as a policy file ([`check_policy_file`]). `load` reads the
/// file as UTF-8, so other bytes are an I/O error before the parser.
pub fn policy_file_input(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        check_policy_file(text);
    }
}

/// `parse_request` on any bytes: a malformed request is `malformed_request` with serde's reason
/// and the list of commands; a request that parses survives a serde round trip, and the rule or
/// policy it carries is checked by [`check_rule`] / [`check_policy`].
pub fn check_request(line: &[u8]) -> Option<Request> {
    match parse_request(line) {
        Err(e) => {
            assert_eq!(e.code, ErrorCode::MalformedRequest, "{e:?}");
            let reason = e.message.split(" (requests are one JSON object").next().unwrap_or("");
            assert!(!reason.trim().is_empty(), "an error without its reason: {:?}", e.message);
            None
        }
        Ok(req) => {
            let text = serde_json::to_vec(&req).expect("a parsed request serializes");
            let again = parse_request(&text).unwrap_or_else(|e| {
                panic!("a request written back does not parse: {e}: {}", String::from_utf8_lossy(&text))
            });
            assert!(
                same_value(&serde_json::to_value(&again).unwrap(), &serde_json::to_value(&req).unwrap()),
                "request round trip: {req:?} -> {again:?}"
            );
            match &req {
                Request::PolicyAdd { rule, .. } | Request::PolicyReplace { rule, .. } => {
                    check_rule(rule);
                }
                Request::FlowSet { policy, .. } => {
                    check_policy(policy);
                }
                _ => {}
            }
            Some(req)
        }
    }
}

/// `parse_rule` on any JSON: an error names a field the rule has (or the rule itself), and says
/// what is wrong with it; a rule that parses round-trips through its JSON form and through the
/// policy file the agent would persist it to.
pub fn check_rule(v: &Value) -> Option<polycc_agent::policy_rules::Rule> {
    match parse_rule(v) {
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.starts_with(&format!("field `{}`: ", e.field)), "{msg}");
            assert!(msg.len() > format!("field `{}`: ", e.field).len(), "an error without a reason: {msg:?}");
            match (&e.kind, v.as_object()) {
                (RuleErrorKind::UnknownField, Some(m)) => {
                    assert!(m.contains_key(&e.field) && !RULE_FIELDS.contains(&e.field.as_str()), "{msg}")
                }
                (_, Some(_)) => assert!(RULE_FIELDS.contains(&e.field.as_str()), "{msg}"),
                (_, None) => assert_eq!(e.field, "rule", "{msg}"),
            }
            None
        }
        Ok(parsed) => {
            let rule = parsed.rule.clone();
            assert!(!rule.describe().is_empty());
            // The JSON form the control socket shows (and policy_list returns) parses back.
            let shown = rule.to_json();
            let back = parse_rule(&shown).unwrap_or_else(|e| panic!("{shown} does not parse back: {e}"));
            assert_eq!(back.rule, rule, "JSON round trip of {v}");
            // The file the agent persists the rule to loads back as the same rule.
            let set = RuleSet::from_parsed(vec![parsed]).expect("one rule is a rule set");
            check_file_round_trip(&set);
            Some(rule)
        }
    }
}

/// `parse_policy` on any JSON (`flow_set`): errors say what is wrong; a policy that parses is
/// valid and round-trips through [`policy_to_json`].
pub fn check_policy(v: &Value) -> Option<Policy> {
    match parse_policy(v) {
        Err(kind) => {
            assert!(!kind.to_string().trim().is_empty(), "an empty policy error for {v}");
            None
        }
        Ok(p) => {
            p.validate().unwrap_or_else(|e| panic!("parse_policy accepted an invalid policy {p:?}: {e}"));
            assert!(!p.describe().is_empty());
            let shown = policy_to_json(&p);
            let back = parse_policy(&shown).unwrap_or_else(|e| panic!("{shown} does not parse back: {e}"));
            assert_eq!(back, p, "policy round trip of {v}");
            Some(p)
        }
    }
}

/// `parse_file` on any text: errors name the file (and the rule and field for a rule error);
/// a file that parses is written back ([`to_toml`]) as text that parses to the same rules and
/// is a fixed point of the writer; cut at every rule, the text parses to the same result.
pub fn check_policy_file(text: &str) -> Option<RuleSet> {
    let path = Path::new(FILE);
    let whole = parse_file(path, text);
    let pieces = parse_file_in_pieces(path, text, 1);
    match (&whole, &pieces) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "one rule a piece parsed differently:\n{text}"),
        (Err(a), Err(b)) => {
            // A piece with a bad rule is refused before a later piece's syntax error is seen:
            // pieces report errors in file order, so only a rule error must be the same.
            if let PolicyFileError::Rule { .. } = a {
                assert_eq!(a.to_string(), b.to_string(), "one rule a piece gave another error:\n{text}");
            }
        }
        (a, b) => panic!("one rule a piece gave {b:?}, the whole text {a:?}:\n{text}"),
    }
    match whole {
        Err(e) => {
            check_file_error(&e);
            None
        }
        Ok(set) => {
            check_file_round_trip(&set);
            Some(set)
        }
    }
}

fn check_file_error(e: &PolicyFileError) {
    let msg = e.to_string();
    let prefix = format!("policy file {FILE}: ");
    assert!(msg.starts_with(&prefix), "{msg}");
    assert!(!msg[prefix.len()..].trim().is_empty(), "an error without a reason: {msg:?}");
    if let PolicyFileError::Rule { number, source, .. } = e {
        assert!(*number >= 1, "{msg}");
        let named = RULE_FIELDS.contains(&source.field.as_str())
            || source.kind == RuleErrorKind::UnknownField
            || source.field == "rule";
        // A key TOML can write (`"" = 1`) is named as written, even when empty.
        assert!(named && (!source.field.is_empty() || source.kind == RuleErrorKind::UnknownField), "{msg}");
        assert!(msg.contains(&format!("field `{}`", source.field)), "{msg}");
    }
}

/// What the agent writes for `set` loads back as `set`, and writing that gives the same text.
pub fn check_file_round_trip(set: &RuleSet) {
    let text = to_toml(set);
    let back = parse_file(Path::new(FILE), &text)
        .unwrap_or_else(|e| panic!("the file written for {:?} does not load: {e}\n{text}", set.rules()));
    assert_eq!(&back, set, "file round trip:\n{text}");
    assert_eq!(to_toml(&back), text, "the writer is not a fixed point");
}

/// Equal JSON values, floats within a few ulps (serde_json's float parsing is not always
/// correctly rounded without its `float_roundtrip` feature, which the agent does not use).
pub fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            let (x, y) = (x.as_f64().unwrap_or(f64::NAN), y.as_f64().unwrap_or(f64::NAN));
            // Within 4 ulps (subnormals included): adjacent floats have adjacent bit patterns.
            x == y || (x.signum() == y.signum() && x.to_bits().abs_diff(y.to_bits()) <= 4)
        }
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_value(x, y)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same_value(v, w)))
        }
        _ => a == b,
    }
}

// ---------------------------------------------------------------------------------------------
// Generators: well-formed input with random values, and what it must parse to.

/// A subnet field: an address and prefix (host bits cleared or not), or any string.
#[derive(Arbitrary, Debug)]
pub enum CidrSpec {
    V4 { addr: [u8; 4], prefix: Option<u8>, clear_host_bits: bool, pad: Pad },
    V6 { addr: [u8; 16], prefix: Option<u8>, clear_host_bits: bool, pad: Pad, mapped: bool },
    Text(String),
}

/// Blanks around a value the parsers trim.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Pad {
    None,
    Spaces,
    Tab,
}

impl Pad {
    fn around(self, s: &str) -> String {
        match self {
            Pad::None => s.to_string(),
            Pad::Spaces => format!("  {s} "),
            Pad::Tab => format!("\t{s}"),
        }
    }
}

/// Keep the prefix near the family's range, so valid and invalid prefixes both occur.
/// A subnet as the oracle knows it: network address and prefix length.
pub type Subnet = (IpAddr, u8);

fn prefix_near(p: u8, max: u8) -> u8 {
    p % (max + 8)
}

impl CidrSpec {
    /// The field's text and, when the oracle knows it, the network and prefix it must parse to
    /// (`Err(())`: refused), worked out here with masks rather than by the parser's `IpCidr`.
    fn render(&self) -> (String, Option<Result<Subnet, ()>>) {
        fn expect(addr: IpAddr, prefix: Option<u8>, max: u8) -> Result<Subnet, ()> {
            let p = prefix.unwrap_or(max);
            let host_bits = match addr {
                IpAddr::V4(a) if p <= 32 => u32::from(a) & !mask32(p) != 0,
                IpAddr::V6(a) if p <= 128 => u128::from(a) & !mask128(p) != 0,
                _ => return Err(()),
            };
            if host_bits {
                Err(())
            } else {
                Ok((addr, p))
            }
        }
        fn text(addr: IpAddr, prefix: Option<u8>) -> String {
            match prefix {
                Some(p) => format!("{addr}/{p}"),
                None => addr.to_string(),
            }
        }
        match self {
            CidrSpec::V4 { addr, prefix, clear_host_bits, pad } => {
                let prefix = prefix.map(|p| prefix_near(p, 32));
                let mut a = u32::from_be_bytes(*addr);
                if *clear_host_bits {
                    a &= mask32(prefix.unwrap_or(32));
                }
                let ip = IpAddr::V4(Ipv4Addr::from(a));
                (pad.around(&text(ip, prefix)), Some(expect(ip, prefix, 32)))
            }
            CidrSpec::V6 { addr, prefix, clear_host_bits, pad, mapped } => {
                let prefix = prefix.map(|p| prefix_near(p, 128));
                let mut a = u128::from_be_bytes(*addr);
                if *mapped {
                    a = (a & 0xffff_ffff) | (0xffff << 32);
                }
                if *clear_host_bits {
                    a &= mask128(prefix.unwrap_or(128));
                }
                let ip = IpAddr::V6(Ipv6Addr::from(a));
                (pad.around(&text(ip, prefix)), Some(expect(ip, prefix, 128)))
            }
            CidrSpec::Text(s) => (s.clone(), None),
        }
    }
}

fn mask32(prefix: u8) -> u32 {
    u32::MAX.checked_shl(32 - u32::from(prefix.min(32))).unwrap_or(0)
}

fn mask128(prefix: u8) -> u128 {
    u128::MAX.checked_shl(128 - u32::from(prefix.min(128))).unwrap_or(0)
}

/// A port field: a number, "A", "A-B" (either way round), or any string.
#[derive(Arbitrary, Debug)]
pub enum PortsSpec {
    Number(u32),
    One(u16, Pad),
    Range(u16, u16, Pad),
    Text(String),
}

impl PortsSpec {
    fn render(&self) -> (Value, Option<Result<PortRange, ()>>) {
        match self {
            PortsSpec::Number(n) => {
                (json!(n), Some(u16::try_from(*n).map(|p| PortRange { first: p, last: p }).map_err(|_| ())))
            }
            PortsSpec::One(p, pad) => (json!(pad.around(&p.to_string())), Some(Ok(PortRange { first: *p, last: *p }))),
            PortsSpec::Range(a, b, pad) => (
                json!(pad.around(&format!("{a}-{b}"))),
                Some(if a <= b { Ok(PortRange { first: *a, last: *b }) } else { Err(()) }),
            ),
            PortsSpec::Text(s) => (json!(s), None),
        }
    }
}

/// An id field: in range, past u32, or of the wrong type.
#[derive(Arbitrary, Debug)]
pub enum IdSpec {
    Small(u8),
    Any(u32),
    Wide(u64),
    Negative(i8),
    Text(String),
}

impl IdSpec {
    fn render(&self) -> (Value, Result<u32, ()>) {
        match self {
            IdSpec::Small(i) => (json!(i), Ok(u32::from(*i))),
            IdSpec::Any(i) => (json!(i), Ok(*i)),
            IdSpec::Wide(i) => (json!(i), u32::try_from(*i).map_err(|_| ())),
            IdSpec::Negative(i) => (json!(i), u32::try_from(*i).map_err(|_| ())),
            IdSpec::Text(s) => (json!(s), Err(())),
        }
    }
}

/// A value in a place that wants another type, or an unknown field's value.
#[derive(Arbitrary, Debug)]
pub enum ScalarSpec {
    Bool(bool),
    Int(i64),
    Float(f64),
    Text(String),
    Array(Vec<u8>),
}

impl ScalarSpec {
    fn value(&self) -> Value {
        match self {
            ScalarSpec::Bool(b) => json!(b),
            ScalarSpec::Int(i) => json!(i),
            ScalarSpec::Float(f) => serde_json::Number::from_f64(*f).map_or(json!(0.5), Value::Number),
            ScalarSpec::Text(s) => json!(s),
            ScalarSpec::Array(a) => json!(a),
        }
    }
}

/// A new value for one parameter of an algorithm's configuration.
#[derive(Arbitrary, Debug)]
pub enum ParamValue {
    /// Scaled from the default (0 ..= 4x), so that both valid and invalid values occur.
    Scale(u8),
    Int(u64),
    Float(f64),
    Bool(bool),
    Null,
    Weights(Vec<i8>),
}

/// One algorithm: its kind and some parameters changed from the defaults.
#[derive(Arbitrary, Debug)]
pub struct AlgSpec {
    pub kind: u8,
    pub params: Vec<(u8, ParamValue)>,
}

impl AlgSpec {
    /// The configuration, when serde takes the changed parameters (the oracle then knows it).
    pub fn config(&self) -> Option<AlgorithmConfig> {
        let kind = AlgorithmKind::NAMED[usize::from(self.kind) % AlgorithmKind::NAMED.len()];
        let mut v = serde_json::to_value(kind.default_config()).ok()?;
        let m = v.as_object_mut()?;
        let keys: Vec<String> = m.keys().filter(|k| *k != "alg").cloned().collect();
        for (which, value) in &self.params {
            let Some(key) = keys.get(usize::from(*which) % keys.len().max(1)) else { break };
            let old = m.get(key).cloned().unwrap_or(Value::Null);
            let new = match value {
                ParamValue::Scale(s) => match &old {
                    Value::Number(n) if n.is_u64() => json!(n.as_u64().unwrap_or(0).saturating_mul(u64::from(*s)) / 64),
                    Value::Number(n) => json!(n.as_f64().unwrap_or(0.0) * f64::from(*s) / 64.0),
                    Value::Array(a) => json!(a.iter().map(|_| f64::from(*s) / 255.0).collect::<Vec<_>>()),
                    _ => json!(f64::from(*s) / 16.0),
                },
                ParamValue::Int(i) => json!(i),
                ParamValue::Float(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
                ParamValue::Bool(b) => json!(b),
                ParamValue::Null => Value::Null,
                ParamValue::Weights(w) => json!(w.iter().map(|x| f64::from(*x) / 100.0).collect::<Vec<_>>()),
            };
            m.insert(key.clone(), new);
        }
        serde_json::from_value(v).ok()
    }
}

/// A policy: one algorithm, or a fusion of a pilot and copilots.
#[derive(Arbitrary, Debug)]
pub enum PolicySpec {
    Single(AlgSpec),
    Fused { pilot: AlgSpec, copilots: Vec<AlgSpec>, fusion: FusionSpec, fuse_on_rate: bool },
}

#[derive(Arbitrary, Debug)]
pub enum FusionSpec {
    Max,
    Min,
    Bytes(u64),
    Bdp(f64),
    Default,
}

/// How a policy is written in the rule: the shortest form, or each longer one.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum PolicyForm {
    /// `policy_to_json`: a bare name for a default single algorithm.
    Shortest,
    /// `{alg = ...}` with every parameter, or `{fused = {...}}`.
    Full,
    /// `{single = {alg = ...}}` or `{fused = {...}}` (serde's externally tagged form).
    Tagged,
}

impl PolicySpec {
    pub fn policy(&self) -> Option<Policy> {
        Some(match self {
            PolicySpec::Single(a) => Policy::Single(a.config()?),
            PolicySpec::Fused { pilot, copilots, fusion, fuse_on_rate } => Policy::Fused(FusionPolicy {
                pilot: pilot.config()?,
                copilots: copilots.iter().take(4).map(AlgSpec::config).collect::<Option<_>>()?,
                fusion: match fusion {
                    FusionSpec::Max => FusionFn::Max,
                    FusionSpec::Min => FusionFn::Min,
                    FusionSpec::Bytes(b) => FusionFn::Target(TargetCwnd::Bytes(*b)),
                    FusionSpec::Bdp(g) if g.is_finite() => FusionFn::Target(TargetCwnd::Bdp(*g)),
                    FusionSpec::Bdp(_) => FusionFn::Target(TargetCwnd::Bdp(1.0)),
                    FusionSpec::Default => FusionFn::default(),
                },
                fuse_on: if *fuse_on_rate { FuseOn::Rate } else { FuseOn::Cwnd },
            }),
        })
    }
}

/// `p` in `form`; `None` where serde cannot write it (never for generated policies).
pub fn policy_value(p: &Policy, form: PolicyForm) -> Option<Value> {
    Some(match (form, p) {
        (PolicyForm::Shortest, _) => policy_to_json(p),
        (PolicyForm::Full, Policy::Single(c)) => serde_json::to_value(c).ok()?,
        (_, p) => serde_json::to_value(p).ok()?,
    })
}

/// TOML has no null: a member left out is what a null member means to the parsers.
pub fn fit_toml(v: Value) -> Value {
    match v {
        Value::Object(m) => {
            Value::Object(m.into_iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k, fit_toml(v))).collect())
        }
        Value::Array(a) => Value::Array(a.into_iter().map(fit_toml).collect()),
        v => v,
    }
}

/// One rule, field by field.
#[derive(Arbitrary, Debug)]
pub struct RuleSpec {
    pub id: Option<IdSpec>,
    pub dst: Option<CidrSpec>,
    pub src: Option<CidrSpec>,
    pub dst_ports: Option<PortsSpec>,
    pub src_ports: Option<PortsSpec>,
    pub cong_alg: Option<(String, Pad)>,
    pub policy: Option<(PolicySpec, PolicyForm)>,
    /// A field of the wrong type, or a field no rule has.
    pub wrong: Option<(u8, ScalarSpec)>,
    pub unknown: Option<(String, ScalarSpec)>,
}

/// What a rule must parse to, field by field (`None`: the oracle does not know).
#[derive(Debug, Default)]
pub struct Expected {
    pub ok: Option<bool>,
    pub id: Option<u32>,
    pub dst: Option<Option<Subnet>>,
    pub src: Option<Option<Subnet>>,
    pub dst_ports: Option<Option<PortRange>>,
    pub src_ports: Option<Option<PortRange>>,
    pub cong_alg: Option<String>,
    pub policy: Option<Policy>,
}

impl RuleSpec {
    /// The rule as JSON, and what parsing it must give.
    pub fn render(&self) -> (Value, Expected) {
        let mut m = Map::new();
        let mut e = Expected::default();
        // Each field's verdict: Some(true) valid, Some(false) refused, None unknown.
        let mut verdicts: BTreeMap<String, Option<bool>> = BTreeMap::new();
        if let Some(id) = &self.id {
            let (v, want) = id.render();
            m.insert("id".into(), v);
            verdicts.insert("id".into(), Some(want.is_ok()));
            e.id = want.ok();
        }
        for (name, spec, slot) in [("dst", &self.dst, &mut e.dst), ("src", &self.src, &mut e.src)] {
            match spec {
                None => *slot = Some(None),
                Some(spec) => {
                    let (text, want) = spec.render();
                    m.insert(name.into(), json!(text));
                    verdicts.insert(name.into(), want.map(|w| w.is_ok()));
                    *slot = want.and_then(Result::ok).map(Some);
                }
            }
        }
        for (name, spec, slot) in
            [("dst_ports", &self.dst_ports, &mut e.dst_ports), ("src_ports", &self.src_ports, &mut e.src_ports)]
        {
            match spec {
                None => *slot = Some(None),
                Some(spec) => {
                    let (v, want) = spec.render();
                    m.insert(name.into(), v);
                    verdicts.insert(name.into(), want.map(|w| w.is_ok()));
                    *slot = want.and_then(Result::ok).map(Some);
                }
            }
        }
        if let Some((name, pad)) = &self.cong_alg {
            m.insert("cong_alg".into(), json!(pad.around(name)));
            e.cong_alg = Some(name.trim().to_string());
        }
        match &self.policy {
            None => drop(verdicts.insert("policy".into(), Some(false))),
            Some((spec, form)) => match spec.policy().and_then(|p| Some((policy_value(&p, *form)?, p))) {
                Some((v, p)) => {
                    m.insert("policy".into(), v);
                    verdicts.insert("policy".into(), Some(p.validate().is_ok()));
                    e.policy = Some(p);
                }
                None => {
                    m.insert("policy".into(), json!("reno"));
                    e.policy = Some(Policy::Single(AlgorithmKind::Reno.default_config()));
                }
            },
        }
        if let Some((which, value)) = &self.wrong {
            let field = RULE_FIELDS[usize::from(*which) % RULE_FIELDS.len()];
            let v = value.value();
            // Some scalars are the right type after all (a number or a string for a port).
            let surely_wrong = match field {
                "id" => !v.is_number(),
                "dst_ports" | "src_ports" => !v.is_number() && !v.is_string(),
                "policy" => !v.is_string() && !v.is_object(),
                _ => !v.is_string(),
            };
            m.insert(field.into(), v);
            verdicts.insert(field.into(), if surely_wrong { Some(false) } else { None });
            // The field's value is no longer the generated one: nothing is known of it.
            match field {
                "id" => e.id = None,
                "dst" => e.dst = None,
                "src" => e.src = None,
                "dst_ports" => e.dst_ports = None,
                "src_ports" => e.src_ports = None,
                "cong_alg" => e.cong_alg = None,
                _ => e.policy = None,
            }
        }
        if let Some((name, value)) = &self.unknown {
            if !RULE_FIELDS.contains(&name.as_str()) {
                m.insert(name.clone(), value.value());
                verdicts.insert(name.clone(), Some(false));
            }
        }
        e.ok = if verdicts.values().any(|v| *v == Some(false)) {
            Some(false)
        } else if verdicts.values().all(|v| *v == Some(true)) {
            Some(true)
        } else {
            None
        };
        (Value::Object(m), e)
    }
}

/// `parse_rule` on a generated rule agrees with the oracle, then [`check_rule`]'s properties.
pub fn check_rule_spec(spec: &RuleSpec) {
    let (v, want) = spec.render();
    let got = check_rule(&v);
    match (&got, want.ok) {
        (Some(_), Some(false)) => panic!("accepted a rule with a bad field: {v}"),
        (None, Some(true)) => panic!("refused a good rule: {v}: {}", parse_rule(&v).unwrap_err()),
        _ => {}
    }
    let Some(rule) = got else { return };
    if let Some(id) = want.id {
        assert_eq!(parse_rule(&v).unwrap().id, Some(id), "{v}");
    }
    for (name, got, want) in [("dst", rule.dst, want.dst), ("src", rule.src, want.src)] {
        if let Some(want) = want {
            assert_eq!(got.map(|c| (c.network(), c.prefix_len())), want, "{name} of {v}");
        }
    }
    for (name, got, want) in
        [("dst_ports", rule.dst_ports, want.dst_ports), ("src_ports", rule.src_ports, want.src_ports)]
    {
        if let Some(want) = want {
            assert_eq!(got, want, "{name} of {v}");
        }
    }
    if let Some(c) = want.cong_alg {
        assert_eq!(rule.cong_alg.as_deref(), Some(c.as_str()), "{v}");
    }
    if let Some(p) = want.policy {
        assert_eq!(rule.policy, p, "policy of {v}");
    }
}

// ---------------------------------------------------------------------------------------------
// Policy files: generated rules written as TOML in the shapes people write.

/// How a rule's table is laid out in the file.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Layout {
    /// `key = value` lines, the policy inline.
    Inline,
    /// The policy as `[rule.policy]` (and deeper) sub-tables.
    SubTables,
    /// Dotted keys: `policy.alg = "cubic"`.
    Dotted,
}

/// Trivia between the lines.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Trivia {
    Nothing,
    BlankLine,
    Comment,
    CommentWithHeader,
    Indent,
}

#[derive(Arbitrary, Debug)]
pub struct FileRuleSpec {
    pub rule: RuleSpec,
    pub layout: Layout,
    pub trivia: Trivia,
    pub header_comment: bool,
}

/// A policy file of generated rules.
#[derive(Arbitrary, Debug)]
pub struct FileSpec {
    pub preamble: Trivia,
    pub rules: Vec<FileRuleSpec>,
}

impl FileSpec {
    /// The file's text and each rule's JSON (what the control socket would be given).
    pub fn render(&self) -> (String, Vec<Value>) {
        let mut text = String::new();
        trivia(&mut text, self.preamble);
        let mut values = Vec::new();
        for r in &self.rules {
            let v = fit_toml(r.rule.render().0);
            text.push_str(if r.header_comment { "[[rule]] # a rule\n" } else { "[[rule]]\n" });
            write_table(&mut text, "rule", &v, r.layout, r.trivia);
            values.push(v);
        }
        (text, values)
    }
}

fn trivia(out: &mut String, t: Trivia) {
    match t {
        Trivia::Nothing | Trivia::Indent => {}
        Trivia::BlankLine => out.push('\n'),
        Trivia::Comment => out.push_str("# policy = \"reno\"\n"),
        Trivia::CommentWithHeader => out.push_str("# [[rule]]\n"),
    }
}

/// The members of `v` (a table) under `[path]`, in `layout`.
fn write_table(out: &mut String, path: &str, v: &Value, layout: Layout, t: Trivia) {
    let Value::Object(m) = v else { return };
    let indent = if let Trivia::Indent = t { "  " } else { "" };
    let mut tables = Vec::new();
    for (k, v) in m {
        match (layout, v) {
            (Layout::SubTables, Value::Object(_)) => tables.push((k, v)),
            (Layout::Dotted, Value::Object(sub)) if !sub.is_empty() => {
                for (k2, v2) in sub {
                    let _ = writeln!(out, "{indent}{}.{} = {}", key(k), key(k2), inline(v2));
                }
            }
            _ => {
                let _ = writeln!(out, "{indent}{} = {}", key(k), inline(v));
            }
        }
        trivia(out, t);
    }
    for (k, v) in tables {
        let sub = format!("{path}.{}", key(k));
        let Value::Object(members) = v else { continue };
        // An array of tables (copilots) as [[...]] headers; the rest inline.
        let (arrays, rest): (Vec<_>, Vec<_>) = members.iter().partition(|(_, v)| {
            v.as_array()
                .is_some_and(|a| !a.is_empty() && a.iter().all(|x| x.as_object().is_some_and(|o| !o.is_empty())))
        });
        let _ = writeln!(out, "[{sub}]");
        let rest: Map<String, Value> = rest.into_iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        write_table(out, &sub, &Value::Object(rest), layout, t);
        for (k, a) in arrays {
            for item in a.as_array().into_iter().flatten() {
                let _ = writeln!(out, "[[{sub}.{}]]", key(k));
                write_table(out, &format!("{sub}.{}", key(k)), item, Layout::Inline, t);
            }
        }
    }
}

/// A bare key when TOML allows one, else a quoted key.
fn key(k: &str) -> String {
    if !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        k.to_string()
    } else {
        basic_string(k)
    }
}

fn basic_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A value as inline TOML.
fn inline(v: &Value) -> String {
    match v {
        Value::Null => "\"\"".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) if n.is_f64() => {
            let f = n.as_f64().unwrap_or(0.0);
            let s = format!("{f:?}");
            if s.contains('.') || s.contains('e') || s.contains("inf") || s.contains("NaN") {
                s
            } else {
                format!("{s}.0")
            }
        }
        Value::Number(n) => n.to_string(),
        Value::String(s) => basic_string(s),
        Value::Array(a) => format!("[{}]", a.iter().map(inline).collect::<Vec<_>>().join(", ")),
        Value::Object(m) => {
            format!(
                "{{ {} }}",
                m.iter().map(|(k, v)| format!("{} = {}", key(k), inline(v))).collect::<Vec<_>>().join(", ")
            )
        }
    }
}

/// A generated file parses as its rules do through the control socket's JSON path (rule by
/// rule, then [`RuleSet::from_parsed`]), then [`check_policy_file`]'s properties.
pub fn check_file_spec(spec: &FileSpec) {
    let (text, values) = spec.render();
    let via_json = values
        .iter()
        .enumerate()
        .map(|(i, v)| parse_rule(v).map_err(|e| (i, e)))
        .collect::<Result<Vec<_>, _>>()
        .and_then(RuleSet::from_parsed);
    let via_file = check_policy_file(&text);
    match (via_json, via_file) {
        (Ok(a), Some(b)) => assert_eq!(a, b, "the file and the JSON disagree:\n{text}"),
        (Ok(a), None) => panic!(
            "the file refused rules the JSON path takes ({:?}): {}\n{text}",
            a.rules(),
            parse_file(Path::new(FILE), &text).unwrap_err()
        ),
        (Err((i, e)), Some(_)) => panic!("the file took rule {} that the JSON path refuses ({e}):\n{text}", i + 1),
        (Err((i, e)), None) => match parse_file(Path::new(FILE), &text) {
            Err(PolicyFileError::Rule { number, source, .. }) => {
                assert_eq!((number, &source), (i + 1, &e), "another rule error than the JSON path's:\n{text}")
            }
            other => panic!("rule {} is refused ({e}) but the file says {other:?}:\n{text}", i + 1),
        },
    }
}

/// A structured value from the fuzzer's bytes, or `None` when they run out.
pub fn from_bytes<'a, T: Arbitrary<'a>>(data: &'a [u8]) -> Option<T> {
    T::arbitrary_take_rest(Unstructured::new(data)).ok()
}

// ---------------------------------------------------------------------------------------------
// Control requests: generated requests, written as the CLI writes them, then changed a little.

/// A request with random arguments; rules and policies come from the generators above.
#[derive(Arbitrary, Debug)]
pub enum RequestSpec {
    PolicyList,
    PolicyShow(u32),
    PolicyAdd { rule: RuleSpec, position: Option<u16>, apply_live: bool },
    PolicyReplace { id: u32, rule: RuleSpec, apply_live: bool },
    PolicyRemove(u32),
    Flows,
    Stats(Option<u64>),
    FlowSet { flow: u32, datapath: Option<String>, policy: PolicySpec, form: PolicyForm },
    ModelLoad(String),
}

/// What is done to the request's JSON object before it is sent.
#[derive(Arbitrary, Debug)]
pub enum Change {
    None,
    /// Whitespace and a newline around the object (what a line reader leaves).
    Blanks,
    /// A field the command does not take.
    UnknownField(String, ScalarSpec),
    /// One of the fields dropped (index into the object's keys).
    DropField(u8),
    /// Another command name.
    Command(String),
}

/// The fields each command requires (`cmd` aside).
fn required(cmd: &str) -> &'static [&'static str] {
    match cmd {
        "policy_show" | "policy_remove" => &["id"],
        "policy_add" => &["rule"],
        "policy_replace" => &["id", "rule"],
        "flow_set" => &["flow", "policy"],
        "model_load" => &["path"],
        _ => &[],
    }
}

/// The fields each command takes (`cmd` aside).
fn accepted(cmd: &str) -> &'static [&'static str] {
    match cmd {
        "policy_add" => &["rule", "position", "apply_live"],
        "policy_replace" => &["id", "rule", "apply_live"],
        "stats" => &["since"],
        "flow_set" => &["flow", "datapath", "policy"],
        c => required(c),
    }
}

const COMMANDS: [&str; 9] = [
    "policy_list",
    "policy_show",
    "policy_add",
    "policy_replace",
    "policy_remove",
    "flows",
    "stats",
    "flow_set",
    "model_load",
];

impl RequestSpec {
    /// The request's JSON object, and the rule or policy generator inside it.
    fn render(&self) -> (Value, Option<&RuleSpec>, Option<Policy>) {
        let mut rule_spec = None;
        let mut policy = None;
        let v = match self {
            RequestSpec::PolicyList => json!({"cmd": "policy_list"}),
            RequestSpec::PolicyShow(id) => json!({"cmd": "policy_show", "id": id}),
            RequestSpec::PolicyAdd { rule, position, apply_live } => {
                rule_spec = Some(rule);
                let mut v = json!({"cmd": "policy_add", "rule": rule.render().0});
                if let Some(p) = position {
                    v["position"] = json!(p);
                }
                if *apply_live {
                    v["apply_live"] = json!(true);
                }
                v
            }
            RequestSpec::PolicyReplace { id, rule, apply_live } => {
                rule_spec = Some(rule);
                json!({"cmd": "policy_replace", "id": id, "rule": rule.render().0, "apply_live": apply_live})
            }
            RequestSpec::PolicyRemove(id) => json!({"cmd": "policy_remove", "id": id}),
            RequestSpec::Flows => json!({"cmd": "flows"}),
            RequestSpec::Stats(since) => match since {
                Some(s) => json!({"cmd": "stats", "since": s}),
                None => json!({"cmd": "stats"}),
            },
            RequestSpec::FlowSet { flow, datapath, policy: spec, form } => {
                let p = spec.policy();
                let pv = p.as_ref().and_then(|p| policy_value(p, *form)).unwrap_or(json!("reno"));
                policy = Some(p.unwrap_or(Policy::Single(AlgorithmKind::Reno.default_config())));
                let mut v = json!({"cmd": "flow_set", "flow": flow, "policy": pv});
                if let Some(d) = datapath {
                    v["datapath"] = json!(d);
                }
                v
            }
            RequestSpec::ModelLoad(path) => json!({"cmd": "model_load", "path": path}),
        };
        (v, rule_spec, policy)
    }
}

/// A generated request parses to what was written; a changed one is refused with the reason
/// (the unknown field, the missing field, the unknown command) or, where the change is
/// harmless, parses the same. The rule or policy inside is checked against its generator.
pub fn check_request_spec(spec: &RequestSpec, change: &Change) {
    let (mut v, rule_spec, policy) = spec.render();
    let cmd = v["cmd"].as_str().unwrap_or_default().to_string();
    let original = v.clone();
    // What the parse must give: Ok (the original request), or Err with this in its message.
    let mut refused: Option<String> = None;
    let mut line = match change {
        Change::None | Change::Blanks => serde_json::to_string(&v).unwrap(),
        Change::UnknownField(name, value) => {
            if name != "cmd" && !accepted(&cmd).contains(&name.as_str()) {
                v[name.as_str()] = value.value();
                refused = Some(format!("unknown field `{name}`"));
            }
            serde_json::to_string(&v).unwrap()
        }
        Change::DropField(i) => {
            let m = v.as_object_mut().unwrap();
            let key = m.keys().nth(usize::from(*i) % m.len()).cloned().unwrap_or_default();
            m.remove(&key);
            if key == "cmd" || required(&cmd).contains(&key.as_str()) {
                refused = Some(format!("missing field `{key}`"));
            }
            serde_json::to_string(&v).unwrap()
        }
        Change::Command(c) => {
            if !COMMANDS.contains(&c.as_str()) {
                v["cmd"] = json!(c);
                refused = Some("unknown variant".into());
            }
            serde_json::to_string(&v).unwrap()
        }
    };
    if let Change::Blanks = change {
        line = format!(" \t{line}  \n");
    }
    let got = check_request(line.as_bytes());
    match (got, refused) {
        (Some(req), None) => {
            let back = serde_json::to_value(&req).unwrap();
            // Optional fields at their defaults are not written back.
            let mut want = v.clone();
            if let Some(m) = want.as_object_mut() {
                m.retain(|k, x| !(x.is_null() || (k == "apply_live" && *x == json!(false))));
            }
            assert!(same_value(&back, &want), "{line} parsed as {back}");
        }
        (None, None) => panic!("a well-formed request was refused: {line}: {:?}", parse_request(line.as_bytes())),
        (Some(req), Some(why)) => panic!("accepted ({why} expected): {line} -> {req:?}"),
        (None, Some(why)) => {
            let e = parse_request(line.as_bytes()).unwrap_err();
            assert!(e.message.contains(&why), "{line}: expected {why:?} in {:?}", e.message);
        }
    }
    // The rule or policy as the handler parses it, against its generator.
    if v == original {
        if let Some(spec) = rule_spec {
            check_rule_spec(spec);
        }
        if let (Some(p), Some(pv)) = (policy, v.get("policy")) {
            match parse_policy(pv) {
                Ok(got) => assert_eq!(got, p, "{pv}"),
                Err(e) => assert!(p.validate().is_err(), "refused a valid policy {pv}: {e}"),
            }
        }
    }
}
