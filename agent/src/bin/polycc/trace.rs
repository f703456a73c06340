//! `polycc trace FLOW`: one flow followed through the per-second statistics (the records
//! `polycc stats` prints, filtered to the flow): a line per second as they come, sparklines of
//! the whole trace when it ends, and with `--png` a picture of it (`trace_png.rs`).
//!
//! The trace ends when `--duration` has passed, when the flow leaves the agent's flows table (its
//! last, shorter record is printed first), or on ^C; each ends with status 0.

use crate::sparkline::{columns, series_max, sparkline};
use crate::{ask, exit, fail, mbit, nap, parse_interval, stop_flag, trace_png, Cli, Failure};
use clap::Args;
use polycc_agent::control::{FlowRow, Request};
use polycc_agent::stats::{StatsAnswer, StatsRecord};
use std::fs::File;
use std::io::{Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

pub const TRACE_HELP: &str = "\
Examples:
  polycc trace 7                              # a line per second until the flow closes or ^C
  polycc trace 7 --duration 30s --png flow7.png
  polycc trace 7 --history --duration 1s      # the last 120 s the agent holds, then 1 s more
  polycc trace 7 --json | jq .cwnd_bytes      # the flow's records as JSON lines

Each line is one second of the flow (the agent's per-second record): T, the end of that second
from the start of the trace; CWND and RATE as installed at its end (RATE is the pacing rate;
~ marks an unpaced flow's window / RTT, averaged over the second); RTT min/avg; THROUGHPUT
(acknowledged bytes per second); and for a fused flow MEMBER, the member whose value the
second's last decision took, then each member's share of the second's decisions. When the trace
ends, a sparkline per series (each from 0 to its own peak) sums it up, and --png draws it:
cwnd, rate and throughput, RTT, and the members' shares, over time.";

/// What `polycc trace` takes.
#[derive(Args, Debug)]
pub struct TraceArgs {
    /// The flow's id (FLOW in `polycc flows`).
    pub flow: u32,
    /// The datapath, when several have a flow with this id (DATAPATH in `polycc flows --json`).
    #[arg(long)]
    pub datapath: Option<String>,
    /// Stop after this long (e.g. 30s, 5m); default: when the flow closes, or ^C.
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// When the trace ends, draw it into this PNG (also with --json); checked for writing
    /// before the trace starts.
    #[arg(long, value_name = "PATH")]
    pub png: Option<PathBuf>,
    /// With --png: the picture's width x height in pixels.
    #[arg(long, value_name = "WxH", default_value = "1200x900", value_parser = parse_size, requires = "png")]
    pub png_size: (u32, u32),
    /// Start with the flow's records the agent still holds (its last 120 s), then follow.
    #[arg(long)]
    pub history: bool,
    /// How often to ask the agent for new records.
    #[arg(long, default_value = "1s", value_parser = parse_interval)]
    pub interval: Duration,
}

/// "30s", "500ms", "5m", "1h", or bare seconds: 1 s to 24 h.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let (num, unit) = [("ms", 1e-3), ("s", 1.0), ("m", 60.0), ("h", 3600.0)]
        .into_iter()
        .find_map(|(suffix, unit)| s.strip_suffix(suffix).map(|n| (n, unit)))
        .unwrap_or((s, 1.0));
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v * unit >= 1.0 && v * unit <= 86_400.0 => Ok(Duration::from_secs_f64(v * unit)),
        _ => Err(format!("`{s}` is not a duration between 1s and 24h (e.g. 30s, 5m)")),
    }
}

/// "1200x900": each side 200 to 8000 pixels.
fn parse_size(s: &str) -> Result<(u32, u32), String> {
    let side = |v: &str| v.trim().parse::<u32>().ok().filter(|v| (200..=8000).contains(v));
    match s.split_once(['x', 'X']) {
        Some((w, h)) => side(w).zip(side(h)),
        None => None,
    }
    .ok_or_else(|| format!("`{s}` is not a size WxH with each side 200 to 8000 pixels (e.g. 1200x900)"))
}

/// The records of one flow, as they come.
#[derive(Debug)]
pub struct Trace {
    pub flow: u32,
    pub datapath: String,
    /// "src -> dst, policy", from the flows table.
    pub title: String,
    pub records: Vec<StatsRecord>,
}

impl Trace {
    pub fn of(row: &FlowRow) -> Trace {
        Trace {
            flow: row.flow,
            datapath: row.datapath.clone(),
            title: format!("flow {}: {} -> {}, {}", row.flow, row.src, row.dst, row.policy),
            records: Vec::new(),
        }
    }

    /// Keep the records of this flow from `batch` (every flow's, oldest first); the new ones.
    pub fn add(&mut self, batch: Vec<StatsRecord>) -> &[StatsRecord] {
        let start = self.records.len();
        self.records.extend(batch.into_iter().filter(|r| r.meta.flow == self.flow && r.meta.datapath == self.datapath));
        &self.records[start..]
    }

    /// The start of the first record's second, seconds since the Unix epoch: the time axis' 0.
    pub fn t0(&self) -> f64 {
        self.records.first().map_or(0.0, |r| r.t_unix_s - r.duration_s)
    }

    /// The members a fusion chose from, in the order they first won.
    pub fn members(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for r in &self.records {
            for name in r.fusion_member.iter().chain(r.fusion_win_frac.keys()) {
                if !names.contains(name) {
                    names.push(name.clone());
                }
            }
        }
        names
    }
}

/// The rate a record gives the flow: its pacing rate at the second's end, else (unpaced) the
/// window / RTT averaged over the second; `true` when paced.
pub fn rate(r: &StatsRecord) -> Option<(f64, bool)> {
    match r.pacing_rate_bytes_per_sec {
        Some(p) => Some((p, true)),
        None => r.send_rate_avg_bytes_per_sec.map(|s| (s, false)),
    }
}

pub const HEADER: &str = "    T(s)       CWND          RATE  RTT min/avg ms    THROUGHPUT  MEMBER";

/// One second of the flow, in [`HEADER`]'s columns.
pub fn line(r: &StatsRecord, t0: f64) -> String {
    let ms = |x: Option<f64>| x.map_or("-".into(), |v| format!("{:.1}", v / 1e3));
    let rate = match rate(r) {
        Some((v, paced)) => format!("{}{}", if paced { "" } else { "~" }, mbit(v)),
        None => "-".into(),
    };
    let member = match &r.fusion_member {
        Some(m) => {
            let shares: Vec<String> =
                r.fusion_win_frac.iter().map(|(name, f)| format!("{name} {:.0}%", f * 100.0)).collect();
            format!("{m} ({})", if shares.is_empty() { "no decision".into() } else { shares.join(", ") })
        }
        None => "-".into(),
    };
    format!(
        "{:>8.1}  {:>9}  {:>12}  {:>14}  {:>12}  {member}",
        r.t_unix_s - t0,
        r.cwnd_bytes.map_or("-".into(), |b| format!("{:.1} KB", b as f64 / 1e3)),
        rate,
        format!("{}/{}", ms(r.rtt_min_us), ms(r.rtt_avg_us)),
        mbit(r.throughput_bytes_per_sec)
    )
}

/// How a summary line writes its peak.
type Unit = dyn Fn(f64) -> String;

/// Columns of the summary's sparklines, at most.
const SUMMARY_WIDTH: usize = 60;

/// The whole trace in a few lines: a sparkline per series, each from 0 to its peak, and the
/// member a fusion chose, a letter per second (columns average a long trace's seconds; the
/// member strip shows each column's last second).
pub fn summary(t: &Trace) -> String {
    let Some(last) = t.records.last() else {
        return format!("flow {}: no records (the agent makes one per flow per second)\n", t.flow);
    };
    let mut out = format!(
        "flow {} over {:.1} s, {} records (each line from 0 to its peak):\n",
        t.flow,
        last.t_unix_s - t.t0(),
        t.records.len()
    );
    let series = |f: &dyn Fn(&StatsRecord) -> Option<f64>| -> Vec<Option<f64>> { t.records.iter().map(f).collect() };
    let rows: [(&str, Vec<Option<f64>>, &Unit); 4] = [
        ("cwnd", series(&|r| r.cwnd_bytes.map(|b| b as f64)), &|v| format!("{:.1} KB", v / 1e3)),
        ("rate", series(&|r| rate(r).map(|(v, _)| v)), &mbit),
        ("throughput", series(&|r| Some(r.throughput_bytes_per_sec)), &mbit),
        ("rtt avg", series(&|r| r.rtt_avg_us), &|v| format!("{:.1} ms", v / 1e3)),
    ];
    for (name, values, unit) in rows {
        let peak = series_max(&values);
        let spark = sparkline(&columns(&values, SUMMARY_WIDTH), peak);
        out += &format!("  {name:<10}  {spark}  peak {}\n", unit(peak));
    }
    let members = t.members();
    if !members.is_empty() {
        let letter = |i: usize| char::from(b'A' + (i % 26) as u8);
        let n = t.records.len();
        let width = n.min(SUMMARY_WIDTH);
        let strip: String = (0..width)
            .map(|c| {
                let r = &t.records[((c + 1) * n / width).saturating_sub(1)];
                r.fusion_member.as_ref().and_then(|m| members.iter().position(|x| x == m)).map_or(' ', letter)
            })
            .collect();
        let legend: Vec<String> = members.iter().enumerate().map(|(i, m)| format!("{} {m}", letter(i))).collect();
        out += &format!("  {:<10}  {strip}  {}\n", "member", legend.join(", "));
    }
    out
}

/// The one live flow `id` (on `datapath`, when given).
fn find_flow<'a>(flows: &'a [FlowRow], id: u32, datapath: Option<&str>) -> Result<&'a FlowRow, Failure> {
    let found: Vec<&FlowRow> =
        flows.iter().filter(|f| f.flow == id && datapath.is_none_or(|d| f.datapath == d)).collect();
    match found.as_slice() {
        [one] => Ok(one),
        [] => Err(fail(
            exit::NO_SUCH_FLOW,
            match datapath {
                Some(d) => format!("no live flow {id} on datapath {d} (see `polycc flows --json`)"),
                None => format!("no live flow {id} (see `polycc flows`)"),
            },
        )),
        many => Err(fail(
            exit::AMBIGUOUS_FLOW,
            format!(
                "flow {id} is on several datapaths ({}): pass --datapath",
                many.iter().map(|f| f.datapath.as_str()).collect::<Vec<_>>().join(", ")
            ),
        )),
    }
}

/// `--png`'s file, opened for writing now so that a path it cannot write fails before the
/// trace starts rather than after it (an existing file is replaced only at the end).
fn open_png(path: &Path) -> Result<File, Failure> {
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| fail(exit::OUTPUT, format!("cannot write --png {}: {e}", path.display())))
}

fn write_png(mut file: &File, png: &[u8]) -> std::io::Result<()> {
    file.set_len(0)?;
    file.rewind()?;
    file.write_all(png)?;
    file.sync_all()
}

fn poll(cli: &Cli, since: Option<u64>) -> Result<StatsAnswer, Failure> {
    let answer = ask(cli, &Request::Stats { since })?.stats;
    Ok(answer.unwrap_or(StatsAnswer { next: since.unwrap_or(0), ..StatsAnswer::default() }))
}

/// Why a trace ended.
enum End {
    Duration,
    FlowClosed,
    Interrupted,
    StdoutClosed,
}

/// `polycc trace`: follow, print, and at the end sum up and draw.
pub fn trace(cli: &Cli, a: &TraceArgs) -> Result<String, Failure> {
    let png = a.png.as_deref().map(open_png).transpose()?;
    let flows = ask(cli, &Request::Flows {})?.flows.unwrap_or_default();
    let mut trace = Trace::of(find_flow(&flows, a.flow, a.datapath.as_deref())?);
    let stop = stop_flag()?;
    let start = Instant::now();
    let mut cursor = if a.history { 0 } else { poll(cli, None)?.next };
    let mut out = std::io::stdout();
    let mut print = |text: &str| out.write_all(text.as_bytes()).and_then(|()| out.flush()).is_ok();
    if !cli.json {
        print(&format!("{} (^C to stop)\n{HEADER}\n", trace.title));
    }
    let end = loop {
        let flows = ask(cli, &Request::Flows {})?.flows.unwrap_or_default();
        let closed = !flows.iter().any(|f| f.flow == trace.flow && f.datapath == trace.datapath);
        // After the flows table: a closed flow's last record is already held.
        let answer = poll(cli, Some(cursor))?;
        cursor = answer.next;
        if answer.missed > 0 {
            eprintln!("warning: {} records were dropped before they could be read (poll more often)", answer.missed);
        }
        let held = trace.records.len();
        trace.add(answer.records);
        let (t0, new) = (trace.t0(), &trace.records[held..]);
        let text: String = if cli.json {
            new.iter().map(|r| serde_json::to_string(r).unwrap_or_default() + "\n").collect()
        } else {
            new.iter().map(|r| line(r, t0) + "\n").collect()
        };
        if !print(&text) {
            break End::StdoutClosed;
        }
        let left = a.duration.map(|d| d.saturating_sub(start.elapsed()));
        match (closed, left, stop.load(Ordering::SeqCst)) {
            (true, _, _) => break End::FlowClosed,
            (_, Some(Duration::ZERO), _) => break End::Duration,
            (_, _, true) => break End::Interrupted,
            _ => nap(left.map_or(a.interval, |l| l.min(a.interval)), &stop),
        }
    };
    let mut report = String::new();
    if !cli.json && !matches!(end, End::StdoutClosed) {
        if matches!(end, End::FlowClosed) {
            report += &format!("flow {} closed\n", trace.flow);
        }
        report += &summary(&trace);
    }
    if let (Some(file), Some(path)) = (png, &a.png) {
        let drawn = trace_png::render(&trace, a.png_size)
            .map_err(|e| fail(exit::OUTPUT, format!("cannot draw --png {}: {e}", path.display())))?;
        write_png(&file, &drawn)
            .map_err(|e| fail(exit::OUTPUT, format!("cannot write --png {}: {e}", path.display())))?;
        let note =
            format!("wrote {} ({}x{}, {} records)\n", path.display(), a.png_size.0, a.png_size.1, trace.records.len());
        if cli.json {
            eprint!("{note}");
        } else {
            report += &note;
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use polycc_agent::stats::FlowMeta;
    use std::collections::BTreeMap;

    /// A second of flow `flow` on `datapath` ending at `t`.
    pub fn record(datapath: &str, flow: u32, t: f64) -> StatsRecord {
        StatsRecord {
            seq: t as u64,
            t_unix_s: 1_000.0 + t,
            duration_s: 1.0,
            meta: FlowMeta { datapath: datapath.into(), flow, ..FlowMeta::default() },
            ..StatsRecord::default()
        }
    }

    fn row(datapath: &str, flow: u32) -> FlowRow {
        FlowRow {
            flow,
            datapath: datapath.into(),
            src: "10.0.0.1:40000".into(),
            dst: "10.1.0.1:5201".into(),
            policy: "reno".into(),
            ..FlowRow::default()
        }
    }

    #[test]
    fn the_trace_keeps_its_flows_records_from_every_flows_stream() {
        let mut t = Trace::of(&row("dp-a", 7));
        let batch =
            vec![record("dp-a", 7, 1.0), record("dp-a", 8, 1.0), record("dp-b", 7, 1.0), record("dp-a", 7, 2.0)];
        let new: Vec<f64> = t.add(batch).iter().map(|r| r.t_unix_s).collect();
        assert_eq!(new, [1_001.0, 1_002.0], "flow 8, and flow 7 of another datapath, are not this flow");
        assert_eq!(t.add(vec![record("dp-b", 7, 3.0)]), &[] as &[StatsRecord]);
        assert_eq!(t.add(vec![record("dp-a", 7, 3.0)]).len(), 1);
        assert_eq!((t.records.len(), t.t0()), (3, 1_000.0));
        assert_eq!(t.title, "flow 7: 10.0.0.1:40000 -> 10.1.0.1:5201, reno");
    }

    #[test]
    fn a_line_shows_the_seconds_window_rate_rtt_throughput_and_member() {
        let fused = StatsRecord {
            cwnd_bytes: Some(14_480),
            pacing_rate_bytes_per_sec: Some(1.25e6),
            rtt_min_us: Some(50_000.0),
            rtt_avg_us: Some(62_500.0),
            throughput_bytes_per_sec: 1e6,
            fusion_member: Some("cubic".into()),
            fusion_win_frac: BTreeMap::from([("bbr".into(), 0.25), ("cubic".into(), 0.75)]),
            ..record("dp", 7, 3.0)
        };
        assert_eq!(
            line(&fused, 1_000.0),
            "     3.0    14.5 KB  10.00 Mbit/s       50.0/62.5   8.00 Mbit/s  cubic (bbr 25%, cubic 75%)"
        );
        let header_columns: Vec<usize> =
            ["T(s)", "CWND", "RATE", "ms", "THROUGHPUT"].iter().map(|h| HEADER.find(h).unwrap() + h.len()).collect();
        let text = line(&fused, 1_000.0);
        let value_columns: Vec<usize> =
            ["3.0", "KB", "Mbit/s", "62.5", "8.00 Mbit/s"].iter().map(|v| text.find(v).unwrap() + v.len()).collect();
        assert_eq!(header_columns, value_columns, "right-aligned under the header");
        let unpaced =
            StatsRecord { cwnd_bytes: Some(30_000), send_rate_avg_bytes_per_sec: Some(2.5e5), ..record("dp", 7, 1.5) };
        assert_eq!(line(&unpaced, 1_000.0), "     1.5    30.0 KB  ~2.00 Mbit/s             -/-   0.00 Mbit/s  -");
    }

    #[test]
    fn the_summary_draws_each_series_and_the_members_a_letter_a_second() {
        let mut t = Trace::of(&row("dp", 7));
        let seconds = (1..=4).map(|i| StatsRecord {
            cwnd_bytes: Some(10_000 * i),
            throughput_bytes_per_sec: 125_000.0 * i as f64,
            rtt_avg_us: Some(40_000.0),
            fusion_member: Some(if i < 3 { "bbr" } else { "cubic" }.into()),
            ..record("dp", 7, i as f64)
        });
        t.add(seconds.collect());
        let s = summary(&t);
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[0], "flow 7 over 4.0 s, 4 records (each line from 0 to its peak):");
        assert_eq!(lines[1], "  cwnd        ▃▅▆█  peak 40.0 KB");
        assert_eq!(lines[2], format!("  rate        {}  peak 0.00 Mbit/s", " ".repeat(4)), "no rate: gaps");
        assert_eq!(lines[3], "  throughput  ▃▅▆█  peak 4.00 Mbit/s");
        assert_eq!(lines[4], "  rtt avg     ████  peak 40.0 ms");
        assert_eq!(lines[5], "  member      AABB  A bbr, B cubic");
        assert_eq!(
            summary(&Trace::of(&row("dp", 7))),
            "flow 7: no records (the agent makes one per flow per second)\n"
        );
    }

    #[test]
    fn a_flow_is_found_by_id_and_datapath_or_the_exit_status_says_why_not() {
        let flows = [row("dp-a", 7), row("dp-b", 7), row("dp-a", 8)];
        assert_eq!(find_flow(&flows, 8, None).ok().map(|f| f.datapath.as_str()), Some("dp-a"));
        assert_eq!(find_flow(&flows, 7, Some("dp-b")).ok().map(|f| f.datapath.as_str()), Some("dp-b"));
        let e = find_flow(&flows, 7, None).err().unwrap();
        assert_eq!(
            (e.code, e.message.as_str()),
            (exit::AMBIGUOUS_FLOW, "flow 7 is on several datapaths (dp-a, dp-b): pass --datapath")
        );
        let e = find_flow(&flows, 9, None).err().unwrap();
        assert_eq!((e.code, e.message.as_str()), (exit::NO_SUCH_FLOW, "no live flow 9 (see `polycc flows`)"));
        assert_eq!(find_flow(&flows, 8, Some("dp-b")).err().unwrap().code, exit::NO_SUCH_FLOW);
    }

    #[test]
    fn durations_and_sizes_parse_within_their_bounds() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert!(parse_duration("100ms").is_err() && parse_duration("25h").is_err() && parse_duration("x").is_err());
        assert_eq!(parse_size("800x600"), Ok((800, 600)));
        assert!(parse_size("100x600").is_err() && parse_size("800").is_err() && parse_size("axb").is_err());
    }
}
