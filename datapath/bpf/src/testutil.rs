//! Helpers for tests and benchmarks on the host's kernel: skip checks, TCP flows over loopback
//! with a chosen congestion control and MSS, TCP_INFO read-back. Not part of the datapath.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Why BPF congestion-control tests cannot run here, naming the missing feature; `None` when
/// they can.
pub fn skip_reason() -> Option<String> {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root: registering a BPF tcp_congestion_ops needs CAP_BPF and CAP_NET_ADMIN".into());
    }
    if !Path::new(crate::KERNEL_BTF).exists() {
        return Some(format!("the kernel has no BTF ({} missing): CONFIG_DEBUG_INFO_BTF", crate::KERNEL_BTF));
    }
    // One registration per kernel: wait out another test run's agent (a shared machine), and
    // skip rather than fail if an agent is serving this host.
    let free = wait_for(std::time::Duration::from_secs(30), || {
        (!crate::available_congestion_controls().iter().any(|c| c == crate::CA_NAME)).then_some(())
    });
    if free.is_none() {
        return Some(format!("{} is registered by another process (a running agent or test run)", crate::CA_NAME));
    }
    None
}

/// Print the standard skip line and return true when the tests cannot run.
pub fn skip(test: &str) -> bool {
    match skip_reason() {
        Some(why) => {
            eprintln!("skipped {test}: {why}");
            true
        }
        None => false,
    }
}

/// What the tests read back from TCP_INFO.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpInfo {
    pub ca_state: u8,
    pub snd_mss: u32,
    pub snd_cwnd: u32,
    pub snd_ssthresh: u32,
    pub total_retrans: u32,
    /// sk_pacing_rate, bytes per second (u64::MAX: unpaced).
    pub pacing_rate: u64,
    pub bytes_acked: u64,
}

/// TCP_INFO of a socket (offsets of `struct tcp_info`, include/uapi/linux/tcp.h).
pub fn tcp_info(fd: RawFd) -> io::Result<TcpInfo> {
    let mut buf = [0u8; 256];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: `buf` and `len` are live locals of the sizes passed.
    let r = unsafe { libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_INFO, buf.as_mut_ptr().cast(), &mut len) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let u32_at = |o: usize| u32::from_ne_bytes(buf[o..o + 4].try_into().expect("4 bytes"));
    let u64_at = |o: usize| u64::from_ne_bytes(buf[o..o + 8].try_into().expect("8 bytes"));
    Ok(TcpInfo {
        ca_state: buf[1],
        snd_mss: u32_at(16),
        snd_ssthresh: u32_at(76),
        snd_cwnd: u32_at(80),
        total_retrans: u32_at(100),
        pacing_rate: u64_at(104),
        bytes_acked: u64_at(120),
    })
}

/// The socket's congestion control name (TCP_CONGESTION).
pub fn congestion(fd: RawFd) -> io::Result<String> {
    let mut buf = [0u8; 16];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: `buf` and `len` are live locals of the sizes passed.
    let r = unsafe { libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, buf.as_mut_ptr().cast(), &mut len) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let end = buf.iter().position(|&c| c == 0).unwrap_or(buf.len());
    Ok(String::from_utf8_lossy(&buf[..end]).into_owned())
}

fn setsockopt(fd: RawFd, opt: libc::c_int, val: &[u8]) -> io::Result<()> {
    // SAFETY: `val` is a live slice of the length passed.
    let r = unsafe { libc::setsockopt(fd, libc::IPPROTO_TCP, opt, val.as_ptr().cast(), val.len() as libc::socklen_t) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// A connected pair over 127.0.0.1: `client` uses congestion control `ca` with MSS `mss`
/// (loopback's 64 KiB MSS moves with the window at the start; a fixed MSS keeps packet counts
/// exact).
pub fn loopback_pair(listener: &TcpListener, ca: &str, mss: u32) -> io::Result<(TcpStream, TcpStream)> {
    let addr = listener.local_addr()?;
    let family = if addr.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 };
    // SAFETY: a new socket this function owns (wrapped in TcpStream at once).
    let fd = unsafe { libc::socket(family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a valid socket nobody else owns.
    let client = unsafe { TcpStream::from_raw_fd(fd) };
    setsockopt(fd, libc::TCP_CONGESTION, ca.as_bytes())?;
    setsockopt(fd, libc::TCP_MAXSEG, &(mss as libc::c_int).to_ne_bytes())?;
    // SAFETY: each sockaddr is a live local of the size passed.
    let r = unsafe {
        match addr {
            SocketAddr::V4(a) => {
                let sa = sockaddr(a);
                let len = std::mem::size_of_val(&sa) as libc::socklen_t;
                libc::connect(fd, (&sa as *const libc::sockaddr_in).cast(), len)
            }
            SocketAddr::V6(a) => {
                let sa = sockaddr6(a);
                let len = std::mem::size_of_val(&sa) as libc::socklen_t;
                libc::connect(fd, (&sa as *const libc::sockaddr_in6).cast(), len)
            }
        }
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let (server, _) = listener.accept()?;
    Ok((client, server))
}

fn sockaddr(a: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from(*a.ip()).to_be() },
        sin_zero: [0; 8],
    }
}

fn sockaddr6(a: SocketAddrV6) -> libc::sockaddr_in6 {
    libc::sockaddr_in6 {
        sin6_family: libc::AF_INET6 as libc::sa_family_t,
        sin6_port: a.port().to_be(),
        sin6_flowinfo: 0,
        sin6_addr: libc::in6_addr { s6_addr: a.ip().octets() },
        sin6_scope_id: 0,
    }
}

/// A listener on 127.0.0.1 with a free port.
pub fn listener() -> io::Result<TcpListener> {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
}

/// A listener on `[::1]` with a free port.
pub fn listener6() -> io::Result<TcpListener> {
    TcpListener::bind((Ipv6Addr::LOCALHOST, 0))
}

/// A bulk transfer: one thread writes into `client` until stopped, one drains `server`.
pub struct Bulk {
    pub client_fd: RawFd,
    stop: Arc<AtomicBool>,
    received: Arc<AtomicU64>,
    threads: Vec<JoinHandle<()>>,
}

impl Bulk {
    pub fn start(mut client: TcpStream, mut server: TcpStream) -> Bulk {
        let stop = Arc::new(AtomicBool::new(false));
        let received = Arc::new(AtomicU64::new(0));
        let client_fd = client.as_raw_fd();
        let s = Arc::clone(&stop);
        let writer = std::thread::spawn(move || {
            let chunk = vec![0x5a_u8; 64 * 1024];
            while !s.load(Ordering::Relaxed) {
                if client.write_all(&chunk).is_err() {
                    break;
                }
            }
            let _ = client.shutdown(std::net::Shutdown::Write);
            // Keep the socket (and its TCP_INFO) until the reader saw EOF.
            let mut sink = [0u8; 16];
            let _ = client.read(&mut sink);
        });
        let r = Arc::clone(&received);
        let reader = std::thread::spawn(move || {
            let mut buf = vec![0u8; 256 * 1024];
            while let Ok(n) = server.read(&mut buf) {
                if n == 0 {
                    break;
                }
                r.fetch_add(n as u64, Ordering::Relaxed);
            }
        });
        Bulk { client_fd, stop, received, threads: vec![writer, reader] }
    }

    pub fn received(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }

    /// Bytes per second received while `during` runs (a sleep, or serving the datapath).
    pub fn goodput_while(&self, during: impl FnOnce()) -> f64 {
        let (b0, t0) = (self.received(), std::time::Instant::now());
        during();
        (self.received() - b0) as f64 / t0.elapsed().as_secs_f64()
    }

    pub fn info(&self) -> io::Result<TcpInfo> {
        tcp_info(self.client_fd)
    }

    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Poll `f` every 10 ms for up to `limit`; the first `Some` wins.
pub fn wait_for<T>(limit: std::time::Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let end = std::time::Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if std::time::Instant::now() > end {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// [`skip`], then a [`VethPair`] tagged `tag`: `None`, with the skip line printed, where the tests
/// cannot run or the pair cannot be made (no `ip`, no netns support).
pub fn veth_or_skip(test: &str, tag: &str) -> Option<VethPair> {
    if skip(test) {
        return None;
    }
    VethPair::new(tag).inspect_err(|e| eprintln!("skipped {test}: no veth pair between network namespaces: {e}")).ok()
}

/// Two network namespaces joined by a veth pair (10.79.N.1 in `a`, 10.79.N.2 in `b`), made with
/// `ip` and removed on drop: a path with a real device between sender and receiver, where
/// loopback has none (veth reorders a little, as NICs do).
pub struct VethPair {
    a: String,
    b: String,
    addr_b: Ipv4Addr,
    /// The veth end in `b` ([`VethPair::set_link`] takes it down).
    dev_b: String,
}

impl VethPair {
    /// Create the pair; `tag` and the process id make the names unique. Errs naming what failed
    /// (no `ip`, no netns support).
    pub fn new(tag: &str) -> io::Result<VethPair> {
        let id = std::process::id();
        let (a, b) = (format!("polycc-{tag}-{id}-a"), format!("polycc-{tag}-{id}-b"));
        let net = (id % 200 + 20) as u8;
        let (va, vb) = (format!("pv{}a", id % 100_000), format!("pv{}b", id % 100_000));
        let pair = VethPair { a: a.clone(), b: b.clone(), addr_b: Ipv4Addr::new(10, 79, net, 2), dev_b: vb.clone() };
        let cmds: [&[&str]; 9] = [
            &["netns", "add", &a],
            &["netns", "add", &b],
            &["link", "add", &va, "netns", &a, "type", "veth", "peer", "name", &vb, "netns", &b],
            &["-n", &a, "addr", "add", &format!("10.79.{net}.1/24"), "dev", &va],
            &["-n", &b, "addr", "add", &format!("10.79.{net}.2/24"), "dev", &vb],
            &["-n", &a, "link", "set", "lo", "up"],
            &["-n", &b, "link", "set", "lo", "up"],
            &["-n", &a, "link", "set", &va, "up"],
            &["-n", &b, "link", "set", &vb, "up"],
        ];
        for args in cmds {
            let out = std::process::Command::new("ip").args(args).output()?;
            if !out.status.success() {
                return Err(io::Error::other(format!(
                    "ip {}: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stderr).trim()
                )));
            }
        }
        Ok(pair)
    }

    /// Take the link down (`up` false: `b`'s end, so every packet either way is dropped and
    /// the sender's retransmission timer fires) or bring it back.
    pub fn set_link(&self, up: bool) -> io::Result<()> {
        let vb = &self.dev_b;
        let state = if up { "up" } else { "down" };
        let out = std::process::Command::new("ip").args(["-n", &self.b, "link", "set", vb, state]).output()?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "ip link set {vb} {state}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(())
    }

    /// A connected pair across the veth: `client` in namespace `a` with congestion control `ca`
    /// and MSS `mss`, `server` in `b`. Sockets keep their namespace, so both work from any thread.
    pub fn pair(&self, ca: &str, mss: u32) -> io::Result<(TcpStream, TcpStream)> {
        let addr_b = self.addr_b;
        let listener = in_netns(&self.b, move || TcpListener::bind((addr_b, 0)))?;
        let ca = ca.to_string();
        in_netns(&self.a, move || loopback_pair(&listener, &ca, mss))
    }
}

impl Drop for VethPair {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b] {
            let _ = std::process::Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

/// Run `f` on a thread that joined network namespace `name` (/run/netns/NAME).
fn in_netns<T: Send + 'static>(name: &str, f: impl FnOnce() -> io::Result<T> + Send + 'static) -> io::Result<T> {
    let ns = std::fs::File::open(format!("/run/netns/{name}"))?;
    std::thread::spawn(move || {
        // SAFETY: a namespace fd we own; setns changes only this thread's network namespace.
        if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } < 0 {
            return Err(io::Error::last_os_error());
        }
        f()
    })
    .join()
    .map_err(|_| io::Error::other("netns thread panicked"))?
}
