//! `polycc-ipc-baseline`: the unix-socket round trip that the netlink path through `ccp.ko` is
//! compared with (the CCP paper's baseline). A "datapath" thread sends a report-sized datagram,
//! an "agent" thread answers with an update-sized one; prints the round trip's percentiles.
//!
//! ```text
//! polycc-ipc-baseline [MESSAGES]      # default 100000; prints one JSON object
//! ```

use std::os::unix::net::UnixDatagram;
use std::time::Instant;

/// A MEASURE with 16 fields (header, uid, count, 16 x u64) and an UPDATE_FIELDS with 2 updates,
/// the sizes polycc-portus exchanges per report.
const REPORT_BYTES: usize = 16 + 16 * 8;
const UPDATE_BYTES: usize = 12 + 2 * 13;

fn percentile(sorted_us: &[f64], p: f64) -> f64 {
    let i = ((p / 100.0) * (sorted_us.len() - 1) as f64).round() as usize;
    sorted_us[i.min(sorted_us.len() - 1)]
}

fn main() -> std::io::Result<()> {
    let n: usize = match std::env::args().nth(1) {
        None => 100_000,
        Some(s) => match s.parse() {
            Ok(n) if n > 0 => n,
            _ => {
                eprintln!("polycc-ipc-baseline: MESSAGES must be a positive integer, got `{s}`");
                std::process::exit(2);
            }
        },
    };
    let (datapath, agent) = UnixDatagram::pair()?;
    let echo = std::thread::spawn(move || -> std::io::Result<()> {
        let mut buf = [0u8; 2048];
        let reply = [7u8; UPDATE_BYTES];
        for _ in 0..n {
            agent.recv(&mut buf)?;
            agent.send(&reply)?;
        }
        Ok(())
    });
    let report = [1u8; REPORT_BYTES];
    let mut buf = [0u8; 2048];
    let mut rtts = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        datapath.send(&report)?;
        datapath.recv(&mut buf)?;
        rtts.push(t.elapsed().as_secs_f64() * 1e6);
    }
    echo.join().expect("echo thread")?;
    rtts.sort_by(f64::total_cmp);
    println!(
        "{{\"messages\":{n},\"p50_us\":{:.2},\"p95_us\":{:.2},\"p99_us\":{:.2}}}",
        percentile(&rtts, 50.0),
        percentile(&rtts, 95.0),
        percentile(&rtts, 99.0)
    );
    Ok(())
}
