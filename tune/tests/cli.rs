//! The binary: configuration errors exit with their own status and say what to fix; a
//! simulated run stopped between periods and restarted from its state file ends exactly where
//! an uninterrupted run does (same theta, momentum, history).

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

fn tune(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_polycc-tune")).args(args).output().unwrap()
}

const SMALL: &str = r#"
period_minutes = 60
min_samples = 1
contexts = { bands = [[0, 12], [12, 24]], weekend = false }
reward = { linear = { throughput = 1.0, latency = 0.05, loss = 0.5 } }
[params]
beta = {}
slow_start_exit_latency = {}
[bandit]
samples_per_step = 1
[[group]]
name = "g"
dst = "10.0.0.0/8"
[sim]
flows_per_period = 3
flow_seconds = 3
seed = 9
[sim.populations.a]
bw_mbps = [5.0, 20.0]
rtt_ms = [20.0, 60.0]
[sim.populations.b]
bw_mbps = [50.0, 80.0]
rtt_ms = [20.0, 60.0]
[sim.group.g]
population = "a"
by_context = { "all-12-24" = "b" }
"#;

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

#[test]
fn configuration_errors_exit_with_their_own_status_and_name_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("missing.toml", None, 3, "cannot read"),
        ("syntax.toml", Some("period_minutes = "), 3, "syntax.toml"),
        (
            "unknown.toml",
            Some("[[group]]\nname = 'a'\ndst_ports = ['443']\ncolour = 'red'"),
            4,
            "unknown field `colour`",
        ),
        ("empty.toml", Some("[[group]]\nname = 'a'"), 5, "neither dst nor dst_ports"),
        (
            "bounds.toml",
            Some("[params]\nomega = { min = 10, max = 1 }\n[[group]]\nname='a'\ndst_ports=['1']"),
            6,
            "omega",
        ),
        ("invalid.toml", Some("period_minutes = -1\n[[group]]\nname='a'\ndst_ports=['1']"), 7, "period_minutes"),
    ];
    for (name, text, code, says) in cases {
        let path = match text {
            Some(t) => write(dir.path(), name, t),
            None => dir.path().join(name).to_str().unwrap().to_string(),
        };
        let out = tune(&["--config", &path, "--check"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{name}: {err}");
        assert!(err.contains(says), "{name}: `{err}` should say `{says}`");
    }
    let ok = write(dir.path(), "ok.toml", SMALL);
    let out = tune(&["--config", &ok, "--check"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout)
        .contains("1 group(s), 2 context(s), candidates: beta, slow_start_exit_latency"));
    // A --sim run without a [sim] table is a configuration error too.
    let no_sim = write(dir.path(), "nosim.toml", "[[group]]\nname='a'\ndst_ports=['1']");
    assert_eq!(tune(&["--config", &no_sim, "--sim"]).status.code(), Some(7));
}

fn state(path: &str) -> Value {
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    v.as_object_mut().unwrap().remove("stats_cursor");
    v
}

#[test]
fn a_run_stopped_between_periods_resumes_to_the_same_theta_as_an_uninterrupted_one() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(dir.path(), "t.toml", SMALL);
    let (whole, split) = (dir.path().join("whole.json"), dir.path().join("split.json"));
    let (whole, split) = (whole.to_str().unwrap(), split.to_str().unwrap());
    assert!(tune(&["-q", "--sim", "--config", &cfg, "--state", whole, "--periods", "20", "--eval-flows", "1"])
        .status
        .success());
    assert!(tune(&["-q", "--sim", "--config", &cfg, "--state", split, "--periods", "9", "--eval-flows", "1"])
        .status
        .success());
    let midway = state(split);
    assert_eq!(midway["period"], 9);
    assert!(tune(&["-q", "--sim", "--config", &cfg, "--state", split, "--periods", "20", "--eval-flows", "1"])
        .status
        .success());
    let (a, b) = (state(whole), state(split));
    assert_eq!(a["period"], 20);
    for ctx in ["all-0-12", "all-12-24"] {
        let (x, y) = (&a["groups"]["g"]["contexts"][ctx], &b["groups"]["g"]["contexts"][ctx]);
        assert!(x["history"].as_array().unwrap().len() >= 4, "{ctx} was visited and learned from");
        assert!(x["steps"].as_u64().unwrap() >= 1, "{ctx} took steps");
        assert_eq!(x["theta"], y["theta"], "{ctx}");
        assert_eq!(x["velocity"], y["velocity"], "{ctx}");
        assert_eq!(x["history"], y["history"], "{ctx}");
    }
    // The contexts saw different populations: the evening one's paths are much faster.
    let mean = |ctx: &str| {
        let h = a["groups"]["g"]["contexts"][ctx]["history"].as_array().unwrap().clone();
        h.iter().map(|e| e["obs"]["throughput_mbps"].as_f64().unwrap()).sum::<f64>() / h.len() as f64
    };
    assert!(mean("all-12-24") > 2.0 * mean("all-0-12"), "{} vs {}", mean("all-12-24"), mean("all-0-12"));
}

/// docs/metrics.md: the trace, the `--sim` summary and the figures the state keeps (each period's
/// observation, the safety averages) name their units, and loss is a fraction, `loss_frac`. The
/// rest of the state is the bandit's own coordinates (theta, velocity), not measurements.
#[test]
fn tune_outputs_names_carry_their_units() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(dir.path(), "t.toml", SMALL);
    let (trace, st) = (dir.path().join("trace.json"), dir.path().join("state.json"));
    let (trace, st) = (trace.to_str().unwrap(), st.to_str().unwrap());
    let out = tune(&[
        "-q",
        "--sim",
        "--config",
        &cfg,
        "--state",
        st,
        "--trace",
        trace,
        "--periods",
        "6",
        "--eval-flows",
        "1",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows: Value = serde_json::from_str(&std::fs::read_to_string(trace).unwrap()).unwrap();
    assert!(
        rows[0]["loss_frac"].is_number() && summary[0]["learned_eval"]["loss_frac"].is_number(),
        "{rows} {summary}"
    );
    let s = state(st);
    let mut measured = vec![summary, rows];
    for ctx in s["groups"]["g"]["contexts"].as_object().unwrap().values() {
        measured.push(ctx["averages"].clone());
        measured.extend(ctx["history"].as_array().unwrap().iter().map(|h| h["obs"].clone()));
    }
    for v in &measured {
        assert_eq!(polycc_control::vocabulary::violations(v), Vec::<String>::new(), "{v}");
    }
}
