//! The agent: datapath messages in, per-flow controllers, `Cwnd`/`Rate` updates out.
//!
//! ```text
//!   READY(dp)          -> forget dp's flows, INSTALL the union program
//!   CREATE(dp, sid)    -> (INSTALL if dp is new) build the policy's controller,
//!                         CHANGE_PROG(sid, program, Cwnd, Rate, grow cap, interval)
//!   MEASURE(dp, sid)   -> Report (convert.rs) -> controller -> UPDATE_FIELDS(sid, Cwnd, Rate, ..)
//!   MEASURE, 0 fields  -> the flow closed
//! ```
//!
//! Every CREATE is served whatever its congAlg (the polycc module sends "ccp"): the first
//! policy rule matching its addresses, ports and congAlg chooses the policy (see
//! [`crate::policy_rules`]), else the flags' default. With a control socket
//! ([`Agent::with_control`]) the loop also republishes the flows table every
//! [`control::PUBLISH_EVERY`]. The run loop is single-threaded and ends only on
//! a shutdown request or a transport failure; a malformed or unexpected message is logged and
//! skipped. Flows that existed before the agent started are unknown to it (libccp never resends
//! CREATE); their reports are counted and ignored, and the datapath's fallback keeps them going.

use crate::control::{self, ErrorBody, ErrorCode, FlowRow, FlowSample, LiveChange, MovedFlow, Shared};
use crate::convert::{interval_register, rate_from_register, to_install, to_report, FlowClock, GrowRegs, Install};
use crate::json_log::{report_record, unix_ms, us, JsonLog, Record};
use crate::policy_rules::{socket_addr_string, FlowKey};
use crate::program::Program;
use crate::stats::{FlowMeta, ReportSample, StatsRecord, StatsWindow, STATS_EVERY};
use crate::transport::Transport;
use crate::wire::{self, Adoption, Create, Message};
use polycc_algorithms::fixed_window::FixedWindow;
use polycc_algorithms::quantity::ReportInterval;
use polycc_algorithms::units::Rate;
use polycc_algorithms::{ack_growth, CongestionControl, Estimates, FlowInfo, Handover, Policy};
use serde::Serialize;
use slog::{debug, info, warn, Logger};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Receive buffer: the largest CCP message is a MEASURE of 110 fields (896 B); netlink and unix
/// deliver one message per datagram, portus' 1024 B would do, but a netlink datagram may batch.
const RECV_BUFFER_BYTES: usize = 64 * 1024;

/// While the transport waits for its datapath (no module loaded), the warning is repeated this
/// often: an agent that waits says so in its log, not only once at start.
const WAITING_REMINDER: Duration = Duration::from_secs(60);

/// The transport's wait for its datapath, as the run loop tells the log about it.
struct WaitingFor {
    what: Option<&'static str>,
    since: Instant,
    last_said: Instant,
}

#[derive(Debug, PartialEq)]
enum Waited {
    /// Still waiting for this, this long: say it again.
    Still(&'static str, Duration),
    /// What it waited for came.
    Over,
}

impl WaitingFor {
    fn new(what: Option<&'static str>, now: Instant) -> WaitingFor {
        WaitingFor { what, since: now, last_said: now }
    }

    /// What to say now, given what the transport waits for now.
    fn check(&mut self, now_waiting: Option<&'static str>, now: Instant) -> Option<Waited> {
        match (self.what, now_waiting) {
            (Some(_), None) => {
                self.what = None;
                Some(Waited::Over)
            }
            (Some(what), Some(_)) if now.saturating_duration_since(self.last_said) >= WAITING_REMINDER => {
                self.last_said = now;
                Some(Waited::Still(what, now.saturating_duration_since(self.since)))
            }
            _ => None,
        }
    }
}

/// What every flow runs.
#[derive(Clone, Debug)]
pub struct AgentConfig {
    pub policy: Policy,
    pub report_interval: ReportInterval,
    /// Diagnostics: hold every flow's window at this many packets instead of running the policy
    /// (checks that the datapath enforces what the agent installs).
    pub pin_cwnd_packets: Option<u64>,
    /// Diagnostics: pace every flow at this rate instead of running the policy, with the pinned
    /// window or one that does not bind (checks what the datapath delivers of a rate it was set).
    pub pin_rate: Option<Rate>,
    /// Diagnostics: answer no report of a flow once it is this old (the agent stays alive and
    /// reads; checks that the datapath keeps a quiet agent's flows at what it installed).
    pub quiet_after: Option<Duration>,
}

/// `--pin-rate` without `--pin-cwnd`: a window the rate fills in half a second, so that on any
/// path up to that RTT the rate, not the window, is what limits the flow.
fn pinned_rate_window(rate: Rate, mss_bytes: u64) -> u64 {
    ((rate.bytes_per_sec() * 0.5) as u64).max(10 * mss_bytes)
}

/// An algorithm's wish for a report cadence is reinstalled only when it moves by more than this
/// fraction: RTT noise does not cost an extra register write per report.
const INTERVAL_CHANGE_FRACTION: f64 = 0.25;

impl AgentConfig {
    /// `--pin-cwnd` or `--pin-rate`: flows run a fixed window or rate, not the policy.
    fn pinned(&self) -> bool {
        self.pin_cwnd_packets.is_some() || self.pin_rate.is_some()
    }

    /// `Control.interval_us` for a flow running `cc`: 0 = once per RTT. A fixed
    /// `--report-interval` is the user's and wins; with `rtt` (the default) an algorithm that
    /// asks for its own cadence ([`CongestionControl::report_interval`], PCC) gets it.
    fn interval_us(&self, cc: &dyn CongestionControl) -> u64 {
        self.report_interval.for_algorithm(cc.report_interval()).map_or(0, interval_register)
    }
}

/// Whether a wanted interval differs enough from the installed one to be sent.
fn interval_moved(installed_us: u64, wanted_us: u64) -> bool {
    match (installed_us, wanted_us) {
        (a, b) if a == b => false,
        (0, _) | (_, 0) => true,
        (a, b) => (a as f64 - b as f64).abs() > INTERVAL_CHANGE_FRACTION * a as f64,
    }
}

/// One flow's controller and bookkeeping.
struct Flow {
    create: Create,
    cc: Box<dyn CongestionControl>,
    mss_bytes: u64,
    clock: FlowClock,
    installed: Install,
    reports: u64,
    /// The rule that chose the policy (`None`: the default) and what it runs.
    rule: Option<u32>,
    policy_desc: String,
    members: (String, Vec<String>),
    acked_bytes: u64,
    rtt: Option<Duration>,
    info: FlowInfo,
    /// This second's figures for `polycc stats`, since `window_start`.
    stats: StatsWindow,
    window_start: Instant,
    /// Live policy changes so far.
    handovers: u32,
    /// `Control.interval_us` as installed on the flow (0: once per RTT).
    interval_us: u64,
    /// The growth registers as installed with the last decision (per-ACK growth and its delay
    /// exit).
    grow: GrowRegs,
    created: Instant,
}

impl Flow {
    fn meta(&self, datapath: String) -> FlowMeta {
        FlowMeta {
            datapath,
            flow: self.create.sid,
            src: socket_addr_string(self.create.src, self.create.src_port),
            dst: socket_addr_string(self.create.dst, self.create.dst_port),
            cong_alg: self.create.cong_alg.clone(),
            rule: self.rule,
            policy: self.policy_desc.clone(),
        }
    }

    /// Close this interval: its record (seq from `seq`), and a fresh window from `now`.
    fn stats_record(&mut self, datapath: String, seq: u64, now: Instant, t_unix_s: f64) -> StatsRecord {
        let duration_s = now.saturating_duration_since(self.window_start).as_secs_f64();
        self.window_start = now;
        let meta = self.meta(datapath);
        self.stats.take(&meta, seq, t_unix_s, duration_s)
    }
}

/// What a re-announced flow's CREATE says about it, as a policy change hands a flow over.
fn adoption_handover(a: &Adoption, cwnd_bytes: u64) -> Handover {
    let us = |v: Option<u32>| v.map(|us| Duration::from_micros(u64::from(us)));
    Handover {
        cwnd_bytes,
        pacing_rate: a.rate.and_then(rate_from_register),
        estimates: Estimates { bandwidth: None, min_rtt: us(a.min_rtt_us), srtt: us(a.srtt_us) },
        in_slow_start: a.ssthresh.is_none_or(|t| cwnd_bytes < u64::from(t)),
    }
}

fn unix_s() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// Counters (tests, the shutdown line).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    pub datapaths: u64,
    pub flows_created: u64,
    pub flows_closed: u64,
    pub reports: u64,
    pub stale_reports: u64,
    pub unknown_flow_reports: u64,
    pub malformed: u64,
    pub send_errors: u64,
}

/// The agent over one transport.
pub struct Agent<T: Transport> {
    transport: T,
    program: Program,
    cfg: AgentConfig,
    policy_desc: String,
    datapaths: HashMap<T::Addr, HashMap<u32, Flow>>,
    log: Logger,
    json: Option<JsonLog>,
    stats: Stats,
    /// Rules and the flows table, shared with the control socket.
    shared: Option<Arc<Shared>>,
    last_publish: Instant,
    last_stats: Instant,
}

impl<T: Transport> Agent<T> {
    /// Compile the union program (the process's first portus scope, so its uid is 1) and get
    /// ready to serve datapaths.
    pub fn new(
        transport: T,
        cfg: AgentConfig,
        log: Logger,
        json: Option<JsonLog>,
    ) -> Result<Agent<T>, crate::program::ProgramError> {
        let program = Program::compile()?;
        let mut transport = transport;
        transport.attach_program(&program);
        if program.uid != 1 {
            warn!(log, "datapath program uid is not 1: libccp keeps stale programs from an earlier agent until its next READY";
                "uid" => program.uid);
        }
        let policy_desc = cfg.policy.describe();
        Ok(Agent {
            transport,
            program,
            cfg,
            policy_desc,
            datapaths: HashMap::new(),
            log,
            json,
            stats: Stats::default(),
            shared: None,
            last_publish: Instant::now(),
            last_stats: Instant::now(),
        })
    }

    /// Choose each new flow's policy by `shared`'s rules and publish the flows table there.
    pub fn with_control(mut self, shared: Arc<Shared>) -> Agent<T> {
        self.shared = Some(shared);
        self
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    pub fn program(&self) -> &Program {
        &self.program
    }

    /// Serve until `stop` is set (SIGINT/SIGTERM) or the transport fails.
    pub fn run(&mut self, stop: &AtomicBool) -> std::io::Result<()> {
        let mut buf = vec![0u8; RECV_BUFFER_BYTES];
        info!(self.log, "agent ready"; "policy" => &self.policy_desc, "reports" => %self.cfg.report_interval,
            "program_uid" => self.program.uid);
        let mut waiting = WaitingFor::new(self.transport.waiting_for(), Instant::now());
        if let Some(what) = waiting.what {
            warn!(self.log, "{what}");
        }
        let result = loop {
            if stop.load(Ordering::SeqCst) {
                break Ok(());
            }
            match self.transport.recv(&mut buf) {
                Ok(Some((n, from))) => self.handle_datagram(&buf[..n], &from),
                Ok(None) => self.flush_json(),
                Err(e) => break Err(e),
            }
            // Only while waiting: no clock read per datagram once the datapath is there.
            if waiting.what.is_some() {
                match waiting.check(self.transport.waiting_for(), Instant::now()) {
                    Some(Waited::Still(what, since)) => {
                        warn!(self.log, "{what}"; "waiting_s" => since.as_secs())
                    }
                    Some(Waited::Over) => info!(self.log, "the datapath the agent waited for is there"),
                    None => {}
                }
            }
            self.housekeeping();
        };
        self.flush_json();
        let flows: usize = self.datapaths.values().map(HashMap::len).sum();
        info!(self.log, "agent stopped"; "open_flows" => flows, "reports" => self.stats.reports,
            "unknown_flow_reports" => self.stats.unknown_flow_reports,
            "receive_overruns" => self.transport.overruns(),
            "flows_created" => self.stats.flows_created);
        result
    }

    /// Between datagrams: live changes from the control socket, the flows table, the
    /// per-second statistics. Cheap when nothing is due (two clock reads, one atomic).
    pub fn housekeeping(&mut self) {
        if let Some(shared) = self.shared.clone() {
            for req in shared.take_live() {
                let answer = self.live_change(&req.change, &shared);
                // The client may have given up waiting: nothing to do then.
                let _ = req.reply.send(answer);
            }
        }
        let now = Instant::now();
        if now.saturating_duration_since(self.last_publish) >= control::PUBLISH_EVERY {
            self.publish_flows();
        }
        if now.saturating_duration_since(self.last_stats) >= STATS_EVERY {
            self.roll_stats(now);
        }
    }

    /// Every flow's record for the interval just ended.
    fn roll_stats(&mut self, now: Instant) {
        self.last_stats = now;
        let Some(shared) = &self.shared else { return };
        let t = unix_s();
        let datapaths = &mut self.datapaths;
        shared.push_stats(
            |seq| {
                datapaths
                    .iter_mut()
                    .flat_map(|(dp, flows)| flows.values_mut().map(move |f| (dp, f)))
                    .map(|(dp, f)| f.stats_record(format!("{dp:?}"), seq(), now, t))
                    .collect()
            },
            t,
        );
    }

    /// Make a change the control socket asked for.
    fn live_change(&mut self, change: &LiveChange, shared: &Shared) -> Result<Vec<MovedFlow>, ErrorBody> {
        match change {
            LiveChange::SetFlow { flow, datapath, policy } => {
                let found: Vec<T::Addr> = self
                    .datapaths
                    .iter()
                    .filter(|(dp, flows)| {
                        flows.contains_key(flow) && datapath.as_ref().is_none_or(|want| *want == format!("{dp:?}"))
                    })
                    .map(|(dp, _)| dp.clone())
                    .collect();
                let dp = match found.as_slice() {
                    [dp] => dp.clone(),
                    [] => {
                        return Err(ErrorBody {
                            code: ErrorCode::NoSuchFlow,
                            message: format!("no live flow has id {flow} (polycc flows shows them)"),
                        })
                    }
                    _ => {
                        return Err(ErrorBody {
                            code: ErrorCode::AmbiguousFlow,
                            message: format!(
                                "{} datapaths have a flow {flow}; pick one with --datapath (polycc flows shows them)",
                                found.len()
                            ),
                        })
                    }
                };
                Ok(vec![self.switch(&dp, *flow, policy.clone(), None)])
            }
            LiveChange::ApplyRule { id } => {
                let Some(policy) = shared.rule_policy(*id) else { return Ok(Vec::new()) };
                let desc = policy.describe();
                let mut todo = Vec::new();
                for (dp, flows) in &self.datapaths {
                    for f in flows.values() {
                        let c = &f.create;
                        let key = FlowKey {
                            src: c.src,
                            src_port: c.src_port,
                            dst: c.dst,
                            dst_port: c.dst_port,
                            cong_alg: &c.cong_alg,
                        };
                        let now_rule = shared.select(&key).map(|(rid, _)| rid);
                        if now_rule == Some(*id) && (f.rule != Some(*id) || f.policy_desc != desc) {
                            todo.push((dp.clone(), c.sid));
                        }
                    }
                }
                Ok(todo.into_iter().map(|(dp, sid)| self.switch(&dp, sid, policy.clone(), Some(*id))).collect())
            }
        }
    }

    /// MOCC members of a rule's policy (read from JSON, no model attached) use the agent's model.
    fn attach_model(&self, policy: &mut Policy) {
        if let Some(s) = &self.shared {
            s.attach_models(policy);
        }
    }

    /// Move a live flow to `policy`: the new controller adopts the old one's window, rate and
    /// estimates, and what it decides is installed at once. The flow's statistics interval goes
    /// on (its record names the policy at the interval's end).
    fn switch(&mut self, dp: &T::Addr, sid: u32, mut policy: Policy, rule: Option<u32>) -> MovedFlow {
        self.attach_model(&mut policy);
        let seed = self.stats.flows_created.wrapping_add(u64::from(sid));
        let flow = self.datapaths.get_mut(dp).and_then(|f| f.get_mut(&sid)).expect("the caller found the flow");
        let handover = Handover {
            cwnd_bytes: u64::from(flow.installed.cwnd_bytes),
            pacing_rate: flow.installed.pacing_rate(),
            estimates: flow.cc.estimates(),
            in_slow_start: flow.cc.in_slow_start(),
        };
        let mut cc = policy.with_seed(seed).build(flow.info);
        cc.adopt(&handover);
        let install = to_install(&cc.decision(), flow.mss_bytes, flow.installed.rate_bytes_per_sec.is_some());
        let from = std::mem::replace(&mut flow.policy_desc, policy.describe());
        let moved = MovedFlow {
            flow: sid,
            datapath: format!("{dp:?}"),
            from,
            to: flow.policy_desc.clone(),
            rule,
            cwnd_before_bytes: flow.installed.cwnd_bytes,
            cwnd_after_bytes: install.cwnd_bytes,
        };
        flow.cc = cc;
        flow.rule = rule;
        flow.members = control::members(&policy);
        flow.handovers = flow.handovers.saturating_add(1);
        flow.installed = flow.installed.then(install);
        flow.grow = GrowRegs::of(&ack_growth::growth(flow.cc.as_ref(), &flow.cc.decision()));
        let update = self.program.control_fields(&install, Some(flow.grow), None);
        info!(self.log, "flow moved to a new policy, state handed over"; "flow" => sid, "from" => &moved.from,
            "to" => &moved.to, "rule" => rule, "cwnd_before_bytes" => moved.cwnd_before_bytes, "cwnd_after_bytes" => moved.cwnd_after_bytes,
            "rate_bytes_per_sec" => ?install.rate_bytes_per_sec, "slow_start" => handover.in_slow_start);
        self.send(dp, &wire::update_fields(sid, update));
        moved
    }

    /// Handle every CCP message in one datagram.
    pub fn handle_datagram(&mut self, mut bytes: &[u8], from: &T::Addr) {
        while !bytes.is_empty() {
            match wire::parse(bytes) {
                Ok((msg, used)) => {
                    self.handle(msg, from);
                    bytes = &bytes[used..];
                }
                Err(e) => {
                    self.stats.malformed += 1;
                    warn!(self.log, "malformed datapath message skipped"; "error" => %e, "from" => ?from);
                    return;
                }
            }
        }
    }

    fn handle(&mut self, msg: Message, from: &T::Addr) {
        match msg {
            Message::Ready { id } => {
                let dropped = self.datapaths.insert(from.clone(), HashMap::new()).map_or(0, |f| f.len());
                self.stats.datapaths += 1;
                info!(self.log, "datapath ready, installing the program"; "id" => id, "from" => ?from,
                    "dropped_flows" => dropped);
                self.send(from, &self.program.install_msg.clone());
            }
            Message::Create(c) => self.create(c, from),
            Message::Measure { sid, fields, .. } if fields.is_empty() => self.close(sid, from),
            Message::Measure { sid, program_uid, fields } => self.measure(sid, program_uid, fields, from),
            Message::Other { typ, sid, len } => {
                self.stats.malformed += 1;
                warn!(self.log, "unexpected message type from a datapath skipped"; "type" => typ, "sid" => sid,
                    "len" => len);
            }
        }
    }

    fn create(&mut self, c: Create, from: &T::Addr) {
        if !self.datapaths.contains_key(from) {
            // portus >= 0.6.1 behaviour: a CREATE from a datapath whose READY we missed (the agent
            // started after the module) installs the program first.
            debug!(self.log, "CREATE from an unknown datapath, installing the program"; "from" => ?from);
            self.datapaths.insert(from.clone(), HashMap::new());
            self.stats.datapaths += 1;
            self.send(from, &self.program.install_msg.clone());
        }
        let mss_bytes = u64::from(c.mss.max(1));
        // ccp-kernel sends the initial window in bytes; a value under one MSS is a packet count.
        let init_cwnd_bytes = match u64::from(c.init_cwnd) {
            0 => mss_bytes * FlowInfo::DEFAULT_INIT_CWND_PACKETS,
            w if w < mss_bytes => w * mss_bytes,
            w => w,
        };
        // A live flow re-announced to this agent: init_cwnd is its current window, and the
        // controller continues from its state rather than from an initial window in slow start.
        let handover = c.adopted.map(|a| adoption_handover(&a, init_cwnd_bytes));
        let info = match handover {
            Some(_) => FlowInfo { mss_bytes, init_cwnd_bytes: mss_bytes * FlowInfo::DEFAULT_INIT_CWND_PACKETS },
            None => FlowInfo { mss_bytes, init_cwnd_bytes },
        };
        let key = FlowKey { src: c.src, src_port: c.src_port, dst: c.dst, dst_port: c.dst_port, cong_alg: &c.cong_alg };
        let (rule, mut policy) = match self.shared.as_ref().and_then(|s| s.select(&key)) {
            Some((id, p)) => (Some(id), p),
            None => (None, self.cfg.policy.clone()),
        };
        self.attach_model(&mut policy);
        let policy_desc = if rule.is_some() { policy.describe() } else { self.policy_desc.clone() };
        let members = control::members(&policy);
        let cc: Box<dyn CongestionControl> = match (self.cfg.pin_cwnd_packets, self.cfg.pin_rate) {
            (packets, Some(rate)) => {
                let cwnd = packets.map_or(pinned_rate_window(rate, mss_bytes), |p| p.saturating_mul(mss_bytes));
                Box::new(FixedWindow::paced("pinned", cwnd, rate))
            }
            (Some(packets), None) => Box::new(FixedWindow::new("pinned", packets.saturating_mul(mss_bytes))),
            (None, None) => {
                let mut cc = policy.with_seed(self.stats.flows_created).build(info);
                if let Some(h) = &handover {
                    cc.adopt(h);
                }
                cc
            }
        };
        let installed = to_install(&cc.decision(), mss_bytes, false);
        let interval_us = self.cfg.interval_us(cc.as_ref());
        let grow = GrowRegs::of(&ack_growth::growth(cc.as_ref(), &cc.decision()));
        let fields = self.program.control_fields(&installed, Some(grow), Some(interval_us));
        self.send(from, &wire::change_prog(c.sid, self.program.uid, fields));
        self.stats.flows_created += 1;
        info!(self.log, "flow created"; "flow" => c.sid, "src" => socket_addr_string(c.src, c.src_port),
            "dst" => socket_addr_string(c.dst, c.dst_port), "cong_alg" => &c.cong_alg, "mss_bytes" => c.mss,
            "init_cwnd_bytes" => c.init_cwnd, "adopted" => c.adopted.is_some(), "policy" => &policy_desc, "rule" => rule, "cwnd_bytes" => installed.cwnd_bytes,
            "rate_bytes_per_sec" => ?installed.rate_bytes_per_sec);
        if let Some(j) = &mut self.json {
            let r = Record::Create {
                unix_ms: unix_ms(),
                flow: c.sid,
                src: socket_addr_string(c.src, c.src_port),
                dst: socket_addr_string(c.dst, c.dst_port),
                cong_alg: &c.cong_alg,
                mss_bytes: c.mss,
                init_cwnd_bytes: c.init_cwnd,
                adopted: c.adopted.is_some(),
                policy: &policy_desc,
                cwnd_bytes: installed.cwnd_bytes,
                rate_bytes_per_sec: installed.rate_bytes_per_sec,
            };
            if let Err(e) = j.write(&r) {
                warn!(self.log, "cannot write --log-json"; "error" => %e);
            }
        }
        let flow = Flow {
            create: c,
            cc,
            mss_bytes,
            clock: FlowClock::default(),
            installed,
            reports: 0,
            rule,
            policy_desc,
            members,
            acked_bytes: 0,
            rtt: None,
            info,
            stats: StatsWindow::default(),
            window_start: Instant::now(),
            handovers: 0,
            interval_us,
            grow,
            created: Instant::now(),
        };
        let flows = self.datapaths.entry(from.clone()).or_default();
        if flows.insert(flow.create.sid, flow).is_some() {
            debug!(self.log, "flow re-created; the old controller is dropped");
        }
    }

    fn close(&mut self, sid: u32, from: &T::Addr) {
        let Some(mut flow) = self.datapaths.get_mut(from).and_then(|f| f.remove(&sid)) else {
            debug!(self.log, "close of an unknown flow"; "flow" => sid);
            return;
        };
        // The flow's last, shorter, interval.
        if let Some(shared) = &self.shared {
            let t = unix_s();
            shared.push_stats(|seq| vec![flow.stats_record(format!("{from:?}"), seq(), Instant::now(), t)], t);
        }
        self.stats.flows_closed += 1;
        info!(self.log, "flow closed"; "flow" => sid, "reports" => flow.reports);
        if let Some(j) = &mut self.json {
            let _ = j.write(&Record::Close { unix_ms: unix_ms(), flow: sid, reports: flow.reports });
        }
    }

    fn measure(&mut self, sid: u32, program_uid: u32, fields: wire::Fields<'_>, from: &T::Addr) {
        let Some(flow) = self.datapaths.get_mut(from).and_then(|f| f.get_mut(&sid)) else {
            self.stats.unknown_flow_reports += 1;
            debug!(self.log, "report for an unknown flow (created before this agent?)"; "flow" => sid);
            return;
        };
        if program_uid != self.program.uid {
            self.stats.stale_reports += 1;
            debug!(self.log, "report from another program ignored"; "flow" => sid, "uid" => program_uid);
            return;
        }
        let Some(raw) = self.program.read(fields) else {
            self.stats.malformed += 1;
            warn!(self.log, "report with too few fields skipped"; "flow" => sid, "fields" => fields.len());
            return;
        };
        // The window in force over the report: its app-limited rule and the per-ACK growth read it.
        let installed = u64::from(flow.installed.cwnd_bytes);
        let report = to_report(&raw, &mut flow.clock, flow.mss_bytes, installed, flow.create.undo_signal);
        let quiet = self.cfg.quiet_after.is_some_and(|d| flow.created.elapsed() >= d);
        // The program grew the window per ACK since the last decision (ack_growth).
        let grown = ack_growth::expected_cwnd(installed, flow.grow.cap, &report);
        let (decision, growth) = ack_growth::decide(flow.cc.as_mut(), &report, installed, grown);
        let grow = GrowRegs::of(&growth);
        let install = to_install(&decision, flow.mss_bytes, flow.installed.rate_bytes_per_sec.is_some());
        flow.installed = flow.installed.then(install);
        flow.stats.add(&ReportSample::of(
            &report,
            flow.installed.pacing_rate(),
            flow.installed.cwnd_bytes,
            flow.cc.in_slow_start(),
            flow.cc.chosen_member(),
        ));
        flow.reports += 1;
        flow.acked_bytes = flow.acked_bytes.saturating_add(report.bytes_acked);
        flow.rtt = report.rtt_mean().or(flow.rtt);
        self.stats.reports += 1;
        let grow_update = flow.grow.needs_write(&grow).then_some(grow);
        flow.grow = grow;
        let wanted_us = self.cfg.interval_us(flow.cc.as_ref());
        let interval_update = (!self.cfg.pinned() && interval_moved(flow.interval_us, wanted_us)).then_some(wanted_us);
        if interval_update.is_some() {
            debug!(self.log, "report interval"; "flow" => sid, "from_us" => flow.interval_us, "to_us" => wanted_us);
            flow.interval_us = wanted_us;
        }
        let update = self.program.control_fields(&install, grow_update, interval_update);
        for t in flow.cc.take_trace() {
            debug!(self.log, "mi"; "flow" => sid, "now_ms" => t.now_ms, "event" => t.event, "state" => t.state,
                "rate_mbps" => t.rate_mbps, "delivered_mbps" => t.delivered_mbps, "loss_frac" => t.loss_frac,
                "rtt_ms" => t.rtt_ms, "rtt_gradient" => t.rtt_gradient, "utility" => t.utility,
                "utility_gradient" => t.utility_gradient, "target_mbps" => t.target_mbps);
            if let Some(j) = &mut self.json {
                if let Err(e) = j.write(&Record::Mi { unix_ms: unix_ms(), flow: sid, trace: t }) {
                    warn!(self.log, "cannot write --log-json"; "error" => %e);
                }
            }
        }
        debug!(self.log, "decision"; "flow" => sid, "now_ms" => report.now.as_millis(),
            "acked_bytes" => report.bytes_acked, "lost_packets" => report.packets_lost, "ce_packets" => report.packets_ce, "timeout" => report.timeout,
            "rtt_us" => report.rtt_mean().map(us), "cwnd_bytes" => install.cwnd_bytes,
            "rate_bytes_per_sec" => ?install.rate_bytes_per_sec);
        if let Some(j) = &mut self.json {
            if let Err(e) = j.write(&report_record(sid, &report, &decision, &install, &grow)) {
                warn!(self.log, "cannot write --log-json"; "error" => %e);
            }
        }
        if !quiet {
            self.send(from, &wire::update_fields(sid, update));
        }
    }

    /// Hand the control socket a fresh flows table.
    fn publish_flows(&mut self) {
        self.last_publish = Instant::now();
        let Some(shared) = &self.shared else { return };
        let samples = self
            .datapaths
            .iter()
            .flat_map(|(dp, flows)| flows.values().map(move |f| (dp, f)))
            .map(|(dp, f)| FlowSample {
                row: FlowRow {
                    flow: f.create.sid,
                    datapath: format!("{dp:?}"),
                    src: socket_addr_string(f.create.src, f.create.src_port),
                    dst: socket_addr_string(f.create.dst, f.create.dst_port),
                    cong_alg: f.create.cong_alg.clone(),
                    rule: f.rule,
                    policy: f.policy_desc.clone(),
                    pilot: f.members.0.clone(),
                    copilots: f.members.1.clone(),
                    cwnd_bytes: f.installed.cwnd_bytes,
                    rate_bytes_per_sec: f.installed.rate_bytes_per_sec,
                    rtt_us: f.rtt.map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX)),
                    throughput_bytes_per_sec: 0.0,
                    reports_per_sec: 0.0,
                    reports: f.reports,
                    handovers: f.handovers,
                },
                acked_bytes: f.acked_bytes,
            })
            .collect();
        shared.publish(samples, self.last_publish);
    }

    fn send(&mut self, to: &T::Addr, msg: &[u8]) {
        if let Err(e) = self.transport.send(to, msg) {
            self.stats.send_errors += 1;
            warn!(self.log, "cannot send to the datapath"; "error" => %e, "to" => ?to);
        }
    }

    fn flush_json(&mut self) {
        if let Some(j) = &mut self.json {
            if let Err(e) = j.flush() {
                warn!(self.log, "cannot write --log-json"; "error" => %e);
            }
        }
    }
}

#[cfg(test)]
mod tests;
