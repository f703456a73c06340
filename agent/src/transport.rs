//! How the agent reaches datapaths: netlink to the kernel module, a unix datagram socket to a
//! userspace (libccp) datapath, or in-memory channels for tests.
//!
//! Opening is the boundary where users make mistakes (no CAP_NET_ADMIN, a missing directory,
//! a second agent), so it returns [`OpenError`] with what to do; receiving and sending report
//! [`IoError`]s the run loop logs.

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

/// Netlink as portus 0.9 and the ccp module speak it: NETLINK_USERSOCK, kernel -> agent on
/// multicast group 22, agent -> kernel unicast to port 0, one CCP message per netlink message.
pub struct Netlink {
    fd: OwnedFd,
    /// Receive-buffer overflows (ENOBUFS from recvfrom) seen so far.
    overruns: u64,
}

const NETLINK_CCP_GROUP: libc::c_int = 22;
const NLMSG_HDR_BYTES: usize = 16;
/// Receive buffer for the kernel's reports (per-ACK reporting at high rates overruns the
/// default ~200 KiB and arms the module's fallback).
const NETLINK_RCVBUF_BYTES: libc::c_int = 4 << 20;

impl Netlink {
    pub fn open() -> Result<Netlink, OpenError> {
        let err = |step: &'static str| {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EPERM) | Some(libc::EACCES) => OpenError::NetlinkPermission(e),
                _ => OpenError::Netlink { step, source: e },
            }
        };
        // SAFETY: plain syscalls on a descriptor this function owns; every pointer passed
        // points to a live local of the size given.
        unsafe {
            let fd = libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_USERSOCK);
            if fd < 0 {
                return Err(err("socket"));
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
                return Err(err("bind"));
            }
            let set = |level, opt, val: *const libc::c_void, len: usize| {
                libc::setsockopt(fd.as_raw_fd(), level, opt, val, len as libc::socklen_t)
            };
            let group = NETLINK_CCP_GROUP;
            if set(
                libc::SOL_NETLINK,
                libc::NETLINK_ADD_MEMBERSHIP,
                &group as *const _ as *const libc::c_void,
                std::mem::size_of_val(&group),
            ) < 0
            {
                return Err(err("join multicast group 22"));
            }
            let rcvbuf = NETLINK_RCVBUF_BYTES;
            // FORCE passes rmem_max for a privileged agent; fall back to the capped option.
            if set(libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &rcvbuf as *const _ as *const _, 4) < 0 {
                set(libc::SOL_SOCKET, libc::SO_RCVBUF, &rcvbuf as *const _ as *const _, 4);
            }
            let tv = libc::timeval { tv_sec: 0, tv_usec: RECV_TIMEOUT.as_micros() as libc::suseconds_t };
            if set(
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                &tv as *const _ as *const libc::c_void,
                std::mem::size_of_val(&tv),
            ) < 0
            {
                return Err(err("receive timeout"));
            }
            Ok(Netlink { fd, overruns: 0 })
        }
    }
}

impl Transport for Netlink {
    type Addr = ();

    /// Copies the payloads of the datagram's netlink messages into `buf`, back to back (CCP
    /// messages carry their own lengths). Datagrams not from the kernel (port id 0) are
    /// dropped: any local user may write to a NETLINK_USERSOCK port.
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<Option<(usize, ())>> {
        let mut raw = [0u8; 16 * 1024];
        // SAFETY: `raw` and `from` are live locals of the sizes passed.
        let (n, from_pid) = unsafe {
            let mut from: libc::sockaddr_nl = std::mem::zeroed();
            let mut from_len = std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t;
            let n = libc::recvfrom(
                self.fd.as_raw_fd(),
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
            if e.raw_os_error() == Some(libc::ENOBUFS) {
                // The socket's receive buffer overflowed and the kernel dropped messages (it
                // reports this once, then delivers again): the datapath counts them
                // (send_enobufs) and re-sends what needs an answer, so carry on.
                self.overruns += 1;
                return Ok(None);
            }
            return if would_block(&e) { Ok(None) } else { Err(e) };
        }
        if from_pid != 0 {
            return Ok(None);
        }
        let raw = &raw[..n as usize];
        let (mut at, mut out) = (0, 0);
        while at + NLMSG_HDR_BYTES <= raw.len() {
            let len = u32::from_ne_bytes([raw[at], raw[at + 1], raw[at + 2], raw[at + 3]]) as usize;
            if len < NLMSG_HDR_BYTES || at + len > raw.len() {
                break;
            }
            let payload = &raw[at + NLMSG_HDR_BYTES..at + len];
            let take = payload.len().min(buf.len() - out);
            buf[out..out + take].copy_from_slice(&payload[..take]);
            out += take;
            at += (len + 3) & !3; // NLMSG_ALIGN
        }
        Ok((out > 0).then_some((out, ())))
    }

    fn overruns(&self) -> u64 {
        self.overruns
    }

    fn send(&self, _to: &(), msg: &[u8]) -> io::Result<()> {
        let mut m = Vec::with_capacity(NLMSG_HDR_BYTES + msg.len());
        m.extend_from_slice(&((NLMSG_HDR_BYTES + msg.len()) as u32).to_ne_bytes());
        m.extend_from_slice(&[0u8; 12]); // type, flags, seq, pid: 0 as portus sends them
        m.extend_from_slice(msg);
        // SAFETY: `m` and `to` are live locals of the sizes passed.
        let n = unsafe {
            let mut to: libc::sockaddr_nl = std::mem::zeroed();
            to.nl_family = libc::AF_NETLINK as libc::sa_family_t;
            libc::sendto(
                self.fd.as_raw_fd(),
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
