//! polycc's datapath without a kernel module: `polycc_bpf`, a BPF `tcp_congestion_ops`
//! (src/bpf/polycc.bpf.c), loaded from its generated skeleton and registered through a BPF link.
//!
//! [`Datapath::open`] loads and registers it (the congestion control `polycc_bpf` appears in
//! `net.ipv4.tcp_available_congestion_control`); dropping the [`Datapath`], or the process
//! dying, closes the link and unregisters it. Flows report through a ring buffer
//! ([`Datapath::poll`] returns [`Event`]s) and are controlled through [`Datapath::write_ctl`].
//! This crate knows nothing of CCP's wire format: the agent's `bpf` transport translates.
//!
//! Only the open path can fail in ways a user must act on (no BTF, no privileges, the verifier
//! refused the program, another agent holds the name): [`OpenError`] says which.

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, PrintLevel, RingBuffer, RingBufferBuilder};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::mem::MaybeUninit;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Mutex;
use std::time::Duration;
use thiserror::Error;

#[doc(hidden)]
pub mod testutil;

#[allow(clippy::all, unused_imports, dead_code, non_camel_case_types)]
mod skel {
    include!(concat!(env!("OUT_DIR"), "/polycc.skel.rs"));
}
use skel::{PolyccSkel, PolyccSkelBuilder};

/// The congestion control name the ops register under (`-C polycc_bpf`, TCP_CONGESTION).
pub const CA_NAME: &str = "polycc_bpf";
/// Report registers per MEASURE, in the order of the agent's `program::Field::ALL`.
pub const FIELD_COUNT: usize = 16;
/// What ccp.ko waits before its fallback (its `fallback_timeout_ms` default).
pub const DEFAULT_FALLBACK_TIMEOUT: Duration = Duration::from_secs(1);
/// Where the kernel exposes its BTF; struct_ops cannot work without it.
pub const KERNEL_BTF: &str = "/sys/kernel/btf/vmlinux";

const EV_CREATE: u32 = 0;
const EV_MEASURE: u32 = 1;
const EV_FREE: u32 = 2;

/// `struct polycc_event` (src/bpf/polycc.h).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct RawEvent {
    kind: u32,
    sid: u32,
    t_ns: u64,
    mss: u32,
    init_cwnd_bytes: u32,
    saddr: u32,
    daddr: u32,
    sport: u32,
    dport: u32,
    mode: u32,
    app_limited: u32,
    saddr6: [u8; 16],
    daddr6: [u8; 16],
    fields: [u64; FIELD_COUNT],
}

/// `struct polycc_ctl` (src/bpf/polycc.h): what the agent installs for one flow.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ctl {
    /// Bumped by [`Datapath::write_ctl`]; the BPF side applies an entry once per new value.
    pub seq: u64,
    /// Congestion window in bytes; 0: keep the current one.
    pub cwnd_bytes: u32,
    /// Pacing rate in bytes per second; 0: keep, `u32::MAX`: unpaced.
    pub rate_bytes_per_sec: u32,
    /// Report every this many microseconds; 0: once per RTT.
    pub interval_us: u32,
    /// Per-ACK slow start up to this window (bytes); 0: none.
    pub grow_cap_bytes: u32,
    /// The growth's delay exit: its RTT threshold (us); `u32::MAX`: none.
    pub grow_rtt_us: u32,
    /// The growth's delay exit: the cap once it fires (bytes).
    pub grow_cap_after_bytes: u32,
}

/// Who controls a flow when it reported (`enum polycc_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The agent has not answered the flow's creation yet: Reno.
    Waiting,
    /// The agent's window and rate are enforced.
    Agent,
    /// The agent was silent past the timeout: Reno until it answers.
    Fallback,
}

impl Mode {
    fn from_raw(m: u32) -> Mode {
        match m {
            1 => Mode::Agent,
            2 => Mode::Fallback,
            _ => Mode::Waiting,
        }
    }
}

/// A live flow's state in a CREATE that announces it again (`polycc_adopt_field`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowState {
    /// Slow-start threshold in bytes; `None`: the flow is in slow start.
    pub ssthresh_bytes: Option<u32>,
    pub srtt_us: Option<u32>,
    pub min_rtt_us: Option<u32>,
    /// The rate the agent set (bytes/s); `None`: unpaced.
    pub rate_bytes_per_sec: Option<u32>,
}

impl FlowState {
    fn from_fields(f: &[u64; FIELD_COUNT]) -> Option<FlowState> {
        let get = |i: usize| u32::try_from(f[i]).ok().filter(|&v| v != 0);
        (f[0] == 1).then(|| FlowState {
            ssthresh_bytes: get(1),
            srtt_us: get(2),
            min_rtt_us: get(3),
            rate_bytes_per_sec: get(4),
        })
    }
}

/// What a flow told the agent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    Create {
        sid: u32,
        mss: u32,
        /// The kernel's window: the initial one for a new flow, the current one for a flow
        /// announced again (`state` is then `Some`).
        init_cwnd_bytes: u32,
        src: IpAddr,
        src_port: u16,
        dst: IpAddr,
        dst_port: u16,
        state: Option<FlowState>,
    },
    /// A report: [`FIELD_COUNT`] registers in the agent's `Field::ALL` order.
    Measure {
        sid: u32,
        /// `bpf_ktime_get_ns()` when written (CLOCK_MONOTONIC).
        t_ns: u64,
        mode: Mode,
        /// The ECN-marked packets ride in the lost-packets register's upper half (`CE_SHIFT`).
        fields: [u64; FIELD_COUNT],
        app_limited: bool,
    },
    Free {
        sid: u32,
    },
}

/// CLOCK_MONOTONIC now, nanoseconds: the clock of `bpf_ktime_get_ns()` and of [`Event`] times.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a live local; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec as u64)
}

/// A CREATE's address: IPv6 when the event carries a v6 destination (`v6_dst`, never all zero
/// for a v6 flow), else the IPv4 one (network byte order).
fn address(v4: u32, v6: [u8; 16], v6_dst: [u8; 16]) -> IpAddr {
    if v6_dst != [0; 16] {
        IpAddr::V6(Ipv6Addr::from(v6))
    } else {
        IpAddr::V4(Ipv4Addr::from(u32::from_be(v4)))
    }
}

impl Event {
    /// Decode one ring-buffer record; `None` for a short or unknown one, and for a CREATE
    /// written before `since_ns`: a dead agent left it unread in a pinned ring, and it describes
    /// the flow as it was then (a new flow at its initial window, where it may now be a long
    /// one in the fallback). Every flow without an agent announces itself again within a second
    /// (RECREATE_NS), as it is then.
    fn parse(data: &[u8], since_ns: u64) -> Option<Event> {
        if data.len() < std::mem::size_of::<RawEvent>() {
            return None;
        }
        // SAFETY: the length is checked; RawEvent is plain integers, any bit pattern is valid.
        let e: RawEvent = unsafe { std::ptr::read_unaligned(data.as_ptr().cast()) };
        Some(match e.kind {
            EV_CREATE if e.t_ns < since_ns => return None,
            EV_CREATE => Event::Create {
                sid: e.sid,
                mss: e.mss,
                init_cwnd_bytes: e.init_cwnd_bytes,
                src: address(e.saddr, e.saddr6, e.daddr6),
                src_port: u16::from_be(e.sport as u16),
                dst: address(e.daddr, e.daddr6, e.daddr6),
                dst_port: u16::from_be(e.dport as u16),
                state: FlowState::from_fields(&e.fields),
            },
            EV_MEASURE => Event::Measure {
                sid: e.sid,
                t_ns: e.t_ns,
                mode: Mode::from_raw(e.mode),
                fields: e.fields,
                app_limited: e.app_limited != 0,
            },
            EV_FREE => Event::Free { sid: e.sid },
            _ => return None,
        })
    }
}

/// The datapath's counters (the program's bss).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub flows_created: u64,
    pub flows_freed: u64,
    pub reports: u64,
    /// Events the ring buffer had no room for (the agent did not read fast enough, or is gone).
    pub ringbuf_drops: u64,
    /// Times a flow left the agent's control for the fallback, and came back.
    pub fallbacks: u64,
    pub resumes: u64,
}

/// Why the datapath could not be registered; each says what to do.
#[derive(Debug, Error)]
pub enum OpenError {
    #[error("the kernel has no BTF ({KERNEL_BTF} is missing): BPF congestion control needs CONFIG_DEBUG_INFO_BTF=y; use the ccp kernel module (--ipc netlink) instead")]
    NoBtf,
    #[error("loading the BPF congestion control was refused ({0}): it needs root, or CAP_BPF with CAP_NET_ADMIN")]
    Permission(#[source] libbpf_rs::Error),
    #[error("the kernel's verifier rejected the BPF congestion control ({source}); it said: {log}; (whole log above, from libbpf) this build of polycc does not fit this kernel, please report it with `uname -r`")]
    Verifier {
        log: String,
        #[source]
        source: libbpf_rs::Error,
    },
    #[error("registering the congestion control {CA_NAME} failed: another agent holds it (stop it first, or check `sysctl net.ipv4.tcp_available_congestion_control`): {0}")]
    InUse(#[source] libbpf_rs::Error),
    #[error("registering the congestion control {CA_NAME} failed ({0}): this kernel lacks BPF struct_ops links for tcp_congestion_ops (Linux >= 6.4 with CONFIG_BPF_JIT)")]
    Unsupported(#[source] libbpf_rs::Error),
    #[error("the BPF datapath could not be set up ({step}): {source}")]
    Other {
        step: &'static str,
        #[source]
        source: libbpf_rs::Error,
    },
}

fn errno(e: &libbpf_rs::Error) -> Option<i32> {
    use libbpf_rs::ErrorKind;
    match e.kind() {
        ErrorKind::PermissionDenied => Some(libc::EPERM),
        ErrorKind::AlreadyExists => Some(libc::EEXIST),
        ErrorKind::InvalidInput => Some(libc::EINVAL),
        _ => None,
    }
}

/// The last lines libbpf logged (the verifier's log among them), for [`OpenError::Verifier`].
static LIBBPF_LOG: Mutex<VecDeque<String>> = Mutex::new(VecDeque::new());
const LIBBPF_LOG_LINES: usize = 40;

fn capture_libbpf_log() {
    fn print(level: PrintLevel, msg: String) {
        if level == PrintLevel::Debug {
            return;
        }
        eprint!("libbpf: {msg}");
        let mut log = LIBBPF_LOG.lock().unwrap_or_else(|p| p.into_inner());
        for line in msg.lines() {
            if log.len() == LIBBPF_LOG_LINES {
                log.pop_front();
            }
            log.push_back(line.to_string());
        }
    }
    libbpf_rs::set_print(Some((PrintLevel::Info, print)));
}

/// The verifier's last words from libbpf's log (the lines before "-- END PROG LOAD LOG --").
fn verifier_tail() -> String {
    let log = LIBBPF_LOG.lock().unwrap_or_else(|p| p.into_inner());
    let end = log.iter().rposition(|l| l.contains("END PROG LOAD LOG")).unwrap_or(log.len());
    let start = end.saturating_sub(6);
    log.range(start..end).map(|l| l.trim()).collect::<Vec<_>>().join(" | ")
}

fn load_error(e: libbpf_rs::Error) -> OpenError {
    match errno(&e) {
        Some(libc::EPERM) | Some(libc::EACCES) if !is_root() => OpenError::Permission(e),
        _ => OpenError::Verifier { log: verifier_tail(), source: e },
    }
}

/// Load (verify) the BPF object at `path` and drop it, classifying errors as [`Datapath::open`]
/// does: the tests use it on a program built to be rejected.
#[doc(hidden)]
pub fn check_load(path: &Path) -> Result<(), OpenError> {
    capture_libbpf_log();
    let open = libbpf_rs::ObjectBuilder::default()
        .open_file(path)
        .map_err(|source| OpenError::Other { step: "open the BPF object", source })?;
    open.load().map(drop).map_err(load_error)
}

/// The object [`check_load`] must refuse (built by build.rs from src/bpf/reject_test.bpf.c).
#[doc(hidden)]
pub const REJECT_TEST_OBJECT: &str = concat!(env!("OUT_DIR"), "/reject_test.bpf.o");

/// Options for [`Datapath::open`].
#[derive(Clone, Debug)]
pub struct Config {
    /// A report unanswered this long puts its flow into the BPF fallback.
    pub fallback_timeout: Duration,
    /// No timed report sooner than this after the previous one (loss and RTO reports are
    /// never held): caps reports per flow where the RTT is microseconds (loopback).
    pub min_report_interval: Duration,
    /// Pin `ctl`, `events` and `sids` here (a bpffs directory) and reuse them if pinned: flows
    /// of an agent that died keep reporting into the same ring buffer and reading the same
    /// control map, and announce themselves again from the fallback, so the next agent adopts
    /// them. `None`: private maps, flows of a dead agent finish in the fallback.
    pub pin_dir: Option<PathBuf>,
}

/// Default [`Config::min_report_interval`]: at most 5,000 timed reports a second per flow.
pub const DEFAULT_MIN_REPORT_INTERVAL: Duration = Duration::from_micros(200);
/// Where `polycc-portus` pins the maps that outlive it (`ctl`, `events`, `sids`).
pub const DEFAULT_PIN_DIR: &str = "/sys/fs/bpf/polycc";
const PINNED_MAPS: [&str; 3] = ["ctl", "events", "sids"];
const BPF_FS_MAGIC: i64 = 0xcafe_4a11;

impl Default for Config {
    fn default() -> Self {
        Config {
            fallback_timeout: DEFAULT_FALLBACK_TIMEOUT,
            min_report_interval: DEFAULT_MIN_REPORT_INTERVAL,
            pin_dir: None,
        }
    }
}

/// Why the maps could not be pinned (the datapath then runs unpinned: no adoption).
#[derive(Debug, Error)]
#[error("cannot pin the BPF maps under {dir}: {why}")]
pub struct PinError {
    pub dir: PathBuf,
    pub why: String,
}

/// Make sure `dir`'s parent is a mounted bpffs (mounting one on /sys/fs/bpf if nothing is
/// there, as systemd does at boot) and `dir` exists.
fn prepare_pin_dir(dir: &Path) -> Result<(), PinError> {
    let err = |why: String| PinError { dir: dir.to_path_buf(), why };
    let parent = dir.parent().ok_or_else(|| err("no parent directory".into()))?;
    let is_bpffs = |p: &Path| {
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).ok()?;
        // SAFETY: `c` is a NUL-terminated path and `st` a live local.
        let mut st: libc::statfs = unsafe { std::mem::zeroed() };
        (unsafe { libc::statfs(c.as_ptr(), &mut st) } == 0).then_some(st.f_type as i64 == BPF_FS_MAGIC)
    };
    if is_bpffs(parent) != Some(true) {
        if parent != Path::new("/sys/fs/bpf") {
            return Err(err(format!("{} is not a bpffs mount", parent.display())));
        }
        let c = |s: &str| std::ffi::CString::new(s).expect("no NUL");
        let (src, target, fstype, opts) = (c("bpf"), c("/sys/fs/bpf"), c("bpf"), c("mode=0700"));
        // SAFETY: NUL-terminated strings that live across the call.
        let r = unsafe { libc::mount(src.as_ptr(), target.as_ptr(), fstype.as_ptr(), 0, opts.as_ptr().cast()) };
        if r < 0 {
            return Err(err(format!("mounting bpffs on /sys/fs/bpf: {}", std::io::Error::last_os_error())));
        }
    }
    std::fs::create_dir_all(dir).map_err(|e| err(e.to_string()))
}

/// Remove the pins (the maps live on while programs hold them).
pub fn remove_pins(dir: &Path) {
    for m in PINNED_MAPS {
        let _ = std::fs::remove_file(dir.join(m));
    }
}

/// The registered BPF datapath. Single-threaded: poll and write from one thread.
pub struct Datapath {
    ring: RingBuffer<'static>,
    queue: Rc<RefCell<VecDeque<Event>>>,
    /// Dropped before `skel`: closing the link unregisters the ops.
    link: Option<Link>,
    skel: PolyccSkel<'static>,
    busy_poll: Duration,
    pinning: Pinning,
}

/// What [`Datapath::open`] did with [`Config::pin_dir`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pinning {
    /// No pin directory asked for.
    None,
    /// New maps, pinned.
    Created,
    /// An earlier agent's maps: its live flows will be adopted.
    Reused,
    /// Earlier pins did not fit this build and were replaced.
    Replaced,
    /// Pinning failed (the reason); the maps are private.
    Failed(String),
}

impl Datapath {
    /// Load the program and register `polycc_bpf` through a BPF link. With
    /// [`Config::pin_dir`], pinned maps of an earlier agent are reused; if they do not fit this
    /// build (another version), they are replaced, and so is a pin directory that cannot be set
    /// up: then the datapath runs unpinned. What happened is in [`Datapath::pinning`].
    pub fn open(cfg: &Config) -> Result<Datapath, OpenError> {
        if !Path::new(KERNEL_BTF).exists() {
            return Err(OpenError::NoBtf);
        }
        let Some(dir) = cfg.pin_dir.as_deref() else { return Datapath::open_with(cfg, None) };
        if let Err(e) = prepare_pin_dir(dir) {
            let mut dp = Datapath::open_with(cfg, None)?;
            dp.pinning = Pinning::Failed(e.to_string());
            return Ok(dp);
        }
        let reused = PINNED_MAPS.iter().all(|m| dir.join(m).exists());
        match Datapath::open_with(cfg, Some(dir)) {
            Ok(mut dp) => {
                dp.pinning = if reused { Pinning::Reused } else { Pinning::Created };
                Ok(dp)
            }
            Err(OpenError::Verifier { .. } | OpenError::Other { .. }) if reused => {
                // Pins from another build (a different map layout): start afresh.
                remove_pins(dir);
                let mut dp = Datapath::open_with(cfg, Some(dir))?;
                dp.pinning = Pinning::Replaced;
                Ok(dp)
            }
            Err(e) => Err(e),
        }
    }

    /// How the maps were pinned.
    pub fn pinning(&self) -> &Pinning {
        &self.pinning
    }

    fn open_with(cfg: &Config, pin_dir: Option<&Path>) -> Result<Datapath, OpenError> {
        // The skeleton borrows its object storage for its whole life; one small allocation per
        // open, kept for the process (the object itself is closed when the skeleton drops).
        capture_libbpf_log();
        let storage: &'static mut MaybeUninit<libbpf_rs::OpenObject> = Box::leak(Box::new(MaybeUninit::uninit()));
        let mut open = PolyccSkelBuilder::default()
            .open(storage)
            .map_err(|source| OpenError::Other { step: "open the BPF object", source })?;
        if let Some(ro) = open.maps.rodata_data.as_deref_mut() {
            ro.fallback_timeout_ns = u64::try_from(cfg.fallback_timeout.as_nanos()).unwrap_or(u64::MAX);
            ro.min_report_us = u64::try_from(cfg.min_report_interval.as_micros()).unwrap_or(u64::MAX);
        }
        if let Some(dir) = pin_dir {
            for (name, map) in
                [("ctl", &mut open.maps.ctl), ("events", &mut open.maps.events), ("sids", &mut open.maps.sids)]
            {
                map.set_pin_path(dir.join(name))
                    .map_err(|source| OpenError::Other { step: "set a map's pin path", source })?;
            }
        }
        let mut skel = open.load().map_err(load_error)?;
        let link = skel.maps.polycc_ops.attach_struct_ops().map_err(|e| match errno(&e) {
            Some(libc::EEXIST) => OpenError::InUse(e),
            Some(libc::EPERM) | Some(libc::EACCES) => OpenError::Permission(e),
            _ => OpenError::Unsupported(e),
        })?;
        let queue = Rc::new(RefCell::new(VecDeque::new()));
        let q = Rc::clone(&queue);
        let opened_ns = monotonic_ns();
        let mut builder = RingBufferBuilder::new();
        builder
            .add(&skel.maps.events, move |data: &[u8]| {
                if let Some(e) = Event::parse(data, opened_ns) {
                    q.borrow_mut().push_back(e);
                }
                0
            })
            .map_err(|source| OpenError::Other { step: "ring buffer", source })?;
        let ring = builder.build().map_err(|source| OpenError::Other { step: "ring buffer", source })?;
        Ok(Datapath { ring, queue, link: Some(link), skel, busy_poll: Duration::ZERO, pinning: Pinning::None })
    }

    /// Spin on the ring buffer this long before sleeping in epoll (0: never spin). Sleeping
    /// costs a wakeup per report (tens of microseconds on a VM's vCPU); spinning costs CPU.
    pub fn set_busy_poll(&mut self, spin: Duration) {
        self.busy_poll = spin;
    }

    /// The next event, waiting up to `timeout` for one.
    pub fn poll(&mut self, timeout: Duration) -> std::io::Result<Option<Event>> {
        if let Some(e) = self.queue.borrow_mut().pop_front() {
            return Ok(Some(e));
        }
        if !self.busy_poll.is_zero() {
            let end = std::time::Instant::now() + self.busy_poll.min(timeout);
            loop {
                self.ring.consume_raw();
                if let Some(e) = self.queue.borrow_mut().pop_front() {
                    return Ok(Some(e));
                }
                if std::time::Instant::now() >= end {
                    break;
                }
                std::hint::spin_loop();
            }
        }
        let n = self.ring.poll_raw(timeout);
        if n < 0 && n != -libc::EINTR {
            return Err(std::io::Error::from_raw_os_error(-n));
        }
        Ok(self.queue.borrow_mut().pop_front())
    }

    /// Events already read from the ring buffer and not yet returned by [`Datapath::poll`].
    pub fn queued(&self) -> usize {
        self.queue.borrow().len()
    }

    /// Install `ctl` for flow `sid` (the whole entry: the BPF side applies it at the flow's next
    /// ACK when its `seq` differs from the last one applied).
    pub fn write_ctl(&self, sid: u32, ctl: &Ctl) -> std::io::Result<()> {
        // SAFETY: Ctl is repr(C) plain integers with no padding (checked by a test).
        let bytes = unsafe { std::slice::from_raw_parts((ctl as *const Ctl).cast::<u8>(), std::mem::size_of::<Ctl>()) };
        self.skel.maps.ctl.update(&sid.to_ne_bytes(), bytes, MapFlags::ANY).map_err(std::io::Error::other)
    }

    /// Forget flow `sid`'s control entry (the flow closed).
    pub fn remove_ctl(&self, sid: u32) {
        let _ = self.skel.maps.ctl.delete(&sid.to_ne_bytes());
    }

    pub fn stats(&self) -> Stats {
        let Some(b) = self.skel.maps.bss_data.as_deref() else { return Stats::default() };
        // SAFETY: the bss is mmapped and written by BPF concurrently; volatile reads of aligned
        // u64 counters see some recent value.
        let rd = |p: &u64| unsafe { std::ptr::read_volatile(p) };
        Stats {
            flows_created: rd(&b.stat_created),
            flows_freed: rd(&b.stat_freed),
            reports: rd(&b.stat_reports),
            ringbuf_drops: rd(&b.stat_ringbuf_drops),
            fallbacks: rd(&b.stat_fallbacks),
            resumes: rd(&b.stat_resumes),
        }
    }

    /// Unregister now (what dropping does).
    pub fn unregister(&mut self) {
        self.link.take();
    }
}

impl Drop for Datapath {
    fn drop(&mut self) {
        self.link.take();
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The congestion controls the kernel offers now.
pub fn available_congestion_controls() -> Vec<String> {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .map(|s| s.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_layouts_match_the_c_header() {
        // struct polycc_event: 10 u32, two v6 addresses, 2 u64 and 16 u64 fields; struct polycc_ctl.
        assert_eq!(std::mem::size_of::<RawEvent>(), 4 * 10 + 2 * 16 + 8 + 8 * FIELD_COUNT);
        assert_eq!(std::mem::size_of::<Ctl>(), 32);
    }

    #[test]
    fn events_decode_and_short_records_are_skipped() {
        let mut e = RawEvent {
            kind: EV_CREATE,
            sid: 3,
            mss: 1448,
            init_cwnd_bytes: 14_480,
            saddr: u32::from(Ipv4Addr::new(127, 0, 0, 1)).to_be(),
            sport: u32::from(5201u16.to_be()),
            ..RawEvent::default()
        };
        // SAFETY: reading a plain repr(C) value as bytes.
        let bytes = |e: &RawEvent| unsafe {
            std::slice::from_raw_parts((e as *const RawEvent).cast::<u8>(), std::mem::size_of::<RawEvent>()).to_vec()
        };
        match Event::parse(&bytes(&e), 0) {
            Some(Event::Create { sid: 3, src, src_port: 5201, state: None, .. }) => {
                assert_eq!(src, IpAddr::V4(Ipv4Addr::LOCALHOST))
            }
            other => panic!("{other:?}"),
        }
        // A flow announced again: its state, with slow start and no rate as None.
        e.fields[..5].copy_from_slice(&[1, 0, 41_000, 40_000, 0]);
        let state = FlowState {
            ssthresh_bytes: None,
            srtt_us: Some(41_000),
            min_rtt_us: Some(40_000),
            rate_bytes_per_sec: None,
        };
        assert!(matches!(Event::parse(&bytes(&e), 0), Some(Event::Create { state: Some(s), .. }) if s == state));
        e.fields = [0; FIELD_COUNT];
        // An IPv6 flow: its addresses, not the (zero) IPv4 fields.
        e.saddr6 = Ipv6Addr::LOCALHOST.octets();
        e.daddr6 = "2001:db8::2".parse::<Ipv6Addr>().unwrap().octets();
        match Event::parse(&bytes(&e), 0) {
            Some(Event::Create { src: IpAddr::V6(s), dst: IpAddr::V6(d), .. }) => {
                assert_eq!((s, d.segments()[0]), (Ipv6Addr::LOCALHOST, 0x2001))
            }
            other => panic!("{other:?}"),
        }
        // A CREATE from before this agent opened the ring (a dead agent left it unread) is
        // stale; a report that old is not (the agent ignores those of flows it does not know).
        e.t_ns = 5_000;
        assert!(matches!(Event::parse(&bytes(&e), 5_000), Some(Event::Create { .. })));
        assert_eq!(Event::parse(&bytes(&e), 5_001), None);
        e.kind = EV_MEASURE;
        e.mode = 2;
        assert!(matches!(Event::parse(&bytes(&e), 5_001), Some(Event::Measure { .. })));
        e.fields[0] = 7;
        assert!(
            matches!(Event::parse(&bytes(&e), 0), Some(Event::Measure { mode: Mode::Fallback, fields, .. }) if fields[0] == 7)
        );
        assert_eq!(Event::parse(&bytes(&e)[..20], 0), None);
        e.kind = 9;
        assert_eq!(Event::parse(&bytes(&e), 0), None);
    }
}
