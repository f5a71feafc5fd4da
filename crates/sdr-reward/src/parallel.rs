//! Rayon parallelism that survives `fork`.
//!
//! A process forked after a Rayon pool started has none of the pool's
//! threads, and the first parallel call in the child waits forever. Python
//! trainers fork (TRL's data loader workers, verl's reward workers), and the
//! encoder's kernels (candle's matmul, softmax and layer norm, the tokenizer's
//! batch encoding) use Rayon internally. So all work of the bindings runs
//! inside [`install`]: a pool owned by the current process, created on first
//! use and created afresh in a forked child (which never touches the parent's
//! pool, nor Rayon's global one). The bindings' at-fork hook also calls
//! [`set_parallelism`]`(false)`, as huggingface/tokenizers does
//! (bindings/python/src/lib.rs): a child then runs on one thread.

use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

use rayon::prelude::*;
use rayon::ThreadPool;

static PARALLEL: AtomicBool = AtomicBool::new(true);

/// Turn Rayon parallelism on or off for this process (pools created later
/// get one thread when off).
pub fn set_parallelism(on: bool) {
    PARALLEL.store(on, Ordering::SeqCst);
}

/// Whether scoring may use more than one thread.
pub fn parallelism() -> bool {
    PARALLEL.load(Ordering::SeqCst)
}

struct ProcessPool {
    pid: u32,
    pool: ThreadPool,
}

/// The current process's pool. Entries are leaked on purpose: a pool
/// inherited through `fork` has no threads and must never be dropped or used.
static POOL: AtomicPtr<ProcessPool> = AtomicPtr::new(ptr::null_mut());

fn process_pool() -> Option<&'static ThreadPool> {
    let pid = std::process::id();
    loop {
        let current = POOL.load(Ordering::Acquire);
        // SAFETY: non-null entries are leaked `Box`es, valid for the process lifetime.
        if let Some(entry) = unsafe { current.as_ref() } {
            if entry.pid == pid {
                return Some(&entry.pool);
            }
        }
        let mut builder = rayon::ThreadPoolBuilder::new().thread_name(|i| format!("sdr-{i}"));
        if !parallelism() {
            builder = builder.num_threads(1);
        }
        // Thread creation can fail (resource limits): callers then run inline.
        let pool = builder.build().ok()?;
        let fresh = Box::into_raw(Box::new(ProcessPool { pid, pool }));
        if POOL
            .compare_exchange(current, fresh, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // Another thread installed one first: ours never ran anything.
            // SAFETY: `fresh` was never shared.
            drop(unsafe { Box::from_raw(fresh) });
        }
    }
}

/// Run `f` on this process's pool: every Rayon call inside it (ours,
/// candle's, the tokenizer's) uses that pool.
///
/// When no thread can be started, `f` runs on the calling thread.
pub fn install<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    match process_pool() {
        Some(pool) => pool.install(f),
        None => f(),
    }
}

/// `work` on this process's pool while the calling thread runs `watch`;
/// returns `watch`'s result once `work` has finished too. For a caller that
/// must keep its own thread (Python's main thread, the only one that runs
/// signal handlers): the pool's threads are already running, where a thread
/// of its own cost tens of microseconds per call.
///
/// Called from one of the pool's threads (a Python encoder runs inside
/// [`install`]), `work` runs first, inline: on a thread of its own, its
/// `install` would queue on the pool and wait while this thread sits in
/// `watch`, which deadlocks a one-thread pool (a forked worker's). Signal
/// handlers never run on such a thread, so `watch` loses nothing. `work` gets
/// a thread of its own only when the pool cannot start.
pub fn beside<R>(work: impl FnOnce() + Send, watch: impl FnOnce() -> R) -> R {
    match process_pool() {
        Some(pool) if pool.current_thread_index().is_none() => pool.in_place_scope(|s| {
            s.spawn(|_| work());
            watch()
        }),
        Some(_) => {
            work();
            watch()
        }
        None => std::thread::scope(|s| {
            s.spawn(work);
            watch()
        }),
    }
}

/// `items.map(f)` in order, in parallel when parallelism is on.
pub(crate) fn map<T: Sync, R: Send>(items: &[T], f: impl Fn(usize, &T) -> R + Sync) -> Vec<R> {
    if parallelism() && items.len() > 1 {
        items.par_iter().enumerate().map(|(i, x)| f(i, x)).collect()
    } else {
        items.iter().enumerate().map(|(i, x)| f(i, x)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_runs_on_the_process_pool() {
        let name = install(|| std::thread::current().name().map(str::to_string));
        assert!(name.unwrap_or_default().starts_with("sdr-"));
        let v: Vec<usize> = install(|| map(&[1usize, 2, 3], |i, x| i * x));
        assert_eq!(v, [0, 2, 6]);
    }

    #[test]
    fn beside_runs_the_work_on_the_pool_while_the_caller_watches() {
        use std::sync::mpsc;
        let (tx, rx) = mpsc::channel();
        let here = std::thread::current().id();
        let (name, id) = beside(
            move || {
                let t = std::thread::current();
                let _ = tx.send((t.name().map(str::to_string), t.id()));
            },
            || rx.recv().unwrap(),
        );
        assert!(name.unwrap_or_default().starts_with("sdr-"));
        assert_ne!(id, here);
        // From one of the pool's threads, inline on that thread (see
        // tests/one_thread_pool.rs for why).
        let (outer, inner) = install(|| {
            let (tx, rx) = mpsc::channel();
            let id = move || std::thread::current().id();
            (
                id(),
                beside(move || tx.send(id()).unwrap(), || rx.recv().unwrap()),
            )
        });
        assert_eq!(inner, outer);
    }
}
