//! `polycc flows --watch`: the flows table redrawn every interval, each flow with a sparkline of
//! its throughput over the last frames.

use crate::sparkline::{series_max, sparkline};
use crate::{ask, flows_table, nap, stop_flag, Cli, Failure};
use polycc_agent::control::{FlowRow, Request};
use std::collections::{HashMap, VecDeque};
use std::io::{IsTerminal, Write};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Frames of throughput each flow's sparkline shows.
pub const HISTORY_FRAMES: usize = 30;

/// Each live flow's throughput over the last [`HISTORY_FRAMES`] frames, newest last, kept by the
/// client from frame to frame (the agent keeps no such history). Keyed by (datapath, flow); a
/// flow that leaves the table leaves the history.
#[derive(Debug, Default)]
pub struct ThroughputHistory {
    by_flow: HashMap<(String, u32), VecDeque<f64>>,
}

impl ThroughputHistory {
    /// Add this frame's figures and forget the flows that are gone.
    pub fn update(&mut self, flows: &[FlowRow]) {
        let mut next = HashMap::with_capacity(flows.len());
        for f in flows {
            let key = (f.datapath.clone(), f.flow);
            let mut series = self.by_flow.remove(&key).unwrap_or_default();
            if series.len() == HISTORY_FRAMES {
                series.pop_front();
            }
            series.push_back(f.throughput_bytes_per_sec);
            next.insert(key, series);
        }
        self.by_flow = next;
    }

    /// The flow's sparkline, on its own scale (0 to its largest throughput in the history),
    /// right-aligned in [`HISTORY_FRAMES`] columns so every row's newest frame lines up.
    pub fn sparkline(&self, f: &FlowRow) -> String {
        let series: Vec<Option<f64>> = self
            .by_flow
            .get(&(f.datapath.clone(), f.flow))
            .map_or(Vec::new(), |s| s.iter().map(|&v| Some(v)).collect());
        format!("{:>HISTORY_FRAMES$}", sparkline(&series, series_max(&series)))
    }
}

/// `flows --watch`: clear the screen and redraw every `interval` until ^C. `--json` prints
/// one JSON array per line instead; into a pipe or file, each table follows the last.
pub fn watch_flows(cli: &Cli, interval: Duration) -> Result<String, Failure> {
    let stop = stop_flag()?;
    let mut out = std::io::stdout();
    let terminal = out.is_terminal();
    let mut history = ThroughputHistory::default();
    while !stop.load(Ordering::SeqCst) {
        let flows = ask(cli, &Request::Flows {})?.flows.unwrap_or_default();
        history.update(&flows);
        let text = watch_frame(&flows, &history, cli.json, terminal, interval);
        if out.write_all(text.as_bytes()).and_then(|()| out.flush()).is_err() {
            break; // stdout closed (e.g. `| head`)
        }
        nap(interval, &stop);
    }
    Ok(String::new())
}

/// One `--watch` redraw: JSON on one line; a table after home-and-clear on a terminal, and
/// without escape codes (a blank line between tables) into a pipe or a file.
pub fn watch_frame(
    flows: &[FlowRow],
    history: &ThroughputHistory,
    json: bool,
    terminal: bool,
    interval: Duration,
) -> String {
    if json {
        return serde_json::to_string(flows).unwrap_or_default() + "\n";
    }
    let body = if flows.is_empty() {
        "no flows\n".to_string()
    } else {
        flows_table(flows, Some(("HISTORY", &|f: &FlowRow| history.sparkline(f))))
    };
    let table = format!(
        "{} flows, every {interval:?} (^C to stop); HISTORY: throughput over the last {HISTORY_FRAMES} frames, \
         each flow from 0 to its own peak\n{body}",
        flows.len()
    );
    if terminal {
        format!("\x1b[H\x1b[2J{table}")
    } else {
        format!("{table}\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(datapath: &str, flow: u32, throughput_bytes_per_sec: f64) -> FlowRow {
        FlowRow {
            flow,
            datapath: datapath.into(),
            policy: "reno".into(),
            pilot: "reno".into(),
            throughput_bytes_per_sec,
            ..FlowRow::default()
        }
    }

    /// Issue 20: `flows --watch` wrote the terminal's home-and-clear codes into pipes.
    #[test]
    fn watch_writes_escape_codes_to_a_terminal_only() {
        let every = Duration::from_secs(1);
        let h = ThroughputHistory::default();
        let tty = watch_frame(&[], &h, false, true, every);
        assert!(tty.starts_with("\x1b[H\x1b[2J0 flows, every 1s"), "{tty:?}");
        let piped = watch_frame(&[], &h, false, false, every);
        assert!(
            !piped.contains('\x1b') && piped.starts_with("0 flows, every 1s") && piped.ends_with("\n\n"),
            "{piped:?}"
        );
        assert_eq!(watch_frame(&[], &h, true, true, every), "[]\n", "JSON is one line either way");
    }

    /// Each flow's sparkline follows its own throughput frame by frame, on its own scale; a
    /// flow that goes away takes its history with it, and the same id on another datapath is
    /// another flow.
    #[test]
    fn each_flow_keeps_its_own_throughput_history_across_frames() {
        let mut h = ThroughputHistory::default();
        for mbps in [0.0, 4.0, 8.0] {
            h.update(&[row("dp-a", 1, mbps * 125_000.0), row("dp-b", 1, 1e3), row("dp-a", 2, 5e5)]);
        }
        let spark = |h: &ThroughputHistory, f: &FlowRow| h.sparkline(f).trim_start().to_string();
        assert_eq!(spark(&h, &row("dp-a", 1, 0.0)), "▁▅█");
        assert_eq!(spark(&h, &row("dp-b", 1, 0.0)), "███", "a steady flow is flat on its own scale");
        assert_eq!(h.sparkline(&row("dp-a", 1, 0.0)).chars().count(), HISTORY_FRAMES, "right-aligned");
        // Flow 2 leaves, then an id 2 comes back: a new flow, a new history.
        h.update(&[row("dp-a", 1, 1e6)]);
        h.update(&[row("dp-a", 1, 1e6), row("dp-a", 2, 0.0)]);
        assert_eq!(spark(&h, &row("dp-a", 2, 0.0)), "▁");
        assert_eq!(spark(&h, &row("dp-a", 1, 0.0)), "▁▅███");
        // Only the last HISTORY_FRAMES frames.
        for i in 0..HISTORY_FRAMES {
            h.update(&[row("dp-a", 1, if i == 0 { 2e6 } else { 1e6 })]);
        }
        assert_eq!(spark(&h, &row("dp-a", 1, 0.0)), format!("█{}", "▅".repeat(HISTORY_FRAMES - 1)));
    }

    #[test]
    fn a_watch_frame_shows_each_flows_sparkline_in_its_row() {
        let mut h = ThroughputHistory::default();
        let frames = [[2e5, 1e6], [6e5, 1e6], [1e6, 1e6]];
        let mut flows = Vec::new();
        for [a, b] in frames {
            flows = vec![row("dp", 7, a), row("dp", 9, b)];
            h.update(&flows);
        }
        let text = watch_frame(&flows, &h, false, false, Duration::from_secs(1));
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].contains("throughput over the last 30 frames, each flow from 0 to its own peak"), "{text}");
        assert!(lines[1].starts_with("FLOW") && lines[1].ends_with("HISTORY"), "{text}");
        // 0.2, 0.6, 1.0 of the peak: levels 1.4, 4.2, 7 -> ▂▅█.
        assert!(lines[2].starts_with("7 ") && lines[2].ends_with("▂▅█"), "{text}");
        assert!(lines[3].starts_with("9 ") && lines[3].ends_with("███"), "{text}");
        assert!(lines[2].contains("8.00 Mbit/s"), "the current throughput stays: {text}");
    }
}
