//! One bulk loopback flow: in-kernel CUBIC and Reno against polycc_bpf served by
//! `polycc-portus --datapath bpf` (issue 17: "a loopback flow not held back").
//!
//! Each scheme runs a 3.5 s bulk transfer over 127.0.0.1 (TCP_MAXSEG 1448), goodput taken over
//! the last 3 s; the schemes alternate for `REPS` rounds so load from elsewhere on the machine
//! hits them alike. polycc_bpf runs with the agent's cubic at several `--bpf-min-report-us`
//! (0 = a report every RTT, as ccp.ko), and once with no agent at all (BPF Reno, reports
//! unread: the cost of the BPF code alone). Prints a line per run and the medians as ratios to
//! in-kernel CUBIC. `cargo bench -p polycc-agent --bench bpf_loopback` as root.

use polycc_bpf::testutil::{self, Bulk};
use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::Duration;

const REPS: usize = 3;

fn flow(ca: &str) -> f64 {
    let l = testutil::listener().unwrap();
    let (c, s) = testutil::loopback_pair(&l, ca, 1448).unwrap();
    let b = Bulk::start(c, s);
    std::thread::sleep(Duration::from_millis(500));
    let r0 = b.received();
    std::thread::sleep(Duration::from_secs(3));
    let gbps = (b.received() - r0) as f64 * 8.0 / 3e9;
    b.stop();
    gbps
}

fn with_agent(args: &[&str]) -> f64 {
    let sock = std::env::temp_dir().join(format!("polycc-bpf-loopback-{}.sock", std::process::id()));
    let mut a = Command::new(env!("CARGO_BIN_EXE_polycc-portus"))
        .args(["--datapath", "bpf", "--bpf-no-pin", "--log-level", "error", "--control-socket", sock.to_str().unwrap()])
        .args(args)
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn polycc-portus");
    let up = testutil::wait_for(Duration::from_secs(10), || {
        polycc_bpf::available_congestion_controls().iter().any(|c| c == polycc_bpf::CA_NAME).then_some(())
    });
    assert!(up.is_some(), "the agent registered polycc_bpf");
    let r = flow(polycc_bpf::CA_NAME);
    // SAFETY: the pid of a child spawned here and not yet reaped.
    unsafe { libc::kill(a.id() as libc::pid_t, libc::SIGTERM) };
    a.wait().unwrap();
    r
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    if testutil::skip("bpf loopback bench") {
        return;
    }
    let mut runs: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for rep in 0..REPS {
        let mut add = |name, gbps: f64| {
            println!("rep {rep} {name:>38}: {gbps:6.2} Gbit/s");
            runs.entry(name).or_default().push(gbps);
        };
        add("cubic (in-kernel)", flow("cubic"));
        add("reno (in-kernel)", flow("reno"));
        for (name, us) in [
            ("polycc_bpf cubic, report every RTT", "0"),
            ("polycc_bpf cubic, min report 200 us", "200"),
            ("polycc_bpf cubic, min report 1 ms", "1000"),
        ] {
            add(name, with_agent(&["--alg", "cubic", "--bpf-min-report-us", us]));
        }
        let dp = polycc_bpf::Datapath::open(&polycc_bpf::Config::default()).expect("registers");
        add("polycc_bpf, no agent (BPF Reno)", flow(polycc_bpf::CA_NAME));
        drop(dp);
    }
    let base = median(runs.get_mut("cubic (in-kernel)").unwrap());
    for (name, v) in runs.iter_mut() {
        let m = median(v);
        println!("median {name:>38}: {m:6.2} Gbit/s = {:.2} x in-kernel CUBIC", m / base);
    }
}
