//! `polycc-portus`: the polycc CCP agent. Serves every flow of a CCP datapath (the polycc
//! kernel module over netlink, or a libccp datapath over a unix socket) with the policy its
//! flags describe: the same flags, parser and `Policy::build` as `polycc-sim`.

use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, ValueEnum};
use polycc_agent::affinity;
use polycc_agent::control::{ControlSocket, Shared, DEFAULT_SOCKET};
use polycc_agent::error::AgentError;
use polycc_agent::policy_file;
use polycc_agent::policy_rules::{self, RuleSet};
use polycc_agent::transport::{Netlink, NetlinkMode, Transport, Unix};
use polycc_agent::{logging, Agent, AgentConfig, JsonLog};
use polycc_algorithms::quantity::ReportInterval;
use polycc_args::PolicyArgs;
use slog::{error, info, warn, Level, Logger};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Ipc {
    /// The polycc kernel module ccp.ko (needs root or CAP_NET_ADMIN), over the transport it
    /// was loaded with: its generic netlink family (default) or NETLINK_USERSOCK (ipc=usersock).
    Netlink,
    /// A userspace libccp datapath on a unix datagram socket (see --unix-socket).
    Unix,
    /// No module: register the BPF congestion control `polycc_bpf` (struct_ops) on this host's
    /// kernel and serve its flows (needs root and a kernel with BTF; see docs/bpf-datapath.md).
    Bpf,
}

/// `--bpf-pin-dir`'s default, whether or not the BPF datapath is built in.
const fn polycc_bpf_pin_dir() -> &'static str {
    "/sys/fs/bpf/polycc"
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum LogLevel {
    Error,
    Warn,
    Info,
    /// Also every report's decision.
    Debug,
}

const AFTER_HELP: &str = "\
Examples:
  sudo polycc-portus --ipc netlink --alg cubic
  sudo polycc-portus --ipc netlink --alg fused --pilot bbr --copilot cubic --fusion max --log-json run.jsonl
  polycc-portus --ipc unix --alg reno --report-interval 10ms
  sudo polycc-portus --datapath bpf --alg cubic      # then: iperf3 -C polycc_bpf ...
  sudo polycc-portus --alg cubic --policy /etc/polycc/policy.toml

Every flow the datapath creates runs the policy of the first --policy rule that matches its
addresses, ports and congestion control name, else the policy these flags describe. Rules are
changed live with `polycc policy ...` over --control-socket (each change rewrites the file
atomically; new rules apply to new flows). A --policy file:

  [[rule]]
  dst_ports = \"5201\"             # or \"5000-5999\"; also src_ports, dst/src = \"10.0.0.0/8\", cong_alg
  policy = \"copa\"                # or { alg = \"cubic\", beta = 0.8 }, or { fused = { pilot = { alg = \"bbr\" }, copilots = [{ alg = \"cubic\" }] } }

Reports come once per RTT (or every --report-interval), and at once on loss or timeout.

Exit status: 0 after SIGINT/SIGTERM; 2 bad flags; 3 netlink needs root/CAP_NET_ADMIN; 4 netlink
failed otherwise; 5 unix socket path problem; 6 another agent holds the unix socket; 7 cannot
write --log-json; 8 the datapath connection failed while running; 9 bad --policy file; 10
control socket problem; 11 the BPF datapath cannot be registered; 70 internal error.";

/// The polycc CCP agent: drives datapath flows with polycc's algorithms and fused policies.
#[derive(Parser, Debug)]
#[command(name = "polycc-portus", version, after_help = AFTER_HELP)]
struct Cli {
    /// The datapath and how to reach it (`--datapath` is the same flag).
    #[arg(long, alias = "datapath", value_enum, default_value = "netlink")]
    ipc: Ipc,

    /// With --datapath bpf: a report unanswered this long (ms) puts its flow into the BPF
    /// fallback (Reno) until the agent answers again.
    #[arg(long, value_name = "MS", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    fallback_timeout_ms: u64,

    /// With --datapath bpf: no timed report sooner than this many microseconds after the last
    /// (loss and timeout reports are never held). Once per RTT is tens of thousands of reports a
    /// second on loopback; 0 reports every RTT however short, as ccp.ko.
    #[arg(long, value_name = "US", default_value_t = 200, value_parser = clap::value_parser!(u64).range(0..=10_000_000))]
    bpf_min_report_us: u64,

    /// With --datapath bpf: pin the control map, ring buffer and flow-id counter here (bpffs;
    /// /sys/fs/bpf is mounted if nothing is there) and reuse an earlier agent's, so its live
    /// flows are adopted after a restart.
    #[arg(long, value_name = "DIR", default_value = polycc_bpf_pin_dir())]
    bpf_pin_dir: PathBuf,

    /// With --datapath bpf: private maps (flows of an agent that exits finish in the fallback).
    #[arg(long)]
    bpf_no_pin: bool,

    /// With --datapath bpf: spin this many microseconds on the ring buffer before sleeping
    /// (lower report-to-update latency for one core's worth of CPU while reports flow; 0: off).
    #[arg(long, value_name = "US", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    bpf_busy_poll_us: u64,

    /// With --datapath bpf: write report-to-update round-trip percentiles (JSON) here on exit.
    #[arg(long, value_name = "FILE")]
    bpf_latency_out: Option<PathBuf>,

    /// With --ipc unix: the socket the agent binds (datapaths send to it).
    #[arg(long, value_name = "PATH", default_value = "/tmp/ccp/portus")]
    unix_socket: PathBuf,

    #[command(flatten)]
    policy: PolicyArgs,

    /// Report cadence: auto (the algorithm's own: PCC and Copa four per RTT, MOCC every 10 ms,
    /// others once per RTT), rtt (once per RTT for every algorithm) or a duration such as 10ms.
    #[arg(long, default_value = "auto")]
    report_interval: ReportInterval,

    /// Write one JSON object per line for every flow creation, report (with its decision) and
    /// close.
    #[arg(long, value_name = "FILE")]
    log_json: Option<PathBuf>,

    // The help is an attribute, not a doc comment: rustdoc reads `[[rule]]` as a link.
    #[arg(
        long = "policy",
        value_name = "FILE",
        help = "Per-flow policy rules (TOML, [[rule]] tables; see below). Loaded at start; a missing file \
                is an empty rule set, created on the first change through the control socket."
    )]
    policy_file: Option<PathBuf>,

    /// The control socket `polycc` talks to (created mode 0600, its directory 0700: root-only
    /// when the agent runs as root).
    #[arg(long, value_name = "PATH", default_value = DEFAULT_SOCKET)]
    control_socket: PathBuf,

    /// Least severe level logged on stderr.
    #[arg(long, value_enum, default_value = "info")]
    log_level: LogLevel,

    /// Diagnostics: hold every flow's window at this many packets, unpaced, instead of running
    /// the policy (checks that the datapath enforces what the agent installs).
    #[arg(long, value_name = "PACKETS", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pin_cwnd: Option<u64>,

    /// Diagnostics: pace every flow at this rate (e.g. 45mbit) instead of running the policy, in
    /// the --pin-cwnd window or one the rate fills in 0.5 s (measures what the datapath delivers
    /// of a rate it was set: the guest's pacing, under loss).
    #[arg(long, value_name = "RATE", value_parser = polycc_algorithms::quantity::parse_bandwidth)]
    pin_rate: Option<polycc_algorithms::units::Rate>,

    /// Diagnostics: answer none of a flow's reports once it is this old (e.g. 2s), while still
    /// reading them: the agent is alive and quiet, as a portus algorithm is during loss
    /// recovery. Checks that the datapath keeps such a flow at what was installed.
    #[arg(long, value_name = "DURATION", value_parser = polycc_algorithms::quantity::parse_duration)]
    quiet_after: Option<std::time::Duration>,

    /// Run the agent on this CPU only (all its threads), e.g. to give an agent that busy-polls
    /// (--bpf-busy-poll-us) a core of its own (docs/bpf-datapath.md).
    #[arg(long, value_name = "N")]
    cpu: Option<usize>,

    /// Validate the flags, print the policy, and exit.
    #[arg(long)]
    check: bool,
}

/// The flags that apply to one datapath only (their clap ids), and the datapath.
const DATAPATH_FLAGS: &[(&str, Ipc)] = &[
    ("fallback_timeout_ms", Ipc::Bpf),
    ("bpf_min_report_us", Ipc::Bpf),
    ("bpf_pin_dir", Ipc::Bpf),
    ("bpf_no_pin", Ipc::Bpf),
    ("bpf_busy_poll_us", Ipc::Bpf),
    ("bpf_latency_out", Ipc::Bpf),
    ("unix_socket", Ipc::Unix),
];

/// A flag of one datapath given with another would be ignored: refused as a bad flag (exit 2).
fn refuse_other_datapaths_flags(cli: &Cli, matches: &ArgMatches) {
    let name = |ipc: Ipc| ipc.to_possible_value().map(|v| v.get_name().to_owned()).unwrap_or_default();
    for &(id, applies_to) in DATAPATH_FLAGS {
        if applies_to != cli.ipc && matches.value_source(id) == Some(ValueSource::CommandLine) {
            let flag = format!("--{}", id.replace('_', "-"));
            let msg = format!(
                "{flag} applies to --datapath {} only; this agent runs --datapath {} and would ignore it",
                name(applies_to),
                name(cli.ipc)
            );
            Cli::command().error(clap::error::ErrorKind::ArgumentConflict, msg).exit();
        }
    }
}

/// Pins this process (every thread it starts after) to CPU `n`; an error names the CPUs it may use.
fn pin_to_cpu(n: usize) -> Result<(), String> {
    let cpus = affinity::allowed_cpus().map_err(|e| format!("cannot read this process's CPUs: {e}"))?;
    if !cpus.contains(&n) {
        let list = cpus.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(", ");
        return Err(format!("--cpu {n}: this process may run on CPUs {list} only"));
    }
    affinity::run_on(&[n]).map_err(|e| format!("--cpu {n}: {e}"))
}

fn run<T: Transport>(
    transport: T,
    cfg: AgentConfig,
    log: &Logger,
    json: Option<JsonLog>,
    control: (&Path, Arc<Shared>),
) -> Result<(), AgentError> {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop)).map_err(AgentError::Ipc)?;
    }
    let agent = Agent::new(transport, cfg, log.clone(), json)?;
    // Opened after the datapath socket, so the datapath's errors keep their exit statuses; the
    // socket file is removed when `socket` drops, on any exit from here.
    let socket = ControlSocket::open(control.0)?;
    socket.spawn(Arc::clone(&control.1), log.clone()).map_err(AgentError::Ipc)?;
    info!(log, "control socket ready"; "path" => %socket.path().display());
    agent.with_control(control.1).run(&stop).map_err(AgentError::Ipc)
}

/// How many of `--policy`'s rules the agent logs at start.
const RULES_LOGGED: usize = 20;

/// The rules of `--policy`, with a warning per overlap (the first few, then a count).
fn load_rules(path: Option<&Path>, log: &Logger) -> Result<RuleSet, AgentError> {
    let Some(path) = path else { return Ok(RuleSet::default()) };
    if !path.exists() {
        warn!(log, "policy file does not exist: no rules until one is added (polycc policy add), which creates it";
            "path" => %path.display());
    }
    let rules = policy_file::load(path)?;
    for line in policy_rules::overlaps(&rules, policy_rules::OVERLAPS_SHOWN).lines() {
        warn!(log, "{line}"; "file" => %path.display());
    }
    // Bounded like the warnings: a start with 100,000 rules logs a page, not 100,000 lines.
    for r in rules.rules().iter().take(RULES_LOGGED) {
        info!(log, "policy rule"; "id" => r.id, "rule" => r.describe());
    }
    if let Some(more) = rules.rules().len().checked_sub(RULES_LOGGED).filter(|&more| more > 0) {
        info!(log, "and more policy rules (polycc policy list shows them all)"; "more" => more);
    }
    Ok(rules)
}

/// The MOCC models the rules name, loaded before any flow needs one.
fn load_rule_models(shared: &Shared, policy_file: Option<&Path>) -> Result<usize, AgentError> {
    let rules = shared.rules();
    shared.load_rule_models(rules.rules().iter().map(|r| &r.policy)).map_err(|(_, message)| AgentError::RuleModel {
        path: policy_file.map(Path::to_path_buf).unwrap_or_default(),
        message,
    })
}

fn start(cli: &Cli, cfg: AgentConfig, log: &Logger) -> Result<(), AgentError> {
    let rules = load_rules(cli.policy_file.as_deref(), log)?;
    let mut shared = Shared::new(rules, cli.policy_file.clone());
    load_rule_models(&shared, cli.policy_file.as_deref())?;
    // `polycc model load` swaps the model the flags loaded (one slot for every MOCC flow).
    if let Some(slot) = cfg.policy.mocc_slot() {
        shared = shared.with_model_slot(slot);
    }
    let shared = Arc::new(shared);
    let control = (cli.control_socket.as_path(), shared);
    let json = match &cli.log_json {
        None => None,
        Some(path) => {
            let f = std::fs::File::create(path).map_err(|source| AgentError::LogFile { path: path.clone(), source })?;
            Some(JsonLog::new(Box::new(std::io::BufWriter::new(f))))
        }
    };
    match cli.ipc {
        Ipc::Netlink => {
            let t = Netlink::open()?;
            match t.mode() {
                NetlinkMode::Genl { family } => {
                    info!(log, "connected to ccp.ko over generic netlink"; "family" => "polycc_ccp", "id" => family)
                }
                NetlinkMode::Usersock => {
                    info!(log, "listening on NETLINK_USERSOCK group 22 (ccp.ko ipc=usersock; or, until a ccp.ko with the default ipc=genl is loaded)")
                }
            }
            run(t, cfg, log, json, control)
        }
        Ipc::Unix => {
            let t = Unix::open(&cli.unix_socket)?;
            info!(log, "listening on a unix socket"; "path" => %cli.unix_socket.display());
            run(t, cfg, log, json, control)
        }
        #[cfg(feature = "bpf")]
        Ipc::Bpf => {
            let bpf_cfg = polycc_bpf::Config {
                fallback_timeout: std::time::Duration::from_millis(cli.fallback_timeout_ms),
                min_report_interval: std::time::Duration::from_micros(cli.bpf_min_report_us),
                pin_dir: (!cli.bpf_no_pin).then(|| cli.bpf_pin_dir.clone()),
            };
            let spin = std::time::Duration::from_micros(cli.bpf_busy_poll_us);
            let t = polycc_agent::bpf::Bpf::open(&bpf_cfg, spin, cli.bpf_latency_out.clone())?;
            match t.datapath().pinning() {
                polycc_bpf::Pinning::Failed(why) => {
                    warn!(log, "BPF maps not pinned: flows will not outlive this agent's control"; "why" => why)
                }
                p => info!(log, "BPF maps"; "pinning" => ?p, "dir" => %cli.bpf_pin_dir.display()),
            }
            info!(log, "BPF congestion control registered"; "name" => polycc_bpf::CA_NAME,
                "fallback_timeout_ms" => cli.fallback_timeout_ms);
            run(t, cfg, log, json, control)
        }
        #[cfg(not(feature = "bpf"))]
        Ipc::Bpf => Err(polycc_agent::transport::OpenError::BpfNotBuilt.into()),
    }
}

fn main() -> ExitCode {
    // `make install`'s man pages and completions (POLYCC_CLI_DOCS=DIR), from this very command.
    if let Some(code) = polycc_clidoc::write_if_requested(Cli::command) {
        return code;
    }
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    refuse_other_datapaths_flags(&cli, &matches);
    let policy = cli.policy.policy_or_exit::<Cli>();
    if let Some(e) = cli.cpu.and_then(|n| pin_to_cpu(n).err()) {
        Cli::command().error(clap::error::ErrorKind::ValueValidation, e).exit();
    }
    if cli.check {
        println!("policy {} (reports: {})", policy.describe(), cli.report_interval);
        if let Some(path) = &cli.policy_file {
            let loaded = policy_file::load(path).map_err(AgentError::from).and_then(|rules| {
                let shared = Shared::new(rules.clone(), Some(path.clone()));
                load_rule_models(&shared, Some(path)).map(|_| rules)
            });
            match loaded {
                Ok(rules) => {
                    for r in rules.rules() {
                        println!("rule {}: {}", r.id, r.describe());
                    }
                    for line in policy_rules::overlaps(&rules, policy_rules::OVERLAPS_SHOWN).lines() {
                        eprintln!("warning: {line}");
                    }
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(e.exit_code());
                }
            }
        }
        return ExitCode::SUCCESS;
    }
    let level = match cli.log_level {
        LogLevel::Error => Level::Error,
        LogLevel::Warn => Level::Warning,
        LogLevel::Info => Level::Info,
        LogLevel::Debug => Level::Debug,
    };
    let log = logging::stderr_logger(level);
    let cfg = AgentConfig {
        policy,
        report_interval: cli.report_interval,
        pin_cwnd_packets: cli.pin_cwnd,
        pin_rate: cli.pin_rate,
        quiet_after: cli.quiet_after,
    };
    match start(&cli, cfg, &log) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            error!(log, "{e}");
            ExitCode::from(e.exit_code())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use polycc_agent::error::exit;

    #[test]
    fn exit_codes_are_distinct() {
        let codes = [
            exit::USAGE,
            exit::NETLINK_PERMISSION,
            exit::NETLINK,
            exit::UNIX_SOCKET,
            exit::AGENT_RUNNING,
            exit::LOG_FILE,
            exit::IPC_FAILED,
            exit::POLICY_FILE,
            exit::CONTROL_SOCKET,
            exit::BPF,
            exit::INTERNAL,
        ];
        let mut sorted = codes.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), codes.len());
    }

    #[test]
    fn flags_parse() {
        Cli::command().debug_assert();
        let cli = Cli::parse_from(["x", "--ipc", "unix", "--alg", "reno", "--report-interval", "10ms"]);
        assert_eq!(cli.ipc, Ipc::Unix);
        assert_eq!(cli.report_interval, "10ms".parse().unwrap());
        let cli = Cli::parse_from(["x", "--datapath", "bpf", "--alg", "cubic", "--fallback-timeout-ms", "200"]);
        assert_eq!((cli.ipc, cli.fallback_timeout_ms), (Ipc::Bpf, 200));
    }
}
