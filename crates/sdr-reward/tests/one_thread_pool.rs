//! `beside` called from the thread of a one-thread pool (a forked worker's,
//! after the at-fork hook turned parallelism off) whose work uses the pool, as
//! `sdr.distance` does when a Python encoder running inside `install` calls it.
//! Its own test binary: the pool is created once per process.

use std::sync::mpsc;
use std::time::Duration;

#[test]
fn beside_from_a_one_thread_pool_does_not_deadlock() {
    sdr_reward::set_parallelism(false);
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let value = sdr_reward::install(|| {
            let (tx, rx) = mpsc::channel();
            sdr_reward::beside(
                move || tx.send(sdr_reward::install(|| 7)).unwrap(),
                || rx.recv().unwrap(),
            )
        });
        let _ = done_tx.send(value);
    });
    assert_eq!(
        done_rx.recv_timeout(Duration::from_secs(20)),
        Ok(7),
        "beside deadlocked on a one-thread pool"
    );
}
