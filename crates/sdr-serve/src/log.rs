//! The server's log: one line to stderr per event.

use std::io::Write;

/// One line to stderr, written at once (stderr is unbuffered).
pub(crate) fn log_line(line: impl std::fmt::Display) {
    let _ = std::io::stderr().write_all(format!("{line}\n").as_bytes());
}
