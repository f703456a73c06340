//! Report-to-update round trip: `polycc-portus --datapath bpf` against a unix-socket datapath,
//! on the host's kernel (issue 17; the CCP paper's bar is p95 < 30 us).
//!
//! - unix: the agent binary (`--ipc unix --alg cubic`) and a datapath here that sends a MEASURE
//!   datagram and waits for the UPDATE_FIELDS answer, one at a time, round robin over 8 flows;
//!   each round trip timed with CLOCK_MONOTONIC around send and receive.
//! - bpf: the agent binary (`--datapath bpf --alg cubic --report-interval 1ms`) serving 8 real
//!   loopback TCP flows whose senders write 16 KiB every millisecond (application-limited, so the
//!   machine is not saturated by loopback traffic); the agent's transport times each report
//!   from its BPF timestamp to the return of the map write that answers it (--bpf-latency-out).
//!
//! - unix with load: the unix case again while the bpf case's 8 loopback flows (in-kernel
//!   CUBIC) run beside it, so both see the same competition for the CPUs.
//! - bpf, busy polling 200 us (shorter than the gaps between reports) and 2 ms (longer): the
//!   agent spins on the ring buffer before it sleeps; the last case also runs it on a core of
//!   its own (`--cpu` on the last CPU, the flows' threads on the others; needs two CPUs).
//!
//! Every bpf case also gives the agent's CPU time over the run in cores (user + system time over
//! wall time): what the round trip costs.
//!
//! Both run the same agent, policy and per-report path; they differ in the datapath IPC.
//! `cargo bench -p polycc-agent --bench bpf_roundtrip [-- ROUND_TRIPS]` as root (else the bpf
//! half is skipped, saying why). Prints one JSON line per datapath.

use polycc_agent::affinity;
use polycc_agent::bpf::percentile;
use polycc_agent::program::{Field, Program, RawReport};
use polycc_agent::wire::{self, build, Create};
use polycc_bpf::testutil;
use std::io::Write;
use std::net::Ipv4Addr;
use std::os::unix::net::UnixDatagram;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const FLOWS: u32 = 8;
const MSS: u32 = 1448;
const DEFAULT_ROUND_TRIPS: usize = 100_000;

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a live local.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn agent(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_polycc-portus"))
        .args(["--log-level", "error"])
        .args(args)
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn polycc-portus")
}

fn stop(child: Child) {
    // SAFETY: the pid of a child spawned here and not yet reaped.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let _ = child.wait_with_output();
}

fn summary(name: &str, ns: &mut [u32], extra: &str) {
    ns.sort_unstable();
    let us = |p| percentile(ns, p).map_or(f64::NAN, |v| f64::from(v) / 1e3);
    println!(
        "{{\"datapath\":\"{name}\",\"round_trips\":{},\"p50_us\":{:.1},\"p95_us\":{:.1},\"p99_us\":{:.1}{extra}}}",
        ns.len(),
        us(50.0),
        us(95.0),
        us(99.0)
    );
}

/// Keeps the calling thread off CPU `avoid`.
fn avoid_cpu(avoid: usize) {
    let others: Vec<usize> = affinity::allowed_cpus().unwrap().into_iter().filter(|&c| c != avoid).collect();
    affinity::run_on(&others).unwrap();
}

/// 8 loopback flows with congestion control `ca`, each writing 16 KiB a millisecond, until the
/// returned flag is set; their threads off CPU `avoid`, if given.
fn traffic(ca: &str, avoid: Option<usize>) -> Arc<AtomicBool> {
    let l = testutil::listener().unwrap();
    let stop_flag = Arc::new(AtomicBool::new(false));
    for _ in 0..FLOWS {
        let (mut client, mut server) = testutil::loopback_pair(&l, ca, MSS).unwrap();
        let s = Arc::clone(&stop_flag);
        drop(std::thread::spawn(move || {
            if let Some(cpu) = avoid {
                avoid_cpu(cpu);
            }
            let chunk = [7u8; 16 * 1024];
            while !s.load(Ordering::Relaxed) {
                if client.write_all(&chunk).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }));
        drop(std::thread::spawn(move || {
            if let Some(cpu) = avoid {
                avoid_cpu(cpu);
            }
            use std::io::Read;
            let mut buf = [0u8; 64 * 1024];
            while let Ok(n) = server.read(&mut buf) {
                if n == 0 {
                    break;
                }
            }
        }));
    }
    stop_flag
}

fn unix(program: &Program, round_trips: usize, load: bool) {
    let dir = std::env::temp_dir().join(format!("polycc-rt-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let agent_sock = dir.join("portus");
    let ctl = dir.join("ctl.sock");
    let child = agent(&[
        "--ipc",
        "unix",
        "--unix-socket",
        agent_sock.to_str().unwrap(),
        "--control-socket",
        ctl.to_str().unwrap(),
        "--alg",
        "cubic",
    ]);
    let up = testutil::wait_for(Duration::from_secs(10), || agent_sock.exists().then_some(()));
    assert!(up.is_some(), "the agent bound its unix socket");
    let dp = UnixDatagram::bind(dir.join("dp")).unwrap();
    dp.set_read_timeout(Some(Duration::from_secs(2))).unwrap();

    let mut buf = [0u8; 4096];
    for sid in 1..=FLOWS {
        let c = Create {
            sid,
            init_cwnd: 10 * MSS,
            mss: MSS,
            src: Ipv4Addr::LOCALHOST.into(),
            src_port: 40_000 + sid as u16,
            dst: Ipv4Addr::LOCALHOST.into(),
            dst_port: 5201,
            cong_alg: "ccp".into(),
            adopted: None,
            undo_signal: true,
        };
        dp.send_to(&build::create(&c), &agent_sock).unwrap();
        // INSTALL (the first flow only), then CHANGE_PROG.
        loop {
            let n = dp.recv(&mut buf).unwrap();
            if u16::from_le_bytes([buf[0], buf[1]]) == wire::CHANGE_PROG {
                assert!(n > 8);
                break;
            }
        }
    }
    let load_flag = load.then(|| traffic("cubic", None));
    let mut ns = Vec::with_capacity(round_trips);
    let mut unanswered = 0u32;
    for i in 0..round_trips {
        let sid = 1 + (i as u32 % FLOWS);
        let rtt = 20_000 + (i as u64 % 31) * 100;
        let raw = RawReport::from_pairs(&[
            (Field::AckedBytes, 20 * u64::from(MSS)),
            (Field::AckedPackets, 20),
            (Field::RttLastUs, rtt),
            (Field::RttMinUs, 20_000),
            (Field::RttSumUs, 20 * rtt),
            (Field::RttSamples, 20),
            (Field::InflightBytes, 20 * u64::from(MSS)),
            (Field::IntervalUs, rtt),
        ]);
        let msg = build::measure(sid, program.uid, &program.measure_fields(&raw));
        let t0 = monotonic_ns();
        dp.send_to(&msg, &agent_sock).unwrap();
        let Ok(n) = dp.recv(&mut buf) else {
            unanswered += 1; // counted and reported, not timed
            continue;
        };
        let t1 = monotonic_ns();
        assert!(n >= 8 && u16::from_le_bytes([buf[0], buf[1]]) == wire::UPDATE_FIELDS);
        ns.push(u32::try_from(t1 - t0).unwrap_or(u32::MAX));
    }
    if let Some(f) = load_flag {
        f.store(true, Ordering::Relaxed);
    }
    stop(child);
    let name = if load { "unix, 8 loopback flows beside" } else { "unix" };
    summary(name, &mut ns, &format!(",\"unanswered_2s\":{unanswered}"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// User + system CPU seconds of process `pid` so far.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Counted from the state (field 3): utime is field 14, stime 15.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok());
    // SAFETY: sysconf has no preconditions.
    let tck = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    field(11).zip(field(12)).map_or(f64::NAN, |(u, s)| (u + s) as f64 / tck)
}

fn bpf(round_trips: usize, busy_poll_us: u32, own_core: bool) {
    if testutil::skip("bpf round trip") {
        return;
    }
    let cpus = affinity::allowed_cpus().unwrap();
    let agent_cpu = match (own_core, cpus.as_slice()) {
        (false, _) => None,
        (true, [_, .., last]) => Some(*last),
        (true, _) => {
            eprintln!("bpf round trip on a core of its own: skipped, one CPU only");
            return;
        }
    };
    let spin = busy_poll_us.to_string();
    let cpu_arg = agent_cpu.map(|c| c.to_string());
    let cpu_flags: Vec<&str> = cpu_arg.iter().flat_map(|c| ["--cpu", c.as_str()]).collect();
    let out = std::env::temp_dir().join(format!("polycc-rt-{}.json", std::process::id()));
    let ctl = std::env::temp_dir().join(format!("polycc-rt-{}.ctl", std::process::id()));
    let child = agent(
        &[
            "--datapath",
            "bpf",
            "--bpf-no-pin",
            "--alg",
            "cubic",
            "--report-interval",
            "1ms",
            "--control-socket",
            ctl.to_str().unwrap(),
            "--bpf-latency-out",
            out.to_str().unwrap(),
            "--bpf-busy-poll-us",
            &spin,
        ]
        .into_iter()
        .chain(cpu_flags)
        .collect::<Vec<_>>(),
    );
    let up = testutil::wait_for(Duration::from_secs(10), || {
        polycc_bpf::available_congestion_controls().iter().any(|c| c == polycc_bpf::CA_NAME).then_some(())
    });
    assert!(up.is_some(), "the agent registered polycc_bpf");
    let stop_flag = traffic(polycc_bpf::CA_NAME, agent_cpu);
    // About 1,000 reports a second per flow at 1 ms; run until enough, at most 120 s.
    let start = Instant::now();
    let per_sec = 1000.0 * f64::from(FLOWS) * 0.8;
    let need = Duration::from_secs_f64((round_trips as f64 / per_sec).max(2.0) * 1.1).min(Duration::from_secs(120));
    let cpu0 = cpu_seconds(child.id());
    let t0 = Instant::now();
    std::thread::sleep(need);
    let cores = (cpu_seconds(child.id()) - cpu0) / t0.elapsed().as_secs_f64();
    stop(child);
    stop_flag.store(true, Ordering::Relaxed);
    let text = std::fs::read_to_string(&out).expect("the agent wrote --bpf-latency-out");
    println!(
        "{{\"datapath\":\"bpf\",\"busy_poll_us\":{busy_poll_us},\"agent_cpu\":{},\"agent_cores\":{cores:.3},\"seconds\":{:.1},\"agent\":{}}}",
        agent_cpu.map_or("null".to_owned(), |c| c.to_string()),
        start.elapsed().as_secs_f64(),
        text.trim()
    );
    let _ = std::fs::remove_file(&out);
}

fn main() {
    // `cargo bench` passes `--bench`; a bare number is the round-trip count.
    let round_trips = std::env::args().skip(1).find_map(|a| a.parse::<usize>().ok()).unwrap_or(DEFAULT_ROUND_TRIPS);
    // This process's first program has the agent's uid (1) and layout; a second compile would
    // have uid 2, and the agent would ignore its reports as another program's.
    let program = Program::compile().unwrap();
    unix(&program, round_trips, false);
    unix(&program, round_trips, true);
    bpf(round_trips, 0, false);
    // Spinning shorter than the gaps between reports (8 flows, one report a millisecond each)
    // still sleeps between bursts; 2 ms spans them, for one core's worth of CPU.
    bpf(round_trips, 200, false);
    bpf(round_trips, 2000, false);
    bpf(round_trips, 2000, true);
}
