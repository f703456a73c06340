//! What keeps a large rule set cheap (issue 16 A2: 1,000 rules took 4.5 s and printed 499 k
//! warnings, 200 k rules took 16.4 GB): the lookup index behind [`RuleSet::select`] and the
//! overlap report.
//!
//! **One address space.** Both do arithmetic on addresses, so IPv4 and IPv6 share one `u128`
//! space: an IPv6 address is its 128 bits, an IPv4 address a.b.c.d is the IPv4-mapped
//! `::ffff:a.b.c.d`, and a v4 /p the v6 /(p + 96) it maps to. A flow's address lands where
//! [`Rule::matches`] reads it (a flow's `::ffff:a.b.c.d` is a.b.c.d there too). The one
//! place the mapping is not one to one, a v6 rule inside `::ffff:0:0/96` against a v4 rule,
//! costs at most some candidates: a rule found through the index is still checked with
//! [`Rule::matches`], and a pair of boxes with the families checked (below).
//!
//! **Lookup.** First match in order is the matching rule at the lowest position. Subnets nest
//! or are disjoint, so the rules whose subnet holds an address sit in at most 129 buckets, one
//! per prefix length (in the shared space): the index buckets rules by (prefix length,
//! network) on one address field (dst, or src when that leaves fewer rules to scan), each
//! bucket in rule order. A lookup probes one bucket per prefix length in use and scans it, and
//! the rules without that field, only up to the best position found so far. Rules sharing one
//! subnet, or having none on that field, are scanned as before: a set made only of such rules
//! costs what the plain scan does. The key's addresses are canonicalised once per lookup, and
//! the buckets hashed by a folded multiply rather than SipHash (see [`NetworkHasher`]).
//!
//! **Overlaps.** A rule is a box of five inclusive ranges (dst and src as `u128`, dst ports, src
//! ports, and congAlg as an interned id), with the families its dst and src may be; a missing
//! field is the whole range and both families. Two rules overlap when all five ranges
//! intersect and each address field has a family in common (what [`Rule::overlaps`] says).
//! For each dimension the pairs whose ranges intersect are counted in O(n log n) (sorted
//! starts against sorted ends); those of the most selective dimension are enumerated by a
//! sweep (rules by start, a min-heap of the open ranges' ends) and checked on all five. Rules
//! that differ in some dimension cost O(n log n) plus the pairs that do intersect there; the
//! check stops at [`OVERLAP_CHECK_BUDGET`] pairs when no dimension separates the rules (then
//! it scans in file order, and the count it reports is a lower bound). The report names the
//! first [`OVERLAPS_SHOWN`] overlaps in file order and counts the rest.

use crate::policy_rules::{FlowKey, IpCidr, PortRange, Rule, RuleSet};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::net::IpAddr;

/// How many overlaps the agent, `--check` and `polycc policy add|replace` print; the rest are
/// counted in one line.
pub const OVERLAPS_SHOWN: usize = 20;

/// The most pairs of rules one overlap report examines: about 0.1 s. Only a set in which no
/// dimension keeps most rules apart gets there (10,000 rules that all overlap have 50 M pairs).
pub const OVERLAP_CHECK_BUDGET: u64 = 10_000_000;

/// Which address field the lookup index buckets on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Field {
    #[default]
    Dst,
    Src,
}

impl Field {
    fn of_rule(self, r: &Rule) -> Option<IpCidr> {
        match self {
            Field::Dst => r.dst,
            Field::Src => r.src,
        }
    }

    fn of_key(self, k: &FlowKey) -> IpAddr {
        match self {
            Field::Dst => k.dst,
            Field::Src => k.src,
        }
    }
}

/// An address in the shared space: IPv4 as IPv4-mapped IPv6 (so a flow's `::ffff:a.b.c.d` and
/// a.b.c.d are one point, as [`Rule::matches`] reads them).
fn point(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(a) => u128::from(a.to_ipv6_mapped()),
        IpAddr::V6(a) => u128::from(a),
    }
}

/// A subnet in the shared space: (prefix length, network); a v4 /p is a /(p + 96).
fn span(c: IpCidr) -> (u8, u128) {
    let len = c.prefix_len() + if c.is_ipv4() { 96 } else { 0 };
    (len, point(c.network()))
}

/// `addr` with its host bits (past `prefix_len`, at most 128) cleared.
fn network_of(addr: u128, prefix_len: u8) -> u128 {
    addr & u128::MAX.checked_shl(128 - u32::from(prefix_len)).unwrap_or(0)
}

/// A network's hash: its halves multiplied and folded (as foldhash does), where SipHash took
/// half the indexed lookup's time on 16-byte keys. The keys are the rules' networks, from the
/// policy file or root's socket, so nobody picks them to collide; a flow's address only picks
/// which key to look for.
#[derive(Default)]
struct NetworkHasher(u64);

impl Hasher for NetworkHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(16) {
            let mut n = [0; 16];
            n[..chunk.len()].copy_from_slice(chunk);
            self.write_u128(u128::from_le_bytes(n));
        }
    }

    fn write_u128(&mut self, n: u128) {
        const K: [u64; 2] = [0x243f_6a88_85a3_08d3, 0x1319_8a2e_0370_7344];
        let m = u128::from(n as u64 ^ K[0] ^ self.0) * u128::from((n >> 64) as u64 ^ K[1]);
        self.0 = m as u64 ^ (m >> 64) as u64;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// Networks of one prefix length -> the range of positions holding that subnet's rules.
type Buckets = HashMap<u128, (usize, usize), BuildHasherDefault<NetworkHasher>>;

/// Rule positions bucketed by subnet on one address field; rebuilt with every change to the set.
#[derive(Clone, Default)]
pub(crate) struct RuleIndex {
    field: Field,
    /// One map per prefix length in use (in the shared space, ascending): network -> the range
    /// of `positions` holding that subnet's rules, ascending.
    buckets: Vec<(u8, Buckets)>,
    positions: Vec<usize>,
    /// Rules without a subnet on `field`, ascending: every lookup scans these.
    unindexed: Vec<usize>,
}

impl fmt::Debug for RuleIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuleIndex")
            .field("field", &self.field)
            .field("buckets", &self.buckets.iter().map(|(_, b)| b.len()).sum::<usize>())
            .field("unindexed", &self.unindexed.len())
            .finish()
    }
}

impl RuleIndex {
    /// On dst, or on src when that leaves fewer rules to scan in the worst lookup.
    pub(crate) fn build(rules: &[Rule]) -> RuleIndex {
        let dst = RuleIndex::on(Field::Dst, rules);
        if dst.worst_scan() == 0 {
            return dst;
        }
        let src = RuleIndex::on(Field::Src, rules);
        if src.worst_scan() < dst.worst_scan() {
            src
        } else {
            dst
        }
    }

    fn on(field: Field, rules: &[Rule]) -> RuleIndex {
        let mut keyed = Vec::with_capacity(rules.len());
        let mut unindexed = Vec::new();
        for (i, r) in rules.iter().enumerate() {
            match field.of_rule(r) {
                Some(c) => keyed.push((span(c), i)),
                None => unindexed.push(i),
            }
        }
        keyed.sort_unstable();
        let mut buckets: Vec<(u8, Buckets)> = Vec::new();
        let mut start = 0;
        for group in keyed.chunk_by(|a, b| a.0 == b.0) {
            let (len, network) = group[0].0;
            if buckets.last().is_none_or(|(l, _)| *l != len) {
                buckets.push((len, Buckets::default()));
            }
            if let Some((_, by_network)) = buckets.last_mut() {
                by_network.insert(network, (start, start + group.len()));
            }
            start += group.len();
        }
        let positions = keyed.into_iter().map(|(_, i)| i).collect();
        RuleIndex { field, buckets, positions, unindexed }
    }

    /// What the worst lookup may scan: the unindexed rules and the largest bucket (an estimate:
    /// an address can fall in one bucket per prefix length).
    fn worst_scan(&self) -> usize {
        let largest = self.buckets.iter().flat_map(|(_, b)| b.values()).map(|(start, end)| end - start).max();
        self.unindexed.len() + largest.unwrap_or(0)
    }

    /// The position of the first rule matching `k`: what a scan of `rules` in order finds.
    pub(crate) fn first_match(&self, rules: &[Rule], k: &FlowKey) -> Option<usize> {
        debug_assert_eq!(self.positions.len() + self.unindexed.len(), rules.len(), "index out of date");
        let k = &k.canonical();
        let addr = point(self.field.of_key(k));
        let mut best = first_below(&self.unindexed, rules, k, None);
        for (len, by_network) in &self.buckets {
            if let Some(&(start, end)) = by_network.get(&network_of(addr, *len)) {
                best = first_below(&self.positions[start..end], rules, k, best);
            }
        }
        best
    }
}

/// The first of `positions` (ascending) before `bound` whose rule matches the canonical `k`,
/// else `bound`.
fn first_below(positions: &[usize], rules: &[Rule], k: &FlowKey, bound: Option<usize>) -> Option<usize> {
    positions
        .iter()
        .copied()
        .take_while(|&p| bound.is_none_or(|b| p < b))
        .find(|&p| rules[p].matches_canonical(k))
        .or(bound)
}

/// Two rules some flow could match both of: the later one never sees those flows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Overlap {
    pub earlier: u32,
    pub later: u32,
}

impl fmt::Display for Overlap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "rule {} overlaps the earlier rule {}: flows matching both run rule {}",
            self.later, self.earlier, self.earlier
        )
    }
}

/// The overlapping pairs of a rule set, the first few named and the rest counted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OverlapReport {
    /// The first overlaps in file order (by the later rule's position, then the earlier's).
    pub shown: Vec<Overlap>,
    /// Overlapping pairs in all, `shown` included; a lower bound when `complete` is false.
    pub total: u64,
    /// Whether every pair that could overlap was checked (false past [`OVERLAP_CHECK_BUDGET`]).
    pub complete: bool,
    /// Pairs of rules examined: the report's cost, which tests hold down.
    pub checked: u64,
}

impl OverlapReport {
    /// The warnings to print: one per shown overlap, then one counting the rest.
    pub fn lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self.shown.iter().map(Overlap::to_string).collect();
        let more = self.total - self.shown.len() as u64;
        if !self.complete {
            lines.push(format!(
                "and at least {more} more overlapping pairs of rules (the check stopped after {} pairs: \
                 most rules here can match the same flows)",
                self.checked
            ));
        } else if more > 0 {
            lines.push(format!("and {more} more overlapping pairs of rules"));
        }
        lines
    }
}

/// The first `limit` pairs (earlier, later) by (later, earlier), of all those added.
struct FirstPairs {
    limit: usize,
    /// A max-heap on (later, earlier): its top is the pair to drop when a smaller one comes.
    kept: BinaryHeap<(usize, usize)>,
    total: u64,
}

impl FirstPairs {
    fn new(limit: usize) -> FirstPairs {
        FirstPairs { limit, kept: BinaryHeap::new(), total: 0 }
    }

    fn add(&mut self, earlier: usize, later: usize) {
        self.total += 1;
        if self.kept.len() < self.limit {
            self.kept.push((later, earlier));
        } else if self.kept.peek().is_some_and(|&top| (later, earlier) < top) {
            self.kept.pop();
            self.kept.push((later, earlier));
        }
    }

    fn report(self, rules: &[Rule], complete: bool, checked: u64) -> OverlapReport {
        let shown = self
            .kept
            .into_sorted_vec()
            .into_iter()
            .map(|(later, earlier)| Overlap { earlier: rules[earlier].id, later: rules[later].id })
            .collect();
        OverlapReport { shown, total: self.total, complete, checked }
    }
}

/// Every pair of rules that can match the same flow, the first `shown` of them named.
pub fn overlaps(set: &RuleSet, shown: usize) -> OverlapReport {
    overlaps_within(set.rules(), shown, OVERLAP_CHECK_BUDGET)
}

/// The overlaps of rule `id` with the others (after `polycc policy add|replace`): one pass.
pub fn overlaps_with(set: &RuleSet, id: u32, shown: usize) -> OverlapReport {
    let rules = set.rules();
    let mut first = FirstPairs::new(shown);
    let Some(at) = rules.iter().position(|r| r.id == id) else { return first.report(rules, true, 0) };
    for (i, _) in rules.iter().enumerate().filter(|&(i, r)| i != at && r.overlaps(&rules[at])) {
        first.add(i.min(at), i.max(at));
    }
    first.report(rules, true, rules.len().saturating_sub(1) as u64)
}

/// One rule as inclusive ranges in five dimensions: dst and src (the shared `u128` space),
/// dst ports, src ports, congAlg (interned); and the families its dst and src may be.
struct RuleBox {
    addrs: [(u128, u128); 2],
    others: [(u32, u32); 3],
    /// [`V4`] and [`V6`] for dst, the same shifted by 2 for src: both when the field is missing.
    families: u8,
}

const V4: u8 = 1;
const V6: u8 = 2;
const DIMS: usize = 5;

fn boxes(rules: &[Rule]) -> Vec<RuleBox> {
    let mut algs: HashMap<&str, u32> = HashMap::new();
    let cidr = |c: Option<IpCidr>| match c {
        None => ((0, u128::MAX), V4 | V6),
        Some(c) => ((point(c.network()), point(c.broadcast())), if c.is_ipv4() { V4 } else { V6 }),
    };
    let ports = |p: Option<PortRange>| p.map_or((0, u16::MAX.into()), |p| (p.first.into(), p.last.into()));
    rules
        .iter()
        .map(|r| {
            let alg = r.cong_alg.as_deref().map_or((0, u32::MAX), |a| {
                let next = algs.len() as u32 + 1;
                let id = *algs.entry(a).or_insert(next);
                (id, id)
            });
            let ((dst, dst_families), (src, src_families)) = (cidr(r.dst), cidr(r.src));
            RuleBox {
                addrs: [dst, src],
                others: [ports(r.dst_ports), ports(r.src_ports), alg],
                families: dst_families | (src_families << 2),
            }
        })
        .collect()
}

/// Some flow is in both boxes: every range intersects, and dst and src each have a family in
/// common (a v4 subnet and a v6 one in `::ffff:0:0/96` intersect as ranges, not as subnets).
fn intersect(a: &RuleBox, b: &RuleBox) -> bool {
    let meet = |a: &(u128, u128), b: &(u128, u128)| a.0 <= b.1 && b.0 <= a.1;
    let meet32 = |a: &(u32, u32), b: &(u32, u32)| a.0 <= b.1 && b.0 <= a.1;
    let families = a.families & b.families;
    families & (V4 | V6) != 0
        && families & ((V4 | V6) << 2) != 0
        && a.addrs.iter().zip(&b.addrs).all(|(a, b)| meet(a, b))
        && a.others.iter().zip(&b.others).all(|(a, b)| meet32(a, b))
}

/// Pairs of rules whose ranges (`range` of each box) intersect: for each range in order of
/// start, the ranges before it less those that ended before it starts (which all started
/// before it).
fn intersecting_pairs<T: Ord + Copy>(boxes: &[RuleBox], range: impl Fn(&RuleBox) -> (T, T)) -> u64 {
    let mut starts: Vec<T> = boxes.iter().map(|b| range(b).0).collect();
    let mut ends: Vec<T> = boxes.iter().map(|b| range(b).1).collect();
    starts.sort_unstable();
    ends.sort_unstable();
    starts.iter().enumerate().map(|(before, &s)| (before - ends.partition_point(|&e| e < s)) as u64).sum()
}

/// Calls `pair` once for each two rules whose ranges (`range` of each box) intersect: rules by
/// start, and the ranges still open when one starts are exactly those it intersects.
fn sweep<T: Ord + Copy>(boxes: &[RuleBox], range: impl Fn(&RuleBox) -> (T, T), mut pair: impl FnMut(usize, usize)) {
    let mut by_start: Vec<usize> = (0..boxes.len()).collect();
    by_start.sort_unstable_by_key(|&i| range(&boxes[i]).0);
    let mut open: BinaryHeap<Reverse<(T, usize)>> = BinaryHeap::new();
    for i in by_start {
        let (start, end) = range(&boxes[i]);
        while open.peek().is_some_and(|Reverse((e, _))| *e < start) {
            open.pop();
        }
        for Reverse((_, j)) in open.iter() {
            pair(*j, i);
        }
        open.push(Reverse((end, i)));
    }
}

/// [`intersecting_pairs`] in dimension `dim`: the address dimensions in `u128`, the others in
/// `u32` (16-byte keys sort at about half the speed: on 100,000 rules the dst dimension's count
/// went from 4 to 10 ms with them).
fn intersecting_pairs_in(boxes: &[RuleBox], dim: usize) -> u64 {
    match dim {
        0 | 1 => intersecting_pairs(boxes, |b| b.addrs[dim]),
        _ => intersecting_pairs(boxes, |b| b.others[dim - 2]),
    }
}

/// [`sweep`] in dimension `dim` (as [`intersecting_pairs_in`]).
fn sweep_in(boxes: &[RuleBox], dim: usize, pair: impl FnMut(usize, usize)) {
    match dim {
        0 | 1 => sweep(boxes, |b| b.addrs[dim], pair),
        _ => sweep(boxes, |b| b.others[dim - 2], pair),
    }
}

/// [`overlaps`] with the budget given (tests use a small one).
fn overlaps_within(rules: &[Rule], shown: usize, budget: u64) -> OverlapReport {
    let boxes = boxes(rules);
    let mut first = FirstPairs::new(shown);
    let mut checked = 0;
    let (pairs, dim) = (0..DIMS).map(|dim| (intersecting_pairs_in(&boxes, dim), dim)).min().unwrap_or((0, 0));
    if pairs <= budget {
        sweep_in(&boxes, dim, |a, b| {
            checked += 1;
            if intersect(&boxes[a], &boxes[b]) {
                first.add(a.min(b), a.max(b));
            }
        });
        return first.report(rules, true, checked);
    }
    // No dimension separates the rules: check in file order, so the first named are the first.
    'scan: for later in 0..boxes.len() {
        for earlier in 0..later {
            if checked == budget {
                break 'scan;
            }
            checked += 1;
            if intersect(&boxes[earlier], &boxes[later]) {
                first.add(earlier, later);
            }
        }
    }
    first.report(rules, false, checked)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy_file::parse_file;
    use crate::policy_rules::{parse_policy, ParsedRule};
    use proptest::prelude::*;
    use serde_json::{json, Value};
    use std::net::{Ipv4Addr, Ipv6Addr};
    use std::path::Path;

    fn set(rules: Value) -> RuleSet {
        parse_file(Path::new("t.toml"), &toml::to_string(&json!({ "rule": rules })).unwrap()).unwrap()
    }

    fn pairs(report: &OverlapReport) -> Vec<(u32, u32)> {
        report.shown.iter().map(|o| (o.earlier, o.later)).collect()
    }

    #[test]
    fn overlapping_rules_are_reported_and_disjoint_ones_not() {
        let s = set(json!([
            {"dst": "10.0.0.0/8", "policy": "reno"},
            {"dst": "10.1.0.0/16", "dst_ports": "80", "policy": "cubic"},
            {"dst": "11.0.0.0/8", "policy": "bbr"},
            {"dst_ports": "81-90", "cong_alg": "ccp", "policy": "copa"},
            {"dst_ports": "80", "cong_alg": "bbr", "policy": "copa"},
        ]));
        let report = overlaps(&s, OVERLAPS_SHOWN);
        assert_eq!(pairs(&report), [(1, 2), (1, 4), (3, 4), (1, 5), (2, 5), (3, 5)]);
        assert!(report.shown[0].to_string().contains("rule 2 overlaps the earlier rule 1"));
        assert_eq!(report.lines().len(), 6, "nothing more to count");
        let with_4 = overlaps_with(&s, 4, OVERLAPS_SHOWN);
        assert_eq!(pairs(&with_4), [(1, 4), (3, 4)]);
    }

    /// Issue 16 A2: the report checked all pairs; 20,000 rules of distinct destinations took
    /// 200 M checks (1.8 s here) to find the few that overlap.
    #[test]
    fn distinct_destinations_cost_the_pairs_that_overlap_not_all_pairs() {
        let mut rules: Vec<Value> = (0..20_000u32)
            .map(|i| json!({"dst": Ipv4Addr::from(0x0a00_0000 + 7 * i).to_string(), "policy": "reno"}))
            .collect();
        // Rule 20001 spans rules 1-37 (10.0.0.0 .. 10.0.0.252 in steps of 7); 20002 repeats rule
        // 1001's address with a congAlg; 20003 is a subnet nothing else touches.
        rules.push(json!({"dst": "10.0.0.0/24", "dst_ports": "80", "policy": "cubic"}));
        rules.push(
            json!({"dst": Ipv4Addr::from(0x0a00_0000 + 7 * 1000).to_string(), "cong_alg": "ccp", "policy": "bbr"}),
        );
        rules.push(json!({"dst": "11.0.0.0/8", "policy": "copa"}));
        let s = set(Value::Array(rules));
        let report = overlaps(&s, 100);
        let mut expected: Vec<(u32, u32)> = (1..=37).map(|i| (i, 20_001)).collect();
        expected.push((1001, 20_002));
        assert_eq!(pairs(&report), expected);
        assert_eq!((report.total, report.complete), (38, true));
        assert!(report.checked <= 100, "checked {} pairs of 20,003 rules", report.checked);
    }

    /// Issue 16 A2: 1,000 rules printed 499 k warnings.
    #[test]
    fn many_overlaps_are_named_up_to_the_limit_and_the_rest_counted() {
        let rules: Vec<Value> = (0..1000).map(|i| json!({"dst_ports": 1000 + i % 2, "policy": "reno"})).collect();
        let s = set(Value::Array(rules));
        let report = overlaps(&s, OVERLAPS_SHOWN);
        assert_eq!((report.total, report.complete), (249_500, true));
        let lines = report.lines();
        assert_eq!(lines.len(), OVERLAPS_SHOWN + 1);
        assert_eq!(lines[0], "rule 3 overlaps the earlier rule 1: flows matching both run rule 1");
        assert_eq!(lines[OVERLAPS_SHOWN], "and 249480 more overlapping pairs of rules");
        // What `polycc policy add` answers for one rule is bounded the same way.
        let lines = overlaps_with(&s, 1, OVERLAPS_SHOWN).lines();
        assert_eq!(lines.len(), OVERLAPS_SHOWN + 1);
        assert_eq!(lines[OVERLAPS_SHOWN], "and 479 more overlapping pairs of rules");
    }

    #[test]
    fn a_set_no_dimension_separates_stops_at_the_budget_naming_the_first_overlaps() {
        let s = set(Value::Array((0..100).map(|_| json!({"policy": "reno"})).collect()));
        let report = overlaps_within(s.rules(), 3, 1000);
        assert_eq!(pairs(&report), [(1, 2), (1, 3), (2, 3)], "file order");
        assert_eq!((report.total, report.checked, report.complete), (1000, 1000, false));
        assert!(report.lines()[3].starts_with("and at least 997 more"), "{:?}", report.lines());
        assert_eq!(overlaps(&s, 3).total, 4950, "under the real budget every pair is counted");
    }

    fn flow(dst: &str, src: &str) -> FlowKey<'static> {
        FlowKey {
            dst: dst.parse().unwrap(),
            src: src.parse().unwrap(),
            dst_port: 80,
            src_port: 40_000,
            cong_alg: "ccp",
        }
    }

    /// 10,000 rules of one family and a few of the other: each family's flows find their rule
    /// through buckets, scanning neither the other family's rules nor all of their own.
    #[test]
    fn the_index_finds_a_v6_rule_among_v4_rules_and_a_v4_rule_among_v6_rules() {
        let mut rules: Vec<Value> = (0..10_000u32)
            .map(|i| json!({"dst": Ipv4Addr::from(0x0a00_0000 + i).to_string(), "policy": "reno"}))
            .collect();
        rules.insert(5_000, json!({"dst": "2001:db8::/32", "policy": "bbr"}));
        rules.push(json!({"dst": "2001:db8:1::7", "policy": "cubic"}));
        // The mapped v4 /8 shares a bucket key with 10.0.0.0/8: a v6 rule, which no flow to
        // 10.x (v4 or ::ffff:10.x) matches.
        rules.push(json!({"dst": "::ffff:10.0.0.0/104", "policy": "vegas"}));
        rules.push(json!({"dst": "10.0.0.0/8", "policy": "copa"}));
        let s = set(Value::Array(rules));
        let index = RuleIndex::build(s.rules());
        assert_eq!((index.field, index.unindexed.len()), (Field::Dst, 0));
        assert!(index.worst_scan() <= 2, "{index:?}");
        let id = |dst: &str| s.select(&flow(dst, "192.168.1.1")).map(|r| r.id);
        assert_eq!(id("2001:db8:1::7"), Some(5_001), "the /32 comes first");
        assert_eq!(id("2001:db8:ffff::1"), Some(5_001));
        assert_eq!(id("2001:db9::1"), None);
        assert_eq!(id("10.0.19.136"), Some(5_000 + 1 + 1), "10.0.19.136 is host 5000, after the v6 rule");
        assert_eq!(id("10.0.0.3"), Some(4));
        assert_eq!(id("::ffff:10.0.0.3"), Some(4), "a mapped flow is the v4 flow");
        assert_eq!(id("10.200.0.1"), Some(10_004), "the v4 /8, not the mapped v6 /104 before it");
        assert_eq!(id("::ffff:10.200.0.1"), Some(10_004));
        for dst in ["2001:db8:1::7", "10.0.19.136", "::ffff:10.200.0.1", "::ffff:11.0.0.1", "::1"] {
            let k = flow(dst, "::1");
            assert_eq!(s.select(&k).map(|r| r.id), s.select_linear(&k).map(|r| r.id), "{dst}");
        }

        // And the other way round, on src: v6 hosts and one v4 subnet among them.
        let mut rules: Vec<Value> = (0..10_000u32)
            .map(|i| json!({"src": Ipv6Addr::from((0x2001_0db8_u128 << 96) | u128::from(i)).to_string(), "policy": "reno"}))
            .collect();
        rules.insert(3, json!({"src": "192.168.0.0/16", "policy": "bbr"}));
        let s = set(Value::Array(rules));
        let index = RuleIndex::build(s.rules());
        assert_eq!((index.field, index.worst_scan()), (Field::Src, 1), "{index:?}");
        let id = |src: &str| s.select(&flow("10.0.0.1", src)).map(|r| r.id);
        assert_eq!(id("192.168.3.4"), Some(4));
        assert_eq!(id("::ffff:192.168.3.4"), Some(4));
        assert_eq!(id("2001:db8::5"), Some(7));
        assert_eq!(id("2001:db8::1:0"), None);
        assert_eq!(id("::ffff:0:5"), None, "::ffff:0.0.0.5 is the IPv4 flow 0.0.0.5");
    }

    #[test]
    fn overlaps_never_cross_families() {
        let s = set(json!([
            {"dst": "0.0.0.0/0", "policy": "reno"},              // 1
            {"dst": "::/0", "policy": "reno"},                   // 2: not with 1
            {"dst": "::ffff:10.0.0.0/104", "policy": "reno"},    // 3: with 2; not with 1 (same range)
            {"dst": "10.0.0.0/8", "policy": "reno"},             // 4: with 1; not with 3
            {"dst_ports": "80", "policy": "reno"},               // 5: with all
            {"dst": "2001:db8::/32", "src": "10.0.0.0/8", "policy": "reno"}, // 6: with 2, 5
            {"src": "2001:db8::1", "policy": "reno"},            // 7: with 1-5, not 6 (src)
        ]));
        let expected =
            [(2, 3), (1, 4), (1, 5), (2, 5), (3, 5), (4, 5), (2, 6), (5, 6), (1, 7), (2, 7), (3, 7), (4, 7), (5, 7)];
        let report = overlaps(&s, usize::MAX);
        assert_eq!(pairs(&report), expected);
        assert_eq!((report.total, report.complete), (13, true));
        // The budgeted scan in file order agrees.
        let scanned = overlaps_within(s.rules(), usize::MAX, 10);
        assert!(!scanned.complete && pairs(&scanned).iter().all(|p| expected.contains(p)), "{scanned:?}");
        assert_eq!(pairs(&overlaps_with(&s, 3, usize::MAX)), [(2, 3), (3, 5), (3, 7)]);
    }

    /// Where the random addresses lie: IPv4 10.0.0.0 + h, IPv6 2001:db8:: + h, and the v6
    /// `::ffff:10.0.0.0` + h, the same point in the shared space as the IPv4 one (a flow there
    /// is IPv4; a rule there is a v6 rule that no flow's address can match).
    fn address(region: u8, h: u32) -> IpAddr {
        match region {
            0 => Ipv4Addr::from(0x0a00_0000 + h).into(),
            1 => Ipv6Addr::from((0x2001_0db8_u128 << 96) | u128::from(h)).into(),
            _ => Ipv4Addr::from(0x0a00_0000 + h).to_ipv6_mapped().into(),
        }
    }

    /// A subnet over `address(region, h)`: v4 /0, /8, /26../32; v6 /0, /8, /96, /104 (the
    /// mapped v4 /0 and /8), /122../128.
    fn any_cidr() -> impl Strategy<Value = IpCidr> + Clone {
        let v4 = prop::sample::select(vec![0u8, 8, 26, 28, 30, 31, 32]);
        let v6 = prop::sample::select(vec![0u8, 8, 96, 104, 122, 124, 126, 127, 128]);
        prop_oneof![
            5 => (Just(0u8), 0u32..64, v4),
            3 => (Just(1u8), 0u32..64, v6.clone()),
            2 => (Just(2u8), 0u32..64, v6),
        ]
        .prop_map(|(region, h, len)| {
            let net = ipnet::IpNet::new(address(region, h), len).unwrap().trunc();
            IpCidr::new(net.network(), len).unwrap()
        })
    }

    /// A rule from small pools of values, so that random sets nest, repeat and overlap, in both
    /// families and across them.
    fn any_rule() -> impl Strategy<Value = Rule> {
        let cidr = any_cidr();
        let ports = (0u16..8, 0u16..4).prop_map(|(first, width)| PortRange { first, last: first + width });
        let alg = prop::sample::select(vec!["ccp", "bbr"]).prop_map(String::from);
        (
            prop::option::of(cidr.clone()),
            prop::option::of(cidr),
            prop::option::of(ports.clone()),
            prop::option::of(ports),
            prop::option::of(alg),
        )
            .prop_map(|(dst, src, dst_ports, src_ports, cong_alg)| Rule {
                id: 0,
                dst,
                src,
                dst_ports,
                src_ports,
                cong_alg,
                policy: parse_policy(&json!("reno")).unwrap(),
            })
    }

    fn rule_set(rules: Vec<Rule>) -> RuleSet {
        let parsed = rules.into_iter().map(|rule| ParsedRule { id: None, rule }).collect();
        RuleSet::from_parsed(parsed).unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn the_indexed_lookup_picks_what_the_scan_in_order_picks(
            rules in prop::collection::vec(any_rule(), 0..40),
            keys in prop::collection::vec((0u8..3, 0u32..80, 0u8..3, 0u32..80, 0u16..14, 0u16..14,
                prop::sample::select(vec!["ccp", "bbr", "cubic"])), 1..20),
        ) {
            let s = rule_set(rules);
            for (dst_region, dst, src_region, src, dst_port, src_port, cong_alg) in keys {
                let k = FlowKey {
                    dst: address(dst_region, dst), src: address(src_region, src), dst_port, src_port, cong_alg,
                };
                prop_assert_eq!(s.select(&k).map(|r| r.id), s.select_linear(&k).map(|r| r.id));
                // The same through an index on the other field.
                let other = match RuleIndex::build(s.rules()).field {
                    Field::Dst => RuleIndex::on(Field::Src, s.rules()),
                    Field::Src => RuleIndex::on(Field::Dst, s.rules()),
                };
                prop_assert_eq!(other.first_match(s.rules(), &k), s.rules().iter().position(|r| r.matches(&k)));
            }
        }

        #[test]
        fn the_report_names_what_checking_all_pairs_finds(rules in prop::collection::vec(any_rule(), 0..40)) {
            let s = rule_set(rules);
            let r = s.rules();
            let all: Vec<(u32, u32)> = (0..r.len())
                .flat_map(|j| (0..j).map(move |i| (i, j)))
                .filter(|&(i, j)| r[i].overlaps(&r[j]))
                .map(|(i, j)| (r[i].id, r[j].id))
                .collect();
            let report = overlaps(&s, usize::MAX);
            prop_assert_eq!(pairs(&report), all.clone());
            prop_assert_eq!(report.total, all.len() as u64);
            let first = overlaps(&s, 5);
            prop_assert_eq!(pairs(&first), all.iter().copied().take(5).collect::<Vec<_>>());
            if let Some(rule) = r.first() {
                let with: Vec<(u32, u32)> = all.iter().copied().filter(|&(a, b)| a == rule.id || b == rule.id).collect();
                prop_assert_eq!(pairs(&overlaps_with(&s, rule.id, usize::MAX)), with);
            }
        }
    }
}
