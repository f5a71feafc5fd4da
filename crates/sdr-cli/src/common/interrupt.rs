//! A stop by signal (Ctrl-C, a job scheduler's SIGTERM, SIGHUP): no
//! destructor runs, so a handler thread removes the temporary files of
//! unfinished outputs (their destinations keep their old contents), says
//! what a rerun can pick up, and exits with 128 + the signal's number.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use anyhow::{Context, Result};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use super::log_line;

/// What a stop keeps, said on stderr when it happens (a journal's
/// `FILE.partial`).
static NOTES: Mutex<Vec<(u64, String)>> = Mutex::new(Vec::new());
static NEXT_NOTE: AtomicU64 = AtomicU64::new(0);

/// A line printed if a signal stops the process while this lives.
pub struct Note(u64);

impl Note {
    pub fn new(text: String) -> Note {
        let id = NEXT_NOTE.fetch_add(1, Ordering::Relaxed);
        NOTES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((id, text));
        Note(id)
    }
}

impl Drop for Note {
    fn drop(&mut self) {
        NOTES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(id, _)| *id != self.0);
    }
}

fn name(signal: i32) -> &'static str {
    match signal {
        SIGINT => "SIGINT",
        SIGTERM => "SIGTERM",
        _ => "SIGHUP",
    }
}

/// Starts the handler thread (every command but `serve`, which shuts down
/// gracefully on its own).
pub fn install() -> Result<()> {
    let mut signals =
        Signals::new([SIGINT, SIGTERM, SIGHUP]).context("cannot install signal handlers")?;
    std::thread::Builder::new()
        .name("sdr-signals".into())
        .spawn(move || {
            if let Some(signal) = signals.forever().next() {
                let removed = sdr_io::remove_temporary_files();
                let mut line = format!("sdr: stopped by {}", name(signal));
                if removed > 0 {
                    line += &format!(
                        "; removed {removed} unfinished output file(s), earlier contents kept"
                    );
                }
                log_line(format_args!("{line}"));
                for (_, note) in NOTES.lock().unwrap_or_else(|e| e.into_inner()).iter() {
                    log_line(format_args!("sdr: {note}"));
                }
                std::process::exit(128 + signal);
            }
        })
        .context("cannot start the signal thread")?;
    Ok(())
}
