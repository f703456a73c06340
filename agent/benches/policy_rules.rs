//! 100,000 policy rules: load, overlap report and lookup (issue 16 item 5, finding A2).
//!
//! The policy file is written as `polycc-portus --policy` reads it: [`RULES`] rules, most of
//! them one destination host (some with a port range, a congAlg or a policy table), a quarter
//! a destination /24, every 10,000th a /28 over hosts that have rules of their own (the real
//! overlaps), and a last catch-all for congAlg `ccp` that overlaps nearly every rule before it.
//!
//! - load: read + parse + build the set and its index (`policy_file::load`), with the peak
//!   heap over the load from a counting allocator and the process' VmHWM;
//! - overlaps: the report the agent logs at start, its count and the pairs it examined;
//! - lookup: [`KEYS`] flow keys (half on hosts with rules, a quarter in the /24s, a quarter
//!   missing everything, so they end on the catch-all or nothing), through the index and
//!   through the scan in order (`select_linear`) in the same run, checked to agree.
//!
//! The same is then measured on a mixed set (issue 16 K8): every other host and /24 rule moved
//! to IPv6 (2001:db8::k/128, 2001:db8:1::/120s), with the keys that aimed at them, and half
//! the keys that miss everything IPv4-mapped (`::ffff:11.x.y.z`, as a dual-stack socket
//! reports an IPv4 peer): load and lookup, checked against the scan like the IPv4 set.
//!
//! `cargo bench -p polycc-agent --bench policy_rules`. Bars from issue 16: load under 1 s and
//! 200 MB, a lookup under 1 us.

use criterion::{black_box, Criterion};
use polycc_agent::policy_file;
use polycc_agent::policy_rules::{self, FlowKey, RuleSet, OVERLAPS_SHOWN};
use std::alloc::{GlobalAlloc, Layout, System};
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Live and peak heap bytes.
struct Counting;

static LIVE_BYTES: AtomicUsize = AtomicUsize::new(0);
static PEAK_BYTES: AtomicUsize = AtomicUsize::new(0);

fn grew(by: usize) {
    let live = LIVE_BYTES.fetch_add(by, Ordering::Relaxed) + by;
    PEAK_BYTES.fetch_max(live, Ordering::Relaxed);
}

// SAFETY: forwards to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        grew(l.size());
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE_BYTES.fetch_sub(l.size(), Ordering::Relaxed);
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        if new >= l.size() {
            grew(new - l.size());
        } else {
            LIVE_BYTES.fetch_sub(l.size() - new, Ordering::Relaxed);
        }
        System.realloc(p, l, new)
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const RULES: u32 = 100_000;
const KEYS: usize = 10_000;
const LOAD_BAR: Duration = Duration::from_secs(1);
const PEAK_BAR_BYTES: usize = 200 << 20;
const LOOKUP_BAR: Duration = Duration::from_micros(1);

/// Which addresses the rules and keys use.
#[derive(Clone, Copy, PartialEq)]
enum Families {
    /// All IPv4.
    V4,
    /// Odd hosts and /24s in IPv6, half the keys that miss IPv4-mapped.
    Mixed,
}

/// The host of the `k`th host rule: 10.0.0.0 upwards (odd `k` in the mixed set: 2001:db8::k).
fn host(k: u32, f: Families) -> IpAddr {
    match f {
        Families::Mixed if k % 2 == 1 => Ipv6Addr::from((0x2001_0db8_u128 << 96) | u128::from(k)).into(),
        _ => Ipv4Addr::from(0x0a00_0000 + k).into(),
    }
}

/// The `k`th /24: 172.16.0.0/24 upwards (odd `k` in the mixed set: a /120 in 2001:db8:1::/48).
fn subnet24(k: u32, f: Families) -> (IpAddr, u8) {
    match f {
        Families::Mixed if k % 2 == 1 => {
            (Ipv6Addr::from((0x2001_0db8_0001_u128 << 80) | u128::from(k << 8)).into(), 120)
        }
        _ => (Ipv4Addr::from(0xac10_0000 + (k << 8)).into(), 24),
    }
}

/// Address `a` plus `n`, in its family.
fn plus(a: IpAddr, n: u32) -> IpAddr {
    match a {
        IpAddr::V4(a) => Ipv4Addr::from(u32::from(a) + n).into(),
        IpAddr::V6(a) => Ipv6Addr::from(u128::from(a) + u128::from(n)).into(),
    }
}

fn policy_text(f: Families) -> String {
    let policies = ["\"reno\"", "\"cubic\"", "\"bbr\"", "\"copa\"", "{ alg = \"cubic\", beta = 0.8 }"];
    let mut text = String::with_capacity(RULES as usize * 64);
    for i in 0..RULES - 1 {
        let policy = policies[i as usize % policies.len()];
        text.push_str("[[rule]]\n");
        if i % 10_000 == 5_000 {
            // A /28 over 16 host rules (their even, IPv4, half in the mixed set).
            let _ = writeln!(text, "dst = \"{}/28\"", host((i / 4 * 3) & !15, Families::V4));
        } else if i % 4 == 3 {
            let (net, len) = subnet24(i / 4, f);
            let _ = writeln!(text, "dst = \"{net}/{len}\"");
        } else {
            let _ = writeln!(text, "dst = \"{}\"", host(i / 4 * 3 + i % 4, f));
            match i % 8 {
                1 => text.push_str("dst_ports = \"5000-5999\"\n"),
                2 => text.push_str("cong_alg = \"cubic\"\n"),
                _ => {}
            }
        }
        let _ = writeln!(text, "policy = {policy}");
    }
    text.push_str("[[rule]]\ncong_alg = \"ccp\"\npolicy = \"reno\"\n");
    text
}

/// A small deterministic generator (xorshift64), so runs compare.
struct Xorshift(u64);

impl Xorshift {
    fn below(&mut self, n: u32) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % u64::from(n)) as u32
    }
}

struct Key {
    dst: IpAddr,
    dst_port: u16,
    cong_alg: &'static str,
}

impl Key {
    fn flow(&self) -> FlowKey<'_> {
        let src = Ipv4Addr::new(192, 168, 1, 10).into();
        FlowKey { src, src_port: 40_000, dst: self.dst, dst_port: self.dst_port, cong_alg: self.cong_alg }
    }
}

fn flow_keys(f: Families) -> Vec<Key> {
    let mut rng = Xorshift(0x9e37_79b9_7f4a_7c15);
    let algs = ["ccp", "cubic", "bbr"];
    (0..KEYS)
        .map(|i| {
            let dst = match i % 4 {
                0 | 1 => host(rng.below(RULES / 4 * 3), f),
                2 => plus(subnet24(rng.below(RULES / 4), f).0, rng.below(256)),
                _ => {
                    let miss = Ipv4Addr::from(0x0b00_0000 + rng.below(1 << 24));
                    if f == Families::Mixed && i % 8 == 7 {
                        miss.to_ipv6_mapped().into()
                    } else {
                        miss.into()
                    }
                }
            };
            let dst_port = [80, 443, 5201, 5999][rng.below(4) as usize];
            Key { dst, dst_port, cong_alg: algs[rng.below(3) as usize] }
        })
        .collect()
}

/// VmHWM from /proc/self/status: the process' peak resident memory, in bytes.
fn vm_hwm_bytes() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse::<usize>().ok().map(|kib| kib << 10)
}

/// The best of `runs` timings of `f`, and its last result.
fn best_of<T>(runs: usize, mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut best = Duration::MAX;
    let mut last = None;
    for _ in 0..runs {
        let t = Instant::now();
        let out = f();
        best = best.min(t.elapsed());
        last = Some(out);
    }
    (best, last.expect("runs > 0"))
}

/// Mean time per lookup over every key, best of 5 passes.
fn per_lookup(keys: &[Key], select: impl Fn(&FlowKey) -> Option<u32>) -> Duration {
    let (t, _) = best_of(5, || {
        keys.iter().map(|k| select(black_box(&k.flow()))).fold(0u64, |a, id| a + u64::from(id.unwrap_or(0)))
    });
    t / keys.len() as u32
}

/// Per-lookup times through the index and the scan, after checking that they agree on every key.
fn lookups(set: &RuleSet, keys: &[Key]) -> (Duration, Duration) {
    for k in keys {
        let (a, b) = (set.select(&k.flow()).map(|r| r.id), set.select_linear(&k.flow()).map(|r| r.id));
        assert_eq!(a, b, "the index disagrees with the scan for {:?}", k.dst);
    }
    (per_lookup(keys, |k| set.select(k).map(|r| r.id)), per_lookup(keys, |k| set.select_linear(k).map(|r| r.id)))
}

fn load(path: &Path) -> RuleSet {
    policy_file::load(path).expect("the generated policy file loads")
}

fn main() {
    let path: PathBuf = std::env::temp_dir().join(format!("polycc-bench-policy-{}.toml", std::process::id()));
    let text = policy_text(Families::V4);
    std::fs::write(&path, &text).expect("temp dir writable");
    let text_bytes = text.len();

    let before = LIVE_BYTES.load(Ordering::Relaxed);
    PEAK_BYTES.store(before, Ordering::Relaxed);
    let t = Instant::now();
    let set = load(&path);
    let first_load = t.elapsed();
    let peak_heap = PEAK_BYTES.load(Ordering::Relaxed) - before;
    let kept_heap = LIVE_BYTES.load(Ordering::Relaxed) - before;
    let hwm = vm_hwm_bytes();
    let (load_time, _) = best_of(3, || load(&path));

    let (overlap_time, report) = best_of(3, || policy_rules::overlaps(&set, OVERLAPS_SHOWN));

    // What `polycc policy add` costs the agent: copy, insert, reindex, overlaps of the new
    // rule, the file's new text edited from the old one (comments kept: policy_file::rewrite);
    // beside it, the same with the text written anew (to_toml), the baseline.
    let change = |edit: bool| {
        let mut next = set.clone();
        let rule = policy_rules::parse_rule(&serde_json::json!({"dst": "10.9.0.0/16", "policy": "bbr"}));
        let id = next.add(rule.expect("a valid rule"), Some(0)).expect("a free id");
        let warnings = policy_rules::overlaps_with(&next, id, OVERLAPS_SHOWN).lines();
        let new_text = if edit { policy_file::rewrite(&path, &text, &next) } else { policy_file::to_toml(&next) };
        (new_text.len(), warnings.len())
    };
    let before = LIVE_BYTES.load(Ordering::Relaxed);
    PEAK_BYTES.store(before, Ordering::Relaxed);
    let (change_time, _) = best_of(1, || change(true));
    let change_peak = PEAK_BYTES.load(Ordering::Relaxed) - before;
    let (anew_time, _) = best_of(1, || change(false));

    let keys = flow_keys(Families::V4);
    let (indexed, linear) = lookups(&set, &keys);

    let mut c = Criterion::default()
        .configure_from_args()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    let mut group = c.benchmark_group("policy_rules_100k");
    group.bench_function("load", |b| b.iter(|| load(black_box(&path))));
    group.bench_function("overlaps", |b| b.iter(|| policy_rules::overlaps(black_box(&set), OVERLAPS_SHOWN)));
    let mut i = 0;
    group.bench_function("select_indexed", |b| {
        b.iter(|| {
            i = (i + 1) % keys.len();
            set.select(black_box(&keys[i].flow())).map(|r| r.id)
        })
    });
    group.bench_function("select_linear", |b| {
        b.iter(|| {
            i = (i + 1) % keys.len();
            set.select_linear(black_box(&keys[i].flow())).map(|r| r.id)
        })
    });
    group.finish();
    c.final_summary();

    // The mixed set: the same shape, half of it IPv6.
    std::fs::write(&path, policy_text(Families::Mixed)).expect("temp dir writable");
    let before = LIVE_BYTES.load(Ordering::Relaxed);
    PEAK_BYTES.store(before, Ordering::Relaxed);
    let mixed = load(&path);
    let mixed_peak_heap = PEAK_BYTES.load(Ordering::Relaxed) - before;
    let (mixed_load_time, _) = best_of(3, || load(&path));
    let (mixed_overlap_time, mixed_report) = best_of(3, || policy_rules::overlaps(&mixed, OVERLAPS_SHOWN));
    let mixed_keys = flow_keys(Families::Mixed);
    let (mixed_indexed, mixed_linear) = lookups(&mixed, &mixed_keys);
    let mixed_v6 = mixed.rules().iter().filter(|r| r.dst.is_some_and(|c| !c.is_ipv4())).count();
    let _ = std::fs::remove_file(&path);

    let mib = |b: usize| b as f64 / f64::from(1 << 20);
    let met = |ok: bool| if ok { "yes" } else { "NO" };
    println!("\n{} rules, policy file {:.1} MiB", set.rules().len(), mib(text_bytes));
    println!(
        "load (read + parse + index): {:.0} ms best of 3 ({:.0} ms first) [bar 1 s: {}]",
        load_time.as_secs_f64() * 1e3,
        first_load.as_secs_f64() * 1e3,
        met(load_time < LOAD_BAR)
    );
    println!(
        "heap during load: peak {:.1} MiB, kept {:.1} MiB [bar 200 MB: {}]; process VmHWM {}",
        mib(peak_heap),
        mib(kept_heap),
        met(peak_heap < PEAK_BAR_BYTES),
        hwm.map_or("n/a".into(), |b| format!("{:.1} MiB", mib(b)))
    );
    println!(
        "overlap report: {:.1} ms, {} overlapping pairs ({} named), {} pairs examined, complete: {}",
        overlap_time.as_secs_f64() * 1e3,
        report.total,
        report.shown.len(),
        report.checked,
        report.complete
    );
    println!(
        "a change (policy add: copy, insert, reindex, its overlaps, the file's text edited keeping comments): {:.0} ms, \
         peak heap {:.1} MiB; {:.2}x the same writing the text anew ({:.0} ms)",
        change_time.as_secs_f64() * 1e3,
        mib(change_peak),
        change_time.as_secs_f64() / anew_time.as_secs_f64(),
        anew_time.as_secs_f64() * 1e3
    );
    println!(
        "lookup: {:.0} ns indexed, {:.0} ns scan in order, {:.0}x [bar 1 us: {}]",
        indexed.as_secs_f64() * 1e9,
        linear.as_secs_f64() * 1e9,
        linear.as_secs_f64() / indexed.as_secs_f64(),
        met(indexed < LOOKUP_BAR)
    );
    println!(
        "mixed set ({} of {} rules IPv6): load {:.0} ms best of 3, peak heap {:.1} MiB [bars: {}]; \
         overlap report {:.1} ms, {} pairs; lookup {:.0} ns indexed, {:.0} ns scan in order [bar 1 us: {}]",
        mixed_v6,
        mixed.rules().len(),
        mixed_load_time.as_secs_f64() * 1e3,
        mib(mixed_peak_heap),
        met(mixed_load_time < LOAD_BAR && mixed_peak_heap < PEAK_BAR_BYTES),
        mixed_overlap_time.as_secs_f64() * 1e3,
        mixed_report.total,
        mixed_indexed.as_secs_f64() * 1e9,
        mixed_linear.as_secs_f64() * 1e9,
        met(mixed_indexed < LOOKUP_BAR)
    );

    // docs/agent.md's table (`experiments/tables.py policy-rules`; experiments/results_table.py
    // says the format).
    let ms = |d: Duration| format!("{:.0} ms", d.as_secs_f64() * 1e3);
    let ns = |d: Duration| format!("{:.0} ns", d.as_secs_f64() * 1e9);
    let rows = [
        [
            "load: read, parse, index".to_string(),
            format!("{} best of 3 ({} first); mixed v4/v6 {}", ms(load_time), ms(first_load), ms(mixed_load_time)),
            "< 1 s".into(),
        ],
        [
            "peak heap during the load".into(),
            format!(
                "{:.1} MiB, {:.1} MiB kept; process VmHWM {}; mixed {:.1} MiB",
                mib(peak_heap),
                mib(kept_heap),
                hwm.map_or("n/a".into(), |b| format!("{:.1} MiB", mib(b))),
                mib(mixed_peak_heap)
            ),
            "< 200 MB".into(),
        ],
        [
            format!("lookup, {} keys", keys.len()),
            format!(
                "{}; the scan in order {:.0} us: {:.0}x; mixed {}",
                ns(indexed),
                linear.as_secs_f64() * 1e6,
                linear.as_secs_f64() / indexed.as_secs_f64(),
                ns(mixed_indexed)
            ),
            "< 1 us".into(),
        ],
        [
            "overlap report".into(),
            format!(
                "{:.1} ms: {} overlapping pairs, {} pairs examined; mixed {:.1} ms",
                overlap_time.as_secs_f64() * 1e3,
                report.total,
                report.checked,
                mixed_overlap_time.as_secs_f64() * 1e3
            ),
            "-".into(),
        ],
        [
            "`policy add` on that set (copy, reindex, its overlaps, the file's text)".into(),
            format!("{}, {:.1} MiB peak heap", ms(change_time), mib(change_peak)),
            "-".into(),
        ],
    ];
    for (i, r) in rows.iter().enumerate() {
        println!("results-table policy-rules {i}\t{}", r.join("\t"));
    }
}
