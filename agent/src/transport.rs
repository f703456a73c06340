//! How the agent reaches datapaths: netlink to the kernel module, a unix datagram socket to a
//! userspace (libccp) datapath, or in-memory channels for tests.
//!
//! Opening is the boundary where users make mistakes (no CAP_NET_ADMIN, a missing directory,
//! a second agent), so it returns [`OpenError`] with what to do; receiving and sending report
//! `IoError`s the run loop logs.

use std::collections::VecDeque;
use std::fmt::Debug;
use std::hash::Hash;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;
use thiserror::Error;

/// How long a receive waits before the run loop checks for a shutdown request.
pub const RECV_TIMEOUT: Duration = Duration::from_millis(200);
/// The longest a send to a datapath that does not read may block the agent.
pub const SEND_TIMEOUT: Duration = Duration::from_millis(20);

/// A datagram transport to one or more datapaths.
pub trait Transport {
    /// Who sent a message (the agent keeps flows per datapath).
    type Addr: Clone + Eq + Hash + Debug;
    /// Wait up to [`RECV_TIMEOUT`] for one datagram; `Ok(None)` on timeout or interruption.
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<Option<(usize, Self::Addr)>>;
    fn send(&self, to: &Self::Addr, msg: &[u8]) -> io::Result<()>;
    /// Receive-buffer overflows so far (each lost one or more messages); 0 where none can happen.
    fn overruns(&self) -> u64 {
        0
    }
    /// The program the agent installs, before any message: a datapath that runs no CCP programs
    /// (the BPF one) learns from it where the report fields and control registers are. CCP
    /// datapaths get the program in INSTALL and ignore this.
    fn attach_program(&mut self, _program: &crate::program::Program) {}
    /// What the transport waits for before any datapath can reach the agent (the kernel
    /// module not loaded yet), said the way a user fixes it; `None` when nothing is missing.
    fn waiting_for(&self) -> Option<&'static str> {
        None
    }
}

/// The agent could not open its datapath connection.
#[derive(Debug, Error)]
pub enum OpenError {
    #[error("cannot open the netlink socket to the ccp kernel module: {0}; the agent needs root or CAP_NET_ADMIN (run it with sudo, or `setcap cap_net_admin+ep` on the binary)")]
    NetlinkPermission(io::Error),
    #[error("cannot open the netlink socket to the ccp kernel module ({step}): {source}")]
    Netlink {
        step: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("unix socket {path}: the directory {dir} does not exist; create it (mkdir -p {dir}) or pass --unix-socket with another path")]
    UnixNoDirectory { path: PathBuf, dir: PathBuf },
    #[error("unix socket {path}: permission denied; run the agent as a user who may write there, or pass --unix-socket with another path")]
    UnixPermission { path: PathBuf },
    #[error("unix socket {path}: another agent is already listening there; stop it first, or pass --unix-socket with another path")]
    UnixInUse { path: PathBuf },
    #[error("unix socket {path}: a file that is not a socket is in the way; remove it or pass --unix-socket with another path")]
    UnixNotSocket { path: PathBuf },
    #[error("unix socket {path}: {source}")]
    Unix {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[cfg(feature = "bpf")]
    #[error(transparent)]
    Bpf(#[from] polycc_bpf::OpenError),
    #[error("this polycc-portus was built without the BPF datapath (cargo feature `bpf`); rebuild with default features, or use --ipc netlink")]
    BpfNotBuilt,
}

fn would_block(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted)
}

/// Which netlink the ccp module speaks (its `ipc` parameter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetlinkMode {
    /// The generic netlink family `polycc_ccp` (the module's default): admin-only, and the
    /// module unicasts to this agent alone.
    Genl { family: u16 },
    /// NETLINK_USERSOCK as portus 0.9 speaks it (`ipc=usersock`): kernel -> agent on multicast
    /// group 22, agent -> kernel unicast to port 0, one CCP message per netlink message.
    Usersock,
}

/// The netlink connection to the ccp module.
pub struct Netlink {
    fd: OwnedFd,
    mode: NetlinkMode,
    /// Receive-buffer overflows (ENOBUFS from recvfrom) seen so far.
    overruns: u64,
    /// The agent speaks first (generic netlink has no group for the module's READY; over
    /// usersock it saves waiting for one): the transport hands the agent a READY of its own on
    /// its first receive, so it installs its program as it would on the module's; the module
    /// then announces its live flows.
    ready_due: bool,
    /// No module was loaded at open: watch for one, and move to generic netlink if it
    /// registers the family (one loaded with ipc=usersock reaches this socket as it is).
    watch_for_module: bool,
}

/// Where a loaded ccp.ko shows its state ("live" once its init has run).
const MODULE_INITSTATE: &str = "/sys/module/ccp/initstate";

fn module_live() -> bool {
    std::fs::read_to_string(MODULE_INITSTATE).is_ok_and(|s| s.trim() == "live")
}

const NETLINK_CCP_GROUP: libc::c_int = 22;
/// The module's generic netlink family, command and attribute (datapath/ccp_nl.h).
const GENL_FAMILY: &str = "polycc_ccp";
const GENL_VERSION: u8 = 1;
const GENL_CMD_MSG: u8 = 1;
const GENL_ATTR_MSG: u16 = 1;
/// The generic netlink controller (linux/genetlink.h): resolves a family name to its id.
const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 1;
const NLMSG_HDR_BYTES: usize = 16;
const GENL_HDR_BYTES: usize = 4;
const NLA_HDR_BYTES: usize = 4;
/// Receive buffer for the kernel's reports (per-ACK reporting at high rates overruns the
/// default ~200 KiB and arms the module's fallback).
const NETLINK_RCVBUF_BYTES: libc::c_int = 4 << 20;

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// One netlink message: header (`ty`, `flags`), then `payload`, padded.
fn nlmsg(ty: u16, flags: u16, payload: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(align4(NLMSG_HDR_BYTES + payload.len()));
    m.extend_from_slice(&((NLMSG_HDR_BYTES + payload.len()) as u32).to_ne_bytes());
    m.extend_from_slice(&ty.to_ne_bytes());
    m.extend_from_slice(&flags.to_ne_bytes());
    m.extend_from_slice(&[0u8; 8]); // seq, pid: 0 as portus sends them
    m.extend_from_slice(payload);
    m.resize(align4(m.len()), 0);
    m
}

/// A generic netlink request: its header, then attributes (type, value), each padded.
fn genl_payload(cmd: u8, version: u8, attrs: &[(u16, &[u8])]) -> Vec<u8> {
    let mut p = vec![cmd, version, 0, 0];
    for (ty, value) in attrs {
        p.extend_from_slice(&((NLA_HDR_BYTES + value.len()) as u16).to_ne_bytes());
        p.extend_from_slice(&ty.to_ne_bytes());
        p.extend_from_slice(value);
        p.resize(align4(p.len()), 0);
    }
    p
}

/// The netlink messages of a datagram: (type, payload), stopping at the first malformed one.
fn nlmsgs(raw: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut at = 0;
    std::iter::from_fn(move || {
        if at + NLMSG_HDR_BYTES > raw.len() {
            return None;
        }
        let len = u32::from_ne_bytes(raw[at..at + 4].try_into().unwrap()) as usize;
        if len < NLMSG_HDR_BYTES || at + len > raw.len() {
            return None;
        }
        let ty = u16::from_ne_bytes([raw[at + 4], raw[at + 5]]);
        let payload = &raw[at + NLMSG_HDR_BYTES..at + len];
        at += align4(len);
        Some((ty, payload))
    })
}

/// The attributes after a generic netlink header: (type, value).
fn genl_attrs(payload: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut at = GENL_HDR_BYTES;
    std::iter::from_fn(move || {
        if at + NLA_HDR_BYTES > payload.len() {
            return None;
        }
        let len = u16::from_ne_bytes([payload[at], payload[at + 1]]) as usize;
        if len < NLA_HDR_BYTES || at + len > payload.len() {
            return None;
        }
        let ty = u16::from_ne_bytes([payload[at + 2], payload[at + 3]]) & 0x3fff; // no NLA_F_ flags
        let value = &payload[at + NLA_HDR_BYTES..at + len];
        at += align4(len);
        Some((ty, value))
    })
}

impl Netlink {
    /// The module's generic netlink family where it registered one (its default), else
    /// NETLINK_USERSOCK (a module loaded with ipc=usersock, or none loaded yet).
    pub fn open() -> Result<Netlink, OpenError> {
        match Netlink::open_genl()? {
            Some(n) => Ok(n),
            None => {
                let mut n = Netlink::open_usersock()?;
                n.watch_for_module = !module_live();
                // With no module there is no datapath to be ready: a genl module found later
                // brings its own socket (READY due), a usersock one sends its READY on load.
                n.ready_due = !n.watch_for_module;
                Ok(n)
            }
        }
    }

    pub fn mode(&self) -> NetlinkMode {
        self.mode
    }

    /// A bound netlink socket of `protocol` with the agent's buffer and receive timeout.
    fn socket(protocol: libc::c_int) -> Result<OwnedFd, OpenError> {
        // SAFETY: plain syscalls on a descriptor this function owns; every pointer passed
        // points to a live local of the size given.
        unsafe {
            let fd = libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, protocol);
            if fd < 0 {
                return Err(netlink_error("socket"));
            }
            let fd = OwnedFd::from_raw_fd(fd);
            let mut addr: libc::sockaddr_nl = std::mem::zeroed();
            addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
            // Port 0: the kernel assigns a free port id (portus binds its pid, which collides
            // with any other netlink socket the process holds).
            if libc::bind(
                fd.as_raw_fd(),
                &addr as *const libc::sockaddr_nl as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            ) < 0
            {
                return Err(netlink_error("bind"));
            }
            let rcvbuf = NETLINK_RCVBUF_BYTES;
            // FORCE passes rmem_max for a privileged agent; fall back to the capped option.
            if setsockopt(&fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &rcvbuf) < 0 {
                setsockopt(&fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &rcvbuf);
            }
            let tv = libc::timeval { tv_sec: 0, tv_usec: RECV_TIMEOUT.as_micros() as libc::suseconds_t };
            if setsockopt(&fd, libc::SOL_SOCKET, libc::SO_RCVTIMEO, &tv) < 0 {
                return Err(netlink_error("receive timeout"));
            }
            Ok(fd)
        }
    }

    /// Generic netlink: `None` when the module's family is not registered.
    fn open_genl() -> Result<Option<Netlink>, OpenError> {
        let fd = Netlink::socket(libc::NETLINK_GENERIC)?;
        let mut name = GENL_FAMILY.as_bytes().to_vec();
        name.push(0);
        let ask = nlmsg(
            GENL_ID_CTRL,
            NLM_F_REQUEST,
            &genl_payload(CTRL_CMD_GETFAMILY, 1, &[(CTRL_ATTR_FAMILY_NAME, &name)]),
        );
        let family = ask_kernel(&fd, &ask, "ask for the polycc_ccp family", |ty, payload| match ty {
            // ENOENT: no such family, the module is not loaded or uses NETLINK_USERSOCK.
            NLMSG_ERROR => Some(Ok(None)),
            GENL_ID_CTRL => genl_attrs(payload)
                .find(|&(t, v)| t == CTRL_ATTR_FAMILY_ID && v.len() >= 2)
                .map(|(_, v)| Ok(Some(u16::from_ne_bytes([v[0], v[1]])))),
            _ => None,
        })?;
        let Some(family) = family else { return Ok(None) };
        // Connected to the kernel: netlink refuses every other sender's unicast.
        connect_to_kernel(&fd)?;
        check_permission(&fd, family)?;
        let mode = NetlinkMode::Genl { family };
        Ok(Some(Netlink { fd, mode, overruns: 0, ready_due: true, watch_for_module: false }))
    }

    fn open_usersock() -> Result<Netlink, OpenError> {
        let fd = Netlink::socket(libc::NETLINK_USERSOCK)?;
        let group = NETLINK_CCP_GROUP;
        // SAFETY: a live descriptor and a live local of the size given.
        if unsafe { setsockopt(&fd, libc::SOL_NETLINK, libc::NETLINK_ADD_MEMBERSHIP, &group) } < 0 {
            return Err(netlink_error("join multicast group 22"));
        }
        // The agent speaks first here too, as over genl: a module that already runs learns of
        // it at once, instead of finding it by the READY it announces once a second while it
        // knows no agent (a READY that came after the agent's start reset its flows; unmodified
        // portus still waits for it).
        Ok(Netlink { fd, mode: NetlinkMode::Usersock, overruns: 0, ready_due: true, watch_for_module: false })
    }
}

fn netlink_error(step: &'static str) -> OpenError {
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => OpenError::NetlinkPermission(e),
        _ => OpenError::Netlink { step, source: e },
    }
}

/// # Safety
/// `T` must be the option's C type.
unsafe fn setsockopt<T>(fd: &OwnedFd, level: libc::c_int, opt: libc::c_int, val: &T) -> libc::c_int {
    libc::setsockopt(
        fd.as_raw_fd(),
        level,
        opt,
        val as *const T as *const libc::c_void,
        std::mem::size_of::<T>() as libc::socklen_t,
    )
}

fn kernel_addr() -> libc::sockaddr_nl {
    // SAFETY: sockaddr_nl is plain integers; all zero is port 0, no groups (the kernel).
    let mut to: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    to.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    to
}

/// The family's operations are admin-only: an empty request (a no-op for the module) with an
/// acknowledgement says at start whether this agent may use them, rather than each message
/// coming back refused.
fn check_permission(fd: &OwnedFd, family: u16) -> Result<(), OpenError> {
    const NLM_F_ACK: u16 = 4;
    let probe = nlmsg(family, NLM_F_REQUEST | NLM_F_ACK, &genl_payload(GENL_CMD_MSG, GENL_VERSION, &[]));
    let step = "check the polycc_ccp family's permission";
    ask_kernel(fd, &probe, step, |ty, payload| {
        if ty != NLMSG_ERROR || payload.len() < 4 {
            return None;
        }
        Some(match -i32::from_ne_bytes(payload[..4].try_into().unwrap()) {
            0 => Ok(()),
            e @ (libc::EPERM | libc::EACCES) => Err(OpenError::NetlinkPermission(io::Error::from_raw_os_error(e))),
            e => Err(OpenError::Netlink { step, source: io::Error::from_raw_os_error(e) }),
        })
    })
}

/// Send `request` to the kernel and hand each netlink message of its replies to `answer` until
/// it returns a result. The answer is immediate; a few reads ride out EINTR and the receive
/// timeout before `step` is reported as timed out.
fn ask_kernel<T>(
    fd: &OwnedFd,
    request: &[u8],
    step: &'static str,
    mut answer: impl FnMut(u16, &[u8]) -> Option<Result<T, OpenError>>,
) -> Result<T, OpenError> {
    send_to_kernel(fd, request).map_err(|source| OpenError::Netlink { step, source })?;
    let mut raw = [0u8; 4096];
    for _ in 0..10 {
        let n = match recv_from_kernel(fd, &mut raw) {
            Ok(Some(n)) => n,
            Ok(None) => continue,
            Err(source) => return Err(OpenError::Netlink { step, source }),
        };
        if let Some(result) = nlmsgs(&raw[..n]).find_map(|(ty, payload)| answer(ty, payload)) {
            return result;
        }
    }
    Err(OpenError::Netlink { step, source: io::Error::new(io::ErrorKind::TimedOut, "no answer from the kernel") })
}

fn connect_to_kernel(fd: &OwnedFd) -> Result<(), OpenError> {
    let to = kernel_addr();
    // SAFETY: a live descriptor and a live local of the size given.
    let r = unsafe {
        libc::connect(
            fd.as_raw_fd(),
            &to as *const libc::sockaddr_nl as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(netlink_error("connect to the kernel"));
    }
    Ok(())
}

fn send_to_kernel(fd: &OwnedFd, m: &[u8]) -> io::Result<()> {
    let to = kernel_addr();
    // SAFETY: `m` and `to` are live and of the sizes passed.
    let n = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            m.as_ptr() as *const libc::c_void,
            m.len(),
            0,
            &to as *const libc::sockaddr_nl as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// One datagram from the kernel (port 0) into `raw`: `Ok(None)` on timeout or interruption,
/// and for a datagram from any other sender (any local user may write to a NETLINK_USERSOCK
/// port); ENOBUFS is returned for the caller to count.
fn recv_from_kernel(fd: &OwnedFd, raw: &mut [u8]) -> io::Result<Option<usize>> {
    // SAFETY: `raw` and `from` are live and of the sizes passed.
    let (n, from_pid) = unsafe {
        let mut from: libc::sockaddr_nl = std::mem::zeroed();
        let mut from_len = std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t;
        let n = libc::recvfrom(
            fd.as_raw_fd(),
            raw.as_mut_ptr() as *mut libc::c_void,
            raw.len(),
            0,
            &mut from as *mut libc::sockaddr_nl as *mut libc::sockaddr,
            &mut from_len,
        );
        (n, from.nl_pid)
    };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if would_block(&e) { Ok(None) } else { Err(e) };
    }
    Ok((from_pid == 0).then_some(n as usize))
}

impl Transport for Netlink {
    type Addr = ();

    fn waiting_for(&self) -> Option<&'static str> {
        self.watch_for_module.then_some(
            "no ccp kernel module is loaded (no /sys/module/ccp): load it (sudo insmod ccp.ko, or \
             sudo modprobe ccp after make install-dkms) or run polycc-portus --datapath bpf; until then \
             new connections use the kernel's own congestion control",
        )
    }

    /// Copies the CCP messages of the kernel's datagram into `buf`, back to back (CCP messages
    /// carry their own lengths). Datagrams not from the kernel are dropped.
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<Option<(usize, ())>> {
        if std::mem::take(&mut self.ready_due) {
            let ready = crate::wire::build::ready(0);
            buf[..ready.len()].copy_from_slice(&ready);
            return Ok(Some((ready.len(), ())));
        }
        let mut raw = [0u8; 16 * 1024];
        let n = match recv_from_kernel(&self.fd, &mut raw) {
            Ok(Some(n)) => n,
            Ok(None) => {
                if self.watch_for_module && module_live() {
                    self.watch_for_module = false;
                    // A failure leaves this socket as it is: a usersock module's READY reaches it.
                    if let Ok(Some(genl)) = Netlink::open_genl() {
                        *self = genl;
                    }
                }
                return Ok(None);
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                // The socket's receive buffer overflowed and the kernel dropped messages (it
                // reports this once, then delivers again): the datapath counts them
                // (send_enobufs) and re-sends what needs an answer, so carry on.
                self.overruns += 1;
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        let mut out = 0;
        let mut put = |m: &[u8]| {
            let take = m.len().min(buf.len() - out);
            buf[out..out + take].copy_from_slice(&m[..take]);
            out += take;
        };
        for (ty, payload) in nlmsgs(&raw[..n]) {
            match self.mode {
                NetlinkMode::Usersock => put(payload),
                // NLMSG_ERROR answers a message the module refused: it logged and counted it.
                NetlinkMode::Genl { family } if ty == family => {
                    genl_attrs(payload).filter(|&(t, _)| t == GENL_ATTR_MSG).for_each(|(_, m)| put(m))
                }
                NetlinkMode::Genl { .. } => {}
            }
        }
        Ok((out > 0).then_some((out, ())))
    }

    fn overruns(&self) -> u64 {
        self.overruns
    }

    fn send(&self, _to: &(), msg: &[u8]) -> io::Result<()> {
        let m = match self.mode {
            NetlinkMode::Usersock => nlmsg(0, 0, msg),
            NetlinkMode::Genl { family } => {
                nlmsg(family, NLM_F_REQUEST, &genl_payload(GENL_CMD_MSG, GENL_VERSION, &[(GENL_ATTR_MSG, msg)]))
            }
        };
        send_to_kernel(&self.fd, &m)
    }
}

/// A unix datagram socket, as portus' unix IPC (its default path: `/tmp/ccp/portus`). A
/// datapath sends from its own bound path; the agent answers to that path.
pub struct Unix {
    sock: UnixDatagram,
    path: PathBuf,
}

impl Unix {
    /// Bind `path`, replacing a stale socket file but never a live agent's.
    pub fn open(path: &Path) -> Result<Unix, OpenError> {
        let path = path.to_path_buf();
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf();
        if !dir.is_dir() {
            return Err(OpenError::UnixNoDirectory { path, dir });
        }
        match std::fs::symlink_metadata(&path) {
            Ok(meta) => {
                use std::os::unix::fs::FileTypeExt;
                if !meta.file_type().is_socket() {
                    return Err(OpenError::UnixNotSocket { path });
                }
                // A socket someone still reads from is a running agent; a refused connect
                // means a stale file from an agent that died.
                let probe = UnixDatagram::unbound().map_err(|source| OpenError::Unix { path: path.clone(), source })?;
                if probe.connect(&path).is_ok() {
                    return Err(OpenError::UnixInUse { path });
                }
                std::fs::remove_file(&path).map_err(|source| match source.kind() {
                    io::ErrorKind::PermissionDenied => OpenError::UnixPermission { path: path.clone() },
                    _ => OpenError::Unix { path: path.clone(), source },
                })?;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(source) => return Err(OpenError::Unix { path, source }),
        }
        let sock = UnixDatagram::bind(&path).map_err(|source| match source.kind() {
            io::ErrorKind::PermissionDenied => OpenError::UnixPermission { path: path.clone() },
            io::ErrorKind::AddrInUse => OpenError::UnixInUse { path: path.clone() },
            _ => OpenError::Unix { path: path.clone(), source },
        })?;
        sock.set_read_timeout(Some(RECV_TIMEOUT)).map_err(|source| OpenError::Unix { path: path.clone(), source })?;
        // A datapath that stops reading fills its queue (10 datagrams by default); the agent
        // drops the message rather than block every other flow behind it.
        sock.set_write_timeout(Some(SEND_TIMEOUT)).map_err(|source| OpenError::Unix { path: path.clone(), source })?;
        Ok(Unix { sock, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Unix {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Transport for Unix {
    type Addr = PathBuf;

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<Option<(usize, PathBuf)>> {
        match self.sock.recv_from(buf) {
            // An unbound sender cannot be answered: ignore it.
            Ok((n, addr)) => Ok(addr.as_pathname().map(|p| (n, p.to_path_buf()))),
            Err(e) if would_block(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn send(&self, to: &PathBuf, msg: &[u8]) -> io::Result<()> {
        self.sock.send_to(msg, to).map(|_| ())
    }
}

/// In-memory datagrams from one datapath (tests, benchmarks). Messages the agent sends are
/// kept in `sent`.
pub struct Memory {
    pub inbox: mpsc::Receiver<Vec<u8>>,
    pub sent: std::sync::Arc<std::sync::Mutex<VecDeque<Vec<u8>>>>,
}

impl Transport for Memory {
    type Addr = ();

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<Option<(usize, ())>> {
        match self.inbox.recv_timeout(RECV_TIMEOUT) {
            Ok(m) => {
                let n = m.len().min(buf.len());
                buf[..n].copy_from_slice(&m[..n]);
                Ok(Some((n, ())))
            }
            Err(mpsc::RecvTimeoutError::Timeout) => Ok(None),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                Err(io::Error::new(io::ErrorKind::BrokenPipe, "the in-memory datapath is gone"))
            }
        }
    }

    fn send(&self, _to: &(), msg: &[u8]) -> io::Result<()> {
        self.sent.lock().expect("sent queue").push_back(msg.to_vec());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn genl_frames_carry_one_ccp_message_each_and_parse_back() {
        let ccp = crate::wire::build::ready(7);
        // Two messages of the module's family in one datagram, then one of another type.
        let mut datagram = nlmsg(0x1d, 0, &genl_payload(GENL_CMD_MSG, GENL_VERSION, &[(GENL_ATTR_MSG, &ccp)]));
        assert_eq!(datagram.len(), 16 + 4 + 4 + ccp.len(), "header, genl header, attribute: {datagram:?}");
        datagram.extend(nlmsg(0x1d, 0, &genl_payload(GENL_CMD_MSG, GENL_VERSION, &[(GENL_ATTR_MSG, &ccp[..5])])));
        datagram.extend(nlmsg(NLMSG_ERROR, 0, &[0xff; 20]));
        let msgs: Vec<(u16, Vec<Vec<u8>>)> = nlmsgs(&datagram)
            .map(|(ty, p)| (ty, genl_attrs(p).filter(|&(t, _)| t == GENL_ATTR_MSG).map(|(_, v)| v.to_vec()).collect()))
            .collect();
        assert_eq!(msgs.len(), 3);
        assert_eq!(msgs[0], (0x1d, vec![ccp.clone()]));
        assert_eq!(msgs[1], (0x1d, vec![ccp[..5].to_vec()]), "an unaligned value is padded, and read back exactly");
        assert_eq!(msgs[2].0, NLMSG_ERROR);
        // A length past the datagram ends the walk instead of reading beyond it.
        let mut bad = datagram.clone();
        bad[0] = 0xff;
        assert_eq!(nlmsgs(&bad).count(), 0);
        let mut bad_attr = nlmsg(0x1d, 0, &genl_payload(GENL_CMD_MSG, GENL_VERSION, &[(GENL_ATTR_MSG, &ccp)]));
        bad_attr[16 + 4] = 0xff; // the attribute claims more than the message holds
        assert_eq!(nlmsgs(&bad_attr).flat_map(|(_, p)| genl_attrs(p)).count(), 0);
    }

    #[test]
    fn unix_socket_errors_say_what_to_do() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        let missing = d.join("no/such/dir/agent.sock");
        let e = Unix::open(&missing).err().unwrap();
        assert!(matches!(e, OpenError::UnixNoDirectory { .. }), "{e}");
        assert!(e.to_string().contains("mkdir -p"), "{e}");

        let path = d.join("agent.sock");
        let live = Unix::open(&path).unwrap();
        let e = Unix::open(&path).err().unwrap();
        assert!(matches!(e, OpenError::UnixInUse { .. }), "{e}");
        drop(live);

        // A stale socket file (its agent died without cleaning up) is replaced.
        let stale = UnixDatagram::bind(&path).unwrap();
        drop(stale);
        assert!(path.exists());
        let again = Unix::open(&path).unwrap();
        drop(again);
        assert!(!path.exists(), "the agent removes its socket file on exit");

        std::fs::write(&path, b"not a socket").unwrap();
        assert!(matches!(Unix::open(&path), Err(OpenError::UnixNotSocket { .. })));
    }

    #[test]
    fn unix_socket_answers_the_sender() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        let mut agent = Unix::open(&d.join("agent.sock")).unwrap();
        let dp = UnixDatagram::bind(d.join("dp.sock")).unwrap();
        dp.send_to(b"hello", agent.path()).unwrap();
        let mut buf = [0u8; 64];
        let (n, from) = agent.recv(&mut buf).unwrap().unwrap();
        agent.send(&from, &buf[..n]).unwrap();
        let mut back = [0u8; 64];
        assert_eq!(dp.recv(&mut back).unwrap(), 5);
        assert_eq!(agent.recv(&mut buf).unwrap(), None, "times out quietly");
    }
}
