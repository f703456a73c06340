//! `polycc-tune`: learns a Vivace configuration per (service, destination subnet) group and
//! context, against the agent (`--config FILE`) or against simulated populations (`--sim`).
//! Exit status: 0 done, 2 bad flags, 3-7 configuration errors (see `ConfigError::exit_code`),
//! 8 state file, 9 agent, 10 trace file.

use clap::{CommandFactory, Parser};
use indicatif::{ProgressBar, ProgressStyle};
use polycc_control::logging::stderr_logger;
use polycc_tune::agent_env::{self, LoopError};
use polycc_tune::config::Config;
use polycc_tune::state::State;
use polycc_tune::tuner::{self, describe, SimRun, TraceRow};
use slog::{info, warn, Level, Logger};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

const EXIT_STATE: u8 = 8;
const EXIT_AGENT: u8 = 9;
const EXIT_TRACE: u8 = 10;

#[derive(Parser, Debug)]
#[command(name = "polycc-tune", version, about = "Automated per-(service, subnet) customization of Vivace")]
struct Args {
    /// The configuration file (TOML).
    #[arg(long, short)]
    config: PathBuf,
    /// The state file (default: the configuration's `state`; --sim: none, nothing persisted).
    #[arg(long)]
    state: Option<PathBuf>,
    /// The agent's control socket (default: the configuration's `socket`, else /run/polycc/control.sock).
    #[arg(long)]
    socket: Option<PathBuf>,
    /// Run against the configuration's [sim] populations instead of the agent.
    #[arg(long)]
    sim: bool,
    /// Periods to run (--sim: in total, default the configuration's sim.periods; agent: from
    /// now, default forever).
    #[arg(long)]
    periods: Option<u64>,
    /// Write one row per group per period: CSV, or JSON when the name ends in .json.
    #[arg(long)]
    trace: Option<PathBuf>,
    /// --sim: evaluate the learned configuration against the base on this many fresh paths.
    #[arg(long, default_value_t = 64)]
    eval_flows: usize,
    /// Check the configuration and exit.
    #[arg(long)]
    check: bool,
    /// Only warnings and errors on stderr.
    #[arg(long, short)]
    quiet: bool,
}

/// Rows to a CSV or JSON trace, written as they come (a crash keeps what was written).
enum Trace {
    Csv(BufWriter<File>),
    Json(BufWriter<File>, bool),
}

impl Trace {
    fn open(path: &PathBuf) -> std::io::Result<Trace> {
        let mut w = BufWriter::new(File::create(path)?);
        if path.extension().is_some_and(|e| e == "json") {
            w.write_all(b"[\n")?;
            Ok(Trace::Json(w, true))
        } else {
            writeln!(
                w,
                "period,group,context,samples,reward,throughput_mbps,latency_ms,loss_frac,played,theta,events"
            )?;
            Ok(Trace::Csv(w))
        }
    }

    fn write(&mut self, rows: &[TraceRow]) -> std::io::Result<()> {
        let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.4}"));
        // A fraction, two more places than a percentage to keep its precision.
        let opt6 = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.6}"));
        match self {
            Trace::Csv(w) => {
                for r in rows {
                    writeln!(
                        w,
                        "{},{},{},{},{},{},{},{},\"{}\",\"{}\",\"{}\"",
                        r.period,
                        r.group,
                        r.context,
                        r.samples,
                        opt(r.reward),
                        opt(r.throughput_mbps),
                        opt(r.latency_ms),
                        opt6(r.loss_frac),
                        r.played,
                        r.theta,
                        r.events.replace('"', "'")
                    )?;
                }
                w.flush()
            }
            Trace::Json(w, first) => {
                for r in rows {
                    if !*first {
                        w.write_all(b",\n")?;
                    }
                    *first = false;
                    serde_json::to_writer(&mut *w, r)?;
                }
                w.flush()
            }
        }
    }

    fn close(self) -> std::io::Result<()> {
        match self {
            Trace::Csv(mut w) => w.flush(),
            Trace::Json(mut w, _) => {
                w.write_all(b"\n]\n")?;
                w.flush()
            }
        }
    }
}

fn main() -> ExitCode {
    // `make install`'s man pages and completions (POLYCC_CLI_DOCS=DIR), from this very command.
    if let Some(code) = polycc_clidoc::write_if_requested(Args::command) {
        return code;
    }
    let args = Args::parse();
    let log = stderr_logger(if args.quiet { Level::Warning } else { Level::Info });
    let cfg = match Config::load(&args.config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("polycc-tune: {e}");
            return ExitCode::from(e.exit_code() as u8);
        }
    };
    if args.check {
        println!(
            "{}: {} group(s), {} context(s), candidates: {}",
            args.config.display(),
            cfg.groups.len(),
            cfg.contexts.names().len(),
            cfg.space.params.iter().map(|(p, _)| p.name()).collect::<Vec<_>>().join(", ")
        );
        return ExitCode::SUCCESS;
    }
    let mut trace = match args.trace.as_ref().map(Trace::open).transpose() {
        Ok(t) => t,
        Err(e) => {
            eprintln!(
                "polycc-tune: cannot write the trace {}: {e}",
                args.trace.as_ref().map_or(String::new(), |p| p.display().to_string())
            );
            return ExitCode::from(EXIT_TRACE);
        }
    };
    let mut trace_err = None;
    let mut on_rows = |rows: &[TraceRow]| {
        if let Some(t) = trace.as_mut() {
            if let Err(e) = t.write(rows) {
                trace_err.get_or_insert(e);
            }
        }
    };
    let code =
        if args.sim { run_sim(&args, &cfg, &log, &mut on_rows) } else { run_agent(&args, &cfg, &log, &mut on_rows) };
    if let Some(e) = trace_err.or_else(|| trace.map(Trace::close).and_then(Result::err)) {
        eprintln!("polycc-tune: writing the trace failed: {e}");
        return ExitCode::from(EXIT_TRACE);
    }
    code
}

fn run_sim(args: &Args, cfg: &Config, log: &Logger, on_rows: &mut impl FnMut(&[TraceRow])) -> ExitCode {
    let Some(spec) = &cfg.sim else {
        eprintln!(
            "polycc-tune: {}: --sim needs a [sim] table (populations and a population per group)",
            args.config.display()
        );
        return ExitCode::from(7);
    };
    let state_path = args.state.clone();
    let state = match &state_path {
        Some(p) => State::load_or_new(p, &cfg.space),
        None => Ok(State::new(&cfg.space)),
    };
    let state = match state {
        Ok(s) => s,
        Err(e) => {
            eprintln!("polycc-tune: {e}");
            return ExitCode::from(EXIT_STATE);
        }
    };
    let periods = args.periods.unwrap_or(spec.periods);
    let start = state.period;
    let bar = ProgressBar::new(periods.saturating_sub(start));
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} periods, {elapsed} ({eta} left) {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let run = SimRun { periods, state_path: state_path.clone() };
    let result = tuner::run_sim(cfg, state, &run, |rows| {
        on_rows(rows);
        if let Some(r) = rows.iter().find_map(|r| r.reward) {
            bar.set_message(format!("reward {r:.2}"));
        }
        bar.inc(1);
    });
    bar.finish_and_clear();
    let state = match result {
        Ok(s) => s,
        Err(e) => {
            eprintln!("polycc-tune: {e}");
            return ExitCode::from(EXIT_STATE);
        }
    };
    info!(log, "simulated"; "periods" => periods - start);
    let t = tuner::Tuner::new(cfg, state);
    let last = periods.saturating_sub(1);
    let context = cfg.contexts.at(tuner::sim_clock(cfg, last));
    let mut summary = Vec::new();
    for g in &cfg.groups {
        let Some(learned) = t.learned(&g.name, &context) else { continue };
        let pop_name = spec.population_name(&g.name, last, &context).to_string();
        let eval = |c| tuner::evaluate(cfg, &g.name, &pop_name, c, args.eval_flows, spec.seed);
        let (base, tuned) = (eval(&cfg.space.base), eval(&learned));
        let gain = match (base, tuned) {
            (Some(b), Some(t)) if b.reward.abs() > 1e-9 => Some((t.reward - b.reward) / b.reward.abs()),
            _ => None,
        };
        summary.push(serde_json::json!({
            "group": g.name, "context": context, "population": pop_name,
            "learned": describe(cfg, &learned), "base": describe(cfg, &cfg.space.base),
            "base_eval": base, "learned_eval": tuned, "reward_gain_ratio": gain,
        }));
    }
    println!("{}", serde_json::to_string_pretty(&summary).unwrap_or_default());
    ExitCode::SUCCESS
}

fn run_agent(args: &Args, cfg: &Config, log: &Logger, on_rows: &mut impl FnMut(&[TraceRow])) -> ExitCode {
    let Some(state_path) = args.state.clone().or_else(|| cfg.state.clone()) else {
        eprintln!("polycc-tune: no state file: pass --state FILE or set `state` in {}", args.config.display());
        return ExitCode::from(7);
    };
    let socket = args
        .socket
        .clone()
        .or_else(|| cfg.socket.clone())
        .unwrap_or_else(|| PathBuf::from(polycc_control::DEFAULT_SOCKET));
    info!(log, "tuning"; "groups" => cfg.groups.len(), "period_minutes" => cfg.period_minutes, "socket" => socket.display().to_string(), "state" => state_path.display().to_string());
    let result = agent_env::run(
        cfg,
        &state_path,
        &socket,
        args.periods,
        |rows| {
            for r in rows {
                info!(log, "period"; "period" => r.period, "group" => &r.group, "context" => &r.context,
                    "reward" => r.reward.map_or("-".into(), |v| format!("{v:.3}")), "theta" => &r.theta, "events" => &r.events);
            }
            on_rows(rows);
        },
        |m| warn!(log, "{}", m),
    );
    match result {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("polycc-tune: {e}");
            ExitCode::from(match e {
                LoopError::Agent(_) => EXIT_AGENT,
                LoopError::State(_) => EXIT_STATE,
            })
        }
    }
}
