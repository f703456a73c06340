//! `polycc`: steer a running `polycc-portus` over its control socket: list, show, add, replace
//! and remove per-flow policy rules, see the live flows (`--watch`) and their per-second
//! statistics, and move a live flow to another policy.

use clap::{Args, CommandFactory, Parser, Subcommand};
use polycc_agent::control::client::{self, ClientError};
use polycc_agent::control::{ErrorCode, FlowRow, MovedFlow, Request, Response, RuleView, DEFAULT_SOCKET};
use polycc_agent::policy_rules::{parse_policy, parse_rule, policy_to_json, RuleError};
use polycc_agent::stats::StatsRecord;
use polycc_args::PolicyArgs;
use serde_json::{Map, Value};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod sparkline;
mod trace;
mod trace_png;
mod watch;

/// Exit statuses, one per thing a script may want to tell apart.
mod exit {
    /// The agent refused the request for another reason (persisting failed, too many clients).
    pub const AGENT_ERROR: u8 = 1;
    /// clap's: bad flags (clap exits with it; listed so the others stay distinct).
    #[allow(dead_code)]
    pub const USAGE: u8 = 2;
    pub const NOT_RUNNING: u8 = 3;
    pub const PERMISSION: u8 = 4;
    pub const INVALID_CIDR: u8 = 5;
    pub const UNKNOWN_FIELD: u8 = 6;
    pub const BAD_PORT_RANGE: u8 = 7;
    pub const INVALID_POLICY: u8 = 8;
    pub const INVALID_RULE: u8 = 9;
    pub const NO_SUCH_RULE: u8 = 10;
    /// The request or the answer did not follow the protocol (an agent of another version?).
    pub const PROTOCOL: u8 = 11;
    /// `model load`: no file at the path.
    pub const MODEL_MISSING: u8 = 12;
    /// `model load`: the agent cannot read the file.
    pub const MODEL_UNREADABLE: u8 = 13;
    /// `model load`: not a valid MOCC model (corrupt, wrong shapes, missing metadata).
    pub const MODEL_INVALID: u8 = 14;
    /// `flow set`: no live flow has that id.
    pub const NO_SUCH_FLOW: u8 = 15;
    /// `flow set`: several datapaths have a flow with that id (pass --datapath).
    pub const AMBIGUOUS_FLOW: u8 = 16;
    /// A live change the agent loop did not make in time.
    pub const LOOP_BUSY: u8 = 17;
    /// `trace --png`: the picture cannot be written (checked before the trace starts).
    pub const OUTPUT: u8 = 18;
}

const AFTER_HELP: &str = "\
Examples:
  polycc policy list
  polycc policy add --dst-port 5201 --alg copa
  polycc policy add --dst 10.1.0.0/16 --alg fused --pilot bbr --copilot cubic --fusion max --first
  polycc policy add --rule '{\"src\":\"192.168.0.0/24\",\"policy\":{\"alg\":\"cubic\",\"beta\":0.8}}'
  polycc policy show 3
  polycc policy remove 3
  polycc policy replace 3 --dst-port 5201 --alg vivace --apply-live
  polycc flows
  polycc flows --watch --interval 2s
  polycc trace 7 --duration 30s --png flow7.png
  polycc flows --json | jq '.[] | {flow, policy, cwnd_bytes}'
  polycc flow set 7 --alg fused --pilot bbr --copilot cubic
  polycc stats
  polycc stats --json --once | jq -s 'map(.throughput_bytes_per_sec) | add'
  polycc model load onnx/mocc.onnx

Rules are tried in order and the first match gives a new flow its policy; flows no rule matches
run the agent's default (its --alg flags). Changes apply to new flows and are written to the
agent's --policy file atomically; with --apply-live, live flows the changed rule now matches
move to its policy too. A moved flow (also `flow set`) keeps its window, rate and path
estimates: the new algorithm starts from them.

Exit status: 0 done; 1 the agent refused (e.g. cannot write its policy file); 2 bad flags; 3 the
agent is not running; 4 permission denied (the socket is root-only); 5 invalid CIDR; 6 unknown
field; 7 bad port range; 8 invalid policy; 9 other invalid rule; 10 no such rule; 11 protocol
error; 12 no model file; 13 model file unreadable; 14 invalid model (the old model stays); 15 no
such flow; 16 the flow id is on several datapaths (pass --datapath); 17 the agent did not make a
live change in time; 18 cannot write trace's --png.";

/// Steer polycc-portus: per-flow policy rules and live flows.
#[derive(Parser, Debug)]
#[command(name = "polycc", version, after_help = AFTER_HELP)]
struct Cli {
    /// The agent's control socket (its --control-socket).
    #[arg(long, global = true, value_name = "PATH", default_value = DEFAULT_SOCKET)]
    socket: PathBuf,

    /// Print the agent's JSON instead of a table.
    #[arg(long, global = true)]
    json: bool,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Per-flow policy rules.
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// The live flows: policy, pilot and copilots, cwnd, rate, RTT, throughput, reports/s
    /// (rates over the agent's last 0.5 s).
    #[command(after_help = FLOWS_HELP)]
    Flows(FlowsArgs),
    /// One live flow.
    #[command(subcommand)]
    Flow(FlowCommand),
    /// Per-flow per-second statistics (throughput, sending rate, loss, RTT, time in slow start
    /// and app-limited), as they come.
    #[command(after_help = STATS_HELP)]
    Stats(StatsArgs),
    /// Follow one flow through the per-second statistics: a line per second (cwnd, rate, RTT,
    /// throughput, a fusion's chosen member), sparklines at the end, and a PNG with --png.
    #[command(after_help = trace::TRACE_HELP)]
    Trace(trace::TraceArgs),
    /// MOCC's model.
    #[command(subcommand)]
    Model(ModelCommand),
}

#[derive(Subcommand, Debug)]
enum ModelCommand {
    /// Validate an ONNX model and make every MOCC flow use it from its next decision on; a
    /// model that fails validation changes nothing.
    Load { path: PathBuf },
}

const FLOWS_HELP: &str = "\
Examples:
  polycc flows
  polycc flows --watch
  polycc flows --watch --interval 250ms
  polycc flows --json

With --watch, each row ends with HISTORY: a sparkline (▁ to █) of the flow's throughput over the
last 30 redraws, newest on the right, each flow from 0 to its own peak in that window (so a slow
flow's shape shows as well as a fast one's; THROUGHPUT gives the level). polycc keeps it between
redraws; a flow that closes drops it, and one that has just appeared has a short line.";

const STATS_HELP: &str = "\
Examples:
  polycc stats                    # a table of each second's records as they come, until ^C
  polycc stats --json             # the same as JSON lines
  polycc stats --once --since 0   # every record the agent holds (its last 120 s), then exit

Records: throughput (acknowledged bytes per second); the sending rate the flow was allowed over
its reports (pacing rate, else window / RTT): min, avg, max; loss rate (lost / (lost +
delivered) packets); RTT min and mean; seconds of the interval in slow start and app-limited
(nothing queued and less than the window in flight).";

#[derive(Args, Debug)]
struct FlowsArgs {
    /// Redraw the table every --interval until ^C, each flow with a sparkline of its
    /// throughput over the last 30 redraws (see below).
    #[arg(long)]
    watch: bool,
    /// With --watch: how often (e.g. 1s, 500ms).
    #[arg(long, default_value = "1s", value_parser = parse_interval, requires = "watch")]
    interval: Duration,
}

#[derive(Args, Debug)]
struct StatsArgs {
    /// Print what the agent holds and exit, instead of following.
    #[arg(long)]
    once: bool,
    /// Start after this record (0: everything the agent holds); default: from now, or with
    /// --once everything.
    #[arg(long, value_name = "SEQ")]
    since: Option<u64>,
    /// How often to ask the agent for new records.
    #[arg(long, default_value = "1s", value_parser = parse_interval)]
    interval: Duration,
}

#[derive(Subcommand, Debug)]
enum FlowCommand {
    /// Move a live flow to another policy now; its new algorithm starts from the flow's
    /// window, rate and path estimates (no collapse). The flow leaves its rule.
    #[command(
        after_help = "Examples:\n  polycc flow set 7 --alg copa\n  polycc flow set 7 --alg fused --pilot bbr --copilot cubic --fusion max\n  polycc flow set 7 --policy-json '{\"alg\":\"cubic\",\"beta\":0.8}'"
    )]
    Set(Box<SetArgs>),
}

#[derive(Args, Debug)]
struct SetArgs {
    /// The flow's id (FLOW in `polycc flows`).
    id: u32,
    /// The datapath, when several have a flow with this id (DATAPATH in `polycc flows --json`).
    #[arg(long)]
    datapath: Option<String>,
    /// The policy as JSON, in the policy file's form, instead of the flags.
    #[arg(long, value_name = "JSON")]
    policy_json: Option<String>,
    /// The policy: the agent's own flags.
    #[command(flatten)]
    policy: PolicyArgs,
}

/// "1s", "250ms", "2.5s", or bare seconds.
fn parse_interval(s: &str) -> Result<Duration, String> {
    let (num, unit) = match s.strip_suffix("ms") {
        Some(n) => (n, 1e-3),
        None => (s.strip_suffix('s').unwrap_or(s), 1.0),
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v * unit >= 0.05 && v * unit <= 3600.0 => Ok(Duration::from_secs_f64(v * unit)),
        _ => Err(format!("`{s}` is not an interval between 50ms and 3600s (e.g. 1s, 500ms)")),
    }
}

#[derive(Subcommand, Debug)]
enum PolicyCommand {
    /// The rules, in match order.
    List,
    /// One rule.
    Show { id: u32 },
    /// Add a rule (last unless --first or --position).
    Add(Box<AddArgs>),
    /// Put a new rule in the place of rule ID, keeping its id and position.
    #[command(
        after_help = "Examples:\n  polycc policy replace 3 --dst-port 5201 --alg copa\n  polycc policy replace 3 --dst-port 5201 --alg vivace --apply-live"
    )]
    Replace(Box<ReplaceArgs>),
    /// Remove a rule.
    Remove { id: u32 },
}

#[derive(Args, Debug)]
struct AddArgs {
    #[command(flatten)]
    rule: RuleArgs,
    /// Put the rule first.
    #[arg(long, conflicts_with = "position")]
    first: bool,
    /// Put the rule at this 0-based place in the match order.
    #[arg(long, value_name = "N")]
    position: Option<usize>,
    /// Also move the live flows the rule matches to its policy (state handed over); without
    /// it the rule applies to new flows only.
    #[arg(long)]
    apply_live: bool,
}

#[derive(Args, Debug)]
struct ReplaceArgs {
    /// The rule to replace (ID in `polycc policy list`).
    #[arg(value_name = "ID")]
    rule_id: u32,
    #[command(flatten)]
    rule: RuleArgs,
    /// Also move the live flows the new rule matches to its policy (state handed over).
    #[arg(long)]
    apply_live: bool,
}

#[derive(Args, Debug)]
struct RuleArgs {
    /// Destination subnet, IPv4 or IPv6, e.g. 10.0.0.0/8 or 2001:db8::/32 (a bare address is a
    /// /32 or a /128).
    #[arg(long, value_name = "CIDR")]
    dst: Option<String>,
    /// Source subnet, IPv4 or IPv6.
    #[arg(long, value_name = "CIDR")]
    src: Option<String>,
    /// Destination port or range, e.g. 5201 or 5000-5999.
    #[arg(long, value_name = "PORTS")]
    dst_port: Option<String>,
    /// Source port or range.
    #[arg(long, value_name = "PORTS")]
    src_port: Option<String>,
    /// The congestion control name the socket asked for (CREATE's congAlg; "ccp" from the
    /// polycc module).
    #[arg(long, value_name = "NAME")]
    cong_alg: Option<String>,
    /// Fix the rule's id (default: one more than the largest).
    #[arg(long)]
    id: Option<u32>,
    /// The whole rule as JSON, in the policy file's form, instead of the flags above.
    #[arg(long, value_name = "JSON", conflicts_with_all = ["dst", "src", "dst_port", "src_port", "cong_alg", "id"])]
    rule: Option<String>,
    /// The policy the matching flows run: the agent's own flags.
    #[command(flatten)]
    policy: PolicyArgs,
}

/// What went wrong, and the exit status it gets.
struct Failure {
    code: u8,
    message: String,
}

fn fail(code: u8, message: impl Into<String>) -> Failure {
    Failure { code, message: message.into() }
}

fn rule_failure(e: &RuleError) -> Failure {
    fail(code_of(ErrorCode::of_rule_error(e)), format!("invalid rule: {e}"))
}

fn code_of(e: ErrorCode) -> u8 {
    match e {
        ErrorCode::InvalidCidr => exit::INVALID_CIDR,
        ErrorCode::UnknownField => exit::UNKNOWN_FIELD,
        ErrorCode::BadPortRange => exit::BAD_PORT_RANGE,
        ErrorCode::InvalidPolicy => exit::INVALID_POLICY,
        ErrorCode::InvalidRule => exit::INVALID_RULE,
        ErrorCode::NoSuchRule => exit::NO_SUCH_RULE,
        ErrorCode::MalformedRequest | ErrorCode::RequestTooLong => exit::PROTOCOL,
        ErrorCode::Busy | ErrorCode::PersistFailed => exit::AGENT_ERROR,
        ErrorCode::ModelMissing => exit::MODEL_MISSING,
        ErrorCode::ModelUnreadable => exit::MODEL_UNREADABLE,
        ErrorCode::ModelInvalid => exit::MODEL_INVALID,
        ErrorCode::NoSuchFlow => exit::NO_SUCH_FLOW,
        ErrorCode::AmbiguousFlow => exit::AMBIGUOUS_FLOW,
        ErrorCode::LoopBusy => exit::LOOP_BUSY,
    }
}

/// The rule the flags describe, checked here with the agent's own parser.
fn rule_from_flags(a: &RuleArgs) -> Result<Value, Failure> {
    let rule = match &a.rule {
        Some(text) => serde_json::from_str::<Value>(text)
            .map_err(|e| fail(exit::INVALID_RULE, format!("--rule is not JSON: {e}")))?,
        None => {
            let policy = a.policy.named_policy().map_err(|e| fail(exit::INVALID_POLICY, format!("invalid policy: {e}")))?;
            let mut m = Map::new();
            for (k, v) in [
                ("dst", &a.dst),
                ("src", &a.src),
                ("dst_ports", &a.dst_port),
                ("src_ports", &a.src_port),
                ("cong_alg", &a.cong_alg),
            ] {
                if let Some(v) = v {
                    m.insert(k.into(), Value::String(v.clone()));
                }
            }
            if let Some(id) = a.id {
                m.insert("id".into(), id.into());
            }
            m.insert("policy".into(), policy_to_json(&policy));
            Value::Object(m)
        }
    };
    parse_rule(&rule).map_err(|e| rule_failure(&e))?;
    Ok(rule)
}

fn ask(cli: &Cli, req: &Request) -> Result<Response, Failure> {
    let r = client::request(&cli.socket, req).map_err(|e| {
        let code = match e {
            ClientError::NotRunning { .. } | ClientError::Refused { .. } => exit::NOT_RUNNING,
            ClientError::Permission { .. } => exit::PERMISSION,
            ClientError::Io { .. } => exit::NOT_RUNNING,
            ClientError::Protocol { .. } => exit::PROTOCOL,
        };
        fail(code, e.to_string())
    })?;
    match &r.error {
        Some(e) if !r.ok => Err(fail(code_of(e.code), format!("the agent refused: {}", e.message))),
        _ => Ok(r),
    }
}

/// Left-aligned columns, two spaces apart.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let s: Vec<String> = cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        s.join("  ").trim_end().to_string() + "\n"
    };
    let mut out = line(header.to_vec());
    for r in rows {
        out += &line(r.iter().map(String::as_str).collect());
    }
    out
}

fn rules_table(rules: &[RuleView]) -> String {
    let rows: Vec<Vec<String>> = rules
        .iter()
        .map(|r| {
            let (when, policy) = r.description.split_once(" -> ").unwrap_or((&r.description, ""));
            vec![r.id.to_string(), r.position.to_string(), when.to_string(), policy.to_string()]
        })
        .collect();
    table(&["ID", "ORDER", "MATCH", "POLICY"], &rows)
}

fn mbit(bytes_per_sec: f64) -> String {
    format!("{:.2} Mbit/s", bytes_per_sec * 8.0 / 1e6)
}

/// A column a table may add on the right: its header and each row's cell.
type Column<'a> = (&'a str, &'a dyn Fn(&FlowRow) -> String);

fn flows_table(flows: &[FlowRow], extra: Option<Column<'_>>) -> String {
    let rows: Vec<Vec<String>> = flows
        .iter()
        .map(|f| {
            vec![
                f.flow.to_string(),
                f.src.clone(),
                f.dst.clone(),
                f.rule.map_or("default".into(), |r| r.to_string()),
                f.policy.clone(),
                f.pilot.clone(),
                if f.copilots.is_empty() { "-".into() } else { f.copilots.join(",") },
                format!("{:.1} KB", f64::from(f.cwnd_bytes) / 1e3),
                f.rate_bytes_per_sec.map_or("-".into(), |r| mbit(f64::from(r))),
                f.rtt_us.map_or("-".into(), |us| format!("{:.1} ms", us as f64 / 1e3)),
                mbit(f.throughput_bytes_per_sec),
                format!("{:.1}", f.reports_per_sec),
            ]
            .into_iter()
            .chain(extra.map(|(_, cell)| cell(f)))
            .collect()
        })
        .collect();
    let header = [
            "FLOW",
            "SRC",
            "DST",
            "RULE",
            "POLICY",
            "PILOT",
            "COPILOTS",
            "CWND",
            "RATE",
            "RTT",
            "THROUGHPUT",
            "REPORTS/S",
        ];
    let header: Vec<&str> = header.into_iter().chain(extra.map(|(name, _)| name)).collect();
    table(&header, &rows)
}

fn run(cli: &Cli) -> Result<String, Failure> {
    let json = |v: &dyn erased::Json| Ok(v.pretty() + "\n");
    match &cli.command {
        Command::Model(ModelCommand::Load { path }) => {
            // The agent resolves paths in its own working directory: send an absolute one.
            let path =
                std::path::absolute(path).map_err(|e| fail(exit::MODEL_MISSING, format!("{}: {e}", path.display())))?;
            let r = ask(cli, &Request::ModelLoad { path })?;
            match (&r.model, cli.json) {
                (_, true) => json(&r),
                (Some(m), false) => Ok(format!(
                    "loaded MOCC model {} ({} bytes, seed {}); MOCC flows use it from their next decision\n",
                    m.path.display(),
                    m.size_bytes,
                    m.metadata.get("polycc.seed").map_or("?", String::as_str)
                )),
                (None, false) => Err(fail(exit::PROTOCOL, "the agent answered without the model")),
            }
        }
        Command::Flows(a) if a.watch => watch::watch_flows(cli, a.interval),
        Command::Flows(_) => {
            let flows = ask(cli, &Request::Flows {})?.flows.unwrap_or_default();
            if cli.json {
                json(&flows)
            } else {
                Ok(flows_text(&flows))
            }
        }
        Command::Stats(a) => stats(cli, a),
        Command::Trace(a) => trace::trace(cli, a),
        Command::Flow(FlowCommand::Set(a)) => {
            let policy = match &a.policy_json {
                Some(text) => serde_json::from_str::<Value>(text)
                    .map_err(|e| fail(exit::INVALID_POLICY, format!("--policy-json is not JSON: {e}")))?,
                None => policy_to_json(
                    &a.policy.named_policy().map_err(|e| fail(exit::INVALID_POLICY, format!("invalid policy: {e}")))?,
                ),
            };
            parse_policy(&policy).map_err(|kind| rule_failure(&RuleError { field: "policy".into(), kind }))?;
            let r = ask(cli, &Request::FlowSet { flow: a.id, datapath: a.datapath.clone(), policy })?;
            if cli.json {
                return json(&r);
            }
            Ok(r.moved.unwrap_or_default().iter().map(|m| moved_line(m) + "\n").collect())
        }
        Command::Policy(PolicyCommand::List) => {
            let rules = ask(cli, &Request::PolicyList {})?.rules.unwrap_or_default();
            if cli.json {
                json(&rules)
            } else if rules.is_empty() {
                Ok("no rules: every flow runs the agent's default policy\n".into())
            } else {
                Ok(rules_table(&rules))
            }
        }
        Command::Policy(PolicyCommand::Show { id }) => {
            let rules = ask(cli, &Request::PolicyShow { id: *id })?.rules.unwrap_or_default();
            match (cli.json, rules.first()) {
                (true, Some(r)) => json(r),
                (false, Some(r)) => Ok(format!(
                    "{}\nas a rule: {}\n",
                    rules_table(&rules).trim_end(),
                    serde_json::to_string(&r.rule).unwrap_or_default()
                )),
                (_, None) => Err(fail(exit::PROTOCOL, "the agent answered without the rule")),
            }
        }
        Command::Policy(PolicyCommand::Add(a)) => {
            let rule = rule_from_flags(&a.rule)?;
            let position = if a.first { Some(0) } else { a.position };
            let r = ask(cli, &Request::PolicyAdd { rule, position, apply_live: a.apply_live })?;
            changed(cli, &r, "added")
        }
        Command::Policy(PolicyCommand::Replace(a)) => {
            let rule = rule_from_flags(&a.rule)?;
            let r = ask(cli, &Request::PolicyReplace { id: a.rule_id, rule, apply_live: a.apply_live })?;
            changed(cli, &r, "replaced")
        }
        Command::Policy(PolicyCommand::Remove { id }) => {
            let r = ask(cli, &Request::PolicyRemove { id: *id })?;
            changed(cli, &r, "removed")
        }
    }
}

/// The answer to a change: the rule, where it was written, warnings on stderr.
fn changed(cli: &Cli, r: &Response, what: &str) -> Result<String, Failure> {
    for w in &r.warnings {
        eprintln!("warning: {w}");
    }
    if cli.json {
        return Ok(erased::Json::pretty(r) + "\n");
    }
    let rules = r.rules.clone().unwrap_or_default();
    let mut out = match rules.first() {
        Some(rule) => format!("{what} rule {}: {}\n", rule.id, rule.description),
        None => format!("{what}\n"),
    };
    if let Some(p) = &r.persisted {
        out += &format!("written to {}\n", p.display());
    }
    match &r.moved {
        Some(moved) if moved.is_empty() => out += "no live flow moved: none matches the rule, or all run its policy\n",
        Some(moved) => out.extend(moved.iter().map(|m| moved_line(m) + "\n")),
        None => {}
    }
    Ok(out)
}

fn moved_line(m: &MovedFlow) -> String {
    format!(
        "flow {}: {} -> {} (cwnd {:.1} KB -> {:.1} KB, state handed over)",
        m.flow,
        m.from,
        m.to,
        f64::from(m.cwnd_before_bytes) / 1e3,
        f64::from(m.cwnd_after_bytes) / 1e3
    )
}

fn flows_text(flows: &[FlowRow]) -> String {
    if flows.is_empty() {
        "no flows\n".into()
    } else {
        flows_table(flows, None)
    }
}

/// Set by SIGINT/SIGTERM: the loops below end cleanly (exit 0) instead of dying mid-line.
fn stop_flag() -> Result<Arc<AtomicBool>, Failure> {
    let stop = Arc::new(AtomicBool::new(false));
    for s in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(s, Arc::clone(&stop))
            .map_err(|e| fail(exit::AGENT_ERROR, format!("cannot handle signals: {e}")))?;
    }
    Ok(stop)
}

/// Sleep `d` in small steps, returning early once `stop` is set.
fn nap(d: Duration, stop: &AtomicBool) {
    let end = Instant::now() + d;
    while !stop.load(Ordering::SeqCst) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20).min(end.saturating_duration_since(Instant::now())));
    }
}

fn stats_row(r: &StatsRecord) -> Vec<String> {
    let rate = |x: Option<f64>| x.map_or("-".into(), |v| format!("{:.2}", v * 8.0 / 1e6));
    let ms = |x: Option<f64>| x.map_or("-".into(), |v| format!("{:.1}", v / 1e3));
    vec![
        r.seq.to_string(),
        r.meta.flow.to_string(),
        r.meta.dst.clone(),
        r.meta.policy.clone(),
        mbit(r.throughput_bytes_per_sec),
        format!(
            "{}/{}/{} Mbit/s",
            rate(r.send_rate_min_bytes_per_sec),
            rate(r.send_rate_avg_bytes_per_sec),
            rate(r.send_rate_max_bytes_per_sec)
        ),
        format!("{:.2}%", r.loss_frac * 100.0),
        format!("{}/{} ms", ms(r.rtt_min_us), ms(r.rtt_avg_us)),
        format!("{:.2}s", r.slow_start_s),
        format!("{:.2}s", r.app_limited_s),
    ]
}

fn stats_table(records: &[StatsRecord]) -> String {
    let header: Vec<&str> = vec![
        "SEQ",
        "FLOW",
        "DST",
        "POLICY",
        "THROUGHPUT",
        "SEND RATE min/avg/max",
        "LOSS",
        "RTT min/avg",
        "SLOW START",
        "APP-LIMITED",
    ];
    table(&header, &records.iter().map(stats_row).collect::<Vec<_>>())
}

/// `stats`: poll `{"cmd":"stats","since":SEQ}` and print new records, a table per batch or
/// JSON lines.
fn stats(cli: &Cli, a: &StatsArgs) -> Result<String, Failure> {
    let print = |records: &[StatsRecord]| -> bool {
        let text = if cli.json {
            records.iter().map(|r| serde_json::to_string(r).unwrap_or_default() + "\n").collect::<String>()
        } else if records.is_empty() {
            String::new()
        } else {
            stats_table(records)
        };
        let mut out = std::io::stdout();
        out.write_all(text.as_bytes()).and_then(|()| out.flush()).is_ok()
    };
    let poll = |since: Option<u64>| -> Result<(Vec<StatsRecord>, u64, u64), Failure> {
        let r = ask(cli, &Request::Stats { since })?;
        match r.stats {
            Some(a) => Ok((a.records, a.next, a.missed)),
            None => Ok((Vec::new(), since.unwrap_or(0), 0)),
        }
    };
    if a.once {
        let (records, _, missed) = poll(a.since)?;
        if missed > 0 {
            eprintln!("warning: {missed} records after --since are no longer held by the agent");
        }
        if records.is_empty() && !cli.json {
            return Ok("no records yet (the agent makes one per flow per second)\n".into());
        }
        print(&records);
        return Ok(String::new());
    }
    let stop = stop_flag()?;
    // From now, unless --since says where.
    let mut cursor = match a.since {
        Some(s) => s,
        None => poll(None)?.1,
    };
    while !stop.load(Ordering::SeqCst) {
        let (records, next, missed) = poll(Some(cursor))?;
        if missed > 0 {
            eprintln!("warning: {missed} records were dropped before they could be printed (poll more often)");
        }
        cursor = next;
        if !print(&records) {
            break;
        }
        nap(a.interval, &stop);
    }
    Ok(String::new())
}

/// Pretty JSON for anything serializable, behind one object-safe trait.
mod erased {
    pub trait Json {
        fn pretty(&self) -> String;
    }
    impl<T: serde::Serialize> Json for T {
        fn pretty(&self) -> String {
            serde_json::to_string_pretty(self).unwrap_or_default()
        }
    }
}

fn main() -> ExitCode {
    // `make install`'s man pages and completions (POLYCC_CLI_DOCS=DIR), from this very command.
    if let Some(code) = polycc_clidoc::write_if_requested(Cli::command) {
        return code;
    }
    let cli = Cli::parse();
    match run(&cli) {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(f) => {
            eprintln!("polycc: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_and_exit_codes_are_distinct() {
        Cli::command().debug_assert();
        let mut codes = [
            exit::AGENT_ERROR,
            exit::USAGE,
            exit::NOT_RUNNING,
            exit::PERMISSION,
            exit::INVALID_CIDR,
            exit::UNKNOWN_FIELD,
            exit::BAD_PORT_RANGE,
            exit::INVALID_POLICY,
            exit::INVALID_RULE,
            exit::NO_SUCH_RULE,
            exit::PROTOCOL,
            exit::MODEL_MISSING,
            exit::MODEL_UNREADABLE,
            exit::MODEL_INVALID,
            exit::NO_SUCH_FLOW,
            exit::AMBIGUOUS_FLOW,
            exit::LOOP_BUSY,
            exit::OUTPUT,
        ];
        codes.sort_unstable();
        assert!(codes.windows(2).all(|w| w[0] != w[1]));
    }

    #[test]
    fn add_flags_become_the_file_form_of_a_rule() {
        let cli =
            Cli::parse_from(["polycc", "policy", "add", "--dst-port", "5201", "--dst", "10.0.0.0/8", "--alg", "copa"]);
        let Command::Policy(PolicyCommand::Add(a)) = &cli.command else { panic!() };
        let rule = rule_from_flags(&a.rule).ok().unwrap();
        assert_eq!(rule, serde_json::json!({"dst": "10.0.0.0/8", "dst_ports": "5201", "policy": "copa"}));
    }

    #[test]
    fn tables_align() {
        let t = table(&["ID", "MATCH"], &[vec!["1".into(), "dst_ports 5201".into()], vec!["12".into(), "x".into()]]);
        assert_eq!(t, "ID  MATCH\n1   dst_ports 5201\n12  x\n");
    }
}
