//! Long calls that Ctrl-C can stop.
//!
//! Python runs signal handlers on its main thread only, between bytecodes; a
//! call that holds that thread in Rust for seconds would see a Ctrl-C only
//! once it returned. Here the work runs on the process's pool
//! ([`sdr_reward::beside`]: no thread is started per call, so even
//! microsecond calls such as one small pair's distance can go through it)
//! while the calling thread waits, checking Python's signals every [`POLL`]:
//! on an exception (KeyboardInterrupt, or whatever a handler raises) the work
//! is asked to stop through its flag and the exception is raised once it has.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use pyo3::prelude::*;

/// How often the waiting thread checks Python's signals.
const POLL: Duration = Duration::from_millis(50);

/// `work(stop)` off the GIL; `stop` turns true when a signal handler raised,
/// and that exception is returned (after `work` has returned) instead of
/// `work`'s result.
pub(crate) fn interruptible<T: Send>(
    py: Python<'_>,
    work: impl FnOnce(&AtomicBool) -> T + Send,
) -> PyResult<T> {
    let stop = AtomicBool::new(false);
    py.detach(|| {
        let (tx, rx) = mpsc::channel();
        let stop = &stop;
        // The receiver outlives the work (`beside` waits for it).
        let send = move || {
            let _ = tx.send(work(stop));
        };
        sdr_reward::beside(send, || {
            let mut raised: Option<PyErr> = None;
            loop {
                match rx.recv_timeout(POLL) {
                    Ok(out) => return raised.map_or(Ok(out), Err),
                    Err(mpsc::RecvTimeoutError::Timeout) if raised.is_none() => {
                        if let Err(e) = Python::attach(|py| py.check_signals()) {
                            stop.store(true, Ordering::Relaxed);
                            raised = Some(e);
                        }
                    }
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    Err(mpsc::RecvTimeoutError::Disconnected) => {
                        // `work` panicked; `beside` re-raises the panic.
                        return Err(raised.unwrap_or_else(|| {
                            pyo3::exceptions::PyRuntimeError::new_err("the work thread stopped")
                        }));
                    }
                }
            }
        })
    })
}
