//! The control socket's file and its clients: binding (never over a live agent's socket or a
//! file that is not a socket), one thread per client, a deadline per request (see [`super`]).

use super::*;

/// The control socket could not be opened.
#[derive(Debug, Error)]
pub enum ControlOpenError {
    #[error(
        "control socket {path}: cannot create its directory {dir}: {source}; pass --control-socket with another path"
    )]
    Directory {
        path: PathBuf,
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("control socket {path}: another agent is already serving it; stop it first, or pass --control-socket with another path")]
    InUse { path: PathBuf },
    #[error("control socket {path}: a file that is not a socket is there (left as it is); pass --control-socket with another path")]
    NotASocket { path: PathBuf },
    #[error("control socket {path}: {source}; pass --control-socket with another path")]
    Bind {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// The bound control socket; the file is removed when this is dropped.
pub struct ControlSocket {
    listener: UnixListener,
    path: PathBuf,
}

impl ControlSocket {
    /// Bind `path` mode 0600 (its directory is created 0700 when missing), replacing a stale
    /// socket file (one nobody accepts on, e.g. after SIGKILL) but never a live agent's, and
    /// never a file that is not a socket (a symlink included).
    pub fn open(path: &Path) -> Result<ControlSocket, ControlOpenError> {
        let path = path.to_path_buf();
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf();
        if !dir.is_dir() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir)
                .map_err(|source| ControlOpenError::Directory { path: path.clone(), dir: dir.clone(), source })?;
        }
        if let Ok(meta) = std::fs::symlink_metadata(&path) {
            if !meta.file_type().is_socket() {
                return Err(ControlOpenError::NotASocket { path });
            }
            if UnixStream::connect(&path).is_ok() {
                return Err(ControlOpenError::InUse { path });
            }
            std::fs::remove_file(&path).map_err(|source| ControlOpenError::Bind { path: path.clone(), source })?;
        }
        // Bind under a umask that leaves no window in which others may connect.
        // SAFETY: umask(2) has no preconditions; the old mask is restored at once.
        let old = unsafe { libc::umask(0o177) };
        let bound = UnixListener::bind(&path);
        // SAFETY: as above.
        unsafe { libc::umask(old) };
        let listener = bound.map_err(|source| ControlOpenError::Bind { path: path.clone(), source })?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
            .map_err(|source| ControlOpenError::Bind { path: path.clone(), source })?;
        Ok(ControlSocket { listener, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Serve clients on a thread of its own until the process exits. Keep `self`: dropping
    /// it removes the socket file (new clients then find no agent).
    pub fn spawn(&self, shared: Arc<Shared>, log: Logger) -> io::Result<std::thread::JoinHandle<()>> {
        let listener = self.listener.try_clone()?;
        std::thread::Builder::new().name("polycc-control".into()).spawn(move || {
            let clients = Arc::new(AtomicUsize::new(0));
            for conn in listener.incoming() {
                match conn {
                    Ok(mut stream) if clients.load(Ordering::SeqCst) >= MAX_CLIENTS => {
                        let busy =
                            Response::error(ErrorCode::Busy, format!("{MAX_CLIENTS} clients are connected; try again"));
                        let _ = stream.set_write_timeout(Some(CLIENT_TIMEOUT));
                        let _ = writeln!(stream, "{}", serde_json::to_string(&busy).unwrap_or_default());
                    }
                    Ok(stream) => {
                        clients.fetch_add(1, Ordering::SeqCst);
                        let (s, l, n) = (Arc::clone(&shared), log.clone(), Arc::clone(&clients));
                        let spawned =
                            std::thread::Builder::new().name("polycc-control-client".into()).spawn(move || {
                                if let Err(e) = serve_client(stream, &s, &l) {
                                    info!(l, "control client dropped"; "error" => %e);
                                }
                                n.fetch_sub(1, Ordering::SeqCst);
                            });
                        if spawned.is_err() {
                            clients.fetch_sub(1, Ordering::SeqCst);
                        }
                    }
                    Err(e) => {
                        warn!(log, "control socket accept failed"; "error" => %e);
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
            }
        })
    }
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Answer request lines until the client closes, stalls or oversteps.
fn serve_client(stream: UnixStream, shared: &Shared, log: &Logger) -> io::Result<()> {
    serve_client_within(stream, shared, log, CLIENT_TIMEOUT)
}

/// Reads from a stream until a deadline, however the bytes trickle in: each read waits at most
/// for what is left of it.
struct DeadlineReader {
    stream: UnixStream,
    deadline: Instant,
}

impl Read for DeadlineReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let timed_out = || io::Error::new(io::ErrorKind::TimedOut, "no complete request within the deadline");
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(timed_out());
        }
        self.stream.set_read_timeout(Some(left))?;
        match self.stream.read(buf) {
            // SO_RCVTIMEO expiring reads as EAGAIN: the deadline passed while waiting.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Err(timed_out()),
            other => other,
        }
    }
}

/// [`serve_client`] with the per-request deadline given: each request line must arrive whole
/// within `timeout` of the previous answer (or of connecting), so a client that trickles bytes
/// cannot hold one of the [`MAX_CLIENTS`] places (issue 16 A4: the timeout was per read).
pub(super) fn serve_client_within(stream: UnixStream, shared: &Shared, log: &Logger, timeout: Duration) -> io::Result<()> {
    stream.set_write_timeout(Some(timeout))?;
    let mut out = stream.try_clone()?;
    let mut reader = BufReader::new(DeadlineReader { stream, deadline: Instant::now() + timeout });
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = reader.by_ref().take(MAX_REQUEST_BYTES as u64 + 1).read_until(b'\n', &mut line)?;
        if n == 0 {
            return Ok(());
        }
        let too_long = line.len() > MAX_REQUEST_BYTES;
        let response = if too_long {
            Response::error(ErrorCode::RequestTooLong, format!("a request line is at most {MAX_REQUEST_BYTES} bytes"))
        } else if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        } else {
            match parse_request(&line) {
                Ok(req) => shared.handle(req, log),
                Err(e) => {
                    warn!(log, "malformed control request"; "error" => %e.message);
                    Response { ok: false, error: Some(e), ..Default::default() }
                }
            }
        };
        let mut bytes = serde_json::to_vec(&response).unwrap_or_else(|_| br#"{"ok":false}"#.to_vec());
        bytes.push(b'\n');
        out.write_all(&bytes)?;
        if too_long {
            return Ok(());
        }
        // Blank lines do not count as requests: they do not extend the deadline.
        reader.get_mut().deadline = Instant::now() + timeout;
    }
}
