//! Per-flow policy rules: which [`Policy`] a new flow runs.
//!
//! A rule matches on a flow's destination and source subnets (IPv4 or IPv6 CIDR; see [`IpCidr`]
//! for how the families meet), destination and source port ranges, and the congestion control name its socket asked for (CREATE's
//! congAlg). A field left out matches everything. Rules are tried in order; the first that
//! matches gives the policy; a flow no rule matches runs the default policy from the flags.
//!
//! Rules come from the policy file (`--policy FILE`, TOML; `policy_file.rs` reads and writes it)
//! and from the control socket.
//!
//! A rule is one JSON object, as the control socket's `policy add` takes it and as each
//! `[[rule]]` table of the file reads ([`parse_rule`] serves both); its errors name the field.
//! Rules that can match the same flow are legal (first match wins) but reported by
//! [`overlaps`] so the agent and the CLI can warn. The lookup index and the overlap report,
//! which keep 100,000 rules cheap, live in `policy_index.rs`.

use crate::policy_index::RuleIndex;
pub use crate::policy_index::{overlaps, overlaps_with, Overlap, OverlapReport, OVERLAPS_SHOWN, OVERLAP_CHECK_BUDGET};
use ipnet::IpNet;
use polycc_algorithms::{AlgorithmConfig, AlgorithmKind, Policy};
use serde_json::{Map, Value};
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;
use thiserror::Error;

/// The fields a rule may have; anything else is refused (a typo must not widen a rule).
pub const RULE_FIELDS: [&str; 7] = ["id", "dst", "src", "dst_ports", "src_ports", "cong_alg", "policy"];

/// An IPv4 or IPv6 subnet: `addr/prefix`, host bits zero (an [`IpNet`] that refuses host bits
/// instead of masking them: `10.1.2.3/16` is a typo for a host or a subnet, not a subnet).
///
/// The families are apart: a v4 subnet never contains a v6 address nor overlaps a v6 subnet,
/// and a v6 subnet in `::ffff:0:0/96` (IPv4-mapped) is a v6 subnet like any other. Flows are
/// another matter: [`Rule::matches`] reads a flow's IPv4-mapped address as the IPv4 address it
/// is (a dual-stack socket talking IPv4 reports `::ffff:a.b.c.d`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpCidr(IpNet);

/// A subnet that does not parse, with what is wrong.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum CidrError {
    #[error("`{0}` is not an IP address (expected e.g. 10.0.0.0/8, 10.0.0.1, 2001:db8::/32 or 2001:db8::1)")]
    Address(String),
    #[error("`{given}` has a prefix length outside 0..={max}")]
    Prefix { given: String, max: u8 },
    #[error("`{given}` has host bits set; the subnet is {network}")]
    HostBits { given: String, network: String },
}

impl IpCidr {
    /// `addr/prefix`; `None` when the prefix is too long for the family or host bits are set.
    pub fn new(addr: IpAddr, prefix: u8) -> Option<IpCidr> {
        IpNet::new(addr, prefix).ok().filter(|n| n.network() == addr).map(IpCidr)
    }

    /// Whether `ip` is in the subnet; an address of the other family never is (as written:
    /// `::ffff:10.0.0.1` is not in `10.0.0.0/8`; flows are normalised by [`Rule::matches`]).
    pub fn contains(&self, ip: IpAddr) -> bool {
        // By masks here rather than through ipnet's `Contains` (not inlined across crates): a
        // scan of 100,000 rules took 4x the IPv4-only `Ipv4Net` version through it.
        match (self.0, ip) {
            (IpNet::V4(n), IpAddr::V4(a)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(n.prefix_len())).unwrap_or(0);
                u32::from(a) & mask == u32::from(n.network())
            }
            (IpNet::V6(n), IpAddr::V6(a)) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(n.prefix_len())).unwrap_or(0);
                u128::from(a) & mask == u128::from(n.network())
            }
            _ => false,
        }
    }

    pub fn network(&self) -> IpAddr {
        self.0.network()
    }

    /// The subnet's last address.
    pub fn broadcast(&self) -> IpAddr {
        self.0.broadcast()
    }

    pub fn prefix_len(&self) -> u8 {
        self.0.prefix_len()
    }

    /// The longest prefix of the family: 32 or 128.
    pub fn max_prefix_len(&self) -> u8 {
        self.0.max_prefix_len()
    }

    pub fn is_ipv4(&self) -> bool {
        matches!(self.0, IpNet::V4(_))
    }

    /// Two subnets share an address exactly when one contains the other (never across families).
    pub fn overlaps(&self, other: &IpCidr) -> bool {
        self.0.contains(&other.0) || other.0.contains(&self.0)
    }
}

impl FromStr for IpCidr {
    type Err = CidrError;
    fn from_str(s: &str) -> Result<Self, CidrError> {
        let s = s.trim();
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = addr.parse().map_err(|_| CidrError::Address(s.into()))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) => p.parse::<u8>().ok().filter(|p| *p <= max).ok_or(CidrError::Prefix { given: s.into(), max })?,
            None => max,
        };
        let net = IpNet::new(addr, prefix).map_err(|_| CidrError::Prefix { given: s.into(), max })?;
        IpCidr::new(addr, prefix)
            .ok_or_else(|| CidrError::HostBits { given: s.into(), network: format!("{}", net.trunc()) })
    }
}

impl fmt::Display for IpCidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A flow's address as rules see it: an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, what a
/// dual-stack socket talking IPv4 reports) is the IPv4 address; anything else is itself.
pub fn flow_addr(ip: IpAddr) -> IpAddr {
    ip.to_canonical()
}

/// A flow's end as `polycc flows` and the logs show it: `1.2.3.4:5` or `[2001:db8::1]:5`
/// (an IPv4-mapped address shown as the IPv4 address, as [`flow_addr`] reads it).
pub fn socket_addr_string(ip: IpAddr, port: u16) -> String {
    SocketAddr::new(flow_addr(ip), port).to_string()
}

/// An inclusive port range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortRange {
    pub first: u16,
    pub last: u16,
}

impl PortRange {
    pub fn contains(&self, port: u16) -> bool {
        (self.first..=self.last).contains(&port)
    }

    pub fn overlaps(&self, other: &PortRange) -> bool {
        self.first <= other.last && other.first <= self.last
    }
}

impl FromStr for PortRange {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let port = |p: &str| p.trim().parse::<u16>().map_err(|_| format!("`{}` is not a port in 0..=65535", p.trim()));
        let (first, last) = match s.split_once('-') {
            Some((a, b)) => (port(a)?, port(b)?),
            None => (port(s)?, port(s)?),
        };
        if first > last {
            return Err(format!("`{}` runs backwards: the first port must not exceed the last", s.trim()));
        }
        Ok(PortRange { first, last })
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.first == self.last {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}-{}", self.first, self.last)
        }
    }
}

/// What a rule matches on, from a flow's CREATE (ports in host order). An address may be
/// IPv4-mapped IPv6: rules read it as IPv4 ([`flow_addr`]).
#[derive(Clone, Copy, Debug)]
pub struct FlowKey<'a> {
    pub src: IpAddr,
    pub src_port: u16,
    pub dst: IpAddr,
    pub dst_port: u16,
    pub cong_alg: &'a str,
}

impl FlowKey<'_> {
    /// The key with its addresses as rules read them ([`flow_addr`]).
    pub fn canonical(&self) -> Self {
        FlowKey { src: flow_addr(self.src), dst: flow_addr(self.dst), ..*self }
    }
}

/// One rule. `None` fields match every flow.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    pub id: u32,
    pub dst: Option<IpCidr>,
    pub src: Option<IpCidr>,
    pub dst_ports: Option<PortRange>,
    pub src_ports: Option<PortRange>,
    pub cong_alg: Option<String>,
    pub policy: Policy,
}

fn both<T>(a: &Option<T>, b: &Option<T>, f: impl Fn(&T, &T) -> bool) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => f(a, b),
        _ => true,
    }
}

impl Rule {
    /// Whether the flow matches every field the rule has; the flow's IPv4-mapped addresses
    /// are read as IPv4 ([`flow_addr`]).
    pub fn matches(&self, k: &FlowKey) -> bool {
        self.matches_canonical(&k.canonical())
    }

    /// [`Rule::matches`] for a key already [`FlowKey::canonical`] (lookups convert once).
    pub(crate) fn matches_canonical(&self, k: &FlowKey) -> bool {
        self.dst.is_none_or(|c| c.contains(k.dst))
            && self.src.is_none_or(|c| c.contains(k.src))
            && self.dst_ports.is_none_or(|r| r.contains(k.dst_port))
            && self.src_ports.is_none_or(|r| r.contains(k.src_port))
            && self.cong_alg.as_deref().is_none_or(|a| a == k.cong_alg)
    }

    /// Some flow could match both rules.
    pub fn overlaps(&self, other: &Rule) -> bool {
        both(&self.dst, &other.dst, IpCidr::overlaps)
            && both(&self.src, &other.src, IpCidr::overlaps)
            && both(&self.dst_ports, &other.dst_ports, PortRange::overlaps)
            && both(&self.src_ports, &other.src_ports, PortRange::overlaps)
            && both(&self.cong_alg, &other.cong_alg, |a, b| a == b)
    }

    /// "dst 10.0.0.0/8 dst_ports 5201 -> copa"
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(c) = &self.dst {
            parts.push(format!("dst {c}"));
        }
        if let Some(c) = &self.src {
            parts.push(format!("src {c}"));
        }
        if let Some(r) = &self.dst_ports {
            parts.push(format!("dst_ports {r}"));
        }
        if let Some(r) = &self.src_ports {
            parts.push(format!("src_ports {r}"));
        }
        if let Some(a) = &self.cong_alg {
            parts.push(format!("cong_alg {a}"));
        }
        let when = if parts.is_empty() { "every flow".to_string() } else { parts.join(" ") };
        format!("{when} -> {}", self.policy.describe())
    }

    /// The rule in the policy file's form (a JSON object; [`to_toml`](crate::policy_file::to_toml) writes the same).
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("id".into(), self.id.into());
        let mut put = |k: &str, v: Option<String>| {
            if let Some(v) = v {
                m.insert(k.into(), Value::String(v));
            }
        };
        put("dst", self.dst.map(|c| c.to_string()));
        put("src", self.src.map(|c| c.to_string()));
        put("dst_ports", self.dst_ports.map(|r| r.to_string()));
        put("src_ports", self.src_ports.map(|r| r.to_string()));
        put("cong_alg", self.cong_alg.clone());
        m.insert("policy".into(), policy_to_json(&self.policy));
        Value::Object(m)
    }
}

/// A policy as the rule's `policy` field: a bare name when it is one algorithm at its
/// defaults, else the algorithm or fused table.
pub fn policy_to_json(p: &Policy) -> Value {
    match p {
        Policy::Single(c) if *c == c.kind().default_config() => Value::String(c.kind().name().into()),
        Policy::Single(c) => member_to_json(c),
        Policy::Fused(f) => {
            let mut v = without_nulls(serde_json::to_value(p).unwrap_or(Value::Null));
            if let Some(fused) = v.get_mut("fused").and_then(Value::as_object_mut) {
                fused.insert("pilot".into(), member_to_json(&f.pilot));
                fused.insert("copilots".into(), Value::Array(f.copilots.iter().map(member_to_json).collect()));
            }
            v
        }
    }
}

/// An algorithm table; only `alg` when every parameter is at its default.
fn member_to_json(c: &AlgorithmConfig) -> Value {
    if *c == c.kind().default_config() {
        serde_json::json!({ "alg": c.kind().name() })
    } else {
        without_nulls(serde_json::to_value(c).unwrap_or(Value::Null))
    }
}

/// TOML has no null: drop null members (optional parameters left at their default).
fn without_nulls(v: Value) -> Value {
    match v {
        Value::Object(m) => {
            Value::Object(m.into_iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k, without_nulls(v))).collect())
        }
        Value::Array(a) => Value::Array(a.into_iter().map(without_nulls).collect()),
        v => v,
    }
}

/// What is wrong with one field of a rule.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum RuleErrorKind {
    #[error("unknown field (a rule takes {})", RULE_FIELDS.join(", "))]
    UnknownField,
    #[error("invalid CIDR: {0}")]
    InvalidCidr(#[from] CidrError),
    #[error("bad port range: {0}")]
    BadPortRange(String),
    #[error("invalid policy: {0}")]
    InvalidPolicy(String),
    #[error("expected {0}")]
    WrongType(&'static str),
    #[error("missing: every rule needs a policy")]
    MissingPolicy,
    #[error("id {0} is used by an earlier rule")]
    DuplicateId(u32),
    #[error("no id is left after the largest one, 4294967295: give the rule an id that is free")]
    IdsExhausted,
}

/// A rule that cannot be used, naming the field.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("field `{field}`: {kind}")]
pub struct RuleError {
    pub field: String,
    pub kind: RuleErrorKind,
}

impl RuleError {
    fn at(field: &str) -> impl Fn(RuleErrorKind) -> RuleError + '_ {
        move |kind| RuleError { field: field.to_string(), kind }
    }
}

/// A rule whose `id` may still be unassigned.
#[derive(Clone, Debug, PartialEq)]
pub struct ParsedRule {
    pub id: Option<u32>,
    pub rule: Rule,
}

fn string_field<'a>(v: &'a Value, what: &'static str) -> Result<&'a str, RuleErrorKind> {
    v.as_str().ok_or(RuleErrorKind::WrongType(what))
}

fn ports_field(v: &Value) -> Result<PortRange, RuleErrorKind> {
    match v {
        Value::Number(n) => n
            .as_u64()
            .and_then(|p| u16::try_from(p).ok())
            .map(|p| PortRange { first: p, last: p })
            .ok_or_else(|| RuleErrorKind::BadPortRange(format!("{n} is not a port in 0..=65535"))),
        Value::String(s) => s.parse().map_err(RuleErrorKind::BadPortRange),
        _ => Err(RuleErrorKind::WrongType("a port (5201) or a range (\"5000-5999\")")),
    }
}

/// The `policy` field: a name, an algorithm table (`{alg = "cubic", ...}`), or a policy table
/// (`{single = {...}}`, `{fused = {...}}`), validated.
pub fn parse_policy(v: &Value) -> Result<Policy, RuleErrorKind> {
    let invalid = |e: &dyn fmt::Display| RuleErrorKind::InvalidPolicy(e.to_string());
    let policy = match v {
        Value::String(s) if s.trim().eq_ignore_ascii_case("fused") => {
            return Err(RuleErrorKind::InvalidPolicy(
                "a fused policy is a table: {fused = {pilot = {alg = \"bbr\"}, copilots = [{alg = \"cubic\"}]}}".into(),
            ))
        }
        Value::String(s) => Policy::Single(s.parse::<AlgorithmKind>().map_err(|e| invalid(&e))?.default_config()),
        Value::Object(m) if m.contains_key("alg") => {
            Policy::Single(serde_json::from_value::<AlgorithmConfig>(v.clone()).map_err(|e| invalid(&e))?)
        }
        Value::Object(_) => serde_json::from_value::<Policy>(v.clone()).map_err(|e| invalid(&e))?,
        _ => return Err(RuleErrorKind::WrongType("an algorithm name or a policy table")),
    };
    policy.validate().map_err(|e| invalid(&e))?;
    Ok(policy)
}

/// One rule from its JSON/TOML table. Unknown fields are refused before anything else.
pub fn parse_rule(v: &Value) -> Result<ParsedRule, RuleError> {
    let Value::Object(m) = v else {
        return Err(RuleError { field: "rule".into(), kind: RuleErrorKind::WrongType("a table of fields") });
    };
    if let Some(k) = m.keys().find(|k| !RULE_FIELDS.contains(&k.as_str())) {
        return Err(RuleError { field: k.clone(), kind: RuleErrorKind::UnknownField });
    }
    let cidr = |field: &'static str| -> Result<Option<IpCidr>, RuleError> {
        m.get(field)
            .map(|v| {
                string_field(v, "a CIDR string such as \"10.0.0.0/8\" or \"2001:db8::/32\"")?
                    .parse()
                    .map_err(RuleErrorKind::from)
            })
            .transpose()
            .map_err(RuleError::at(field))
    };
    let ports = |field: &'static str| m.get(field).map(ports_field).transpose().map_err(RuleError::at(field));
    let id = m
        .get("id")
        .map(|v| {
            v.as_u64().and_then(|i| u32::try_from(i).ok()).ok_or(RuleErrorKind::WrongType("an id in 0..=4294967295"))
        })
        .transpose()
        .map_err(RuleError::at("id"))?;
    let cong_alg = m
        .get("cong_alg")
        .map(|v| string_field(v, "a congestion control name such as \"ccp\"").map(|s| s.trim().to_string()))
        .transpose()
        .map_err(RuleError::at("cong_alg"))?;
    let policy = parse_policy(m.get("policy").ok_or_else(|| RuleError::at("policy")(RuleErrorKind::MissingPolicy))?)
        .map_err(RuleError::at("policy"))?;
    Ok(ParsedRule {
        id,
        rule: Rule {
            id: id.unwrap_or(0),
            dst: cidr("dst")?,
            src: cidr("src")?,
            dst_ports: ports("dst_ports")?,
            src_ports: ports("src_ports")?,
            cong_alg,
            policy,
        },
    })
}

/// The ordered rules; the default policy lives with the agent.
#[derive(Clone, Debug, Default)]
pub struct RuleSet {
    rules: Vec<Rule>,
    /// The largest id handed out since load: a removed rule's id is not given to the next
    /// one while the agent runs (after a restart ids continue from the file's largest).
    max_id: u32,
    /// Rebuilt by every method that changes `rules`.
    index: RuleIndex,
}

/// Sets are equal by their rules and ids; the index follows from them.
impl PartialEq for RuleSet {
    fn eq(&self, other: &RuleSet) -> bool {
        (&self.rules, self.max_id) == (&other.rules, other.max_id)
    }
}

impl RuleSet {
    fn new(rules: Vec<Rule>, max_id: u32) -> RuleSet {
        let index = RuleIndex::build(&rules);
        RuleSet { rules, max_id, index }
    }

    fn reindex(&mut self) {
        self.index = RuleIndex::build(&self.rules);
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    pub fn into_rules(self) -> Vec<Rule> {
        self.rules
    }

    /// The first rule matching the flow, through the index.
    pub fn select(&self, k: &FlowKey) -> Option<&Rule> {
        self.index.first_match(&self.rules, k).map(|i| &self.rules[i])
    }

    /// The first rule matching the flow by a scan in order: what [`RuleSet::select`] must
    /// agree with (tests and the `policy_rules` benchmark compare them).
    pub fn select_linear(&self, k: &FlowKey) -> Option<&Rule> {
        let k = k.canonical();
        self.rules.iter().find(|r| r.matches_canonical(&k))
    }

    pub fn get(&self, id: u32) -> Option<&Rule> {
        self.rules.iter().find(|r| r.id == id)
    }

    /// One past the largest id handed out; none is left after `u32::MAX` (ids are never reused
    /// while the agent runs, and a saturated id would duplicate one).
    fn next_id(&self) -> Result<u32, RuleError> {
        let largest = self.rules.iter().map(|r| r.id).fold(self.max_id, u32::max);
        largest.checked_add(1).ok_or(RuleError::at("id")(RuleErrorKind::IdsExhausted))
    }

    /// Build from parsed rules in order: missing ids are assigned after the largest given one.
    /// The error carries the 0-based index of the offending rule.
    pub fn from_parsed(parsed: Vec<ParsedRule>) -> Result<RuleSet, (usize, RuleError)> {
        let mut seen = std::collections::HashSet::new();
        for (i, p) in parsed.iter().enumerate() {
            if let Some(id) = p.id {
                if !seen.insert(id) {
                    return Err((i, RuleError::at("id")(RuleErrorKind::DuplicateId(id))));
                }
            }
        }
        let mut next = seen.iter().max().map_or(Some(1), |m| m.checked_add(1));
        let rules = parsed
            .into_iter()
            .enumerate()
            .map(|(i, p)| {
                let id = match p.id {
                    Some(id) => id,
                    None => {
                        let id = next.ok_or((i, RuleError::at("id")(RuleErrorKind::IdsExhausted)))?;
                        next = id.checked_add(1);
                        id
                    }
                };
                Ok(Rule { id, ..p.rule })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let max_id = rules.iter().map(|r| r.id).max().unwrap_or(0);
        Ok(RuleSet::new(rules, max_id))
    }

    /// Insert at `position` (0 = first; `None` or past the end = last). Returns the rule's id.
    pub fn add(&mut self, rule: ParsedRule, position: Option<usize>) -> Result<u32, RuleError> {
        let id = match rule.id {
            Some(id) if self.get(id).is_some() => return Err(RuleError::at("id")(RuleErrorKind::DuplicateId(id))),
            Some(id) => id,
            None => self.next_id()?,
        };
        self.max_id = self.max_id.max(id);
        let at = position.unwrap_or(self.rules.len()).min(self.rules.len());
        self.rules.insert(at, Rule { id, ..rule.rule });
        self.reindex();
        Ok(id)
    }

    /// Put `rule` in the place of rule `id`, keeping its id and position; the old rule is
    /// returned. A `rule` that names another id is refused.
    pub fn replace(&mut self, id: u32, rule: ParsedRule) -> Result<Option<Rule>, RuleError> {
        if let Some(other) = rule.id.filter(|&other| other != id) {
            return Err(RuleError::at("id")(RuleErrorKind::WrongType(if self.get(other).is_some() {
                "the id of the rule being replaced (or none); another rule has that id"
            } else {
                "the id of the rule being replaced (or none)"
            })));
        }
        let Some(i) = self.rules.iter().position(|r| r.id == id) else { return Ok(None) };
        let old = std::mem::replace(&mut self.rules[i], Rule { id, ..rule.rule });
        self.reindex();
        Ok(Some(old))
    }

    pub fn remove(&mut self, id: u32) -> Option<Rule> {
        let i = self.rules.iter().position(|r| r.id == id)?;
        let old = self.rules.remove(i);
        self.reindex();
        Some(old)
    }
}

#[cfg(test)]
mod tests;
