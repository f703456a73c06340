//! `polycc-portus --datapath bpf` end to end on the host's kernel: the agent registers
//! polycc_bpf, serves real loopback TCP flows with unchanged policies, enforces what it
//! decides, and when it is SIGKILLed the ops leave the kernel's list while live flows go on
//! growing in the BPF fallback. Skipped, naming what is missing, where BPF congestion control
//! cannot run (not root, no BTF).
#![cfg(feature = "bpf")]

use polycc_bpf::testutil::{self, Bulk};
use polycc_bpf::{available_congestion_controls, CA_NAME};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

/// One agent (one registration) at a time.
static SERIAL: Mutex<()> = Mutex::new(());
/// TCP_MAXSEG for the test flows: a fixed MSS keeps the pinned window an exact packet count.
const MSS: u32 = 1448;

fn registered() -> bool {
    available_congestion_controls().iter().any(|c| c == CA_NAME)
}

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("polycc-bpf-e2e-{}-{name}", std::process::id()))
}

/// A running agent, killed when dropped: a failed assertion must not leave it holding the
/// polycc_bpf registration (the next tests would wait for it, then skip).
struct AgentProc(Child);

impl std::ops::Deref for AgentProc {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for AgentProc {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for AgentProc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start the agent with `args` and wait until polycc_bpf is registered.
fn start_agent(args: &[&str], tag: &str) -> AgentProc {
    let sock = tmp(&format!("{tag}.sock"));
    // Tests never touch the default pin directory: their own, or none.
    let no_pin: &[&str] = if args.contains(&"--bpf-pin-dir") { &[] } else { &["--bpf-no-pin"] };
    let mut child = Command::new(env!("CARGO_BIN_EXE_polycc-portus"))
        .args(["--datapath", "bpf", "--log-level", "warn", "--control-socket", sock.to_str().unwrap()])
        .args(no_pin)
        .args(args)
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn polycc-portus");
    let up = testutil::wait_for(Duration::from_secs(10), || registered().then_some(()));
    if up.is_none() {
        let _ = child.kill();
        panic!("polycc-portus --datapath bpf did not register {CA_NAME}: {:?}", child.wait());
    }
    AgentProc(child)
}

fn stop_agent(mut child: AgentProc) -> std::process::ExitStatus {
    // SAFETY: the pid of a child this test spawned and has not reaped.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    child.wait().unwrap()
}

#[test]
fn the_agents_window_is_enforced_and_a_killed_agent_leaves_flows_growing_in_bpf() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if testutil::skip("bpf e2e sigkill") {
        return;
    }
    let mut agent = start_agent(&["--pin-cwnd", "12", "--fallback-timeout-ms", "200"], "kill");
    let l = testutil::listener().unwrap();
    let (client, server) = testutil::loopback_pair(&l, CA_NAME, MSS).unwrap();
    let bulk = Bulk::start(client, server);
    // 12, not the kernel's initial 10: the window read back is the agent's.
    let pinned = testutil::wait_for(Duration::from_secs(3), || (bulk.info().unwrap().snd_cwnd == 12).then_some(()));
    assert!(pinned.is_some(), "the agent's --pin-cwnd 12 reads back: {:?}", bulk.info());
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(bulk.info().unwrap().snd_cwnd, 12, "held while the agent answers");

    agent.kill().unwrap(); // SIGKILL: no cleanup runs in the agent
    agent.wait().unwrap();
    let gone = testutil::wait_for(Duration::from_secs(3), || (!registered()).then_some(()));
    assert!(gone.is_some(), "the link closed with the process: {CA_NAME} unregistered");
    assert_eq!(testutil::congestion(bulk.client_fd).unwrap(), CA_NAME, "the live flow keeps the BPF code");
    // The fallback grows a window only while the flow is window-limited (RFC 7661); on loopback
    // a loaded 2-core machine makes the sender the limit for seconds at a time (a clean-clone
    // `make test` beside a build waited 5 s at 10 packets with 7 GB acked), so allow 20 s.
    let grown = testutil::wait_for(Duration::from_secs(20), || {
        let c = bulk.info().unwrap().snd_cwnd;
        (c > 20).then_some(c)
    });
    assert!(grown.is_some(), "after the timeout the flow grows in the fallback: {:?}", bulk.info());
    let before = bulk.received();
    std::thread::sleep(Duration::from_millis(300));
    assert!(bulk.received() > before + 1_000_000, "and keeps moving data");
    bulk.stop();
}

/// In-kernel Reno's goodput over the pair, after a second to get going.
fn kernel_reno_goodput(veth: &testutil::VethPair) -> f64 {
    let (c, s) = veth.pair("reno", MSS).expect("a reno flow across the veth pair");
    let bulk = Bulk::start(c, s);
    std::thread::sleep(Duration::from_secs(1));
    let g = bulk.goodput_while(|| std::thread::sleep(Duration::from_secs(2)));
    bulk.stop();
    g
}

/// Over a veth pair between two namespaces (a device between sender and receiver, which
/// reorders a little): the agent's window and rate hold, and after its SIGKILL the fallback moves
/// data like the kernel's own Reno on the same path. Until 2026-11-29 the fallback kept the
/// agent's last pacing rate (here 200 Mbit/s; on the demo's pair 0.1-0.2x of Reno's goodput)
/// while its window grew.
#[test]
fn over_a_veth_pair_the_window_holds_and_the_fallback_keeps_up_with_kernel_reno() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let Some(veth) = testutil::veth_or_skip("bpf e2e veth", "e2e") else { return };
    let reno_before = kernel_reno_goodput(&veth);
    let args = ["--pin-cwnd", "10", "--pin-rate", "200mbit", "--fallback-timeout-ms", "200"];
    let mut agent = start_agent(&args, "veth");
    let (client, server) = veth.pair(CA_NAME, MSS).unwrap();
    let bulk = Bulk::start(client, server);
    let pinned = testutil::wait_for(Duration::from_secs(3), || (bulk.info().unwrap().snd_cwnd == 10).then_some(()));
    assert!(pinned.is_some(), "--pin-cwnd 10 reads back over veth: {:?}", bulk.info());
    std::thread::sleep(Duration::from_millis(300));
    let held = bulk.goodput_while(|| std::thread::sleep(Duration::from_secs(1)));
    assert_eq!(bulk.info().unwrap().snd_cwnd, 10, "held while the agent answers");
    assert!(
        (0.5 * 25e6..=1.25 * 25e6).contains(&held),
        "--pin-rate 200mbit paces the flow over veth: {:.0} Mbit/s",
        held * 8e-6
    );
    agent.kill().unwrap();
    agent.wait().unwrap();
    std::thread::sleep(Duration::from_secs(1));
    let fallback = bulk.goodput_while(|| std::thread::sleep(Duration::from_secs(2)));
    let info = bulk.info().unwrap();
    bulk.stop();
    let reno_after = kernel_reno_goodput(&veth);
    let reno = reno_before.max(reno_after);
    eprintln!(
        "veth: fallback {:.2} Gbit/s, in-kernel Reno {:.2} / {:.2} Gbit/s, {info:?}",
        fallback * 8e-9,
        reno_before * 8e-9,
        reno_after * 8e-9
    );
    // veth on a shared 2-vCPU host runs in two modes, near 11 and near 30 Gbit/s, whatever the
    // congestion control (a clean-clone `make test`: Reno 28.1 then 11.0, the fallback between
    // them 10.9), so the bar is 0.2x the better Reno run: 30x above the fault's 200 Mbit/s.
    assert!(
        fallback >= 0.2 * reno,
        "the fallback moved {:.2} Gbit/s, under 0.2x in-kernel Reno's {:.2} on the same veth: {info:?}",
        fallback * 8e-9,
        reno * 8e-9
    );
}

#[test]
fn an_ipv6_flow_reaches_the_agent_with_its_addresses_and_matches_a_v6_rule() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if testutil::skip("bpf e2e ipv6") {
        return;
    }
    let Ok(l) = testutil::listener6() else {
        eprintln!("skipped ipv6: no IPv6 loopback ([::1]) on this host");
        return;
    };
    let policy = tmp("ipv6.toml");
    std::fs::write(&policy, "[[rule]]\ndst = \"::1/128\"\npolicy = \"reno\"\n").unwrap();
    let log = tmp("ipv6.jsonl");
    let _ = std::fs::remove_file(&log);
    let agent = start_agent(
        &["--alg", "cubic", "--policy", policy.to_str().unwrap(), "--log-json", log.to_str().unwrap()],
        "ipv6",
    );
    let (client, server) = testutil::loopback_pair(&l, CA_NAME, MSS).unwrap();
    let port = l.local_addr().unwrap().port();
    let bulk = Bulk::start(client, server);
    std::thread::sleep(Duration::from_millis(1000));
    let received = bulk.received();
    bulk.stop();
    assert!(stop_agent(agent).success());
    let creates: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|r| r["event"] == "create")
        .collect();
    let flow = creates.iter().find(|c| c["dst"] == format!("[::1]:{port}"));
    assert!(
        flow.is_some_and(|c| c["src"].as_str().is_some_and(|s| s.starts_with("[::1]:")) && c["policy"] == "reno"),
        "the v6 flow, with its addresses, under the v6 rule's Reno: {creates:?}"
    );
    assert!(received > 1_000_000, "and it moves data: {received} bytes");
}

#[test]
fn policies_run_unchanged_over_bpf() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if testutil::skip("bpf e2e policies") {
        return;
    }
    for (tag, flags) in [
        ("cubic", &["--alg", "cubic"][..]),
        ("vivace", &["--alg", "vivace"][..]),
        ("fused", &["--alg", "fused", "--pilot", "bbr", "--copilot", "cubic"][..]),
    ] {
        let out = tmp(&format!("{tag}.json"));
        let _ = std::fs::remove_file(&out);
        let agent = start_agent(&[flags, &["--bpf-latency-out", out.to_str().unwrap()]].concat(), tag);
        let l = testutil::listener().unwrap();
        let (client, server) = testutil::loopback_pair(&l, CA_NAME, MSS).unwrap();
        let bulk = Bulk::start(client, server);
        std::thread::sleep(Duration::from_millis(1500));
        let received = bulk.received();
        let info = bulk.info().unwrap();
        bulk.stop();
        eprintln!("{tag}: {received} bytes in 1.5 s ({info:?})");
        assert!(stop_agent(agent).success(), "{tag}: the agent exits 0 on SIGTERM");
        let summary: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        let n = |k: &str| summary[k].as_u64().unwrap_or(0);
        assert!(n("round_trips") >= 100, "{tag}: reports answered: {summary}");
        assert_eq!(n("fallbacks"), 0, "{tag}: an answering agent keeps its flows: {summary}");
        assert!(received > 10_000_000, "{tag}: {received} bytes in 1.5 s on loopback ({info:?})");
        assert!(info.snd_cwnd >= 2, "{tag}: {info:?}");
        let _ = std::fs::remove_file(&out);
    }
}

#[test]
fn a_restarted_agent_adopts_the_flows_of_the_one_it_replaces() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if testutil::skip("bpf e2e adoption") {
        return;
    }
    let dir = PathBuf::from(format!("/sys/fs/bpf/polycc-test-{}", std::process::id()));
    let pin = ["--bpf-pin-dir", dir.to_str().unwrap()];
    let mut first = start_agent(&[&pin[..], &["--pin-cwnd", "4", "--fallback-timeout-ms", "200"]].concat(), "adopt1");
    if !dir.join("ctl").exists() {
        let _ = first.kill();
        let _ = first.wait();
        eprintln!("skipped adoption: maps not pinned (no bpffs at /sys/fs/bpf, and it could not be mounted)");
        return;
    }
    // Flow `served`: the first agent took it (4 packets, not the kernel's initial 10).
    let l_served = testutil::listener().unwrap();
    let (client, server) = testutil::loopback_pair(&l_served, CA_NAME, MSS).unwrap();
    let served = Bulk::start(client, server);
    let pinned = testutil::wait_for(Duration::from_secs(3), || (served.info().unwrap().snd_cwnd == 4).then_some(()));
    assert!(pinned.is_some(), "{:?}", served.info());
    // Flow `unread`: opened while the agent is stopped, so its CREATE is left unread in the
    // pinned ring when the agent dies. It describes a new flow at 10 packets; the next agent
    // must not take the flow, by then long in the fallback, as that.
    // SAFETY: the pid of a child this test spawned and has not reaped.
    unsafe { libc::kill(first.id() as libc::pid_t, libc::SIGSTOP) };
    let l_unread = testutil::listener().unwrap();
    let (client, server) = testutil::loopback_pair(&l_unread, CA_NAME, MSS).unwrap();
    let unread = Bulk::start(client, server);
    first.kill().unwrap();
    first.wait().unwrap();
    // The fallback grows only while the flow is window-limited: allow for a loaded machine, as
    // the SIGKILL test does.
    for (name, bulk) in [("served", &served), ("unread", &unread)] {
        let grown = testutil::wait_for(Duration::from_secs(20), || (bulk.info().unwrap().snd_cwnd > 20).then_some(()));
        assert!(grown.is_some(), "the orphaned flow {name} runs the fallback: {:?}", bulk.info());
    }

    // A new agent on the same pins: each flow announces itself again from the fallback (within
    // a second) and the new agent's window holds.
    let log = tmp("adopt2.jsonl");
    let second = start_agent(
        &[&pin[..], &["--pin-cwnd", "7", "--fallback-timeout-ms", "200", "--log-json", log.to_str().unwrap()]].concat(),
        "adopt2",
    );
    for (name, bulk) in [("served", &served), ("unread", &unread)] {
        let adopted = testutil::wait_for(Duration::from_secs(5), || (bulk.info().unwrap().snd_cwnd == 7).then_some(()));
        assert!(adopted.is_some(), "the new agent adopts the live flow {name}: {:?}", bulk.info());
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!((served.info().unwrap().snd_cwnd, unread.info().unwrap().snd_cwnd), (7, 7), "and keeps them");
    served.stop();
    unread.stop();
    assert!(stop_agent(second).success());
    // Its CREATEs described the flows as they were (the fallback's window, grown past 20
    // packets, at least 10 after one loss since), not as new flows at 10 packets or at the dead
    // agent's 4: stale CREATEs left in the ring were skipped.
    let records = std::fs::read_to_string(&log).unwrap_or_default();
    let creates: Vec<serde_json::Value> = records
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|r| r["event"] == "create")
        .collect();
    for (name, l) in [("served", &l_served), ("unread", &l_unread)] {
        let dst = format!("127.0.0.1:{}", l.local_addr().unwrap().port());
        let windows: Vec<(bool, u64)> = creates
            .iter()
            .filter(|c| c["dst"] == dst.as_str())
            .map(|c| {
                (
                    c["adopted"] == true,
                    c["init_cwnd_bytes"].as_u64().unwrap_or(0) / c["mss_bytes"].as_u64().unwrap_or(1).max(1),
                )
            })
            .collect();
        assert!(
            !windows.is_empty() && windows.iter().all(|&(adopted, w)| adopted && w >= 10),
            "{name}: adopted at the fallback's window (>= 10 packets): (adopted, packets) {windows:?}; \
             the new agent's creates: {creates:?}"
        );
    }
    polycc_bpf::remove_pins(&dir);
    let _ = std::fs::remove_dir(&dir);
}
