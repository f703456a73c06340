//! `polycc-sim`'s command line: JSON fields, series output, and exit status 2 on bad flags.

use std::process::Command;

fn sim(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_polycc-sim")).args(args).output().expect("polycc-sim runs")
}

#[test]
fn json_has_the_documented_fields() {
    let out = sim(&["--alg", "reno", "--duration", "5s", "--bw-change", "2s:10mbit", "--json"]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for key in [
        "goodput_mbps",
        "utilization",
        "mean_rtt_ms",
        "p95_rtt_ms",
        "base_rtt_ms",
        "loss_rate",
        "jain_index",
        "convergence_s",
        "flows",
    ] {
        assert!(v.get(key).is_some(), "missing {key} in {v}");
    }
    assert!(v["utilization"].as_f64().unwrap() > 0.5);
    assert_eq!(v["base_rtt_ms"].as_f64().unwrap(), 40.0);
}

#[test]
fn series_has_a_row_per_report() {
    let path = std::env::temp_dir().join(format!("polycc-sim-series-{}.csv", std::process::id()));
    let out = sim(&["--alg", "cubic", "--duration", "3s", "--json", "--series", path.to_str().unwrap()]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let csv = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).ok();
    let mut lines = csv.lines();
    assert_eq!(lines.next().unwrap(), "time_s,flow,cwnd_bytes,rate_mbps,inflight_bytes,rtt_ms,throughput_mbps");
    assert_eq!(lines.count() as u64, v["flows"][0]["reports"].as_u64().unwrap());
}

#[test]
fn bad_flags_exit_2_naming_the_flag_and_the_accepted_forms() {
    for (args, needle) in [
        (vec!["--alg", "bbr3"], "reno, cubic, vegas, bbr, copa"),
        (vec!["--bw", "20mbps"], "mbit"),
        (vec!["--rtt=-5ms"], "--rtt"),
        (vec!["--alg", "fused"], "--copilot"),
        (vec!["--alg", "fused", "--copilot", "cubic", "--fusion", "avg"], "max, min or target"),
        (vec!["--buffer", "lots"], "bdp"),
        (vec!["--rtt", "40ms", "--rtt-dev", "50ms"], "--rtt-dev"),
        (vec!["--data-delay", "10ms"], "--data-delay: only applies with --rtt-dev"),
        (vec!["--rtt", "40ms", "--rtt-dev", "10ms", "--data-delay", "25ms"], "--data-delay: at most half of --rtt"),
        (vec!["--loss", "1.5"], "between 0 and 1"),
        (
            vec!["--alg", "vivace", "--vivace", "beta=2"],
            "--vivace: invalid vivace parameter: beta = 2 is outside [4.5, 1000]",
        ),
        (vec!["--alg", "vivace", "--vivace", "kappa=2"], "unknown vivace parameter `kappa`"),
        (vec!["--alg", "fused", "--copilot", "vivace", "--vivace", "delta=1.5"], "delta = 1.5 is outside (0, 1)"),
        (vec!["--policer", "fast"], "RATE[:BURST]"),
        (vec!["--random-changes", "5s:bw=100mbit-10mbit"], "EVERY:bw=LO-HI"),
        (vec!["--rtt-change", "5s"], "TIME:RTT"),
        (vec!["--loss-change", "5s:2"], "TIME:PROBABILITY"),
    ] {
        let out = sim(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?} should exit 2, stderr: {err}");
        assert!(err.contains(needle), "{args:?}: stderr should mention {needle:?}: {err}");
    }
}
