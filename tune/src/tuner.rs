//! One period of the loop, whatever the environment:
//!
//! ```text
//!   finish: the period's records -> per group, the reward of what it played -> bandit.observe
//!   plan:   per group, the context now -> bandit.next_play -> a Vivace configuration to install
//! ```
//!
//! The agent loop ([`crate::agent_env`]) and the simulator loop ([`run_sim`]) both call
//! [`Tuner::finish`] and [`Tuner::plan`]; only where records come from and where configurations
//! go differ.

use crate::bandit::{name_hash, Bandit, Event};
use crate::config::{Config, Group};
use crate::params::Param;
use crate::reward::{self, Observation};
use crate::sim_env::{self, RecordMeta};
use crate::state::{Playing, State, StateError};
use polycc_control::stats::StatsRecord;
use polycc_algorithms::vivace::VivaceConfig;
use serde::Serialize;
use std::net::{IpAddr, SocketAddr};

/// One line of the trace: one group in one period.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TraceRow {
    pub period: u64,
    pub group: String,
    pub context: String,
    /// Flow-seconds that counted (0: too few, the period taught nothing).
    pub samples: usize,
    pub reward: Option<f64>,
    pub throughput_mbps: Option<f64>,
    pub latency_ms: Option<f64>,
    pub loss_frac: Option<f64>,
    /// The configuration played, as "name=value" pairs of the tuned candidates.
    pub played: String,
    /// The context's theta after the update, same form.
    pub theta: String,
    pub events: String,
}

pub struct Tuner<'a> {
    pub cfg: &'a Config,
    pub state: State,
    safe_point: Vec<f64>,
    start_point: Vec<f64>,
}

/// "beta=11.35 gamma=900" for the tuned candidates of a configuration.
pub fn describe(cfg: &Config, c: &VivaceConfig) -> String {
    cfg.space.params.iter().map(|(p, _)| format!("{p}={:.4}", p.get(c))).collect::<Vec<_>>().join(" ")
}

/// The destination of a record as an address and port.
fn dst_of(r: &StatsRecord) -> Option<(IpAddr, u16)> {
    r.meta.dst.parse::<SocketAddr>().ok().map(|a| (a.ip(), a.port()))
}

impl<'a> Tuner<'a> {
    pub fn new(cfg: &'a Config, state: State) -> Tuner<'a> {
        Tuner { cfg, state, safe_point: cfg.space.to_unit(&cfg.safe), start_point: cfg.space.to_unit(&cfg.space.base) }
    }
}

/// The bandit of one (group, context).
fn bandit<'b>(cfg: &'b Config, safe: &'b [f64], group: &str, context: &str) -> Bandit<'b> {
    Bandit { cfg: &cfg.bandit, safety: &cfg.safety, safe, key: name_hash(group) ^ name_hash(context).rotate_left(17) }
}

impl<'a> Tuner<'a> {
    /// Learn from the period that just ended. `records`: everything seen over it (records of
    /// other groups' or no group's flows are ignored; in agent mode only records of the
    /// group's own rules count).
    pub fn finish(&mut self, records: &[StatsRecord]) -> Vec<TraceRow> {
        let mut rows = Vec::new();
        let period = self.state.period;
        for g in &self.cfg.groups {
            let Some(gs) = self.state.groups.get(&g.name) else { continue };
            let Some(playing) = gs.playing.clone() else { continue };
            let mine: Vec<&StatsRecord> = records
                .iter()
                .filter(|r| r.t_unix_s > playing.since_unix_s)
                .filter(|r| dst_of(r).is_some_and(|(a, p)| g.matches(a, p)))
                .filter(|r| gs.rule_ids.is_empty() || r.meta.rule.is_some_and(|id| gs.rule_ids.contains(&id)))
                .collect();
            let obs = reward::observe(&self.cfg.reward, &mine).filter(|o| o.samples >= self.cfg.min_samples);
            let b = bandit(self.cfg, &self.safe_point, &g.name, &playing.context);
            let start = &self.start_point;
            let gs = self.state.groups.get_mut(&g.name).expect("checked above");
            let ctx = gs.contexts.entry(playing.context.clone()).or_insert_with(|| b.start(start));
            let events = b.observe(ctx, period, obs);
            let theta = self.cfg.space.project(&ctx.theta);
            rows.push(trace_row(self.cfg, period, g, &playing, obs, &theta, &events));
        }
        rows
    }

    /// Choose and remember what every group plays next; the configurations to install.
    pub fn plan(&mut self, now_unix_s: f64) -> Vec<(usize, VivaceConfig)> {
        let context = self.cfg.contexts.at(now_unix_s);
        let mut out = Vec::new();
        for (i, g) in self.cfg.groups.iter().enumerate() {
            let b = bandit(self.cfg, &self.safe_point, &g.name, &context);
            let start = &self.start_point;
            let gs = self.state.groups.entry(g.name.clone()).or_default();
            let ctx = gs.contexts.entry(context.clone()).or_insert_with(|| b.start(start));
            let point = b.next_play(ctx);
            let config = self.cfg.space.project(&point);
            gs.playing =
                Some(Playing { context: context.clone(), point, config: config.clone(), since_unix_s: now_unix_s });
            out.push((i, config));
        }
        out
    }

    /// The configuration a group has learned for a context (theta, projected).
    pub fn learned(&self, group: &str, context: &str) -> Option<VivaceConfig> {
        let ctx = self.state.groups.get(group)?.contexts.get(context)?;
        Some(self.cfg.space.project(&ctx.theta))
    }
}

fn trace_row(
    cfg: &Config,
    period: u64,
    g: &Group,
    playing: &Playing,
    obs: Option<Observation>,
    theta: &VivaceConfig,
    events: &[Event],
) -> TraceRow {
    TraceRow {
        period,
        group: g.name.clone(),
        context: playing.context.clone(),
        samples: obs.map_or(0, |o| o.samples),
        reward: obs.map(|o| o.reward),
        throughput_mbps: obs.map(|o| o.throughput_mbps),
        latency_ms: obs.map(|o| o.latency_ms),
        loss_frac: obs.map(|o| o.loss_frac),
        played: describe(cfg, &playing.config),
        theta: describe(cfg, theta),
        events: events
            .iter()
            .map(|e| match e {
                Event::Step { norm } => format!("step {norm:.3}"),
                Event::Screened { tuned } => format!(
                    "tuned {}",
                    tuned.iter().map(|i| cfg.space.params[*i].0.name()).collect::<Vec<_>>().join("+")
                ),
                Event::SafetyRevert { reason } => format!("SAFETY: {reason}"),
            })
            .collect::<Vec<_>>()
            .join("; "),
    }
}

/// Simulator-mode options.
#[derive(Clone, Debug)]
pub struct SimRun {
    /// Periods to run in total (a resumed state counts its completed ones).
    pub periods: u64,
    /// Save the state here after every period.
    pub state_path: Option<std::path::PathBuf>,
}

/// The clock of simulated period `p`.
pub fn sim_clock(cfg: &Config, p: u64) -> f64 {
    let spec = cfg.sim.as_ref().expect("checked by the caller");
    spec.start_unix_s + p as f64 * cfg.period_minutes * 60.0
}

/// Simulate one period of every group playing `plan`; the records.
pub fn simulate_period(cfg: &Config, period: u64, now: f64, plan: &[(usize, VivaceConfig)]) -> Vec<StatsRecord> {
    let spec = cfg.sim.as_ref().expect("checked by the caller");
    let context = cfg.contexts.at(now);
    let mut jobs = Vec::new();
    for (gi, config) in plan {
        let g = &cfg.groups[*gi];
        let (addr, port) = g.representative();
        let pop = spec.population(&g.name, period, &context);
        for (f, (path, seed)) in
            sim_env::draw_paths(pop, spec.seed, period, &g.name, spec.flows_per_period).into_iter().enumerate()
        {
            let meta = RecordMeta {
                t0_unix_s: now,
                flow: (gi * 100_000 + f) as u32,
                dst: SocketAddr::new(addr, port).to_string(),
                rule: None,
            };
            jobs.push((config.clone(), path, seed, meta));
        }
    }
    sim_env::run_jobs(&jobs, spec.flow_seconds).into_iter().flatten().collect()
}

/// The whole loop against simulated populations: `on_period` sees each period's rows.
pub fn run_sim(
    cfg: &Config,
    state: State,
    run: &SimRun,
    mut on_period: impl FnMut(&[TraceRow]),
) -> Result<State, StateError> {
    let mut t = Tuner::new(cfg, state);
    while t.state.period < run.periods {
        let p = t.state.period;
        let now = sim_clock(cfg, p);
        let plan = t.plan(now);
        let records = simulate_period(cfg, p, now, &plan);
        let rows = t.finish(&records);
        t.state.period += 1;
        if let Some(path) = &run.state_path {
            t.state.save(path)?;
        }
        on_period(&rows);
    }
    Ok(t.state)
}

/// Mean observation of `config` over `flows` fresh paths of a population (evaluation draws are
/// seeded apart from the tuning's, and every configuration compared sees the same paths).
pub fn evaluate(
    cfg: &Config,
    group: &str,
    population: &str,
    config: &VivaceConfig,
    flows: usize,
    seed: u64,
) -> Option<Observation> {
    let spec = cfg.sim.as_ref()?;
    let g = cfg.groups.iter().find(|g| g.name == group)?;
    let pop = spec.populations.get(population)?;
    let (addr, port) = g.representative();
    let jobs: Vec<_> = sim_env::draw_paths(pop, seed ^ 0xE7A1_0000, u64::MAX, group, flows)
        .into_iter()
        .enumerate()
        .map(|(f, (path, s))| {
            (
                config.clone(),
                path,
                s,
                RecordMeta { t0_unix_s: 0.0, flow: f as u32, dst: SocketAddr::new(addr, port).to_string(), rule: None },
            )
        })
        .collect();
    let records: Vec<StatsRecord> = sim_env::run_jobs(&jobs, spec.flow_seconds).into_iter().flatten().collect();
    reward::observe(&cfg.reward, &records.iter().collect::<Vec<_>>())
}

/// The tuned candidates' values of a configuration, for reports.
pub fn values(cfg: &Config, c: &VivaceConfig) -> Vec<(Param, f64)> {
    cfg.space.params.iter().map(|(p, _)| (*p, p.get(c))).collect()
}
