//! Human log lines on stderr (slog + slog-term).

use slog::{o, Drain, Level, Logger};

/// A logger writing `level` and above to stderr, one line per event.
pub fn stderr_logger(level: Level) -> Logger {
    let decorator = slog_term::PlainSyncDecorator::new(std::io::stderr());
    let drain = slog_term::FullFormat::new(decorator).build().filter_level(level).fuse();
    Logger::root(drain, o!())
}

/// A logger that drops everything (tests, benchmarks).
pub fn discard() -> Logger {
    Logger::root(slog::Discard, o!())
}
