//! Cooperative cancellation of one pair's solvers.
//!
//! A caller that may give up on a long distance (the Python bindings on
//! Ctrl-C: GW on thousands of rows runs for tens of seconds) passes a flag to
//! [`Metric::evaluate_until`](super::Metric::evaluate_until); the solvers
//! read it between iterations and return [`SdrError::Stopped`].
//!
//! The flag travels as an explicit argument rather than in thread-local or
//! global state: the solvers run on Rayon pool threads (`batch.rs`, the
//! bindings' process pool), where a thread-local set by the caller is not
//! seen, and a global would stop every caller's work at once. The existing
//! entry points pass [`Stop::NEVER`], so their signatures and values are
//! unchanged. Checks are a relaxed load at most once per outer iteration,
//! batch of pivots or sweeps, block of rows or row's search: nothing next to
//! the work between them, even on report-sized sets.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{Result, SdrError};

/// A flag the solvers poll; `NEVER` for callers that cannot stop.
#[derive(Clone, Copy)]
pub(crate) struct Stop<'a>(Option<&'a AtomicBool>);

impl<'a> Stop<'a> {
    /// Never set: the computation runs to its end.
    pub(crate) const NEVER: Stop<'static> = Stop(None);

    /// Stop once `flag` is true.
    pub(crate) fn on(flag: &'a AtomicBool) -> Self {
        Stop(Some(flag))
    }

    /// Whether the flag is set. Relaxed: the flag orders no other memory,
    /// and a stop seen one check later costs only that check's work.
    #[inline]
    pub(crate) fn is_set(self) -> bool {
        self.0.is_some_and(|flag| flag.load(Ordering::Relaxed))
    }

    /// [`SdrError::Stopped`] once the flag is set.
    #[inline]
    pub(crate) fn check(self) -> Result<()> {
        if self.is_set() {
            Err(SdrError::Stopped)
        } else {
            Ok(())
        }
    }
}

/// The value of a computation run with [`Stop::NEVER`], for the entry points
/// that cannot fail otherwise.
pub(crate) fn never_stopped<T>(r: Result<T>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => unreachable!("a computation that cannot stop failed: {e}"),
    }
}
