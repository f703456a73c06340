//! `polycc-sim`: run one dumbbell simulation and print its metrics.

use clap::{CommandFactory, Parser};
use polycc_algorithms::quantity::{parse_bandwidth, parse_duration, parse_probability, ReportInterval};
use polycc_algorithms::{AlgorithmKind, Policy};
use polycc_args::PolicyArgs;
use polycc_sim::config::{BandwidthChange, BufferSize, LossChange, Policer, RandomChanges, RttChange, MIN_PACING_EFFICIENCY};
use polycc_sim::{run, FlowConfig, LinkConfig, SimConfig};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

const EXAMPLES: &str = "\
Examples:
  polycc-sim --alg cubic --bw 20mbit --rtt 40ms --buffer 1bdp
  polycc-sim --alg fused --pilot bbr --copilot cubic --fusion max --fuse-on cwnd \\
             --bw 20mbit --rtt 100ms --rtt-dev 70ms --duration 60s --json
  polycc-sim --alg fused --pilot bbr --copilot copa --fusion min --fuse-on rate \\
             --rtt 100ms --bw-change 5s:10mbit --series run.csv
  polycc-sim --alg bbr --flows 3 --stagger 10s --duration 60s --json
  polycc-sim --alg fused --pilot bbr --copilot cubic --competitor cubic \\
             --bw 20mbit --rtt 100ms --duration 60s --json
  polycc-sim --alg vivace --vivace gamma=2700 --bw 100mbit --rtt 30ms --loss 0.01
  polycc-sim --alg vivace --bw 100mbit --rtt 30ms --duration 100s \\
             --random-changes 5s:bw=10mbit-100mbit,rtt=10ms-100ms,loss=0-0.01
  polycc-sim --alg vivace --bw 100mbit --rtt 30ms --policer 20mbit";

/// Simulate flows over a dumbbell bottleneck with polycc's algorithms.
#[derive(Parser, Debug)]
#[command(name = "polycc-sim", version, after_help = EXAMPLES)]
struct Cli {
    #[command(flatten)]
    policy: PolicyArgs,

    /// Bottleneck bandwidth (bit, kbit, mbit, gbit).
    #[arg(long, value_parser = parse_bandwidth, default_value = "20mbit")]
    bw: polycc_algorithms::Rate,

    /// Mean round-trip propagation delay (us, ms, s).
    #[arg(long, value_parser = parse_duration, default_value = "40ms")]
    rtt: Duration,

    /// ACK-path jitter as netem makes it: each ACK delayed by ack delay +/- dev (uniform), never
    /// ahead of the ACK before it, so ACKs bunch behind long draws.
    #[arg(long, value_parser = parse_duration, default_value = "0ms")]
    rtt_dev: Duration,

    /// One-way data-path delay under --rtt-dev (the ACK path takes the rest of the RTT);
    /// default 15ms, at most half the RTT, as the kernel harness splits it.
    #[arg(long, value_parser = parse_duration)]
    data_delay: Option<Duration>,

    /// Bottleneck FIFO buffer: BDP multiple (1bdp), packets (64pkt) or bytes (150kb).
    #[arg(long, default_value = "1bdp")]
    buffer: BufferSize,

    /// Random loss probability per packet (0.01 = 1 %).
    #[arg(long, value_parser = parse_probability, default_value = "0")]
    loss: f64,

    /// Bandwidth change TIME:BW (repeatable), e.g. 5s:10mbit.
    #[arg(long = "bw-change", value_name = "TIME:BW")]
    bw_change: Vec<BandwidthChange>,

    /// Propagation RTT change TIME:RTT (repeatable), e.g. 5s:50ms.
    #[arg(long = "rtt-change", value_name = "TIME:RTT")]
    rtt_change: Vec<RttChange>,

    /// Random loss change TIME:PROBABILITY (repeatable), e.g. 5s:0.01.
    #[arg(long = "loss-change", value_name = "TIME:P")]
    loss_change: Vec<LossChange>,

    /// Redraw bandwidth, RTT and loss uniformly every EVERY (from time zero, seeded by --seed),
    /// e.g. 5s:bw=10mbit-100mbit,rtt=10ms-100ms,loss=0-0.01. Utilization is then against the
    /// capacity integral over time (the optimal).
    #[arg(long = "random-changes", value_name = "EVERY:RANGES")]
    random_changes: Option<RandomChanges>,

    /// Token-bucket policer RATE[:BURST] in front of the buffer: packets beyond the tokens are
    /// dropped, not queued (burst in bytes or packets; default 10 ms at RATE, >= 10 packets).
    #[arg(long, value_name = "RATE[:BURST]")]
    policer: Option<Policer>,

    /// Number of flows.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    flows: u32,

    /// Start flow i at i x stagger.
    #[arg(long, value_parser = parse_duration, default_value = "0s")]
    stagger: Duration,

    /// One more flow after the --flows flows, running a classic algorithm at its defaults: what
    /// the policy's flows compete against.
    #[arg(long, value_name = "ALG", value_parser = parse_competitor, help = competitor_help())]
    competitor: Option<AlgorithmKind>,

    /// When the --competitor flow starts (default 0s: with the first flow).
    #[arg(long, value_parser = parse_duration, value_name = "DURATION", requires = "competitor")]
    competitor_start: Option<Duration>,

    /// Simulated time.
    #[arg(long, value_parser = parse_duration, default_value = "30s")]
    duration: Duration,

    /// Report cadence: auto (the algorithm's own, as the agent gives it: PCC and Copa four per
    /// RTT, MOCC every 10 ms, others once per latest RTT sample), rtt (once per latest RTT sample)
    /// or a duration such as 10ms.
    #[arg(long, default_value = "auto")]
    report_interval: ReportInterval,

    /// Packet size in bytes.
    #[arg(long, default_value_t = 1500, value_parser = clap::value_parser!(u64).range(64..=65_535))]
    mss: u64,

    /// The fraction of a paced sender's rate its packets leave at: 1 as a real host paces; the
    /// guest's pacing probe (`experiments/run --backend vm`, its `pacing_probe.wire_ratio`) reads
    /// 0.75-0.98 under emulation, where late pacing timers lose time, and the simulator's twin of
    /// a guest run paces as that guest did. Unpaced (window-limited) sending is untouched.
    #[arg(long, value_parser = parse_pacing_efficiency, default_value = "1", value_name = "FRACTION")]
    pacing_efficiency: f64,

    /// Random seed: a run is a pure function of its flags and seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,

    /// Print the summary as one JSON object instead of a table.
    #[arg(long)]
    json: bool,

    /// Write the per-report time series (time, flow, cwnd, rate, inflight, RTT, throughput) as CSV;
    /// `-` writes it to stdout (and the summary to stderr).
    #[arg(long, value_name = "FILE.csv")]
    series: Option<PathBuf>,

    /// Write every PCC decision (Vivace, Allegro, a fused PCC member: the MI judged, its rate,
    /// delivery, loss, RTT gradient and utility, the event and the new target) as JSON lines, the
    /// same records as the agent's `--log-json` "mi" lines, to compare a guest run with this one.
    #[arg(long, value_name = "FILE.jsonl")]
    mi_trace: Option<PathBuf>,
}

/// `--pacing-efficiency`: a fraction in [MIN_PACING_EFFICIENCY, 1].
fn parse_pacing_efficiency(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(f) if (MIN_PACING_EFFICIENCY..=1.0).contains(&f) => Ok(f),
        _ => Err(format!(
            "expected the fraction of its rate a paced sender's packets leave at, {MIN_PACING_EFFICIENCY} to 1 \
             (1: exact pacing, as a real host; e.g. 0.87 from a guest's pacing probe)"
        )),
    }
}

fn main() -> ExitCode {
    // `make install`'s man pages and completions (POLYCC_CLI_DOCS=DIR), from this very command.
    if let Some(code) = polycc_clidoc::write_if_requested(Cli::command) {
        return code;
    }
    let cli = Cli::parse();
    let policy = cli.policy.policy_or_exit::<Cli>();
    if cli.duration.is_zero() {
        Cli::command().error(clap::error::ErrorKind::ValueValidation, "--duration: must be positive, e.g. 30s").exit();
    }
    if cli.rtt.is_zero() {
        Cli::command().error(clap::error::ErrorKind::ValueValidation, "--rtt: must be positive, e.g. 40ms").exit();
    }
    if cli.rtt_dev > cli.rtt {
        Cli::command()
            .error(
                clap::error::ErrorKind::ValueValidation,
                "--rtt-dev: cannot exceed --rtt (the RTT would go negative)",
            )
            .exit();
    }
    if let Some(c) = cli.rtt_change.iter().find(|c| c.rtt < cli.rtt_dev) {
        Cli::command()
            .error(
                clap::error::ErrorKind::ValueValidation,
                format!("--rtt-change: {:?} is below --rtt-dev (the RTT would go negative)", c.rtt),
            )
            .exit();
    }
    if cli.data_delay.is_some() && cli.rtt_dev.is_zero() {
        Cli::command()
            .error(
                clap::error::ErrorKind::ArgumentConflict,
                "--data-delay: only applies with --rtt-dev (without a deviation the RTT is split evenly)",
            )
            .exit();
    }
    if cli.data_delay.is_some_and(|d| d > cli.rtt / 2) {
        Cli::command().error(clap::error::ErrorKind::ValueValidation, "--data-delay: at most half of --rtt").exit();
    }
    // Changes and flows that would fall after the run's end would silently never happen.
    let changes = cli.bw_change.iter().map(|c| ("--bw-change", c.at));
    let changes = changes.chain(cli.rtt_change.iter().map(|c| ("--rtt-change", c.at)));
    if let Some((flag, at)) =
        changes.chain(cli.loss_change.iter().map(|c| ("--loss-change", c.at))).find(|(_, at)| *at >= cli.duration)
    {
        Cli::command()
            .error(
                clap::error::ErrorKind::ValueValidation,
                format!(
                    "{flag}: {at:?} is at or after the end of the run (--duration {:?}): it would never apply",
                    cli.duration
                ),
            )
            .exit();
    }
    let last_start = cli.stagger * (cli.flows - 1);
    if cli.flows > 1 && last_start >= cli.duration {
        Cli::command()
            .error(
                clap::error::ErrorKind::ValueValidation,
                format!(
                    "--stagger: flow {} would start at {last_start:?}, at or after the end of the run (--duration {:?})",
                    cli.flows - 1,
                    cli.duration
                ),
            )
            .exit();
    }
    if cli.flows == 1 && !cli.stagger.is_zero() {
        Cli::command()
            .error(
                clap::error::ErrorKind::ArgumentConflict,
                "--stagger: one flow has nothing to stagger (add --flows N)",
            )
            .exit();
    }
    let mut link = LinkConfig {
        bandwidth: cli.bw,
        changes: cli.bw_change.clone(),
        rtt: cli.rtt,
        rtt_dev: cli.rtt_dev,
        data_delay: cli.data_delay,
        buffer: cli.buffer,
        loss: cli.loss,
        rtt_changes: cli.rtt_change.clone(),
        loss_changes: cli.loss_change.clone(),
        policer: cli.policer,
    };
    if let Some(spec) = &cli.random_changes {
        if spec.rtt.is_some_and(|(lo, _)| lo < cli.rtt_dev) {
            Cli::command()
                .error(clap::error::ErrorKind::ValueValidation, "--random-changes: the RTT range goes below --rtt-dev")
                .exit();
        }
        link.add_random_changes(spec, cli.duration, cli.seed);
    }
    let competitor_start = cli.competitor_start.unwrap_or(Duration::ZERO);
    if competitor_start >= cli.duration {
        Cli::command()
            .error(
                clap::error::ErrorKind::ValueValidation,
                "--competitor-start: must be before the end of the run (--duration)",
            )
            .exit();
    }
    let changing = !link.changes.is_empty();
    let mut flows: Vec<FlowConfig> =
        (0..cli.flows).map(|i| FlowConfig { start: cli.stagger * i, policy: policy.clone() }).collect();
    if let Some(kind) = cli.competitor {
        flows.push(FlowConfig { start: competitor_start, policy: Policy::Single(kind.default_config()) });
    }
    let cfg = SimConfig {
        link,
        flows,
        duration: cli.duration,
        report_interval: cli.report_interval,
        mss_bytes: cli.mss,
        seed: cli.seed,
        record_series: cli.series.is_some() || cli.mi_trace.is_some(),
        pacing_efficiency: cli.pacing_efficiency,
    };
    let result = run(&cfg);
    // `--series -`: the series on stdout, so the summary goes to stderr.
    let series_to_stdout = cli.series.as_deref() == Some(Path::new("-"));
    if let Some(path) = &cli.series {
        let written = if series_to_stdout {
            write_series(&mut std::io::stdout().lock(), &result.series)
        } else {
            write_file(path, |w| write_series(w, &result.series))
        };
        if let Err(e) = written {
            eprintln!("polycc-sim: cannot write --series {}: {e}", path.display());
            return ExitCode::from(1);
        }
    }
    if let Some(path) = &cli.mi_trace {
        if let Err(e) = write_file(path, |w| write_mi_trace(w, &result.mi_trace)) {
            eprintln!("polycc-sim: cannot write --mi-trace {}: {e}", path.display());
            return ExitCode::from(1);
        }
    }
    let mut out: Box<dyn Write> =
        if series_to_stdout { Box::new(std::io::stderr()) } else { Box::new(std::io::stdout()) };
    match print_summary(&mut out, &cli, &policy, &result.summary, competitor_start, changing) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("polycc-sim: cannot write the summary: {e}");
            ExitCode::from(1)
        }
    }
}

/// The run's summary: one JSON object with `--json`, else a table.
fn print_summary(
    out: &mut dyn Write,
    cli: &Cli,
    policy: &Policy,
    s: &polycc_sim::Summary,
    competitor_start: Duration,
    changing: bool,
) -> std::io::Result<()> {
    if cli.json {
        writeln!(out, "{}", serde_json::to_string(s).expect("summary serializes"))?;
    } else {
        let opt = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.2}"));
        writeln!(out, "policy          {}", policy.describe())?;
        if let Some(kind) = cli.competitor {
            writeln!(
                out,
                "competitor      {kind} from {:.1} s (flow {}, counted in the totals below)",
                competitor_start.as_secs_f64(),
                cli.flows
            )?;
        }
        writeln!(out, "goodput         {:.2} Mbit/s   utilization {:.3}", s.goodput_mbps, s.utilization)?;
        writeln!(
            out,
            "rtt             mean {} ms   p95 {} ms   base {:.1} ms",
            opt(s.mean_rtt_ms),
            opt(s.p95_rtt_ms),
            s.base_rtt_ms
        )?;
        writeln!(out, "loss            {:.2} %   jain {:.3}", s.loss_frac * 100.0, s.jain_index)?;
        if changing {
            writeln!(
                out,
                "convergence     {} s (throughput)   {} s (queue)",
                opt(s.convergence_s),
                opt(s.queue_convergence_s)
            )?;
        }
        for f in &s.flows {
            writeln!(
                out,
                "  flow {:<3} start {:>5.1}s  goodput {:>7.2} Mbit/s  rtt {:>7} ms  loss {:.2} %",
                f.id,
                f.start_s,
                f.goodput_mbps,
                opt(f.mean_rtt_ms),
                f.loss_frac * 100.0
            )?;
        }
        writeln!(
            out,
            "simulated {:.1} s in {:.3} s wall ({:.0}x real time)",
            s.duration_s,
            s.wall_s,
            s.duration_s / s.wall_s.max(1e-9)
        )?;
    }
    Ok(())
}

fn competitor_help() -> String {
    format!(
        "One more flow after the --flows flows, running this algorithm at its defaults ({}): what the policy's flows compete against",
        AlgorithmKind::accepted_classic()
    )
}

/// `--competitor`: a classic algorithm by name (not `fused`, and not `mocc`, which needs a model).
fn parse_competitor(s: &str) -> Result<AlgorithmKind, String> {
    let classic = AlgorithmKind::accepted_classic();
    match s.parse::<AlgorithmKind>() {
        Ok(kind) if !kind.learned() => Ok(kind),
        Ok(kind) => Err(format!("`{kind}` needs a model; the competitor runs a classic algorithm: {classic}")),
        Err(_) => Err(format!("`{s}` is not a single algorithm: expected one of {classic}")),
    }
}

/// Create `path` and hand `write` a buffered writer to it.
fn write_file(path: &Path, write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> std::io::Result<()> {
    write(&mut std::io::BufWriter::new(std::fs::File::create(path)?))
}

fn write_mi_trace(w: &mut dyn Write, trace: &[(usize, polycc_algorithms::pcc::MiTrace)]) -> std::io::Result<()> {
    for (flow, t) in trace {
        let line = serde_json::json!({"event": "mi", "flow": flow, "trace": t});
        writeln!(w, "{line}")?;
    }
    w.flush()
}

fn write_series(w: &mut dyn Write, rows: &[polycc_sim::SeriesRow]) -> std::io::Result<()> {
    writeln!(w, "time_s,flow,cwnd_bytes,rate_mbps,inflight_bytes,rtt_ms,throughput_mbps,lost_packets")?;
    for r in rows {
        let opt = |v: Option<f64>| v.map_or(String::new(), |x| format!("{x:.4}"));
        writeln!(
            w,
            "{:.6},{},{},{},{},{},{:.4},{}",
            r.time_s,
            r.flow,
            r.cwnd_bytes,
            opt(r.rate_mbps),
            r.inflight_bytes,
            opt(r.rtt_ms),
            r.throughput_mbps,
            r.lost_packets
        )?;
    }
    w.flush()
}
