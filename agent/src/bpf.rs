//! The BPF datapath as a [`Transport`]: `polycc-portus --datapath bpf`.
//!
//! The BPF congestion control (`datapath/bpf`, crate `polycc-bpf`) runs no CCP programs: it
//! folds the union program's report registers in BPF and reports through a ring buffer, and
//! takes cwnd, rate, report interval and growth cap from a per-flow map entry. This transport
//! translates, so the agent and its policies run unchanged over netlink, unix sockets and BPF:
//!
//! ```text
//!   ring buffer CREATE(sid)   -> CCP CREATE (congAlg "polycc_bpf")
//!   ring buffer MEASURE(sid)  -> CCP MEASURE (fields placed by the program's scope)
//!   ring buffer FREE(sid)     -> CCP MEASURE with no fields (the flow closed)
//!   CCP INSTALL               -> nothing (the program is built in)
//!   CCP CHANGE_PROG/UPDATE_FIELDS(sid, Cwnd, Rate, interval, grow cap) -> ctl[sid] write
//! ```
//!
//! It also measures the report-to-update round trip: from the BPF timestamp of a flow's report
//! to the return of the map write that answers it (both CLOCK_MONOTONIC), one sample per
//! answered report.

use crate::program::Program;
use crate::transport::{OpenError, Transport, RECV_TIMEOUT};
use crate::wire::{self, build, Adoption, Create, RegId, ToDatapath};
use polycc_bpf::{monotonic_ns, Ctl, Datapath, Event};
use std::cell::RefCell;
use std::collections::HashMap;
use std::io;
use std::path::PathBuf;
use std::time::Duration;

/// At most this many round-trip samples are kept (8 MB).
const MAX_LATENCY_SAMPLES: usize = 2_000_000;
/// A MEASURE of 16 fields is 144 B: stop batching events into one receive this close to the end.
const MAX_MESSAGE_BYTES: usize = 256;

/// Where the program's control registers are on the wire.
#[derive(Clone, Copy, Debug)]
struct Regs {
    cwnd: RegId,
    rate: RegId,
    interval: RegId,
    grow_cap: RegId,
    grow_rtt: RegId,
    grow_cap_after: RegId,
}

/// The BPF datapath (one; its address is `()`).
pub struct Bpf {
    dp: Datapath,
    program: Option<(Program, Regs)>,
    /// Per flow: what the agent installed last, and the unanswered report's BPF timestamp.
    /// (`Transport::send` takes `&self`: the writes go through cells.)
    flows: RefCell<HashMap<u32, (Ctl, Option<u64>)>>,
    latencies_ns: RefCell<Vec<u32>>,
    latency_out: Option<PathBuf>,
}

impl Bpf {
    /// Load and register `polycc_bpf` (spinning `busy_poll` on the ring buffer before each sleep);
    /// with `latency_out`, round-trip percentiles are written
    /// there (JSON) when the transport drops.
    pub fn open(cfg: &polycc_bpf::Config, busy_poll: Duration, latency_out: Option<PathBuf>) -> Result<Bpf, OpenError> {
        let mut dp = Datapath::open(cfg)?;
        dp.set_busy_poll(busy_poll);
        Ok(Bpf { dp, program: None, flows: RefCell::default(), latencies_ns: RefCell::default(), latency_out })
    }

    pub fn datapath(&self) -> &Datapath {
        &self.dp
    }

    /// Round trips measured so far, nanoseconds, in arrival order.
    pub fn latencies_ns(&self) -> Vec<u32> {
        self.latencies_ns.borrow().clone()
    }

    /// The CCP message for one event (`None` before the program is known).
    fn encode(&mut self, e: Event) -> Option<Vec<u8>> {
        let (program, _) = self.program.as_ref()?;
        Some(match e {
            Event::Create { sid, mss, init_cwnd_bytes, src, src_port, dst, dst_port, state } => {
                // A clock reading, not 0: a flow adopted from an earlier agent (pinned maps)
                // has applied that agent's seqs, and must see this one's as new.
                self.flows.borrow_mut().insert(sid, (Ctl { seq: monotonic_ns(), ..Ctl::default() }, None));
                build::create(&Create {
                    sid,
                    init_cwnd: init_cwnd_bytes,
                    mss,
                    src,
                    src_port,
                    dst,
                    dst_port,
                    cong_alg: polycc_bpf::CA_NAME.into(),
                    adopted: state.map(|s| Adoption {
                        ssthresh: s.ssthresh_bytes,
                        srtt_us: s.srtt_us,
                        min_rtt_us: s.min_rtt_us,
                        rate: s.rate_bytes_per_sec,
                    }),
                    // polycc.bpf.c adds its undo count to the events register itself.
                    undo_signal: true,
                })
            }
            Event::Measure { sid, t_ns, fields, .. } => {
                if let Some((_, pending)) = self.flows.borrow_mut().get_mut(&sid) {
                    pending.get_or_insert(t_ns);
                }
                let raw = crate::program::RawReport::from_values(fields);
                build::measure(sid, program.uid, &program.measure_fields(&raw))
            }
            Event::Free { sid } => {
                self.flows.borrow_mut().remove(&sid);
                self.dp.remove_ctl(sid);
                build::measure(sid, program.uid, &[])
            }
        })
    }

    fn apply(&self, sid: u32, fields: &[(RegId, u64)]) -> io::Result<()> {
        let Some((_, regs)) = self.program.as_ref() else { return Ok(()) };
        let regs = *regs;
        // A flow the datapath has freed (or never announced) gets no entry: it would leak.
        let mut flows = self.flows.borrow_mut();
        let Some((ctl, pending)) = flows.get_mut(&sid) else { return Ok(()) };
        let sat = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        for &(id, v) in fields {
            if id == regs.cwnd {
                ctl.cwnd_bytes = sat(v);
            } else if id == regs.rate {
                ctl.rate_bytes_per_sec = sat(v);
            } else if id == regs.interval {
                ctl.interval_us = sat(v);
            } else if id == regs.grow_cap {
                ctl.grow_cap_bytes = sat(v);
            } else if id == regs.grow_rtt {
                ctl.grow_rtt_us = sat(v);
            } else if id == regs.grow_cap_after {
                ctl.grow_cap_after_bytes = sat(v);
            }
        }
        ctl.seq = ctl.seq.wrapping_add(1);
        let ctl = *ctl;
        let report_t_ns = pending.take();
        drop(flows);
        self.dp.write_ctl(sid, &ctl)?;
        if let Some(t) = report_t_ns {
            let mut l = self.latencies_ns.borrow_mut();
            if l.len() < MAX_LATENCY_SAMPLES {
                let rtt = monotonic_ns().saturating_sub(t);
                l.push(u32::try_from(rtt).unwrap_or(u32::MAX));
            }
        }
        Ok(())
    }
}

/// p-th percentile (0..=100) of `sorted`, nearest rank.
pub fn percentile(sorted: &[u32], p: f64) -> Option<u32> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

impl Transport for Bpf {
    type Addr = ();

    /// Every event already read, as back-to-back CCP messages; waits up to [`RECV_TIMEOUT`] for
    /// the first.
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<Option<(usize, ())>> {
        let mut out = 0;
        let mut timeout = RECV_TIMEOUT;
        while out + MAX_MESSAGE_BYTES <= buf.len() {
            let Some(e) = self.dp.poll(timeout)? else { break };
            timeout = Duration::ZERO;
            if let Some(m) = self.encode(e) {
                buf[out..out + m.len()].copy_from_slice(&m);
                out += m.len();
            }
            if self.dp.queued() == 0 {
                break;
            }
        }
        Ok((out > 0).then_some((out, ())))
    }

    fn send(&self, _to: &(), msg: &[u8]) -> io::Result<()> {
        match wire::parse_to_datapath(msg).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))? {
            ToDatapath::Install | ToDatapath::Other { .. } => Ok(()),
            ToDatapath::ChangeProg { sid, fields, .. } | ToDatapath::UpdateFields { sid, fields } => {
                self.apply(sid, &fields)
            }
        }
    }

    fn overruns(&self) -> u64 {
        self.dp.stats().ringbuf_drops
    }

    fn attach_program(&mut self, program: &Program) {
        let regs = Regs {
            cwnd: wire::reg_id(&program.cwnd_reg),
            rate: wire::reg_id(&program.rate_reg),
            interval: wire::reg_id(&program.interval_reg),
            grow_cap: wire::reg_id(&program.grow_cap_reg),
            grow_rtt: wire::reg_id(&program.grow_rtt_reg),
            grow_cap_after: wire::reg_id(&program.grow_cap_after_reg),
        };
        self.program = Some((program.clone(), regs));
    }
}

impl Drop for Bpf {
    fn drop(&mut self) {
        let Some(path) = self.latency_out.take() else { return };
        let mut v = self.latencies_ns.borrow().clone();
        v.sort_unstable();
        let p = |q| percentile(&v, q).map_or(serde_json::Value::Null, |ns| (f64::from(ns) / 1e3).into());
        let s = self.dp.stats();
        let summary = serde_json::json!({
            "round_trips": v.len(),
            "p50_us": p(50.0), "p95_us": p(95.0), "p99_us": p(99.0), "max_us": p(100.0),
            "flows_created": s.flows_created, "reports": s.reports, "ringbuf_drops": s.ringbuf_drops,
            "fallbacks": s.fallbacks, "resumes": s.resumes,
        });
        if let Err(e) = std::fs::write(&path, format!("{summary}\n")) {
            eprintln!("cannot write the round-trip summary {}: {e}", path.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_take_the_nearest_rank() {
        let v: Vec<u32> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), Some(50));
        assert_eq!(percentile(&v, 95.0), Some(95));
        assert_eq!(percentile(&v, 99.0), Some(99));
        assert_eq!(percentile(&v, 100.0), Some(100));
        assert_eq!(percentile(&v, 0.0), Some(1));
        assert_eq!(percentile(&[], 50.0), None);
    }
}
