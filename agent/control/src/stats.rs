//! Per-flow per-second statistics: what `polycc stats --json` prints and what `polycc-tune`
//! consumes. One [`StatsRecord`] per live flow per second, computed by the agent loop from the
//! flow's reports over that second.
//!
//! Control socket: `{"cmd":"stats","since":SEQ}` answers the records with `seq > SEQ` still
//! held (the agent keeps the last [`STATS_HISTORY_SECS`] seconds), oldest first, and `next`, the
//! SEQ to ask with next time; `since` absent means "everything held".
//!
//! Compatibility: fields are only ever added, each with a serde default, so a client reads the
//! records of an older agent (the newer fields come out `None` or empty), and an older client
//! reads a newer agent's (serde passes over the fields it does not know).

use polycc_algorithms::{Rate, Report};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Seconds of records the agent holds for clients that poll.
pub const STATS_HISTORY_SECS: usize = 120;

/// One flow over one second (the last interval may be shorter: `duration_s`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StatsRecord {
    /// Increases by one per record, across flows; a poller's cursor.
    pub seq: u64,
    /// End of the interval, seconds since the Unix epoch.
    pub t_unix_s: f64,
    /// Length of the interval the figures cover.
    pub duration_s: f64,
    /// Which flow: its fields sit at the record's top level on the wire.
    #[serde(flatten)]
    pub meta: FlowMeta,
    /// Acknowledged bytes over the interval, per second.
    pub throughput_bytes_per_sec: f64,
    /// The sending rate reported over the interval (bytes/s); `None` with no report carrying one.
    pub send_rate_min_bytes_per_sec: Option<f64>,
    pub send_rate_avg_bytes_per_sec: Option<f64>,
    pub send_rate_max_bytes_per_sec: Option<f64>,
    /// Lost / (lost + delivered) packets over the interval; 0 with no traffic.
    pub loss_frac: f64,
    pub rtt_min_us: Option<f64>,
    pub rtt_avg_us: Option<f64>,
    /// Seconds of the interval the flow's controller spent in slow start.
    pub slow_start_s: f64,
    /// Seconds of the interval the flow was application-limited.
    pub app_limited_s: f64,
    /// The window installed on the flow at the interval's end; `None` before its first report
    /// (and from agents older than the field).
    #[serde(default)]
    pub cwnd_bytes: Option<u64>,
    /// The pacing rate installed on the flow at the interval's end; `None`: not paced.
    #[serde(default)]
    pub pacing_rate_bytes_per_sec: Option<f64>,
    /// A fused flow: the member (pilot or copilot, by algorithm name) whose value the
    /// interval's last decision took; `None` for a single algorithm.
    #[serde(default)]
    pub fusion_member: Option<String>,
    /// A fused flow: per member, the fraction (0..1) of the interval's decisions that took its
    /// value (they add up to 1; two members of one algorithm count together); empty for a
    /// single algorithm or an interval without a report.
    #[serde(default)]
    pub fusion_win_frac: BTreeMap<String, f64>,
}

/// Records held at most, whatever the flow count: 120 s of 512 flows. A poller whose cursor
/// fell behind this is told how many it missed (`StatsAnswer::missed`).
pub const STATS_HISTORY_MAX_RECORDS: usize = STATS_HISTORY_SECS * 512;

/// How often the agent loop closes every flow's interval and makes its record.
pub const STATS_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// One report, as the statistics need it: [`ReportSample::of`] in the agent, built from other
/// sources by `polycc-tune`'s simulator environment.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ReportSample {
    /// The report's interval, datapath time.
    pub interval_s: f64,
    pub acked_bytes: u64,
    pub acked_packets: u64,
    pub lost_packets: u64,
    pub rtt_min_us: Option<f64>,
    /// Sum and count of the report's RTT samples.
    pub rtt_sum_us: f64,
    pub rtt_samples: u64,
    /// The rate the flow was allowed to send at over the interval: its pacing rate, else its
    /// window over the report's mean RTT; `None` for an unpaced report without RTT.
    pub send_rate: Option<Rate>,
    /// The controller was in slow start for this report.
    pub slow_start: bool,
    /// The report's [`Report::app_limited`].
    pub app_limited: bool,
    /// The window installed after the report (bytes).
    pub cwnd_bytes: u64,
    /// The pacing rate installed after the report; `None`: not paced.
    pub pacing: Option<Rate>,
    /// A fusion: the member whose value the decision took
    /// (`CongestionControl::chosen_member`).
    pub chosen_member: Option<&'static str>,
}

impl ReportSample {
    /// What the statistics take from report `r`; `pacing` and `cwnd_bytes` are what the agent
    /// installed after it, `slow_start` whether the controller was in slow start after it and
    /// `chosen_member` which member a fusion took the decision from.
    pub fn of(
        r: &Report,
        pacing: Option<Rate>,
        cwnd_bytes: u32,
        slow_start: bool,
        chosen_member: Option<&'static str>,
    ) -> ReportSample {
        let send_rate = ReportSample::send_rate(pacing, f64::from(cwnd_bytes), r.rtt_mean().map(|d| d.as_secs_f64()));
        ReportSample {
            interval_s: r.interval.as_secs_f64(),
            acked_bytes: r.bytes_acked,
            acked_packets: r.packets_acked,
            lost_packets: r.packets_lost,
            rtt_min_us: r.rtt_min.map(|d| d.as_secs_f64() * 1e6),
            rtt_sum_us: r.rtt_sum.as_secs_f64() * 1e6,
            rtt_samples: r.rtt_samples,
            send_rate,
            slow_start,
            app_limited: r.app_limited,
            cwnd_bytes: u64::from(cwnd_bytes),
            pacing,
            chosen_member,
        }
    }

    /// [`ReportSample::send_rate`] from what the flow was given: its pacing rate, else its
    /// window (bytes) over the report's mean RTT (seconds, > 0).
    pub fn send_rate(pacing: Option<Rate>, cwnd_bytes: f64, rtt_s: Option<f64>) -> Option<Rate> {
        pacing.or_else(|| rtt_s.filter(|r| *r > 0.0).map(|r| Rate::from_bytes_per_sec(cwnd_bytes / r)))
    }
}

/// A flow's running figures for the current interval.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StatsWindow {
    acked_bytes: u64,
    acked_packets: u64,
    lost_packets: u64,
    rtt_min_us: Option<f64>,
    rtt_sum_us: f64,
    rtt_samples: u64,
    rate_min: Option<f64>,
    rate_max: Option<f64>,
    rate_sum: f64,
    rate_n: u64,
    slow_start_s: f64,
    app_limited_s: f64,
    /// Per member, the decisions that took its value (a fusion), in first-win order.
    wins: Vec<(&'static str, u64)>,
    /// As the last report left the flow; kept from one interval to the next (a quiet interval
    /// ends with what the one before left installed).
    last: Option<LastReport>,
}

/// What the last report left installed on the flow.
#[derive(Clone, Copy, Debug, PartialEq)]
struct LastReport {
    cwnd_bytes: u64,
    pacing_bytes_per_sec: Option<f64>,
    chosen_member: Option<&'static str>,
}

/// What identifies a flow in its records.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FlowMeta {
    pub datapath: String,
    pub flow: u32,
    /// "addr:port" as in `polycc flows`.
    pub src: String,
    pub dst: String,
    pub cong_alg: String,
    /// The rule that chose the flow's policy; `None`: the default from the flags.
    pub rule: Option<u32>,
    /// The policy in the flows table's form (e.g. "vivace", "fused(bbr+cubic,max cwnd)").
    pub policy: String,
}

fn fmin(a: Option<f64>, b: f64) -> f64 {
    a.map_or(b, |a| a.min(b))
}

fn fmax(a: Option<f64>, b: f64) -> f64 {
    a.map_or(b, |a| a.max(b))
}

impl StatsWindow {
    pub fn add(&mut self, r: &ReportSample) {
        self.acked_bytes = self.acked_bytes.saturating_add(r.acked_bytes);
        self.acked_packets = self.acked_packets.saturating_add(r.acked_packets);
        self.lost_packets = self.lost_packets.saturating_add(r.lost_packets);
        if let Some(m) = r.rtt_min_us {
            self.rtt_min_us = Some(fmin(self.rtt_min_us, m));
        }
        self.rtt_sum_us += r.rtt_sum_us;
        self.rtt_samples = self.rtt_samples.saturating_add(r.rtt_samples);
        if let Some(rate) = r.send_rate.map(Rate::bytes_per_sec) {
            self.rate_min = Some(fmin(self.rate_min, rate));
            self.rate_max = Some(fmax(self.rate_max, rate));
            self.rate_sum += rate;
            self.rate_n += 1;
        }
        let interval_s = if r.interval_s.is_finite() { r.interval_s.max(0.0) } else { 0.0 };
        if r.slow_start {
            self.slow_start_s += interval_s;
        }
        if r.app_limited {
            self.app_limited_s += interval_s;
        }
        if let Some(name) = r.chosen_member {
            match self.wins.iter_mut().find(|(n, _)| *n == name) {
                Some((_, k)) => *k += 1,
                None => self.wins.push((name, 1)),
            }
        }
        self.last = Some(LastReport {
            cwnd_bytes: r.cwnd_bytes,
            pacing_bytes_per_sec: r.pacing.map(Rate::bytes_per_sec),
            chosen_member: r.chosen_member,
        });
    }

    /// The interval's record, and a fresh window (which keeps what the last report left
    /// installed). Times in slow start and app-limited are clamped to the interval (a report's
    /// interval may straddle two).
    pub fn take(&mut self, meta: &FlowMeta, seq: u64, t_unix_s: f64, duration_s: f64) -> StatsRecord {
        let w = std::mem::replace(self, StatsWindow { last: self.last, ..StatsWindow::default() });
        let decisions: u64 = w.wins.iter().map(|(_, k)| k).sum();
        let secs = duration_s.max(1e-6);
        let delivered_or_lost = w.acked_packets.saturating_add(w.lost_packets);
        StatsRecord {
            seq,
            t_unix_s,
            duration_s,
            meta: meta.clone(),
            throughput_bytes_per_sec: w.acked_bytes as f64 / secs,
            send_rate_min_bytes_per_sec: w.rate_min,
            send_rate_avg_bytes_per_sec: (w.rate_n > 0).then(|| w.rate_sum / w.rate_n as f64),
            send_rate_max_bytes_per_sec: w.rate_max,
            loss_frac: if delivered_or_lost == 0 { 0.0 } else { w.lost_packets as f64 / delivered_or_lost as f64 },
            rtt_min_us: w.rtt_min_us,
            rtt_avg_us: (w.rtt_samples > 0).then(|| w.rtt_sum_us / w.rtt_samples as f64),
            slow_start_s: w.slow_start_s.min(duration_s),
            app_limited_s: w.app_limited_s.min(duration_s),
            cwnd_bytes: w.last.map(|l| l.cwnd_bytes),
            pacing_rate_bytes_per_sec: w.last.and_then(|l| l.pacing_bytes_per_sec),
            fusion_member: w.last.and_then(|l| l.chosen_member).map(String::from),
            fusion_win_frac: w
                .wins
                .iter()
                .map(|&(name, k)| (name.to_string(), k as f64 / decisions as f64))
                .collect(),
        }
    }
}

/// The records the agent holds for pollers, oldest first.
#[derive(Debug, Default)]
pub struct StatsHistory {
    records: std::collections::VecDeque<StatsRecord>,
    next_seq: u64,
}

/// The answer to `{"cmd":"stats","since":SEQ}`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StatsAnswer {
    pub records: Vec<StatsRecord>,
    /// The `since` to ask with next time.
    pub next: u64,
    /// Records after `since` that are no longer held (the poller fell behind).
    pub missed: u64,
}

impl StatsHistory {
    /// The seq the next record gets (the first is 1, so `since: 0` means everything).
    pub fn next_seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    /// Add records (their seqs from [`StatsHistory::next_seq`]), then drop those older than
    /// [`STATS_HISTORY_SECS`] before `now_unix_s` and any beyond [`STATS_HISTORY_MAX_RECORDS`].
    pub fn push(&mut self, records: impl IntoIterator<Item = StatsRecord>, now_unix_s: f64) {
        self.records.extend(records);
        let oldest = now_unix_s - STATS_HISTORY_SECS as f64;
        while self.records.front().is_some_and(|r| r.t_unix_s < oldest)
            || self.records.len() > STATS_HISTORY_MAX_RECORDS
        {
            self.records.pop_front();
        }
    }

    /// Records with `seq > since` (all with `None`), oldest first.
    pub fn since(&self, since: Option<u64>) -> StatsAnswer {
        let since = since.unwrap_or(0);
        let start = self.records.partition_point(|r| r.seq <= since);
        let records: Vec<StatsRecord> = self.records.range(start..).cloned().collect();
        let first_held = self.records.front().map_or(self.next_seq + 1, |r| r.seq);
        StatsAnswer {
            missed: first_held.saturating_sub(since.saturating_add(1)).min(self.next_seq.saturating_sub(since)),
            next: records.last().map_or(since.max(first_held.saturating_sub(1)), |r| r.seq),
            records,
        }
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(acked_packets: u64, lost: u64, rtt_us: f64, rate: Option<f64>, slow_start: bool) -> ReportSample {
        ReportSample {
            interval_s: 0.05,
            acked_bytes: acked_packets * 1000,
            acked_packets,
            lost_packets: lost,
            rtt_min_us: (acked_packets > 0).then_some(rtt_us),
            rtt_sum_us: rtt_us * acked_packets as f64,
            rtt_samples: acked_packets,
            send_rate: rate.map(Rate::from_bytes_per_sec),
            slow_start,
            app_limited: !slow_start,
            ..ReportSample::default()
        }
    }

    #[test]
    fn a_record_sums_rates_and_weights_rtts_by_samples() {
        let mut w = StatsWindow::default();
        w.add(&sample(10, 0, 50_000.0, Some(1e6), true));
        w.add(&sample(30, 10, 70_000.0, Some(3e6), false));
        w.add(&sample(0, 0, 0.0, None, false));
        let meta = FlowMeta { flow: 3, policy: "reno".into(), ..Default::default() };
        let r = w.take(&meta, 7, 100.0, 0.5);
        assert_eq!((r.seq, r.meta.flow, r.meta.policy.as_str()), (7, 3, "reno"));
        assert_eq!(r.throughput_bytes_per_sec, 40_000.0 / 0.5);
        assert_eq!(r.send_rate_min_bytes_per_sec, Some(1e6));
        assert_eq!(r.send_rate_max_bytes_per_sec, Some(3e6));
        assert_eq!(r.send_rate_avg_bytes_per_sec, Some(2e6));
        assert_eq!(r.loss_frac, 10.0 / 50.0);
        assert_eq!(r.rtt_min_us, Some(50_000.0));
        assert_eq!(r.rtt_avg_us, Some((10.0 * 50_000.0 + 30.0 * 70_000.0) / 40.0));
        assert!((r.slow_start_s - 0.05).abs() < 1e-12 && (r.app_limited_s - 0.10).abs() < 1e-12, "{r:?}");
        // The window restarts empty.
        let r = w.take(&meta, 8, 101.0, 1.0);
        assert_eq!(
            (r.throughput_bytes_per_sec, r.loss_frac, r.rtt_avg_us, r.send_rate_avg_bytes_per_sec),
            (0.0, 0.0, None, None)
        );
    }

    #[test]
    fn history_answers_after_a_cursor_and_forgets_old_records() {
        let mut h = StatsHistory::default();
        let rec = |seq, t| StatsRecord { seq, t_unix_s: t, ..blank() };
        let (a, b, c) = (h.next_seq(), h.next_seq(), h.next_seq());
        h.push([rec(a, 1000.0), rec(b, 1001.0), rec(c, 1002.0)], 1002.0);
        let all = h.since(None);
        assert_eq!((all.records.len(), all.next, all.missed), (3, 3, 0));
        let after = h.since(Some(2));
        assert_eq!((after.records[0].seq, after.next), (3, 3));
        assert_eq!(h.since(Some(3)).records, vec![], "nothing new");
        assert_eq!(h.since(Some(3)).next, 3);
        // 120 s later the first two are gone; a poller at 0 missed them.
        let d = h.next_seq();
        h.push([rec(d, 1121.5)], 1121.5);
        assert_eq!(h.len(), 2);
        let late = h.since(Some(0));
        assert_eq!((late.missed, late.records.len(), late.next), (2, 2, 4));
    }

    /// The flow's fields stay at the record's top level on the wire (pollers read `flow`, `dst`,
    /// `policy` beside the figures), and a record reads back as it was written.
    #[test]
    fn a_record_keeps_the_flow_fields_at_the_top_level_of_its_json() {
        let meta = FlowMeta { flow: 9, dst: "10.1.0.1:443".into(), rule: Some(2), ..Default::default() };
        let r = StatsWindow::default().take(&meta, 4, 1.5, 1.0);
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(
            (json["flow"].as_u64(), json["dst"].as_str(), json["rule"].as_u64()),
            (Some(9), Some("10.1.0.1:443"), Some(2))
        );
        assert!(json.get("meta").is_none(), "{json}");
        assert_eq!(serde_json::from_value::<StatsRecord>(json).unwrap(), r);
    }

    /// docs/metrics.md: every figure of `polycc stats --json` and the `stats` answer ends in its
    /// unit (the loss is `loss_frac`, a fraction, not a percentage).
    #[test]
    fn stats_records_names_carry_their_units() {
        let mut w = StatsWindow::default();
        w.add(&ReportSample {
            interval_s: 0.5,
            acked_bytes: 90_000,
            acked_packets: 60,
            lost_packets: 2,
            rtt_min_us: Some(20_000.0),
            rtt_sum_us: 1_500_000.0,
            rtt_samples: 60,
            send_rate: Some(Rate::from_bytes_per_sec(200_000.0)),
            slow_start: true,
            app_limited: true,
            cwnd_bytes: 30_000,
            pacing: Some(Rate::from_bytes_per_sec(250_000.0)),
            chosen_member: Some("bbr"),
        });
        let meta = FlowMeta { flow: 9, rule: Some(2), ..Default::default() };
        let answer = StatsAnswer { records: vec![w.take(&meta, 4, 1.5, 1.0)], next: 5, missed: 1 };
        let json = serde_json::to_value(&answer).unwrap();
        assert!(json["records"][0]["rtt_avg_us"].is_number() && json["records"][0]["loss_frac"].is_number(), "{json}");
        assert_eq!(crate::vocabulary::violations(&json), Vec::<String>::new(), "{json}");
    }

    /// What `polycc trace` draws: the window and pacing rate in force at the interval's end
    /// (still there after a quiet interval), and the share of the fusion's decisions per member.
    #[test]
    fn a_record_ends_with_the_installed_window_and_counts_the_fusions_choices() {
        let mut w = StatsWindow::default();
        let meta = FlowMeta::default();
        let first = w.take(&meta, 1, 1.0, 1.0);
        assert_eq!((first.cwnd_bytes, first.pacing_rate_bytes_per_sec, first.fusion_member), (None, None, None));
        assert!(first.fusion_win_frac.is_empty());
        let decided = |cwnd_bytes, pacing: Option<f64>, member| ReportSample {
            cwnd_bytes,
            pacing: pacing.map(Rate::from_bytes_per_sec),
            chosen_member: Some(member),
            ..sample(10, 0, 50_000.0, pacing, false)
        };
        for (cwnd, member) in [(15_000, "bbr"), (30_000, "cubic"), (29_000, "bbr"), (40_000, "bbr")] {
            w.add(&decided(cwnd, Some(2.5e6), member));
        }
        let r = w.take(&meta, 2, 2.0, 1.0);
        assert_eq!(
            (r.cwnd_bytes, r.pacing_rate_bytes_per_sec, r.fusion_member.as_deref()),
            (Some(40_000), Some(2.5e6), Some("bbr"))
        );
        let shares: Vec<(&str, f64)> = r.fusion_win_frac.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(shares, [("bbr", 0.75), ("cubic", 0.25)]);
        // A quiet second: no decisions to share, the same window and rate in force.
        let quiet = w.take(&meta, 3, 3.0, 1.0);
        assert_eq!((quiet.cwnd_bytes, quiet.pacing_rate_bytes_per_sec), (Some(40_000), Some(2.5e6)));
        assert!(quiet.fusion_win_frac.is_empty());
        // Unpaced, single algorithm.
        w.add(&ReportSample { cwnd_bytes: 20_000, ..sample(10, 0, 50_000.0, None, false) });
        let r = w.take(&meta, 4, 4.0, 1.0);
        assert_eq!((r.cwnd_bytes, r.pacing_rate_bytes_per_sec, r.fusion_member), (Some(20_000), None, None));
    }

    /// The record as it was before `cwnd_bytes`, `pacing_rate_bytes_per_sec` and the fusion's
    /// fields: what an older `polycc` or `polycc-tune` reads.
    #[derive(Debug, Deserialize, Serialize)]
    struct OldRecord {
        seq: u64,
        t_unix_s: f64,
        duration_s: f64,
        #[serde(flatten)]
        meta: FlowMeta,
        throughput_bytes_per_sec: f64,
        send_rate_min_bytes_per_sec: Option<f64>,
        send_rate_avg_bytes_per_sec: Option<f64>,
        send_rate_max_bytes_per_sec: Option<f64>,
        loss_frac: f64,
        rtt_min_us: Option<f64>,
        rtt_avg_us: Option<f64>,
        slow_start_s: f64,
        app_limited_s: f64,
    }

    #[test]
    fn old_clients_read_new_records_and_new_clients_read_old_ones() {
        let mut w = StatsWindow::default();
        w.add(&ReportSample {
            cwnd_bytes: 30_000,
            chosen_member: Some("cubic"),
            ..sample(10, 0, 40_000.0, None, true)
        });
        let meta = FlowMeta { flow: 5, policy: "fused(bbr+cubic,max cwnd)".into(), ..Default::default() };
        let new = w.take(&meta, 9, 10.0, 1.0);
        let old: OldRecord = serde_json::from_str(&serde_json::to_string(&new).unwrap()).unwrap();
        assert_eq!((old.seq, old.meta.flow, old.rtt_min_us), (9, 5, Some(40_000.0)));
        let old_json = serde_json::to_string(&old).unwrap();
        assert!(!old_json.contains("cwnd_bytes"), "{old_json}");
        let read: StatsRecord = serde_json::from_str(&old_json).unwrap();
        assert_eq!(
            (read.cwnd_bytes, read.pacing_rate_bytes_per_sec, read.fusion_member.as_deref()),
            (None, None, None)
        );
        assert!(read.fusion_win_frac.is_empty());
        assert_eq!(
            StatsRecord { cwnd_bytes: None, fusion_member: None, fusion_win_frac: BTreeMap::new(), ..new },
            read
        );
    }

    fn blank() -> StatsRecord {
        StatsWindow::default().take(&FlowMeta::default(), 0, 0.0, 1.0)
    }
}
