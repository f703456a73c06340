//! The `polycc_gym` Python module: [`crate::MoccEnv`] as `polycc_gym.Env`.

use crate::{EnvError, LinkParams, LinkRange, MoccEnv};
use numpy::PyArray1;
use polycc_algorithms::mocc::{Preference, RttBase};
use polycc_algorithms::Rate;
use polycc_sim::config::BandwidthChange;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::time::Duration;

fn value_error(e: EnvError) -> PyErr {
    PyValueError::new_err(e.to_string())
}

fn duration(name: &str, s: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(s).map_err(|_| PyValueError::new_err(format!("{name} {s} is not a duration")))
}

/// A link as a dict: bandwidth_bps, one_way_delay_s, queue_packets, loss, initial_rate_bps
/// (None: the deployed start, from the initial window through MOCC's startup), change_at_s and change_bandwidth_bps (None without a change), competitor_start_s (None
/// without a competitor), rtt_dev_s (0 on a clean path), pacing_efficiency (1: exact pacing).
fn link_dict<'py>(py: Python<'py>, l: &LinkParams) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("bandwidth_bps", l.bandwidth.bits_per_sec())?;
    d.set_item("one_way_delay_s", l.one_way_delay.as_secs_f64())?;
    d.set_item("queue_packets", l.queue_packets)?;
    d.set_item("loss", l.loss)?;
    d.set_item("initial_rate_bps", l.initial_rate.map(|r| r.bits_per_sec()))?;
    d.set_item("change_at_s", l.bandwidth_change.map(|c| c.at.as_secs_f64()))?;
    d.set_item("change_bandwidth_bps", l.bandwidth_change.map(|c| c.bandwidth.bits_per_sec()))?;
    d.set_item("competitor_start_s", l.competitor_start.map(|t| t.as_secs_f64()))?;
    d.set_item("rtt_dev_s", l.rtt_dev.as_secs_f64())?;
    d.set_item("pacing_efficiency", l.pacing_efficiency)?;
    Ok(d)
}

/// The link `Env(link, seed, episode_steps)` draws for its first episode (the range's draw from
/// a generator seeded with `seed`): how evaluations pick links from a training range.
#[pyfunction]
#[pyo3(signature = (link = "envelope", seed = 0, episode_steps = 400))]
fn sample_link<'py>(py: Python<'py>, link: &str, seed: u64, episode_steps: usize) -> PyResult<Bound<'py, PyDict>> {
    let range = link.parse::<LinkRange>().map_err(value_error)?;
    if episode_steps == 0 {
        return Err(value_error(EnvError::NoSteps));
    }
    link_dict(py, &range.sample_for(&mut ChaCha8Rng::seed_from_u64(seed), episode_steps))
}

/// One MOCC sender on one simulated link per episode; one step is one monitor interval.
#[pyclass(name = "Env", unsendable)]
struct Env {
    inner: MoccEnv,
}

#[pymethods]
impl Env {
    /// `rtt_base`: the latency ratio's base, `lowest` (the lowest MI RTT so far) or `lowest-10s`
    /// (over the last 10 s); the exported model records it (`polycc.rtt_base`). `fair_share`: the
    /// rate dithered and nudged toward an equal share of a shared bottleneck
    /// (`polycc_algorithms::mocc::share`, off by default as for deployed flows).
    #[new]
    #[pyo3(signature = (link = "envelope", seed = 0, episode_steps = 400, rtt_base = "lowest", fair_share = false))]
    fn new(link: &str, seed: u64, episode_steps: usize, rtt_base: &str, fair_share: bool) -> PyResult<Env> {
        let range = link.parse::<LinkRange>().map_err(value_error)?;
        let base = RttBase::from_metadata(Some(rtt_base)).map_err(PyValueError::new_err)?;
        let mut inner = MoccEnv::new(range, seed, episode_steps).map_err(value_error)?;
        inner.set_rtt_base(base);
        inner.set_fair_share(fair_share);
        Ok(Env { inner })
    }

    /// Whether the flow's rate is dithered and nudged toward an equal share.
    #[getter]
    fn fair_share(&self) -> bool {
        self.inner.fair_share()
    }

    /// The preference `[w_thr, w_lat, w_loss]` the flow serves from the next reset on (None: none),
    /// which sets the queue its drain guard lets stand, as an agent's flow with that preference
    /// has it; the reward's weights stay the caller's.
    #[pyo3(signature = (weights = None))]
    fn set_preference(&mut self, weights: Option<Vec<f64>>) -> PyResult<()> {
        let w = weights.map(|w| Preference::new(&w)).transpose().map_err(|e| PyValueError::new_err(e.to_string()))?;
        self.inner.set_preference(w);
        Ok(())
    }

    /// The latency ratio's base the observation carries.
    #[getter]
    fn rtt_base(&self) -> &'static str {
        self.inner.rtt_base().name()
    }

    /// Start an episode; returns the 30 raw history values (float32).
    #[pyo3(signature = (seed = None))]
    fn reset<'py>(&mut self, py: Python<'py>, seed: Option<u64>) -> Bound<'py, PyArray1<f32>> {
        let obs = self.inner.reset(seed);
        PyArray1::from_slice(py, &obs)
    }

    /// Apply `action` for the next MI: (obs, o_thr, o_lat, o_loss, done, info).
    #[allow(clippy::type_complexity)]
    fn step<'py>(
        &mut self,
        py: Python<'py>,
        action: f64,
    ) -> PyResult<(Bound<'py, PyArray1<f32>>, f64, f64, f64, bool, Bound<'py, PyDict>)> {
        if !action.is_finite() {
            return Err(PyValueError::new_err(format!("action must be a finite number, got {action}")));
        }
        let s = self.inner.step(action);
        let info = PyDict::new(py);
        info.set_item("throughput_bps", s.throughput_bps)?;
        info.set_item("rtt_s", s.rtt_s)?;
        info.set_item("loss", s.loss)?;
        info.set_item("capacity_bps", s.capacity_bps)?;
        info.set_item("base_rtt_s", s.base_rtt_s)?;
        info.set_item("rate_bps", s.rate_bps)?;
        info.set_item("mis_completed", s.mis_completed)?;
        info.set_item("sim_time_s", s.sim_time_s)?;
        Ok((PyArray1::from_slice(py, &s.obs), s.o_thr, s.o_lat, s.o_loss, s.done, info))
    }

    /// Use this link for every episode from the next reset on; `fix_link()` with no bandwidth
    /// goes back to drawing links from the range. `initial_rate_mbps`: the rate the episode
    /// starts at, as training's episodes do; None: the deployed start, from the initial window
    /// through MOCC's startup (the actions are not used until it ends). `change_at_s` with `change_bandwidth_mbps`:
    /// the bandwidth changes once; `competitor_start_s`: a CUBIC flow starts then; `rtt_dev_s`:
    /// ACK-path jitter (each ACK's delay +/- this, netem-style); `pacing_efficiency`: the fraction
    /// of its rate the sender puts on the wire (the emulated guest's late timers: 0.75-0.98).
    #[pyo3(signature = (bandwidth_mbps = None, one_way_delay_s = 0.05, queue_packets = 20, loss = 0.0,
                        initial_rate_mbps = None, change_at_s = None, change_bandwidth_mbps = None,
                        competitor_start_s = None, rtt_dev_s = 0.0, pacing_efficiency = 1.0))]
    #[allow(clippy::too_many_arguments)]
    fn fix_link(
        &mut self,
        bandwidth_mbps: Option<f64>,
        one_way_delay_s: f64,
        queue_packets: u64,
        loss: f64,
        initial_rate_mbps: Option<f64>,
        change_at_s: Option<f64>,
        change_bandwidth_mbps: Option<f64>,
        competitor_start_s: Option<f64>,
        rtt_dev_s: f64,
        pacing_efficiency: f64,
    ) -> PyResult<()> {
        let link = match bandwidth_mbps {
            None => None,
            Some(bw) => {
                let bandwidth_change = match (change_at_s, change_bandwidth_mbps) {
                    (None, None) => None,
                    (Some(at), Some(mbps)) => {
                        Some(BandwidthChange { at: duration("change_at_s", at)?, bandwidth: Rate::from_mbps(mbps) })
                    }
                    _ => return Err(PyValueError::new_err("change_at_s and change_bandwidth_mbps go together")),
                };
                Some(LinkParams {
                    bandwidth: Rate::from_mbps(bw),
                    one_way_delay: duration("one_way_delay_s", one_way_delay_s)?,
                    queue_packets,
                    loss,
                    initial_rate: initial_rate_mbps.map(Rate::from_mbps),
                    bandwidth_change,
                    competitor_start: competitor_start_s.map(|t| duration("competitor_start_s", t)).transpose()?,
                    rtt_dev: duration("rtt_dev_s", rtt_dev_s)?,
                    pacing_efficiency,
                })
            }
        };
        self.inner.fix_link(link).map_err(value_error)
    }

    /// The current episode's link: bandwidth_bps, one_way_delay_s, queue_packets, loss,
    /// initial_rate_bps, change_at_s, change_bandwidth_bps, competitor_start_s, rtt_dev_s,
    /// pacing_efficiency.
    fn link<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        link_dict(py, &self.inner.link())
    }

    /// The 95th percentile of the MOCC flow's per-packet RTTs so far this episode, seconds
    /// (None before any ACK): the simulator's histogram, as `polycc-sim --json`'s p95_rtt_ms.
    fn p95_rtt_s(&self) -> Option<f64> {
        self.inner.p95_rtt().map(|d| d.as_secs_f64())
    }
}

#[pymodule]
fn polycc_gym(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Env>()?;
    m.add_function(wrap_pyfunction!(sample_link, m)?)?;
    m.add("OBS_LEN", polycc_algorithms::mocc::OBS_LEN)?;
    m.add("ACTION_ALPHA", polycc_algorithms::mocc::ACTION_ALPHA)?;
    Ok(())
}
