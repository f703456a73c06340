//! The agent against the real libccp C datapath, as the kernel module will run it.
//!
//! (Over 800 lines on purpose: every test here shares the one mock datapath below, and it must
//! stay a separate test binary, for the reason just after.)
//!
//! The test process is the datapath: `libccp::Datapath` and `libccp::Connection` with chosen
//! `Primitives`, whose `set_cwnd`/`set_rate_abs` callbacks record what the agent installed. The
//! agent is the real `polycc-portus` binary in its own process, on a unix datagram socket
//! (`--ipc unix`), with `--log-json` read back at the end.
//!
//! Why a separate process and this separate test binary: the libccp crate exports unmangled C
//! symbols (`log`, `now`, `send_msg`, ...), and its `log` replaces libm's in any binary that
//! links it, so `f64::ln` is wrong here (see
//! `libm_log_is_replaced_in_this_binary_so_the_agent_runs_out_of_process`). No algorithm runs
//! in this binary; the expected numbers below are integer arithmetic.
//!
//! libccp's clock is the wall clock, so rounds are paced with real sleeps (RTT 50 ms).

use libccp::{CongestionOps, Connection, Datapath, DatapathBuilder, DatapathOps, FlowInfo, Primitives};
use serde_json::Value;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MSS: u32 = 1448;
const INIT_CWND_PACKETS: u32 = 10;
/// 127.0.0.1 in network byte order, as a little-endian u32.
const LOCALHOST: u32 = u32::from_ne_bytes([127, 0, 0, 1]);
const RTT: Duration = Duration::from_millis(50);
/// How long to wait for the agent's answer before failing.
const AGENT_TIMEOUT: Duration = Duration::from_secs(5);

fn rtt_us() -> u32 {
    RTT.as_micros() as u32
}

fn scratch_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("polycc-mock-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The `polycc-portus` process.
struct AgentProcess {
    child: Option<Child>,
    dir: PathBuf,
    socket: PathBuf,
    /// Leave `dir` in place when dropped (a restarted agent uses it next).
    keep: bool,
}

impl AgentProcess {
    fn start(name: &str, args: &[&str]) -> AgentProcess {
        AgentProcess::start_in(scratch_dir(name), args)
    }

    /// Another agent in a stopped one's directory: the same sockets, a fresh log.
    fn restart(dir: &Path, args: &[&str]) -> AgentProcess {
        AgentProcess::start_in(dir.to_path_buf(), args)
    }

    fn start_in(dir: PathBuf, args: &[&str]) -> AgentProcess {
        let socket = dir.join("agent.sock");
        let stderr = std::fs::File::create(dir.join("agent.log")).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_polycc-portus"))
            .args(["--ipc", "unix", "--unix-socket"])
            .arg(&socket)
            .arg("--log-json")
            .arg(dir.join("log.jsonl"))
            .arg("--control-socket")
            .arg(dir.join("control.sock"))
            .args(["--log-level", "debug"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("start polycc-portus");
        let deadline = Instant::now() + AGENT_TIMEOUT;
        while !socket.exists() {
            assert!(Instant::now() < deadline, "the agent did not bind {}", socket.display());
            std::thread::sleep(Duration::from_millis(5));
        }
        AgentProcess { child: Some(child), dir, socket, keep: false }
    }

    /// SIGTERM, wait, and return the exit status, the JSON records and stderr.
    fn stop(mut self) -> (ExitStatus, Vec<Value>, String) {
        self.halt()
    }

    /// As `stop`, leaving the directory for [`AgentProcess::restart`].
    fn stop_keeping_files(mut self) -> (ExitStatus, Vec<Value>, String) {
        self.keep = true;
        self.halt()
    }

    fn halt(&mut self) -> (ExitStatus, Vec<Value>, String) {
        let mut child = self.child.take().unwrap();
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + AGENT_TIMEOUT;
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("the agent did not exit within {AGENT_TIMEOUT:?} of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let json = std::fs::read_to_string(self.dir.join("log.jsonl")).unwrap_or_default();
        let records = json.lines().map(|l| serde_json::from_str(l).expect("one JSON object per line")).collect();
        let stderr = std::fs::read_to_string(self.dir.join("agent.log")).unwrap_or_default();
        (status, records, stderr)
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// libccp's datapath side of the unix socket.
struct SocketOps {
    sock: Arc<UnixDatagram>,
    agent: PathBuf,
}

impl DatapathOps for SocketOps {
    fn send_msg(&mut self, msg: &[u8]) {
        let _ = self.sock.send_to(msg, &self.agent);
    }
}

/// A mock TCP flow: records what libccp's callbacks install.
#[derive(Default)]
struct MockFlow {
    cwnd: u32,
    rate: u32,
    cwnd_calls: u32,
    rate_calls: u32,
}

impl CongestionOps for MockFlow {
    fn set_cwnd(&mut self, cwnd: u32) {
        self.cwnd = cwnd;
        self.cwnd_calls += 1;
    }
    fn set_rate_abs(&mut self, rate: u32) {
        self.rate = rate;
        self.rate_calls += 1;
    }
}

/// The datapath: libccp plus the socket it talks to the agent on. Everything runs on the test
/// thread (receive, then invoke), so libccp's unlocked staging is never raced.
struct MockDatapath {
    sock: Arc<UnixDatagram>,
    dp: Datapath,
    flows: std::cell::Cell<usize>,
}

impl MockDatapath {
    fn start(agent: &AgentProcess) -> MockDatapath {
        let sock = Arc::new(UnixDatagram::bind(agent.dir.join("datapath.sock")).unwrap());
        sock.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        let ops = SocketOps { sock: Arc::clone(&sock), agent: agent.socket.clone() };
        // ccp_init sends READY.
        let dp = DatapathBuilder::default().with_ops(ops).with_id(7).init().expect("libccp init");
        MockDatapath { sock, dp, flows: std::cell::Cell::new(0) }
    }

    /// Feed the agent's messages to libccp until `n` have arrived; returns how many did.
    fn pump(&self, n: usize) -> usize {
        let deadline = Instant::now() + AGENT_TIMEOUT;
        let mut got = 0;
        let mut buf = [0u8; 4096];
        while got < n && Instant::now() < deadline {
            if let Ok(len) = self.sock.recv(&mut buf) {
                self.dp.recv_msg(&mut buf[..len]).expect("libccp accepts the agent's message");
                got += 1;
            }
        }
        got
    }

    /// Feed the agent's messages to libccp until none arrives for `quiet`; returns how many.
    fn pump_until_quiet(&self, quiet: Duration) -> usize {
        let mut got = 0;
        let mut buf = [0u8; 4096];
        let mut last = Instant::now();
        while last.elapsed() < quiet {
            if let Ok(len) = self.sock.recv(&mut buf) {
                self.dp.recv_msg(&mut buf[..len]).expect("libccp accepts the agent's message");
                got += 1;
                last = Instant::now();
            }
        }
        got
    }

    /// Feed libccp whatever the agent has sent, without waiting; returns how many.
    fn drain(&self) -> usize {
        self.sock.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 4096];
        let mut got = 0;
        while let Ok(len) = self.sock.recv(&mut buf) {
            self.dp.recv_msg(&mut buf[..len]).expect("libccp accepts the agent's message");
            got += 1;
        }
        self.sock.set_nonblocking(false).unwrap();
        got
    }

    fn flow(&self, cong_alg: &str, sport: u16) -> Connection<'_, MockFlow> {
        self.flow_to(cong_alg, sport, 5201)
    }

    /// A flow from 127.0.0.1:`sport` to 127.0.0.1:`dport`.
    fn flow_to(&self, cong_alg: &str, sport: u16, dport: u16) -> Connection<'_, MockFlow> {
        let info = FlowInfo::default()
            .with_mss(MSS)
            .with_init_cwnd(MSS * INIT_CWND_PACKETS)
            .with_four_tuple(LOCALHOST, u32::from(sport.to_be()), LOCALHOST, u32::from(dport.to_be()))
            .with_cong_alg(cong_alg)
            .unwrap();
        let c = Connection::start(&self.dp, MockFlow::default(), info).expect("libccp connection");
        // INSTALL (the answer to READY, before the first flow) and CHANGE_PROG with the window.
        let expected = if self.flows.get() == 0 { 2 } else { 1 };
        self.flows.set(self.flows.get() + 1);
        assert_eq!(self.pump(expected), expected, "the agent answers CREATE with the program and the flow's window");
        c
    }
}

/// One ACK's primitives, with the flow's current window and rate as the kernel reports them.
fn ack(c: &mut Connection<'_, MockFlow>, p: Primitives) {
    let (cwnd, rate) = (c.cwnd, c.rate);
    c.load_primitives(p.with_snd_cwnd(cwnd).with_snd_rate(u64::from(rate)));
    c.invoke().expect("the program runs");
}

/// An ACK with no new data and no RTT sample: applies staged updates, changes nothing else.
fn idle_ack(c: &mut Connection<'_, MockFlow>) {
    ack(c, Primitives::default());
}

fn data_ack(packets: u32) -> Primitives {
    Primitives::default()
        .with_bytes_acked(packets * MSS)
        .with_packets_acked(packets)
        .with_rtt_sample_us(u64::from(rtt_us()))
        .with_bytes_in_flight(10 * MSS)
        .with_packets_in_flight(10)
        .with_rate_outgoing(12_500_000)
        .with_rate_incoming(10_000_000)
}

/// One RTT of ACKs for `packets` packets, one per ACK: all but the last at once, the last one
/// RTT after the previous report, so it closes the round and triggers the report. Then the
/// agent's update is applied.
fn round(dp: &MockDatapath, c: &mut Connection<'_, MockFlow>, packets: u32) {
    let start = Instant::now();
    for _ in 1..packets {
        ack(c, data_ack(1));
    }
    std::thread::sleep((RTT + Duration::from_millis(5)).saturating_sub(start.elapsed()));
    ack(c, data_ack(1));
    assert_eq!(dp.pump(1), 1, "a report every RTT, answered by an update");
    idle_ack(c);
}

fn reports(records: &[Value]) -> Vec<&Value> {
    records.iter().filter(|r| r["event"] == "report").collect()
}

/// The reports that carry slow start's delay exit.
fn delay_exits(records: &[Value]) -> Vec<&Value> {
    reports(records).into_iter().filter(|r| r["delay_exit"] == true).collect()
}

/// A one-packet ACK with an RTT sample of `rtt_us`, 40 packets in flight (the window stays
/// limited, so slow start grows it per ACK).
fn queued_ack(rtt_us: u64) -> Primitives {
    data_ack(1).with_rtt_sample_us(rtt_us).with_bytes_in_flight(40 * MSS).with_packets_in_flight(40)
}

/// Set in the child process of the test below.
const LN_PROBE_ENV: &str = "POLYCC_MOCK_LN_PROBE";

#[test]
fn libm_log_is_replaced_in_this_binary_so_the_agent_runs_out_of_process() {
    if std::env::var_os(LN_PROBE_ENV).is_some() {
        // libccp's `log(dp, level, msg, len)` is what `f64::ln` calls in this binary: it reads
        // a datapath out of the float registers and crashes (or returns garbage).
        let ln10 = std::hint::black_box(10.0f64).ln();
        println!("ln10={ln10}");
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "libm_log_is_replaced_in_this_binary_so_the_agent_runs_out_of_process", "--nocapture"])
        .env(LN_PROBE_ENV, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let correct = format!("ln10={}", std::f64::consts::LN_10);
    assert!(
        !out.status.success() || !stdout.contains(&correct),
        "f64::ln works in a binary linking libccp now ({stdout}); the clash this file works around is gone"
    );
    // Keep libccp linked into this binary even when this test runs alone.
    let _ = DatapathBuilder::default();
}

/// The fused flow's slow first seconds in the guest (issue 15): growth came only with the
/// agent's per-report update, so the window doubled once per report cycle (RTT + wait for the
/// next ACK + the agent's round trip + wait for the next ACK), 1.5-2.5 RTTs under ACK
/// aggregation. The program now grows it per ACK, up to one doubling ahead of the agent, and a
/// loss stops that growth until the agent has decided.
#[test]
fn slow_start_grows_per_ack_in_the_datapath_and_a_loss_is_judged_from_the_grown_window() {
    let agent = AgentProcess::start("reno-ack-growth", &["--alg", "reno"]);
    let dp = MockDatapath::start(&agent);
    let mut c = dp.flow("ccp", 40_011);
    idle_ack(&mut c);
    assert_eq!(c.cwnd, INIT_CWND_PACKETS * MSS);
    for _ in 0..5 {
        ack(&mut c, data_ack(1));
    }
    assert_eq!(c.cwnd, 15 * MSS, "five ACKs of one packet: five packets more, before any report");
    for _ in 0..10 {
        ack(&mut c, data_ack(1));
    }
    assert_eq!(c.cwnd, 20 * MSS, "at most one doubling ahead of the agent's last decision");
    // A loss: no growth on its ACK or after it, and Reno halves the 20 packets the flow has,
    // not the 10 it last decided.
    ack(&mut c, data_ack(1).with_lost_pkts_sample(1));
    ack(&mut c, data_ack(1));
    assert_eq!(c.cwnd, 20 * MSS, "growth stops at a loss");
    assert_eq!(dp.pump(1), 1, "the loss report is answered");
    idle_ack(&mut c);
    assert_eq!(c.cwnd, 10 * MSS, "halved from the grown window");
    for _ in 0..5 {
        ack(&mut c, data_ack(1));
    }
    assert_eq!(c.cwnd, 10 * MSS, "congestion avoidance: no per-ACK growth");
    drop(c);
    std::thread::sleep(Duration::from_millis(50));
    let (status, _, stderr) = agent.stop();
    assert!(status.success(), "{stderr}");
}

/// Slow start's delay exit in the program (issue 21): the fused and the agent's CUBIC windows
/// ran a whole report interval into the queue before HyStart, tested on the report's RTTs, saw
/// it (guest, 4 BDP: 1,021-1,607 packets where in-kernel CUBIC stops at 666-676). The program
/// runs HyStart's delay test per RTT sample: the 8th sample of a round above min RTT + 1/8 stops
/// the growth at that ACK and reports at once; CUBIC leaves slow start from the grown window.
#[test]
fn cubic_slow_start_ends_at_the_ack_whose_round_shows_the_queue() {
    let agent = AgentProcess::start("cubic-delay-exit", &["--alg", "cubic"]);
    let dp = MockDatapath::start(&agent);
    let mut c = dp.flow("ccp", 40_021);
    idle_ack(&mut c);
    round(&dp, &mut c, INIT_CWND_PACKETS); // the base RTT, 50 ms: threshold 56.25 ms
    assert_eq!(c.cwnd, 2 * INIT_CWND_PACKETS * MSS);
    let queued = |rtt_ms: u64| queued_ack(rtt_ms * 1000);
    // A sample under the threshold among the round's first 8: the round's minimum stays under.
    ack(&mut c, queued(55));
    for _ in 0..9 {
        ack(&mut c, queued(80));
    }
    assert_eq!(c.cwnd, 30 * MSS, "no exit: the round's minimum is 55 ms; per-ACK growth goes on");
    assert_eq!(dp.drain(), 0, "no report before the RTT deadline");
    std::thread::sleep(Duration::from_millis(85)); // the deadline: the latest sample, 80 ms
    ack(&mut c, queued(80)); // closes the round: a report, answered
    assert_eq!(dp.pump(1), 1);
    idle_ack(&mut c);
    let start = c.cwnd;
    assert!(start >= 31 * MSS, "still in slow start: {} packets", start / MSS);
    // The next round's first 8 samples are all 80 ms: growth until the 8th, then none.
    for _ in 0..8 {
        ack(&mut c, queued(80));
    }
    let at_exit = c.cwnd;
    assert_eq!(at_exit, start + 8 * MSS, "the 8th ACK still grew, then the exit fired");
    assert_eq!(dp.pump(1), 1, "the delay exit reports at once, long before the RTT deadline");
    for _ in 0..5 {
        ack(&mut c, queued(80));
    }
    let after = c.cwnd;
    assert!(
        (at_exit..at_exit + 2 * MSS).contains(&after),
        "CUBIC continues from the {} packets of the exit in congestion avoidance: {} packets",
        at_exit / MSS,
        after / MSS
    );
    drop(c);
    std::thread::sleep(Duration::from_millis(50));
    let (status, records, stderr) = agent.stop();
    assert!(status.success(), "{stderr}");
    let exits = delay_exits(&records);
    assert_eq!(exits.len(), 1, "one report carries the delay exit");
    assert_eq!(exits[0]["lost_packets"], 0);
    assert!(exits[0]["interval_us"].as_u64().unwrap() < 25_000, "sent at the exit: {}", exits[0]["interval_us"]);
}

/// The delay exit's round inside a long report (issue 21, guest, 1 BDP): once the window passed
/// the path, the queue grew the RTT as fast as time passed, so the report (due at the latest
/// sample) stretched to 180 ms; its first 8 samples predated the queue and, with the report as
/// the round, the exit never fired: the fused window grew per ACK to 789 packets where the path
/// holds 345. A round now lasts its first sample.
#[test]
fn the_delay_exit_sees_a_queue_that_builds_inside_a_long_report() {
    let agent = AgentProcess::start("cubic-delay-exit-long-report", &["--alg", "cubic"]);
    let dp = MockDatapath::start(&agent);
    let mut c = dp.flow("ccp", 40_023);
    idle_ack(&mut c);
    round(&dp, &mut c, INIT_CWND_PACKETS); // the base RTT, 50 ms: threshold 56.25 ms
    let start = Instant::now();
    let mut exited_at = None;
    // An ACK every 2 ms: 51 ms samples for 20 ms, then the queue adds 1 ms per ms, so every
    // sample stays above the time since the report and the RTT deadline never passes.
    while start.elapsed() < Duration::from_millis(150) && exited_at.is_none() {
        let t = start.elapsed().as_micros() as u64;
        let rtt = if t < 20_000 { 51_000 } else { 31_000 + t };
        ack(&mut c, queued_ack(rtt));
        if dp.drain() > 0 {
            exited_at = Some(start.elapsed());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let exited_at = exited_at.expect("the delay exit reports within the 150 ms report");
    // The first round lasts 51 ms; the next sees 82 ms and more, and its 8th sample comes 8 ACKs
    // later.
    assert!(exited_at < Duration::from_millis(110), "exit at {exited_at:?}");
    let at_exit = c.cwnd;
    for _ in 0..5 {
        ack(&mut c, queued_ack(120_000));
    }
    assert!(
        c.cwnd < at_exit + 2 * MSS,
        "no per-ACK growth after the exit: {} -> {} packets",
        at_exit / MSS,
        c.cwnd / MSS
    );
    drop(c);
    std::thread::sleep(Duration::from_millis(50));
    let (status, records, stderr) = agent.stop();
    assert!(status.success(), "{stderr}");
    let exits = delay_exits(&records);
    assert_eq!(exits.len(), 1, "one report carries the delay exit");
}

#[test]
fn reno_slow_start_doubles_per_rtt_and_a_loss_halves_at_once() {
    let agent = AgentProcess::start("reno", &["--alg", "reno"]);
    let dp = MockDatapath::start(&agent);
    let mut c = dp.flow("ccp", 40_001);
    idle_ack(&mut c);
    assert_eq!(c.cwnd, INIT_CWND_PACKETS * MSS, "the agent installs Reno's initial window");

    round(&dp, &mut c, 10);
    assert_eq!(c.cwnd, 20 * MSS, "slow start: 10 packets acked in one RTT -> 20");
    round(&dp, &mut c, 20);
    assert_eq!(c.cwnd, 40 * MSS, "-> 40");

    // A loss: reported on the ACK that carries it, long before the RTT is up.
    let t = Instant::now();
    ack(&mut c, data_ack(1).with_lost_pkts_sample(1));
    assert_eq!(dp.pump(1), 1, "the loss report is answered");
    idle_ack(&mut c);
    assert!(t.elapsed() < RTT, "loss handled in {:?}, within the RTT", t.elapsed());
    assert_eq!(c.cwnd, 20 * MSS, "a loss halves the window");

    drop(c); // libccp sends the close (a MEASURE without fields)
    std::thread::sleep(Duration::from_millis(50));
    let (status, records, stderr) = agent.stop();
    assert!(status.success(), "SIGTERM: clean exit, got {status}; stderr:\n{stderr}");
    assert!(stderr.contains("flow created") && stderr.contains("policy: reno"), "{stderr}");
    assert!(stderr.contains("agent stopped"), "{stderr}");
    let create = records.iter().find(|r| r["event"] == "create").expect("a create record");
    assert_eq!(create["src"], "127.0.0.1:40001");
    assert_eq!(create["cong_alg"], "ccp");
    let reps = reports(&records);
    assert_eq!(reps.len(), 3, "two RTT reports and one loss report: {reps:?}");
    // The first round's report: 10 packets, RTT samples of 50 ms, the delivery-rate sample.
    let r = reps[0];
    assert_eq!(r["acked_bytes"], 10 * MSS);
    assert_eq!(r["acked_packets"], 10);
    assert_eq!(r["rtt_samples"], 10);
    assert_eq!(r["rtt_min_us"], rtt_us());
    assert_eq!(r["rtt_mean_us"], rtt_us());
    assert_eq!(r["delivery_rate_bytes_per_sec"], 10_000_000.0, "min(rate_outgoing, rate_incoming)");
    assert_eq!(r["inflight_bytes"], 10 * MSS);
    assert_eq!(r["inflight_packets"], 10);
    assert!(r["interval_us"].as_u64().unwrap() > u64::from(rtt_us()), "{r}");
    assert_eq!(r["cwnd_bytes"], 20 * MSS);
    let loss = reps[2];
    assert_eq!(loss["lost_packets"], 1);
    assert!(loss["interval_us"].as_u64().unwrap() < u64::from(rtt_us()), "immediate: {loss}");
    assert_eq!(loss["cwnd_bytes"], 20 * MSS);
    let now: Vec<u64> = reps.iter().map(|r| r["now_us"].as_u64().unwrap()).collect();
    assert!(now.windows(2).all(|w| w[0] < w[1]), "report time advances: {now:?}");
    assert!(records.iter().any(|r| r["event"] == "close"), "the close reached the agent");
}

/// CREATE's name as ccp.ko writes it for a datapath that reports undos: "ccp", then at byte 12
/// the extension word (little-endian "PC" magic with flag 0x4, agent/src/wire.rs).
const CCP_WITH_UNDO: &str = "ccp\0\0\0\0\0\0\0\0\0\u{4}\0CP";

/// ccp.ko tells the program of the kernel's undo in `Ack.ecn_bytes` (it said so at CREATE): the
/// report goes at once, and the agent's Reno takes its spurious halving back.
#[test]
fn an_undo_is_reported_at_once_and_the_halving_is_taken_back() {
    let agent = AgentProcess::start("undo", &["--alg", "reno"]);
    let dp = MockDatapath::start(&agent);
    let mut c = dp.flow(CCP_WITH_UNDO, 40_003);
    idle_ack(&mut c);
    round(&dp, &mut c, 10);
    assert_eq!(c.cwnd, 20 * MSS);
    ack(&mut c, data_ack(1).with_lost_pkts_sample(2));
    assert_eq!(dp.pump(1), 1, "the loss report is answered");
    idle_ack(&mut c);
    assert_eq!(c.cwnd, 10 * MSS, "halved for the loss");
    let t = Instant::now();
    ack(&mut c, Primitives::default().with_ecn_bytes(1));
    assert_eq!(dp.pump(1), 1, "the undo report is answered");
    idle_ack(&mut c);
    assert!(t.elapsed() < RTT, "undo handled in {:?}, within the RTT", t.elapsed());
    assert_eq!(c.cwnd, 20 * MSS, "the window from before the spurious loss");
    let (status, records, _) = agent.stop();
    assert!(status.success());
    let reps = reports(&records);
    assert_eq!(reps.iter().map(|r| r["undo"] == true).collect::<Vec<_>>(), [false, false, true], "{reps:?}");
    assert_eq!(reps[2]["lost_packets"], 0);
}

#[test]
fn a_timeout_is_reported_at_once() {
    let agent = AgentProcess::start("timeout", &["--alg", "reno"]);
    let dp = MockDatapath::start(&agent);
    let mut c = dp.flow("ccp", 40_002);
    idle_ack(&mut c);
    round(&dp, &mut c, 10);
    assert_eq!(c.cwnd, 20 * MSS);
    ack(&mut c, Primitives::default().with_was_timeout(true));
    assert_eq!(dp.pump(1), 1, "the timeout report is answered at once");
    idle_ack(&mut c);
    assert_eq!(c.cwnd, 2 * MSS, "Reno restarts from the loss window after a timeout, not the initial 10 packets");
    let (status, records, _) = agent.stop();
    assert!(status.success());
    assert_eq!(reports(&records)[1]["timeout"], true);
}

#[test]
fn fused_bbr_with_cubic_installs_both_cwnd_and_rate() {
    let agent = AgentProcess::start(
        "fused",
        &["--alg", "fused", "--pilot", "bbr", "--copilot", "cubic", "--fusion", "max", "--fuse-on", "cwnd"],
    );
    let dp = MockDatapath::start(&agent);
    let mut c = dp.flow("ccp", 40_003);
    idle_ack(&mut c);
    for _ in 0..4 {
        let packets = (c.cwnd / MSS).clamp(2, 40);
        round(&dp, &mut c, packets);
    }
    assert!(c.rate_calls > 0 && c.rate > 0, "BBR's pacing rate reaches the datapath");
    assert!(c.cwnd >= 4 * MSS, "a window is installed: {}", c.cwnd);
    let (status, records, stderr) = agent.stop();
    assert!(status.success(), "{stderr}");
    assert!(stderr.contains("fused(pilot=bbr, copilots=cubic, max on cwnd)"), "{stderr}");
    let last = *reports(&records).last().unwrap();
    assert_eq!(
        last["rate_bytes_per_sec"].as_u64(),
        Some(u64::from(c.rate)),
        "the datapath holds the agent's last rate"
    );
    assert_eq!(last["cwnd_bytes"].as_u64(), Some(u64::from(c.cwnd)));
    assert!(last["decision_rate_bytes_per_sec"].as_f64().unwrap() > 0.0);
}

/// `polycc trace` of a fused flow: what the agent held for it (a record a second: the flow is
/// kept busy past one), then 2 s more (a second closes at least every 1.2 s). Its records carry
/// the window and rate the agent installed, and which member the fusion took them from.
#[test]
fn a_traced_fused_flow_shows_the_installed_window_and_rate_and_the_members_shares() {
    let agent = AgentProcess::start(
        "traced",
        &["--alg", "fused", "--pilot", "bbr", "--copilot", "cubic", "--fusion", "max", "--fuse-on", "cwnd"],
    );
    let dp = MockDatapath::start(&agent);
    let mut c = dp.flow("ccp", 40_013);
    idle_ack(&mut c);
    let busy = Instant::now();
    while busy.elapsed() < Duration::from_millis(1_100) {
        let packets = (c.cwnd / MSS).clamp(2, 40);
        round(&dp, &mut c, packets);
    }
    let id = flows_json(&agent, 1)[0]["flow"].clone();
    let png = agent.dir.join("trace.png");
    let (code, out, err) = polycc(
        &agent,
        &["trace", &id.to_string(), "--history", "--duration", "2s", "--json", "--png", png.to_str().unwrap()],
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("trace.png (1200x900, "), "{err}");
    assert!(std::fs::read(&png).unwrap().starts_with(b"\x89PNG"));
    let traced: Vec<Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(!traced.is_empty() && traced.iter().all(|r| r["flow"] == id), "{out}");
    let decided = traced.iter().find(|r| r["fusion_win_frac"].as_object().is_some_and(|m| !m.is_empty()));
    let shares = decided.unwrap_or_else(|| panic!("a second with decisions: {out}"))["fusion_win_frac"].clone();
    let total: f64 = shares.as_object().unwrap().values().map(|v| v.as_f64().unwrap()).sum();
    assert!(
        (total - 1.0).abs() < 1e-9 && shares.as_object().unwrap().keys().all(|k| k == "bbr" || k == "cubic"),
        "{shares}"
    );
    let end = traced.last().unwrap();
    assert!(matches!(end["fusion_member"].as_str(), Some("bbr" | "cubic")), "{end}");
    drop(c);
    let (status, records, stderr) = agent.stop();
    assert!(status.success(), "{stderr}");
    // The trace's last second ended after the last report: what that report installed.
    let last = *reports(&records).last().unwrap();
    assert_eq!(
        (end["cwnd_bytes"].as_u64(), end["pacing_rate_bytes_per_sec"].as_f64()),
        (last["cwnd_bytes"].as_u64(), last["rate_bytes_per_sec"].as_f64()),
        "{end}"
    );
}

/// ACK every `gap` for `total`, with RTT samples of `rtt`. Returns the agent's reports, and the longest time between two ACKs as they were really sent after the
/// first RTT (a loaded machine stretches the sleeps).
fn steady_acks(args: &[&str], name: &str, rtt: Duration, gap: Duration, total: Duration) -> (Vec<Value>, Duration) {
    let agent = AgentProcess::start(name, args);
    let dp = MockDatapath::start(&agent);
    let mut c = dp.flow("ccp", 40_004);
    idle_ack(&mut c);
    let start = Instant::now();
    let (mut last, mut longest_gap) = (None::<Instant>, Duration::ZERO);
    while start.elapsed() < total {
        ack(&mut c, data_ack(1).with_rtt_sample_us(rtt.as_micros() as u64));
        let now = Instant::now();
        if now - start > rtt {
            // After the first report, which the checks skip.
            longest_gap = longest_gap.max(last.map_or(Duration::ZERO, |l| now - l));
        }
        last = Some(now);
        dp.drain();
        std::thread::sleep(gap);
    }
    let (status, records, _) = agent.stop();
    assert!(status.success());
    (reports(&records).into_iter().cloned().collect(), longest_gap)
}

#[test]
fn the_report_interval_follows_the_flag() {
    // --report-interval 10ms with a 200 ms RTT: about every 10 ms, not once per RTT.
    let (fixed, _) = steady_acks(
        &["--alg", "cubic", "--report-interval", "10ms"],
        "interval-fixed",
        Duration::from_millis(200),
        Duration::from_millis(1),
        Duration::from_millis(150),
    );
    let intervals: Vec<u64> = fixed.iter().map(|r| r["interval_us"].as_u64().unwrap()).collect();
    assert!((6..=15).contains(&fixed.len()), "{} reports in 150 ms every 10 ms: {intervals:?}", fixed.len());
    assert!(intervals.iter().all(|&i| (10_000..100_000).contains(&i)), "{intervals:?}");

    // Default: once per RTT (30 ms here).
    let (per_rtt, longest_gap) = steady_acks(
        &["--alg", "cubic"],
        "interval-rtt",
        Duration::from_millis(30),
        Duration::from_millis(1),
        Duration::from_millis(150),
    );
    let intervals: Vec<u64> = per_rtt.iter().map(|r| r["interval_us"].as_u64().unwrap()).collect();
    assert!((2..=5).contains(&per_rtt.len()), "{} reports in 150 ms at RTT 30 ms: {intervals:?}", per_rtt.len());
    assert!(intervals.iter().all(|&i| i >= 30_000), "{intervals:?}");
    // Samples split into the halves of the interval.
    let r = &per_rtt[1];
    assert_eq!(r["rtt_first_half_us"], 30_000);
    assert_eq!(r["rtt_second_half_us"], 30_000);
    // ACKs about 1 ms apart (< 2 ms) form one train spanning most of the interval. When the
    // machine was too loaded to send them that way, a train still lies within the interval.
    let train = r["ack_train_us"].as_u64().unwrap();
    if longest_gap < Duration::from_micros(1_800) {
        assert!(train > 20_000, "{r}");
    } else {
        eprintln!("ACKs were up to {longest_gap:?} apart: the train ({train} us) is checked against its interval only");
        assert!((1..=r["interval_us"].as_u64().unwrap()).contains(&train), "{r}");
    }
}

#[test]
fn flows_asking_for_other_congestion_controls_are_served_with_the_default_policy() {
    let agent = AgentProcess::start("congalg", &["--alg", "reno"]);
    let dp = MockDatapath::start(&agent);
    let mut a = dp.flow("ccp", 40_005);
    let mut b = dp.flow("cubic", 40_006);
    idle_ack(&mut a);
    idle_ack(&mut b);
    assert_eq!((a.cwnd, b.cwnd), (INIT_CWND_PACKETS * MSS, INIT_CWND_PACKETS * MSS));
    let (status, records, stderr) = agent.stop();
    assert!(status.success());
    let algs: Vec<&str> = records.iter().filter_map(|r| r["cong_alg"].as_str()).collect();
    assert_eq!(algs, ["ccp", "cubic"]);
    let created: Vec<&str> = stderr.lines().filter(|l| l.contains("flow created")).collect();
    assert_eq!(created.len(), 2, "{stderr}");
    assert!(created.iter().all(|l| l.contains("policy: reno")), "{created:?}");
}

#[test]
fn a_second_agent_on_the_same_socket_is_refused() {
    let agent = AgentProcess::start("second", &["--alg", "reno"]);
    let out = Command::new(env!("CARGO_BIN_EXE_polycc-portus"))
        .args(["--ipc", "unix", "--unix-socket"])
        .arg(&agent.socket)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(6));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("another agent is already listening"), "{stderr}");
    let _ = Path::new(&agent.socket);
    let (status, _, _) = agent.stop();
    assert!(status.success());
}

/// `polycc` against the agent's control socket; returns (exit status, stdout, stderr).
fn polycc(agent: &AgentProcess, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_polycc"))
        .arg("--socket")
        .arg(agent.dir.join("control.sock"))
        .args(args)
        .output()
        .expect("run polycc");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `polycc flows --json` until `want` flows each have at least one report (the agent
/// republishes the table every 0.5 s).
fn flows_json(agent: &AgentProcess, want: usize) -> Vec<Value> {
    let deadline = Instant::now() + AGENT_TIMEOUT;
    loop {
        let (code, out, err) = polycc(agent, &["flows", "--json"]);
        assert_eq!(code, Some(0), "polycc flows: {err}");
        let flows: Vec<Value> = serde_json::from_str(&out).expect("polycc flows --json prints a JSON array");
        if flows.len() == want && flows.iter().all(|f| f["reports"].as_u64() >= Some(1)) {
            return flows;
        }
        assert!(Instant::now() < deadline, "{want} flows with reports never showed: {out}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn flow_to_port(flows: &[Value], port: u16) -> &Value {
    let dst = format!("127.0.0.1:{port}");
    flows.iter().find(|f| f["dst"] == dst.as_str()).unwrap_or_else(|| panic!("no flow to {dst}: {flows:?}"))
}

#[test]
fn policy_rules_route_flows_by_destination_port_as_polycc_flows_shows() {
    let files = scratch_dir("policy-file");
    let policy = files.join("policy.toml");
    std::fs::write(
        &policy,
        r#"
[[rule]]
dst_ports = "5201"
policy = "reno"

[[rule]]
dst_ports = "5202-5203"
cong_alg = "ccp"
policy = { fused = { pilot = { alg = "bbr" }, copilots = [{ alg = "cubic" }], fusion = "max" } }
"#,
    )
    .unwrap();
    let agent = AgentProcess::start("policy", &["--alg", "vegas", "--policy", policy.to_str().unwrap()]);
    let dp = MockDatapath::start(&agent);
    // Each flow's first round follows its CREATE at once: a round started more than an RTT
    // after the program was installed would also report on its first ACK.
    let mut reno = dp.flow_to("ccp", 41_001, 5201);
    idle_ack(&mut reno);
    assert_eq!(reno.cwnd, INIT_CWND_PACKETS * MSS);
    round(&dp, &mut reno, 10);
    assert_eq!(reno.cwnd, 20 * MSS, "the 5201 flow runs Reno: slow start doubles");
    assert_eq!(reno.rate_calls, 0, "Reno paces nothing");
    let mut fused = dp.flow_to("ccp", 41_002, 5202);
    idle_ack(&mut fused);
    assert!(fused.rate > 0, "BBR's pacing rate is installed at CREATE");
    round(&dp, &mut fused, 10);
    let mut other = dp.flow_to("ccp", 41_003, 80);
    idle_ack(&mut other);
    round(&dp, &mut other, 10);

    let flows = flows_json(&agent, 3);
    let f = flow_to_port(&flows, 5201);
    assert_eq!(
        (f["rule"].as_u64(), f["policy"].as_str(), f["pilot"].as_str()),
        (Some(1), Some("reno"), Some("reno")),
        "{f}"
    );
    assert_eq!(f["copilots"], serde_json::json!([]));
    assert_eq!(f["cwnd_bytes"], 20 * MSS, "the table shows the installed window");
    assert_eq!(f["rtt_us"], rtt_us());
    let f = flow_to_port(&flows, 5202);
    assert_eq!(f["rule"], 2, "{f}");
    assert_eq!(f["policy"], "fused(pilot=bbr, copilots=cubic, max on cwnd)");
    assert_eq!((f["pilot"].as_str(), &f["copilots"]), (Some("bbr"), &serde_json::json!(["cubic"])));
    assert_eq!(f["rate_bytes_per_sec"].as_u64(), Some(u64::from(fused.rate)), "{f}");
    let f = flow_to_port(&flows, 80);
    assert_eq!((f["rule"].is_null(), f["policy"].as_str()), (true, Some("vegas")), "no rule: the flags' default: {f}");

    // A rule added live applies to the next flow, and is in the file at once.
    let (code, out, err) = polycc(&agent, &["policy", "add", "--dst-port", "8080", "--alg", "copa", "--first"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("added rule 3: dst_ports 8080 -> copa"), "{out}");
    let text = std::fs::read_to_string(&policy).unwrap();
    assert!(text.find("8080").unwrap() < text.find("5201").unwrap(), "persisted first: {text}");
    let mut copa = dp.flow_to("ccp", 41_004, 8080);
    idle_ack(&mut copa);
    round(&dp, &mut copa, 10);
    let flows = flows_json(&agent, 4);
    assert_eq!(flow_to_port(&flows, 8080)["policy"], "copa");
    assert_eq!(flow_to_port(&flows, 5201)["policy"], "reno", "live flows keep their policy");

    // list, show, remove, and the errors' exit statuses.
    let (code, out, _) = polycc(&agent, &["policy", "list"]);
    assert_eq!(code, Some(0));
    let ids: Vec<&str> = out.lines().skip(1).map(|l| l.split_whitespace().next().unwrap()).collect();
    assert_eq!(ids, ["3", "1", "2"], "{out}");
    let (code, out, _) = polycc(&agent, &["policy", "show", "2", "--json"]);
    assert_eq!(code, Some(0));
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["rule"]["cong_alg"], "ccp");
    assert_eq!(polycc(&agent, &["policy", "remove", "3"]).0, Some(0));
    assert_eq!(polycc(&agent, &["policy", "remove", "3"]).0, Some(10), "no such rule");
    assert!(!std::fs::read_to_string(&policy).unwrap().contains("8080"), "the removal is persisted");
    assert_eq!(polycc(&agent, &["policy", "add", "--dst", "10.0.0.0/33", "--alg", "reno"]).0, Some(5));
    assert_eq!(polycc(&agent, &["policy", "add", "--rule", r#"{"dstt":"10.0.0.0/8","policy":"reno"}"#]).0, Some(6));
    let (code, _, err) = polycc(&agent, &["policy", "add", "--dst-port", "5201", "--alg", "cubic"]);
    assert_eq!(code, Some(0));
    assert!(err.contains("warning: rule 4 overlaps the earlier rule 1"), "{err}");

    drop((reno, fused, other, copa));
    let (status, _, stderr) = agent.stop();
    assert!(status.success(), "{stderr}");
    assert!(stderr.contains("rule added"), "{stderr}");
    let (code, _, err) = polycc(&agent_gone(&files), &["flows"]);
    assert_eq!(code, Some(3), "agent not running: {err}");
    let _ = std::fs::remove_dir_all(&files);
}

/// An `AgentProcess` whose agent is gone (for `polycc`'s not-running case).
fn agent_gone(dir: &Path) -> AgentProcess {
    AgentProcess { child: None, dir: dir.to_path_buf(), socket: dir.join("agent.sock"), keep: true }
}

/// The one flow `polycc flows --json` shows to `port`, once it has a report.
fn live_flow(agent: &AgentProcess, want: usize, port: u16) -> Value {
    flow_to_port(&flows_json(agent, want), port).clone()
}

/// The flow to `port` once the flows table (republished every 0.5 s) satisfies `ok`.
fn table_until(agent: &AgentProcess, port: u16, ok: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + AGENT_TIMEOUT;
    loop {
        let f = live_flow(agent, agent_flow_count(agent), port);
        if ok(&f) {
            return f;
        }
        assert!(Instant::now() < deadline, "the flows table never showed the change: {f}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn agent_flow_count(agent: &AgentProcess) -> usize {
    let (_, out, _) = polycc(agent, &["flows", "--json"]);
    serde_json::from_str::<Vec<Value>>(&out).map_or(0, |v| v.len())
}

/// Apply the update a live change sent (it is on the socket before `polycc` returns).
fn take_update(dp: &MockDatapath, c: &mut Connection<'_, MockFlow>) {
    assert_eq!(dp.pump(1), 1, "the live change installs the new controller's window at once");
    idle_ack(c);
}

#[test]
fn flow_set_hands_the_window_over_without_collapse() {
    let agent = AgentProcess::start("flow-set", &["--alg", "reno"]);
    let dp = MockDatapath::start(&agent);
    let mut c = dp.flow_to("ccp", 42_001, 5201);
    idle_ack(&mut c);
    round(&dp, &mut c, 10);
    round(&dp, &mut c, 20);
    round(&dp, &mut c, 40);
    assert_eq!(c.cwnd, 80 * MSS);
    // A loss: Reno leaves slow start at 40 packets.
    ack(&mut c, data_ack(1).with_lost_pkts_sample(1));
    assert_eq!(dp.pump(1), 1);
    idle_ack(&mut c);
    round(&dp, &mut c, 40);
    let before = c.cwnd;
    assert!((40 * MSS..=41 * MSS).contains(&before), "congestion avoidance at ~40 packets: {before}");
    let id = live_flow(&agent, 1, 5201)["flow"].as_u64().unwrap().to_string();

    // Reno -> CUBIC: the window stays, and CUBIC does not slow-start from it.
    let (code, out, err) = polycc(&agent, &["flow", "set", &id, "--alg", "cubic"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("reno -> cubic") && out.contains("state handed over"), "{out}");
    take_update(&dp, &mut c);
    let after = c.cwnd;
    let ratio = f64::from(after) / f64::from(before);
    assert!((0.97..=1.03).contains(&ratio), "cwnd {before} -> {after} across the switch");
    round(&dp, &mut c, 40);
    assert!(c.cwnd < before * 11 / 10, "no slow start after the hand-over: {before} -> {}", c.cwnd);
    assert!(c.cwnd > INIT_CWND_PACKETS * MSS * 3, "no drop to the initial window: {}", c.cwnd);

    // CUBIC -> fused BBR+CUBIC: a pacing rate from the handed-over window and RTT, same window.
    let before = c.cwnd;
    let (code, out, err) =
        polycc(&agent, &["flow", "set", &id, "--alg", "fused", "--pilot", "bbr", "--copilot", "cubic", "--json"]);
    assert_eq!(code, Some(0), "{out}{err}");
    let moved = &serde_json::from_str::<Value>(&out).unwrap()["moved"][0];
    assert_eq!(moved["from"], "cubic");
    assert_eq!(moved["to"], "fused(pilot=bbr, copilots=cubic, max on cwnd)");
    take_update(&dp, &mut c);
    // BBR (the pilot) rounds its adopted window up to its quantum: a few % more, never less.
    let ratio = f64::from(c.cwnd) / f64::from(before);
    assert!((0.97..=1.06).contains(&ratio), "cwnd {before} -> {} across the switch to fused", c.cwnd);
    round(&dp, &mut c, 40);
    assert!(c.cwnd > INIT_CWND_PACKETS * MSS * 3, "no collapse on the next report: {}", c.cwnd);

    let f = table_until(&agent, 5201, |f| f["handovers"] == 2);
    assert_eq!((f["handovers"].as_u64(), f["rule"].is_null()), (Some(2), true), "{f}");
    assert_eq!(f["policy"], "fused(pilot=bbr, copilots=cubic, max on cwnd)");
    assert!(f["rate_bytes_per_sec"].as_u64() > Some(0), "BBR paces from the handed-over rate: {f}");
    // Bad input: no such flow, and an invalid policy checked before anything is sent.
    let (code, _, err) = polycc(&agent, &["flow", "set", "4242", "--alg", "copa"]);
    assert_eq!(code, Some(15), "{err}");
    assert!(err.contains("no live flow has id 4242"), "{err}");
    let (code, _, err) = polycc(&agent, &["flow", "set", &id, "--policy-json", r#"{"alg":"cubic","beta":3}"#]);
    assert_eq!(code, Some(8), "{err}");
    drop(c);
    let (status, _, stderr) = agent.stop();
    assert!(status.success(), "{stderr}");
    assert!(stderr.contains("state handed over"), "{stderr}");
}

#[test]
fn apply_live_moves_the_flows_a_changed_rule_matches_and_plain_changes_do_not() {
    let files = scratch_dir("apply-live-file");
    let policy = files.join("policy.toml");
    std::fs::write(&policy, "[[rule]]\ndst_ports = \"5201\"\npolicy = \"reno\"\n").unwrap();
    let agent = AgentProcess::start("apply-live", &["--alg", "vegas", "--policy", policy.to_str().unwrap()]);
    let dp = MockDatapath::start(&agent);
    let mut a = dp.flow_to("ccp", 42_101, 5201);
    idle_ack(&mut a);
    round(&dp, &mut a, 10);
    let mut b = dp.flow_to("ccp", 42_102, 5202);
    idle_ack(&mut b);
    round(&dp, &mut b, 10);
    let mut other = dp.flow_to("ccp", 42_103, 80);
    idle_ack(&mut other);
    round(&dp, &mut other, 10);
    let flows = flows_json(&agent, 3);
    assert_eq!(flow_to_port(&flows, 5201)["policy"], "reno");
    assert_eq!(flow_to_port(&flows, 5202)["policy"], "vegas");

    // Without --apply-live a new rule waits for new flows.
    let (code, out, err) = polycc(&agent, &["policy", "add", "--dst-port", "80", "--alg", "cubic"]);
    assert_eq!(code, Some(0), "{out}{err}");
    // Replace rule 1 to cover both ports, live: both flows move, the one on port 80 stays.
    let (a_before, b_before) = (a.cwnd, b.cwnd);
    let (code, out, err) =
        polycc(&agent, &["policy", "replace", "1", "--dst-port", "5201-5202", "--alg", "copa", "--apply-live"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("replaced rule 1: dst_ports 5201-5202 -> copa"), "{out}");
    assert_eq!(out.matches("-> copa (cwnd").count(), 2, "two flows moved: {out}");
    take_update(&dp, &mut a);
    take_update(&dp, &mut b);
    for (c, before) in [(&a, a_before), (&b, b_before)] {
        let ratio = f64::from(c.cwnd) / f64::from(before);
        assert!((0.97..=1.03).contains(&ratio), "cwnd {before} -> {}", c.cwnd);
    }
    let text = std::fs::read_to_string(&policy).unwrap();
    assert!(text.contains("5201-5202") && text.contains("copa") && !text.contains("reno"), "persisted: {text}");
    table_until(&agent, 5202, |f| f["handovers"] == 1);
    let flows = flows_json(&agent, 3);
    for port in [5201, 5202] {
        let f = flow_to_port(&flows, port);
        assert_eq!(
            (f["policy"].as_str(), f["rule"].as_u64(), f["handovers"].as_u64()),
            (Some("copa"), Some(1), Some(1))
        );
    }
    let f = flow_to_port(&flows, 80);
    assert_eq!((f["policy"].as_str(), f["rule"].is_null()), (Some("vegas"), true), "a plain add moves nothing: {f}");
    // The same replace again moves nothing: both already run it.
    let (code, out, _) =
        polycc(&agent, &["policy", "replace", "1", "--dst-port", "5201-5202", "--alg", "copa", "--apply-live"]);
    assert_eq!(code, Some(0));
    assert!(out.contains("no live flow moved"), "{out}");
    assert_eq!(polycc(&agent, &["policy", "replace", "9", "--alg", "copa"]).0, Some(10), "no such rule");
    drop((a, b, other));
    let (status, _, stderr) = agent.stop();
    assert!(status.success(), "{stderr}");
    let _ = std::fs::remove_dir_all(&files);
}

/// `polycc ARGS` in the background, its stdout lines on a channel.
fn polycc_lines(agent: &AgentProcess, args: &[&str]) -> (Child, std::sync::mpsc::Receiver<String>) {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_polycc"))
        .arg("--socket")
        .arg(agent.dir.join("control.sock"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

/// SIGINT a background `polycc` and expect it to end cleanly.
fn interrupt(mut child: Child) {
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let deadline = Instant::now() + AGENT_TIMEOUT;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            assert!(s.success(), "^C ends polycc with status 0: {s}");
            return;
        }
        assert!(Instant::now() < deadline, "polycc ignored ^C");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn stats_are_one_record_per_flow_per_second_from_the_reports() {
    let agent = AgentProcess::start("stats", &["--alg", "reno"]);
    let dp = MockDatapath::start(&agent);
    let mut c = dp.flow_to("ccp", 42_201, 5201);
    idle_ack(&mut c);
    let (follow, lines) = polycc_lines(&agent, &["stats", "--json", "--interval", "200ms"]);
    let (watch, frames) = polycc_lines(&agent, &["flows", "--watch", "--json", "--interval", "200ms"]);
    // 10 packets per 55 ms round for 3.5 s, one loss after 1.5 s.
    let start = Instant::now();
    let mut lost = false;
    while start.elapsed() < Duration::from_millis(3_500) {
        round(&dp, &mut c, 10);
        if !lost && start.elapsed() > Duration::from_millis(1_500) {
            ack(&mut c, Primitives::default().with_lost_pkts_sample(1));
            assert_eq!(dp.pump(1), 1);
            idle_ack(&mut c);
            lost = true;
        }
    }
    let (code, out, err) = polycc(&agent, &["stats", "--once", "--json", "--since", "0"]);
    assert_eq!(code, Some(0), "{err}");
    let records: Vec<Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!((3..=5).contains(&records.len()), "one record per second for 3.5 s: {out}");
    let seqs: Vec<u64> = records.iter().map(|r| r["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    let full: Vec<&Value> = records.iter().filter(|r| (r["duration_s"].as_f64().unwrap() - 1.0).abs() < 0.1).collect();
    assert!(full.len() >= 2, "{out}");
    // 10 packets every 55 ms.
    let expected = f64::from(10 * MSS) / 0.055;
    for r in &full {
        let tput = r["throughput_bytes_per_sec"].as_f64().unwrap();
        assert!((tput / expected - 1.0).abs() < 0.25, "throughput {tput} vs {expected}: {r}");
        assert_eq!((r["rtt_min_us"].as_f64(), r["rtt_avg_us"].as_f64()), (Some(50_000.0), Some(50_000.0)), "{r}");
        assert_eq!((r["policy"].as_str(), r["dst"].as_str()), (Some("reno"), Some("127.0.0.1:5201")));
        let (lo, avg, hi) = (
            r["send_rate_min_bytes_per_sec"].as_f64().unwrap(),
            r["send_rate_avg_bytes_per_sec"].as_f64().unwrap(),
            r["send_rate_max_bytes_per_sec"].as_f64().unwrap(),
        );
        assert!(lo > 0.0 && lo <= avg && avg <= hi, "{r}");
        // Reno's window grows past the 10 packets in flight: app-limited nearly all the time.
        assert!(r["app_limited_s"].as_f64().unwrap() > 0.5, "{r}");
    }
    // Slow start until the loss, avoidance after.
    assert!(full[0]["slow_start_s"].as_f64().unwrap() > 0.5, "{}", full[0]);
    let last = full.last().unwrap();
    assert_eq!(last["slow_start_s"], 0.0, "{last}");
    let lossy: Vec<f64> = records.iter().map(|r| r["loss_frac"].as_f64().unwrap()).collect();
    let expected_loss = 1.0 / (1.0 + 0.5 / 0.055 * 10.0);
    assert_eq!(lossy.iter().filter(|&&l| l > 0.0).count(), 1, "{lossy:?}");
    assert!(lossy.iter().any(|&l| l > 0.2 * expected_loss && l < 0.02), "one loss among ~180 packets: {lossy:?}");

    // The follower printed new records as they came; the watcher redrew the table.
    let followed: Vec<Value> = lines.try_iter().map(|l| serde_json::from_str(&l).unwrap()).collect();
    assert!(followed.len() >= 2, "{followed:?}");
    assert!(followed.iter().all(|r| r["flow"] == records[0]["flow"]));
    let frames: Vec<Vec<Value>> = frames.try_iter().map(|l| serde_json::from_str(&l).unwrap()).collect();
    assert!(frames.len() >= 10, "a frame every 200 ms for 3.5 s: {}", frames.len());
    let shown: Vec<u64> = frames.iter().filter_map(|f| f.first()).map(|f| f["reports"].as_u64().unwrap()).collect();
    assert!(shown.len() >= 5 && shown.last() > shown.first(), "the table follows the flow: {shown:?}");
    interrupt(follow);
    interrupt(watch);

    // The closed flow's last, shorter interval.
    drop(c);
    std::thread::sleep(Duration::from_millis(100));
    let (_, out, _) = polycc(&agent, &["stats", "--once", "--json", "--since", &seqs.last().unwrap().to_string()]);
    assert!(out.lines().any(|l| serde_json::from_str::<Value>(l).unwrap()["duration_s"].as_f64() < Some(1.0)), "{out}");
    let (status, _, stderr) = agent.stop();
    assert!(status.success(), "{stderr}");
}

#[test]
fn a_thousand_concurrent_flows_are_all_served() {
    const FLOWS: u16 = 1_000;
    /// Flows per batch (one RTT of sleep each).
    const BATCH: usize = 40;
    let agent = AgentProcess::start("thousand", &["--alg", "reno"]);
    let dp = MockDatapath::start(&agent);
    let mut flows: Vec<Connection<'_, MockFlow>> = (0..FLOWS).map(|i| dp.flow_to("ccp", 20_000 + i, 5201)).collect();
    for c in flows.iter_mut() {
        idle_ack(c);
    }
    assert!(flows.iter().all(|c| c.cwnd == INIT_CWND_PACKETS * MSS), "every CREATE answered with the window");
    // A round of 10 packets for every flow, in batches: 9 ACKs at once, the 10th an RTT later
    // (flows created more than an RTT ago also report on their first ACK). Each report is
    // answered with a slow-start window above the initial one. The agent's answers are read after each flow: a unix
    // datagram socket queues only net.unix.max_dgram_qlen (often 10) of them.
    for batch in flows.chunks_mut(BATCH) {
        let start = Instant::now();
        let mut answered = 0;
        for c in batch.iter_mut() {
            for _ in 1..10 {
                ack(c, data_ack(1));
            }
            answered += dp.drain();
        }
        std::thread::sleep((RTT + Duration::from_millis(5)).saturating_sub(start.elapsed()));
        for c in batch.iter_mut() {
            ack(c, data_ack(1));
            answered += dp.drain();
        }
        answered += dp.pump_until_quiet(Duration::from_millis(150));
        assert!(answered >= batch.len(), "{answered} updates for {} flows", batch.len());
        for c in batch.iter_mut() {
            idle_ack(c);
        }
    }
    // Answers that arrived after their batch was applied (libccp stages them until the next ACK).
    dp.pump_until_quiet(Duration::from_millis(150));
    for c in flows.iter_mut() {
        idle_ack(c);
    }
    let served = flows.iter().filter(|c| c.cwnd > INIT_CWND_PACKETS * MSS && c.cwnd <= 20 * MSS).count();
    assert_eq!(served, usize::from(FLOWS), "every flow got an update (slow start past 10 packets)");
    // The agent's table: all 1,000, each with its reports and a window past the initial one.
    let table = flows_json(&agent, usize::from(FLOWS));
    assert!(table.iter().all(|f| f["cwnd_bytes"].as_u64() > Some(u64::from(INIT_CWND_PACKETS * MSS))));
    drop(flows);
    let (status, records, stderr) = agent.stop();
    assert!(status.success(), "{stderr}");
    assert!(reports(&records).len() >= usize::from(FLOWS), "every flow reported");
    let line = stderr.lines().find(|l| l.contains("agent stopped")).unwrap();
    assert!(line.contains("flows_created: 1000") && line.contains("unknown_flow_reports: 0"), "{line}");
}

#[test]
fn a_restarted_agent_keeps_its_policies_and_controls_new_flows_but_not_old_ones() {
    let files = scratch_dir("restart-file");
    let policy = files.join("policy.toml");
    std::fs::write(&policy, "[[rule]]\ndst_ports = \"5201\"\npolicy = \"reno\"\n").unwrap();
    let args = ["--alg", "vegas", "--policy", policy.to_str().unwrap()];
    let first = AgentProcess::start("restart", &args);
    let dp = MockDatapath::start(&first);
    let mut old = dp.flow_to("ccp", 42_301, 5201);
    idle_ack(&mut old);
    round(&dp, &mut old, 10);
    assert_eq!(old.cwnd, 20 * MSS);
    let (code, _, err) = polycc(&first, &["policy", "add", "--dst-port", "5202", "--alg", "cubic"]);
    assert_eq!(code, Some(0), "{err}");
    let (status, _, _) = first.stop_keeping_files();
    assert!(status.success());

    // The same flags, the same sockets: the policy file (with the rule added live) is loaded.
    let second = AgentProcess::restart(&first_dir("restart"), &args);
    let (code, out, _) = polycc(&second, &["policy", "list"]);
    assert_eq!(code, Some(0));
    assert!(out.contains("dst_ports 5201") && out.contains("dst_ports 5202"), "{out}");
    // A new flow is controlled with the rules: CREATE -> INSTALL (a datapath the new agent has
    // not seen) and CHANGE_PROG.
    let info = FlowInfo::default()
        .with_mss(MSS)
        .with_init_cwnd(MSS * INIT_CWND_PACKETS)
        .with_four_tuple(LOCALHOST, u32::from(42_302u16.to_be()), LOCALHOST, u32::from(5202u16.to_be()))
        .with_cong_alg("ccp")
        .unwrap();
    let mut new = Connection::start(&dp.dp, MockFlow::default(), info).unwrap();
    assert_eq!(dp.pump(2), 2, "INSTALL and CHANGE_PROG from the new agent");
    idle_ack(&mut new);
    round(&dp, &mut new, 10);
    assert_eq!(new.cwnd, 20 * MSS, "the new agent serves the new flow (CUBIC slow start)");
    // The old flow: its reports reach the new agent, which does not know it and ignores them;
    // the datapath keeps what the old agent installed.
    let start = Instant::now();
    for _ in 1..10 {
        ack(&mut old, data_ack(1));
    }
    std::thread::sleep((RTT + Duration::from_millis(5)).saturating_sub(start.elapsed()));
    ack(&mut old, data_ack(1));
    std::thread::sleep(Duration::from_millis(100));
    dp.drain();
    idle_ack(&mut old);
    // No update from the new agent; the program itself still runs the old agent's per-ACK slow
    // start, at most up to the cap that agent installed (twice its last window).
    assert!((20 * MSS..=40 * MSS).contains(&old.cwnd), "no update for a flow from before the restart: {}", old.cwnd);
    let flows = flows_json(&second, 1);
    assert_eq!((flows[0]["policy"].as_str(), flows[0]["rule"].as_u64()), (Some("cubic"), Some(2)));
    drop((old, new));
    let (status, _, stderr) = second.stop();
    assert!(status.success(), "{stderr}");
    let line = stderr.lines().find(|l| l.contains("agent stopped")).unwrap();
    assert!(!line.contains("unknown_flow_reports: 0"), "the old flow's report was counted: {line}");
    let _ = std::fs::remove_dir_all(&files);
}

fn first_dir(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("polycc-mock-{}-{name}", std::process::id()))
}
