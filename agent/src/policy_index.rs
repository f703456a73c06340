//! What keeps a large rule set cheap (issue 16 A2: 1,000 rules took 4.5 s and printed 499 k
//! warnings, 200 k rules took 16.4 GB): the lookup index behind [`RuleSet::select`] and the
//! overlap report.
//!
//! **Lookup.** First match in order is the matching rule at the lowest position. Subnets nest
//! or are disjoint, so the rules whose subnet holds an address sit in at most 33 buckets, one
//! per prefix length: the index buckets rules by (prefix length, network) on one address field
//! (dst, or src when that leaves fewer rules to scan), each bucket in rule order. A lookup
//! probes one bucket per prefix length in use and scans it, and the rules without that field,
//! only up to the best position found so far. Rules sharing one subnet, or having none on that
//! field, are scanned as before: a set made only of such rules costs what the plain scan does.
//!
//! **Overlaps.** A rule is a box of five inclusive `u32` ranges (dst, src, dst ports, src
//! ports, and congAlg as an interned id); a missing field is the whole range. Two rules overlap
//! when all five ranges intersect (what [`Rule::overlaps`] says). For each dimension the pairs
//! whose ranges intersect are counted in O(n log n) (sorted starts against sorted ends); those
//! of the most selective dimension are enumerated by a sweep (rules by start, a min-heap of the
//! open ranges' ends) and checked on all five. Rules that differ in some dimension cost
//! O(n log n) plus the pairs that do intersect there; the check stops at
//! [`OVERLAP_CHECK_BUDGET`] pairs when no dimension separates the rules (then it scans in file
//! order, and the count it reports is a lower bound). The report names the first
//! [`OVERLAPS_SHOWN`] overlaps in file order and counts the rest.

use crate::policy_rules::{FlowKey, Ipv4Cidr, PortRange, Rule, RuleSet};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::fmt;
use std::net::Ipv4Addr;

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
    fn of_rule(self, r: &Rule) -> Option<Ipv4Cidr> {
        match self {
            Field::Dst => r.dst,
            Field::Src => r.src,
        }
    }

    fn of_key(self, k: &FlowKey) -> Ipv4Addr {
        match self {
            Field::Dst => k.dst,
            Field::Src => k.src,
        }
    }
}

/// A subnet as one hash key: prefix length above the network address.
fn bucket_key(prefix_len: u8, network: u32) -> u64 {
    (u64::from(prefix_len) << 32) | u64::from(network)
}

/// `addr` with its host bits (past `prefix_len`) cleared.
fn network_of(addr: u32, prefix_len: u8) -> u32 {
    addr & u32::MAX.checked_shl(32 - u32::from(prefix_len)).unwrap_or(0)
}

/// Rule positions bucketed by subnet on one address field; rebuilt with every change to the set.
#[derive(Clone, Default)]
pub(crate) struct RuleIndex {
    field: Field,
    /// [`bucket_key`] -> the range of `positions` holding that subnet's rules, ascending.
    buckets: HashMap<u64, (usize, usize)>,
    /// The prefix lengths in use.
    prefix_lens: Vec<u8>,
    positions: Vec<usize>,
    /// Rules without a subnet on `field`, ascending: every lookup scans these.
    unindexed: Vec<usize>,
}

impl fmt::Debug for RuleIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuleIndex")
            .field("field", &self.field)
            .field("buckets", &self.buckets.len())
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
                Some(c) => keyed.push((bucket_key(c.prefix_len(), u32::from(c.network())), i)),
                None => unindexed.push(i),
            }
        }
        keyed.sort_unstable();
        let mut buckets = HashMap::new();
        let mut start = 0;
        for group in keyed.chunk_by(|a, b| a.0 == b.0) {
            buckets.insert(group[0].0, (start, start + group.len()));
            start += group.len();
        }
        let mut prefix_lens: Vec<u8> = buckets.keys().map(|k| (k >> 32) as u8).collect();
        prefix_lens.sort_unstable();
        prefix_lens.dedup();
        let positions = keyed.into_iter().map(|(_, i)| i).collect();
        RuleIndex { field, buckets, prefix_lens, positions, unindexed }
    }

    /// What the worst lookup may scan: the unindexed rules and the largest bucket (an estimate:
    /// an address can fall in one bucket per prefix length).
    fn worst_scan(&self) -> usize {
        self.unindexed.len() + self.buckets.values().map(|(start, end)| end - start).max().unwrap_or(0)
    }

    /// The position of the first rule matching `k`: what a scan of `rules` in order finds.
    pub(crate) fn first_match(&self, rules: &[Rule], k: &FlowKey) -> Option<usize> {
        debug_assert_eq!(self.positions.len() + self.unindexed.len(), rules.len(), "index out of date");
        let addr = u32::from(self.field.of_key(k));
        let mut best = first_below(&self.unindexed, rules, k, None);
        for &len in &self.prefix_lens {
            if let Some(&(start, end)) = self.buckets.get(&bucket_key(len, network_of(addr, len))) {
                best = first_below(&self.positions[start..end], rules, k, best);
            }
        }
        best
    }
}

/// The first of `positions` (ascending) before `bound` whose rule matches, else `bound`.
fn first_below(positions: &[usize], rules: &[Rule], k: &FlowKey, bound: Option<usize>) -> Option<usize> {
    positions.iter().copied().take_while(|&p| bound.is_none_or(|b| p < b)).find(|&p| rules[p].matches(k)).or(bound)
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

/// One rule as inclusive ranges: dst, src, dst ports, src ports, congAlg (interned).
type RuleBox = [(u32, u32); 5];

fn boxes(rules: &[Rule]) -> Vec<RuleBox> {
    let mut algs: HashMap<&str, u32> = HashMap::new();
    let cidr = |c: Option<Ipv4Cidr>| c.map_or((0, u32::MAX), |c| (c.network().into(), c.broadcast().into()));
    let ports = |p: Option<PortRange>| p.map_or((0, u16::MAX.into()), |p| (p.first.into(), p.last.into()));
    rules
        .iter()
        .map(|r| {
            let alg = r.cong_alg.as_deref().map_or((0, u32::MAX), |a| {
                let next = algs.len() as u32 + 1;
                let id = *algs.entry(a).or_insert(next);
                (id, id)
            });
            [cidr(r.dst), cidr(r.src), ports(r.dst_ports), ports(r.src_ports), alg]
        })
        .collect()
}

fn intersect(a: &RuleBox, b: &RuleBox) -> bool {
    a.iter().zip(b).all(|(a, b)| a.0 <= b.1 && b.0 <= a.1)
}

/// Pairs of rules whose ranges in `dim` intersect: for each range in order of start, the
/// ranges before it less those that ended before it starts (which all started before it).
fn intersecting_pairs(boxes: &[RuleBox], dim: usize) -> u64 {
    let mut starts: Vec<u32> = boxes.iter().map(|b| b[dim].0).collect();
    let mut ends: Vec<u32> = boxes.iter().map(|b| b[dim].1).collect();
    starts.sort_unstable();
    ends.sort_unstable();
    starts.iter().enumerate().map(|(before, &s)| (before - ends.partition_point(|&e| e < s)) as u64).sum()
}

/// Calls `pair` once for each two rules whose ranges in `dim` intersect: rules by start, and
/// the ranges still open when one starts are exactly those it intersects.
fn sweep(boxes: &[RuleBox], dim: usize, mut pair: impl FnMut(usize, usize)) {
    let mut by_start: Vec<usize> = (0..boxes.len()).collect();
    by_start.sort_unstable_by_key(|&i| boxes[i][dim].0);
    let mut open: BinaryHeap<Reverse<(u32, usize)>> = BinaryHeap::new();
    for i in by_start {
        let (start, end) = boxes[i][dim];
        while open.peek().is_some_and(|Reverse((e, _))| *e < start) {
            open.pop();
        }
        for Reverse((_, j)) in open.iter() {
            pair(*j, i);
        }
        open.push(Reverse((end, i)));
    }
}

/// [`overlaps`] with the budget given (tests use a small one).
fn overlaps_within(rules: &[Rule], shown: usize, budget: u64) -> OverlapReport {
    let boxes = boxes(rules);
    let mut first = FirstPairs::new(shown);
    let mut checked = 0;
    let (pairs, dim) = (0..5).map(|dim| (intersecting_pairs(&boxes, dim), dim)).min().unwrap_or((0, 0));
    if pairs <= budget {
        sweep(&boxes, dim, |a, b| {
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

    /// A rule from small pools of values, so that random sets nest, repeat and overlap.
    fn any_rule() -> impl Strategy<Value = Rule> {
        let cidr = (0u32..64, prop::sample::select(vec![0u8, 26, 28, 30, 31, 32]))
            .prop_map(|(host, len)| Ipv4Cidr::new(network_of(0x0a00_0000 + host, len).into(), len).unwrap());
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
            keys in prop::collection::vec((0u32..80, 0u32..80, 0u16..14, 0u16..14,
                prop::sample::select(vec!["ccp", "bbr", "cubic"])), 1..20),
        ) {
            let s = rule_set(rules);
            for (dst, src, dst_port, src_port, cong_alg) in keys {
                let k = FlowKey {
                    dst: (0x0a00_0000 + dst).into(), src: (0x0a00_0000 + src).into(), dst_port, src_port, cong_alg,
                };
                prop_assert_eq!(s.select(&k).map(|r| r.id), s.select_linear(&k).map(|r| r.id));
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
