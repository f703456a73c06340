//! `polycc-portus` at its boundary: flags, exit statuses, messages, signals.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn agent() -> Command {
    Command::new(env!("CARGO_BIN_EXE_polycc-portus"))
}

fn run(args: &[&str]) -> Output {
    agent().args(args).output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn bad_flags_exit_2_naming_the_flag() {
    for (args, needle) in [
        (&["--alg", "bbr3"][..], "--alg"),
        (&["--alg", "fused"][..], "--copilot"),
        (&["--report-interval", "0ms"][..], "report interval"),
        (&["--ipc", "char"][..], "--ipc"),
    ] {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
    }
}

/// A flag of another datapath than the one chosen was silently ignored (`--bpf-busy-poll-us`
/// with `--ipc unix` ran without it); it is refused, naming the flag and where it applies.
#[test]
fn a_flag_of_another_datapath_is_refused() {
    for (args, needle) in [
        (&["--ipc", "unix", "--bpf-busy-poll-us", "5"][..], "--bpf-busy-poll-us applies to --datapath bpf only"),
        (&["--ipc", "netlink", "--fallback-timeout-ms", "200"][..], "--fallback-timeout-ms applies to --datapath bpf"),
        (&["--datapath", "bpf", "--unix-socket", "/tmp/x.sock"][..], "--unix-socket applies to --datapath unix only"),
        (&["--bpf-no-pin"][..], "this agent runs --datapath netlink"),
    ] {
        let o = run(&[args, &["--alg", "cubic", "--check"]].concat());
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
    }
    let o = run(&["--datapath", "bpf", "--bpf-busy-poll-us", "5", "--alg", "cubic", "--check"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// `--cpu` names a CPU this process may run on, or the agent says which it may.
#[test]
fn cpu_must_be_one_the_agent_may_run_on() {
    let o = run(&["--cpu", "0", "--alg", "cubic", "--check"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&["--cpu", "100000", "--alg", "cubic", "--check"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--cpu 100000: this process may run on CPUs 0"), "{}", stderr(&o));
}

#[test]
fn check_prints_the_policy() {
    let o = run(&["--alg", "fused", "--pilot", "bbr", "--copilot", "cubic", "--check"]);
    assert!(o.status.success());
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "policy fused(pilot=bbr, copilots=cubic, max on cwnd) (reports: auto)"
    );
}

/// Issue 16 A2: every overlapping pair was a warning; 1,000 rules printed 249,500 of them.
/// Issue 16 K8: v6 subnets in the policy file; overlaps only within a family.
#[test]
fn check_takes_ipv6_rules_and_names_the_subnet_a_v6_rule_with_host_bits_meant() {
    let path = std::env::temp_dir().join(format!("polycc-cli-v6-{}.toml", std::process::id()));
    let rules = "[[rule]]\ndst = \"2001:db8::/32\"\npolicy = \"bbr\"\n\
                 [[rule]]\ndst = \"10.0.0.0/8\"\npolicy = \"reno\"\n\
                 [[rule]]\ndst = \"::/0\"\npolicy = \"cubic\"\n\
                 [[rule]]\nsrc = \"2001:db8::1\"\npolicy = \"copa\"\n";
    std::fs::write(&path, rules).unwrap();
    let o = run(&["--alg", "reno", "--policy", path.to_str().unwrap(), "--check"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let listed: Vec<&str> = stdout.lines().filter(|l| l.starts_with("rule ")).collect();
    assert_eq!(
        listed,
        [
            "rule 1: dst 2001:db8::/32 -> bbr",
            "rule 2: dst 10.0.0.0/8 -> reno",
            "rule 3: dst ::/0 -> cubic",
            "rule 4: src 2001:db8::1/128 -> copa"
        ]
    );
    let warnings: Vec<String> = stderr(&o).lines().filter(|l| l.starts_with("warning: ")).map(String::from).collect();
    let pairs: Vec<&str> =
        warnings.iter().map(|w| w.trim_start_matches("warning: ").split(':').next().unwrap()).collect();
    assert_eq!(
        pairs,
        [
            "rule 3 overlaps the earlier rule 1",
            "rule 4 overlaps the earlier rule 1",
            "rule 4 overlaps the earlier rule 2",
            "rule 4 overlaps the earlier rule 3"
        ],
        "10.0.0.0/8 and ::/0 never meet: {warnings:#?}"
    );

    std::fs::write(&path, "[[rule]]\ndst = \"2001:db8::1/32\"\npolicy = \"bbr\"\n").unwrap();
    let o = run(&["--alg", "reno", "--policy", path.to_str().unwrap(), "--check"]);
    let _ = std::fs::remove_file(&path);
    assert_eq!(o.status.code(), Some(polycc_agent::error::exit::POLICY_FILE.into()), "{}", stderr(&o));
    assert!(
        stderr(&o)
            .contains("field `dst`: invalid CIDR: `2001:db8::1/32` has host bits set; the subnet is 2001:db8::/32"),
        "{}",
        stderr(&o)
    );
}

/// `polycc policy add --dst|--src` takes v6 subnets: checked with the agent's parser before
/// anything is sent (exit 5 for a bad one; a good one gets as far as the missing agent, 3).
#[test]
fn polycc_policy_add_takes_ipv6_subnets() {
    let socket = "/nonexistent-polycc-dir/control.sock";
    let polycc = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_polycc")).args(["--socket", socket]).args(args).output().unwrap()
    };
    let o = polycc(&["policy", "add", "--dst", "2001:db8::1/32", "--alg", "copa"]);
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    assert!(stderr(&o).contains("`2001:db8::1/32` has host bits set; the subnet is 2001:db8::/32"), "{}", stderr(&o));
    let o = polycc(&["policy", "add", "--src", "2001:db8::/129", "--alg", "copa"]);
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    for args in [&["--dst", "2001:db8::/32"][..], &["--src", "fe80::1", "--dst", "::ffff:10.0.0.0/104"][..]] {
        let o = polycc(&[&["policy", "add"][..], args, &["--alg", "copa"][..]].concat());
        assert_eq!(o.status.code(), Some(3), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn check_warns_about_the_first_overlaps_and_counts_the_rest() {
    let path = std::env::temp_dir().join(format!("polycc-cli-overlaps-{}.toml", std::process::id()));
    let rules: String =
        (0..1000).map(|i| format!("[[rule]]\ndst_ports = {}\npolicy = \"reno\"\n", 1000 + i % 2)).collect();
    std::fs::write(&path, rules).unwrap();
    let o = run(&["--alg", "reno", "--policy", path.to_str().unwrap(), "--check"]);
    let _ = std::fs::remove_file(&path);
    assert!(o.status.success(), "{}", stderr(&o));
    let warnings: Vec<String> = stderr(&o).lines().filter(|l| l.starts_with("warning: ")).map(String::from).collect();
    assert_eq!(warnings.len(), polycc_agent::policy_rules::OVERLAPS_SHOWN + 1, "{warnings:#?}");
    assert_eq!(warnings[0], "warning: rule 3 overlaps the earlier rule 1: flows matching both run rule 1");
    assert_eq!(warnings.last().unwrap(), "warning: and 249480 more overlapping pairs of rules");
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().filter(|l| l.starts_with("rule ")).count(), 1000);
}

#[test]
fn unix_socket_and_log_file_problems_have_their_own_status() {
    let o = run(&["--ipc", "unix", "--unix-socket", "/nonexistent-polycc-dir/agent.sock"]);
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    assert!(stderr(&o).contains("mkdir -p /nonexistent-polycc-dir"), "{}", stderr(&o));

    let sock = std::env::temp_dir().join(format!("polycc-cli-{}.sock", std::process::id()));
    let o = run(&[
        "--ipc",
        "unix",
        "--unix-socket",
        sock.to_str().unwrap(),
        "--log-json",
        "/nonexistent-polycc-dir/x.jsonl",
    ]);
    assert_eq!(o.status.code(), Some(7), "{}", stderr(&o));
    assert!(stderr(&o).contains("--log-json"), "{}", stderr(&o));
}

#[test]
fn netlink_without_cap_net_admin_exits_3_and_says_why() {
    let mut cmd = if is_root() {
        // Drop to nobody: no CAP_NET_ADMIN, so joining the module's multicast group fails.
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", env!("CARGO_BIN_EXE_polycc-portus")]);
        c
    } else {
        agent()
    };
    let o = match cmd.args(["--ipc", "netlink"]).stdin(Stdio::null()).output() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("skipped: setpriv (util-linux) is not available: {e}");
            return;
        }
    };
    if o.status.code() != Some(3) && !is_root() {
        eprintln!("skipped: this unprivileged user may open the netlink socket: {}", stderr(&o));
        return;
    }
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("CAP_NET_ADMIN"), "{}", stderr(&o));
}

/// Start the agent, send `signal` once it is ready, and expect a clean exit.
/// Start the agent, signal it once ready, check it exits 0 and cleans up; its log.
fn exits_cleanly_on(signal: libc::c_int, args: &[&str]) -> String {
    let log = std::env::temp_dir().join(format!("polycc-cli-{}-{signal}.log", std::process::id()));
    let control = std::env::temp_dir().join(format!("polycc-cli-{}-{signal}.control", std::process::id()));
    let mut child = agent()
        .args(args)
        .arg("--control-socket")
        .arg(&control)
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let ready = Instant::now() + Duration::from_secs(5);
    while !std::fs::read_to_string(&log).unwrap().contains("agent ready") {
        if let Some(status) = child.try_wait().unwrap() {
            let text = std::fs::read_to_string(&log).unwrap();
            let _ = std::fs::remove_file(&log);
            panic!("the agent exited before it was ready ({status}): {text}");
        }
        assert!(Instant::now() < ready, "the agent did not get ready");
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, signal) };
    let deadline = Instant::now() + Duration::from_secs(3);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "no exit within 3 s of signal {signal}");
        std::thread::sleep(Duration::from_millis(10));
    };
    let text = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_file(&log);
    assert!(status.success(), "{status}: {text}");
    assert!(text.contains("agent stopped"), "{text}");
    assert!(!control.exists(), "the control socket is removed on exit");
    text
}

#[test]
fn sigint_and_sigterm_stop_the_agent_cleanly() {
    let sock: PathBuf = std::env::temp_dir().join(format!("polycc-cli-signal-{}.sock", std::process::id()));
    exits_cleanly_on(libc::SIGINT, &["--ipc", "unix", "--unix-socket", sock.to_str().unwrap()]);
    assert!(!sock.exists(), "the socket file is removed on exit");
    exits_cleanly_on(libc::SIGTERM, &["--ipc", "unix", "--unix-socket", sock.to_str().unwrap()]);
    if is_root() {
        // Netlink needs no module to open: the socket joins the group whether or not one is loaded.
        let log = exits_cleanly_on(libc::SIGTERM, &["--ipc", "netlink"]);
        // Issue 20: with no module loaded the agent said "ready" and waited in silence.
        if !std::path::Path::new("/sys/module/ccp").exists() {
            assert!(log.contains("no ccp kernel module is loaded") && log.contains("insmod ccp.ko"), "{log}");
            assert!(!log.contains("datapath ready"), "no module, no datapath to call ready: {log}");
        }
    }
}

/// Issue 20: `polycc policy add` without `--alg` silently meant cubic, and `--alg cubic
/// --copilot bbr` ran plain CUBIC. Both are refused before anything is sent (exit 8, invalid
/// policy), naming the flag; polycc-portus refuses the ignored flag too (exit 2).
#[test]
fn a_policy_must_be_named_and_flags_it_would_ignore_are_refused() {
    let polycc = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_polycc"))
            .args(["--socket", "/nonexistent-polycc-dir/control.sock"])
            .args(args)
            .output()
            .unwrap()
    };
    let o = polycc(&["policy", "add", "--dst-port", "5201"]);
    assert_eq!(o.status.code(), Some(8), "{}", stderr(&o));
    assert!(stderr(&o).contains("--alg: no algorithm named"), "{}", stderr(&o));
    let o = polycc(&["policy", "add", "--dst-port", "5201", "--alg", "cubic", "--copilot", "bbr"]);
    assert_eq!(o.status.code(), Some(8), "{}", stderr(&o));
    assert!(stderr(&o).contains("--copilot: a fusion flag would be ignored here"), "{}", stderr(&o));
    let o = polycc(&["flow", "set", "7", "--pilot", "bbr"]);
    assert_eq!(o.status.code(), Some(8), "{}", stderr(&o));
    let o = run(&["--alg", "cubic", "--copilot", "bbr", "--check"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--copilot"), "{}", stderr(&o));
}
