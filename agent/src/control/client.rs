//! The client side: one request, one response.

use super::{Request, Response};
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ClientError {
    #[error("the agent is not running: no control socket at {path} (start polycc-portus, or pass --socket with its --control-socket)")]
    NotRunning { path: PathBuf },
    #[error("the agent is not running: {path} refuses connections (a stale socket from an agent that died?)")]
    Refused { path: PathBuf },
    #[error("permission denied on {path}: the control socket is root-only (run with sudo)")]
    Permission { path: PathBuf },
    #[error("control socket {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("control socket {path}: the agent's answer is not a response: {message}")]
    Protocol { path: PathBuf, message: String },
}

pub fn request(path: &Path, req: &Request) -> Result<Response, ClientError> {
    let p = || path.to_path_buf();
    let stream = UnixStream::connect(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => ClientError::NotRunning { path: p() },
        io::ErrorKind::ConnectionRefused => ClientError::Refused { path: p() },
        io::ErrorKind::PermissionDenied => ClientError::Permission { path: p() },
        _ => ClientError::Io { path: p(), source: e },
    })?;
    let io_err = |source| ClientError::Io { path: p(), source };
    stream.set_read_timeout(Some(Duration::from_secs(10))).map_err(io_err)?;
    let mut line = serde_json::to_vec(req).map_err(|e| ClientError::Protocol { path: p(), message: e.to_string() })?;
    line.push(b'\n');
    (&stream).write_all(&line).map_err(io_err)?;
    let mut answer = String::new();
    BufReader::new(&stream).read_line(&mut answer).map_err(io_err)?;
    serde_json::from_str(&answer).map_err(|e| ClientError::Protocol { path: p(), message: e.to_string() })
}
