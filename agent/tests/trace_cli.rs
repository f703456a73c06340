//! `polycc trace` end to end against a scripted control socket: the real `polycc` binary, and in
//! place of the agent a thread that answers `flows` and `stats` from a script, so the records and
//! so the printed values are known exactly.

use polycc_agent::control::{FlowRow, Request, Response};
use polycc_agent::stats::{FlowMeta, StatsAnswer, StatsRecord};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

const RECORDS_PER_FLOW: u64 = 4;

/// The agent's side of the script: flows 7 and 8 live; each `stats` poll after the first
/// releases one more second (a record of each flow); flow 7 leaves the table once its last
/// second is out.
#[derive(Default)]
struct Script {
    released: u64,
    requests: Vec<String>,
}

fn record(flow: u32, second: u64) -> StatsRecord {
    let fused = flow == 7;
    StatsRecord {
        seq: 2 * second - u64::from(fused),
        t_unix_s: 1_000.0 + second as f64,
        duration_s: 1.0,
        meta: FlowMeta {
            datapath: "Unix".into(),
            flow,
            src: "10.0.0.1:40000".into(),
            dst: "10.1.0.1:5201".into(),
            policy: if fused { "fused(bbr+cubic,max cwnd)" } else { "reno" }.into(),
            ..FlowMeta::default()
        },
        throughput_bytes_per_sec: 250_000.0 * second as f64,
        rtt_min_us: Some(40_000.0),
        rtt_avg_us: Some(40_000.0 + 5_000.0 * second as f64),
        cwnd_bytes: Some(10_000 * second),
        pacing_rate_bytes_per_sec: fused.then_some(500_000.0),
        send_rate_avg_bytes_per_sec: Some(400_000.0),
        fusion_member: fused.then(|| if second <= 2 { "bbr" } else { "cubic" }.into()),
        fusion_win_frac: if fused {
            BTreeMap::from([
                ("bbr".into(), 1.0 - 0.25 * (second - 1) as f64),
                ("cubic".into(), 0.25 * (second - 1) as f64),
            ])
        } else {
            BTreeMap::new()
        },
        ..StatsRecord::default()
    }
}

fn row(flow: u32) -> FlowRow {
    let r = record(flow, 1);
    FlowRow {
        flow,
        datapath: r.meta.datapath,
        src: r.meta.src,
        dst: r.meta.dst,
        policy: r.meta.policy,
        ..FlowRow::default()
    }
}

impl Script {
    fn answer(&mut self, req: Request) -> Response {
        match req {
            Request::Flows {} => {
                let live = [(7, self.released < RECORDS_PER_FLOW), (8, true)];
                Response {
                    ok: true,
                    flows: Some(live.iter().filter(|l| l.1).map(|l| row(l.0)).collect()),
                    ..Default::default()
                }
            }
            Request::Stats { since } => {
                if since.is_some() {
                    self.released = (self.released + 1).min(RECORDS_PER_FLOW);
                }
                let held: Vec<StatsRecord> = (1..=self.released)
                    .flat_map(|s| [record(7, s), record(8, s)])
                    .filter(|r| r.seq > since.unwrap_or(0))
                    .collect();
                let next = held.last().map_or(since.unwrap_or(2 * self.released), |r| r.seq);
                Response { ok: true, stats: Some(StatsAnswer { records: held, next, missed: 0 }), ..Default::default() }
            }
            _ => Response::default(),
        }
    }
}

/// A scripted agent on a fresh socket; the requests it saw, as JSON lines.
fn scripted_agent(name: &str) -> (PathBuf, Arc<Mutex<Script>>) {
    let dir = std::env::temp_dir().join(format!("polycc-trace-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("control.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let script = Arc::new(Mutex::new(Script::default()));
    let serving = Arc::clone(&script);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let mut line = String::new();
            if BufReader::new(&stream).read_line(&mut line).is_err() {
                continue;
            }
            let mut s = serving.lock().unwrap();
            s.requests.push(line.trim().to_string());
            let answer = s.answer(serde_json::from_str(&line).unwrap());
            let _ = (&stream).write_all((serde_json::to_string(&answer).unwrap() + "\n").as_bytes());
        }
    });
    (socket, script)
}

fn polycc(socket: &PathBuf, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_polycc")).arg("--socket").arg(socket).args(args).output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn trace_prints_a_line_per_second_of_the_flow_until_it_closes_then_sums_up_and_draws() {
    let (socket, script) = scripted_agent("follow");
    let png = socket.with_file_name("flow7.png");
    let o =
        polycc(&socket, &["trace", "7", "--interval", "50ms", "--png", png.to_str().unwrap(), "--png-size", "640x480"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let lines: Vec<&str> = out.lines().collect();
    let expected = [
        "flow 7: 10.0.0.1:40000 -> 10.1.0.1:5201, fused(bbr+cubic,max cwnd) (^C to stop)",
        "    T(s)       CWND          RATE  RTT min/avg ms    THROUGHPUT  MEMBER",
        "     1.0    10.0 KB   4.00 Mbit/s       40.0/45.0   2.00 Mbit/s  bbr (bbr 100%, cubic 0%)",
        "     2.0    20.0 KB   4.00 Mbit/s       40.0/50.0   4.00 Mbit/s  bbr (bbr 75%, cubic 25%)",
        "     3.0    30.0 KB   4.00 Mbit/s       40.0/55.0   6.00 Mbit/s  cubic (bbr 50%, cubic 50%)",
        "     4.0    40.0 KB   4.00 Mbit/s       40.0/60.0   8.00 Mbit/s  cubic (bbr 25%, cubic 75%)",
        "flow 7 closed",
        "flow 7 over 4.0 s, 4 records (each line from 0 to its peak):",
        "  cwnd        ▃▅▆█  peak 40.0 KB",
        "  rate        ████  peak 4.00 Mbit/s",
        "  throughput  ▃▅▆█  peak 8.00 Mbit/s",
        "  rtt avg     ▆▇▇█  peak 60.0 ms",
        "  member      AABB  A bbr, B cubic",
    ];
    assert_eq!(lines[..expected.len()], expected, "{out}");
    assert_eq!(lines[expected.len()], format!("wrote {} (640x480, 4 records)", png.display()));
    let decoder = png::Decoder::new(std::io::Cursor::new(std::fs::read(&png).unwrap()));
    let info = decoder.read_info().unwrap();
    assert_eq!((info.info().width, info.info().height), (640, 480));
    // It followed from "now" (a stats poll without `since`), then polled with the cursor.
    let requests = script.lock().unwrap().requests.clone();
    assert_eq!(requests[..2], [r#"{"cmd":"flows"}"#, r#"{"cmd":"stats"}"#], "{requests:#?}");
    assert!(requests.contains(&r#"{"cmd":"stats","since":2}"#.to_string()), "{requests:#?}");
    let _ = std::fs::remove_dir_all(socket.parent().unwrap());
}

#[test]
fn trace_json_prints_the_flows_records_alone() {
    let (socket, _) = scripted_agent("json");
    let o = polycc(&socket, &["trace", "7", "--json", "--interval", "50ms"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let records: Vec<StatsRecord> = text(&o.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(records, (1..=RECORDS_PER_FLOW).map(|s| record(7, s)).collect::<Vec<_>>());
    let _ = std::fs::remove_dir_all(socket.parent().unwrap());
}

#[test]
fn trace_refuses_an_unknown_flow_and_an_unwritable_png_before_following() {
    let (socket, script) = scripted_agent("errors");
    let o = polycc(&socket, &["trace", "9"]);
    assert_eq!(o.status.code(), Some(15), "no such flow: {}", text(&o.stderr));
    assert_eq!(text(&o.stderr), "polycc: no live flow 9 (see `polycc flows`)\n");
    let o = polycc(&socket, &["trace", "7", "--datapath", "Netlink"]);
    assert_eq!(o.status.code(), Some(15), "{}", text(&o.stderr));

    let seen = script.lock().unwrap().requests.len();
    let o = polycc(&socket, &["trace", "7", "--png", "/nonexistent-polycc-dir/flow7.png"]);
    assert_eq!(o.status.code(), Some(18), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).starts_with("polycc: cannot write --png /nonexistent-polycc-dir/flow7.png: "),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(script.lock().unwrap().requests.len(), seen, "refused before asking the agent anything");

    let o = polycc(&socket, &["trace", "7", "--png-size", "800x600"]);
    assert_eq!(o.status.code(), Some(2), "--png-size means nothing without --png: {}", text(&o.stderr));
    let o = polycc(&socket, &["trace", "7", "--duration", "0s"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let _ = std::fs::remove_dir_all(socket.parent().unwrap());
}
