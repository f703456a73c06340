//! `polycc`: steer a running `polycc-portus` over its control socket: list, show, add and
//! remove per-flow policy rules, and see the live flows.

use clap::{Args, Parser, Subcommand};
use polycc_agent::control::client::{self, ClientError};
use polycc_agent::control::{ErrorCode, FlowRow, Request, Response, RuleView, DEFAULT_SOCKET};
use polycc_agent::policy_rules::{parse_rule, policy_to_json, RuleError};
use polycc_args::PolicyArgs;
use serde_json::{Map, Value};
use std::path::PathBuf;
use std::process::ExitCode;

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
}

const AFTER_HELP: &str = "\
Examples:
  polycc policy list
  polycc policy add --dst-port 5201 --alg copa
  polycc policy add --dst 10.1.0.0/16 --alg fused --pilot bbr --copilot cubic --fusion max --first
  polycc policy add --rule '{\"src\":\"192.168.0.0/24\",\"policy\":{\"alg\":\"cubic\",\"beta\":0.8}}'
  polycc policy show 3
  polycc policy remove 3
  polycc flows
  polycc flows --json | jq '.[] | {flow, policy, cwnd_bytes}'

Rules are tried in order and the first match gives a new flow its policy; flows no rule matches
run the agent's default (its --alg flags). Changes apply to new flows and are written to the
agent's --policy file atomically.

Exit status: 0 done; 1 the agent refused (e.g. cannot write its policy file); 2 bad flags; 3 the
agent is not running; 4 permission denied (the socket is root-only); 5 invalid CIDR; 6 unknown
field; 7 bad port range; 8 invalid policy; 9 other invalid rule; 10 no such rule; 11 protocol
error.";

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
    Flows,
}

#[derive(Subcommand, Debug)]
enum PolicyCommand {
    /// The rules, in match order.
    List,
    /// One rule.
    Show { id: u32 },
    /// Add a rule (last unless --first or --position).
    Add(Box<AddArgs>),
    /// Remove a rule.
    Remove { id: u32 },
}

#[derive(Args, Debug)]
struct AddArgs {
    /// Destination subnet, e.g. 10.0.0.0/8 (a bare address is a /32).
    #[arg(long, value_name = "CIDR")]
    dst: Option<String>,
    /// Source subnet.
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
    /// Put the rule first.
    #[arg(long, conflicts_with = "position")]
    first: bool,
    /// Put the rule at this 0-based place in the match order.
    #[arg(long, value_name = "N")]
    position: Option<usize>,
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
    }
}

/// The rule the flags describe, checked here with the agent's own parser.
fn rule_from_flags(a: &AddArgs) -> Result<Value, Failure> {
    let rule = match &a.rule {
        Some(text) => serde_json::from_str::<Value>(text)
            .map_err(|e| fail(exit::INVALID_RULE, format!("--rule is not JSON: {e}")))?,
        None => {
            let policy = a.policy.policy().map_err(|e| fail(exit::INVALID_POLICY, format!("invalid policy: {e}")))?;
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

fn flows_table(flows: &[FlowRow]) -> String {
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
        })
        .collect();
    table(
        &[
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
        ],
        &rows,
    )
}

fn run(cli: &Cli) -> Result<String, Failure> {
    let json = |v: &dyn erased::Json| Ok(v.pretty() + "\n");
    match &cli.command {
        Command::Flows => {
            let flows = ask(cli, &Request::Flows {})?.flows.unwrap_or_default();
            if cli.json {
                json(&flows)
            } else if flows.is_empty() {
                Ok("no flows\n".into())
            } else {
                Ok(flows_table(&flows))
            }
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
            let rule = rule_from_flags(a)?;
            let position = if a.first { Some(0) } else { a.position };
            let r = ask(cli, &Request::PolicyAdd { rule, position })?;
            changed(cli, &r, "added")
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
    Ok(out)
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
    use clap::CommandFactory;

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
        ];
        codes.sort_unstable();
        assert!(codes.windows(2).all(|w| w[0] != w[1]));
    }

    #[test]
    fn add_flags_become_the_file_form_of_a_rule() {
        let cli =
            Cli::parse_from(["polycc", "policy", "add", "--dst-port", "5201", "--dst", "10.0.0.0/8", "--alg", "copa"]);
        let Command::Policy(PolicyCommand::Add(a)) = &cli.command else { panic!() };
        let rule = rule_from_flags(a).ok().unwrap();
        assert_eq!(rule, serde_json::json!({"dst": "10.0.0.0/8", "dst_ports": "5201", "policy": "copa"}));
    }

    #[test]
    fn tables_align() {
        let t = table(&["ID", "MATCH"], &[vec!["1".into(), "dst_ports 5201".into()], vec!["12".into(), "x".into()]]);
        assert_eq!(t, "ID  MATCH\n1   dst_ports 5201\n12  x\n");
    }
}
