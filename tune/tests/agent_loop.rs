//! The agent loop against a stand-in agent that speaks the control socket's protocol
//! (policy_add, policy_replace, stats) and checks every rule with the agent's own parser:
//! the tuner installs one rule per group and then replaces it in place every period; killed
//! with SIGKILL, it leaves the agent's rule (and so every new flow) on the last configuration;
//! restarted, it resumes its periods, theta and rule ids from the state file.

use polycc_control::policy_rules::{parse_rule, FlowKey};
use polycc_algorithms::{AlgorithmConfig, Policy};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[derive(Default)]
struct Agent {
    /// (id, rule as sent).
    rules: Vec<(u32, Value)>,
    adds: usize,
    replaces: usize,
    seq: u64,
}

fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64()
}

/// A stand-in agent on `path`: rules kept in memory, one flow's record per request to stats
/// (throughput larger for a larger beta, so the tuner has something to climb).
fn serve(path: &Path, agent: Arc<Mutex<Agent>>) {
    let listener = UnixListener::bind(path).unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let mut line = String::new();
            if BufReader::new(&stream).read_line(&mut line).is_err() {
                continue;
            }
            let req: Value = serde_json::from_str(&line).unwrap();
            let mut a = agent.lock().unwrap();
            let answer = match req["cmd"].as_str().unwrap() {
                "policy_add" => {
                    let id = a.rules.iter().map(|r| r.0).max().unwrap_or(0) + 1;
                    parse_rule(&req["rule"]).expect("the agent accepts the rule");
                    a.rules.insert(0, (id, req["rule"].clone()));
                    a.adds += 1;
                    json!({"ok": true, "rules": [{"id": id, "position": 0, "description": "", "rule": req["rule"]}]})
                }
                "policy_replace" => {
                    let id = req["id"].as_u64().unwrap() as u32;
                    parse_rule(&req["rule"]).expect("the agent accepts the rule");
                    match a.rules.iter_mut().find(|r| r.0 == id) {
                        Some(r) => {
                            r.1 = req["rule"].clone();
                            a.replaces += 1;
                            json!({"ok": true, "rules": [{"id": id, "position": 0, "description": "", "rule": req["rule"]}]})
                        }
                        None => json!({"ok": false, "error": {"code": "no_such_rule", "message": "no rule"}}),
                    }
                }
                "stats" => {
                    let beta = a.rules.first().map_or(11.35, |r| r.1["policy"]["beta"].as_f64().unwrap_or(11.35));
                    let rule = a.rules.first().map(|r| r.0);
                    a.seq += 1;
                    let rec = json!({
                        "seq": a.seq, "t_unix_s": now(), "duration_s": 1.0, "datapath": "test", "flow": 7,
                        "src": "10.0.0.2:40000", "dst": "10.64.0.9:443", "cong_alg": "ccp", "rule": rule,
                        "policy": "vivace", "throughput_bytes_per_sec": 1e5 * beta, "send_rate_min_bytes_per_sec": null,
                        "send_rate_avg_bytes_per_sec": null, "send_rate_max_bytes_per_sec": null, "loss_frac": 0.0,
                        "rtt_min_us": 40000.0, "rtt_avg_us": 45000.0, "slow_start_s": 0.0, "app_limited_s": 0.0
                    });
                    json!({"ok": true, "records": [rec], "next": a.seq, "missed": 0})
                }
                other => json!({"ok": false, "error": {"code": "malformed_request", "message": other}}),
            };
            drop(a);
            let _ = writeln!(&stream, "{answer}");
        }
    });
}

const CONFIG: &str = r#"
period_minutes = 0.004
poll_seconds = 0.05
min_samples = 1
contexts = { bands = [[0, 24]], weekend = false }
reward = { linear = { throughput = 1.0, latency = 0.0, loss = 0.0 } }
[params]
beta = { min = 5, max = 100 }
omega = {}
[[group]]
name = "cell"
dst = "10.64.0.0/10"
dst_ports = ["443"]
"#;

fn tuner(dir: &Path, periods: Option<u64>) -> Child {
    let mut c = Command::new(env!("CARGO_BIN_EXE_polycc-tune"));
    c.args(["--quiet", "--config"]).arg(dir.join("tune.toml")).arg("--state").arg(dir.join("state.json"));
    c.arg("--socket").arg(dir.join("agent.sock"));
    if let Some(p) = periods {
        c.args(["--periods", &p.to_string()]);
    }
    c.spawn().unwrap()
}

fn state(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("state.json")).unwrap()).unwrap()
}

fn rule_beta(a: &Agent) -> f64 {
    match parse_rule(&a.rules[0].1).unwrap().rule.policy {
        Policy::Single(AlgorithmConfig::Vivace(c)) => c.beta,
        p => panic!("not vivace: {p:?}"),
    }
}

#[test]
fn killed_tuner_leaves_flows_on_the_last_configuration_and_a_restart_resumes() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tune.toml"), CONFIG).unwrap();
    let agent = Arc::new(Mutex::new(Agent::default()));
    serve(&dir.path().join("agent.sock"), Arc::clone(&agent));

    let mut child = tuner(dir.path(), None);
    let t0 = Instant::now();
    while agent.lock().unwrap().replaces < 6 {
        assert!(t0.elapsed() < Duration::from_secs(30), "the tuner installs a configuration every period");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL: no chance to clean up
    child.wait().unwrap();
    let (rules_at_kill, beta_at_kill) = {
        let a = agent.lock().unwrap();
        assert_eq!((a.adds, a.rules.len()), (1, 1), "one rule added, then replaced in place");
        (a.rules.clone(), rule_beta(&a))
    };
    let saved = state(dir.path());
    let period_at_kill = saved["period"].as_u64().unwrap();
    assert!(period_at_kill >= 5, "{period_at_kill}");
    // The agent does not depend on the tuner: the rule stays, and a new flow to the group's
    // subnet and port still gets the last configuration.
    std::thread::sleep(Duration::from_millis(600));
    {
        let a = agent.lock().unwrap();
        assert_eq!(a.rules, rules_at_kill, "nothing changed after the tuner died");
        let rule = parse_rule(&a.rules[0].1).unwrap().rule;
        let key = FlowKey {
            src: "10.0.0.2".parse().unwrap(),
            src_port: 40000,
            dst: "10.64.3.4".parse().unwrap(),
            dst_port: 443,
            cong_alg: "ccp",
        };
        assert!(rule.matches(&key));
        assert_eq!(rule_beta(&a), beta_at_kill);
    }

    // Restart: the same rule is replaced (no new one), periods continue from the saved count,
    // and the context's theta continues from the saved one.
    let theta_at_kill = saved["groups"]["cell"]["contexts"]["all-0-24"]["theta"].clone();
    let steps_at_kill = saved["groups"]["cell"]["contexts"]["all-0-24"]["steps"].as_u64().unwrap();
    let status = tuner(dir.path(), Some(4)).wait().unwrap();
    assert!(status.success());
    let after = state(dir.path());
    assert_eq!(after["period"].as_u64().unwrap(), period_at_kill + 4);
    let ctx = &after["groups"]["cell"]["contexts"]["all-0-24"];
    let history = ctx["history"].as_array().unwrap();
    let resumed_first = history.iter().find(|h| h["period"].as_u64().unwrap() >= period_at_kill).unwrap();
    assert_eq!(resumed_first["period"].as_u64().unwrap(), period_at_kill, "no period lost or repeated");
    assert!(ctx["steps"].as_u64().unwrap() >= steps_at_kill, "steps continue");
    assert_eq!(
        history.iter().filter(|h| h["period"].as_u64().unwrap() < period_at_kill).count(),
        period_at_kill as usize
    );
    assert!(theta_at_kill.is_array());
    let a = agent.lock().unwrap();
    assert_eq!((a.adds, a.rules.len(), a.rules[0].0), (1, 1, 1), "the restart replaced rule 1");
}
