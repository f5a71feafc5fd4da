//! Stopping one pair's distances partway (`Metric::evaluate_until`,
//! `evaluate_all_until`): an unset flag changes nothing, bit for bit; a set
//! flag gives `SdrError::Stopped`, never a value of a half-finished solve;
//! and a flag set while a long solver runs stops it within milliseconds.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use sdr_core::cost::PairCost;
use sdr_core::distance::{
    evaluate_all, evaluate_all_until, evaluate_pairs, evaluate_pairs_until, Evaluation,
};
use sdr_core::{Metric, SdrError, SetView};

/// Rows of an LCG in [-0.5, 0.5), advancing `seed`.
fn rows(n: usize, dim: usize, seed: &mut u64) -> Vec<f64> {
    (0..n * dim)
        .map(|_| {
            *seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (*seed >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        })
        .collect()
}

/// The fifteen configurations, and some that take other paths: the
/// smallest `eps` (GW's log-domain inner solves, Sinkhorn's Newton steps,
/// UOT's absorptions), a fixed partial mass.
fn metrics() -> Vec<Metric> {
    let mut all = Metric::all();
    for spec in [
        "gw:eps=0.001",
        "gw:eps=0.02",
        "sinkhorn:eps=0.001",
        "uot:eps=0.001,tau=1",
        "pot:rho=0.3",
    ] {
        all.push(spec.parse().unwrap());
    }
    all
}

/// Equal to the last bit, not only as `f64`s (`-0.0 == 0.0`).
fn same(a: &Evaluation, b: &Evaluation) -> bool {
    a.value.to_bits() == b.value.to_bits()
        && a.converged == b.converged
        && a.iterations == b.iterations
}

#[test]
fn an_unset_flag_gives_the_results_of_evaluate_bit_for_bit() {
    let unset = AtomicBool::new(false);
    let metrics = metrics();
    let mut seed = 11u64;
    let mut sizes: Vec<(usize, usize, usize)> = Vec::new();
    for n in 1..=12 {
        for m in 1..=12 {
            sizes.push((n, m, 8));
        }
    }
    sizes.extend([(30, 40, 16), (64, 17, 16), (100, 90, 16)]);
    for (n, m, dim) in sizes {
        let a = rows(n, dim, &mut seed);
        let mut b = rows(m, dim, &mut seed);
        if n > 1 && m > 2 {
            // A shared row: a zero cost and ties in the assignments.
            b[..dim].copy_from_slice(&a[..dim]);
        }
        let (a, b) = (SetView::new(&a, dim), SetView::new(&b, dim));
        let cost = PairCost::between(&a, &b, true).unwrap();
        for metric in &metrics {
            let want = metric.evaluate(&cost).unwrap();
            let got = metric.evaluate_until(&cost, &unset).unwrap();
            assert!(same(&got, &want), "{metric} {n}x{m}: {got:?} vs {want:?}");
        }
        let want = evaluate_all(&Metric::all(), &a, &b).unwrap();
        let got = evaluate_all_until(&Metric::all(), &a, &b, &unset).unwrap();
        assert!(want.iter().zip(&got).all(|(w, g)| same(g, w)), "{n}x{m}");
    }
    // Errors are the same errors.
    let a = rows(3, 4, &mut seed);
    let (a, b) = (SetView::new(&a, 4), SetView::new(&a[..8], 4));
    let cost = PairCost::between(&a, &b, false).unwrap();
    for bad in [Metric::Gw { eps: 0.1 }, Metric::Sinkhorn { eps: -1.0 }] {
        assert_eq!(
            bad.evaluate_until(&cost, &unset).unwrap_err(),
            bad.evaluate(&cost).unwrap_err()
        );
    }
}

#[test]
fn a_set_flag_stops_every_metric() {
    let set = AtomicBool::new(true);
    let mut seed = 12u64;
    let (a, b) = (rows(9, 8, &mut seed), rows(7, 8, &mut seed));
    let (a, b) = (SetView::new(&a, 8), SetView::new(&b, 8));
    let cost = PairCost::between(&a, &b, true).unwrap();
    for metric in metrics() {
        assert_eq!(
            metric.evaluate_until(&cost, &set),
            Err(SdrError::Stopped),
            "{metric}"
        );
    }
    assert_eq!(
        evaluate_all_until(&metrics(), &a, &b, &set),
        Err(SdrError::Stopped)
    );
    assert_eq!(
        SdrError::Stopped.to_string(),
        "stopped before the distance was computed"
    );
}

#[test]
fn many_pairs_stop_too() {
    // `evaluate_pairs_until`: unset, the results of `evaluate_pairs`, bit for
    // bit; set, every pair is `Stopped`.
    let mut seed = 13u64;
    let sets: Vec<Vec<f64>> = (0..16).map(|k| rows(1 + k % 7, 8, &mut seed)).collect();
    let views: Vec<SetView<'_, f64>> = sets.iter().map(|s| SetView::new(s, 8)).collect();
    let pairs: Vec<_> = (0..8).map(|k| (views[2 * k], views[2 * k + 1])).collect();
    let metrics = metrics();
    let want = evaluate_pairs(&metrics, &pairs);
    let got = evaluate_pairs_until(&metrics, &pairs, &AtomicBool::new(false));
    for (k, (w, g)) in want.iter().zip(&got).enumerate() {
        let (w, g) = (w.as_ref().unwrap(), g.as_ref().unwrap());
        assert!(w.iter().zip(g).all(|(w, g)| same(g, w)), "pair {k}");
    }
    let stopped = evaluate_pairs_until(&metrics, &pairs, &AtomicBool::new(true));
    assert!(stopped.iter().all(|r| r == &Err(SdrError::Stopped)));
}

/// `metric` on `cost`, the flag set from another thread `after` the start:
/// the result, and how long after the flag it came (`None` when the solver
/// finished first).
fn stopped_after(
    metric: Metric,
    cost: &PairCost<'_>,
    after: Duration,
) -> (Result<Evaluation, SdrError>, Option<Duration>) {
    let stop = AtomicBool::new(false);
    let (done, finished) = mpsc::channel::<()>();
    std::thread::scope(|s| {
        let stop = &stop;
        let setter = s.spawn(move || match finished.recv_timeout(after) {
            Err(mpsc::RecvTimeoutError::Timeout) => {
                stop.store(true, Ordering::Relaxed);
                Some(Instant::now())
            }
            _ => None,
        });
        let result = metric.evaluate_until(cost, stop);
        let end = Instant::now();
        drop(done);
        let set_at = setter.join().unwrap();
        (result, set_at.map(|t| end.saturating_duration_since(t)))
    })
}

/// Two sets of `n` and `m` rows of dimension 32 from a fresh `seed`.
fn two_sets(n: usize, m: usize, mut seed: u64) -> (Vec<f64>, Vec<f64>) {
    (rows(n, 32, &mut seed), rows(m, 32, &mut seed))
}

/// The solvers that run for seconds on large pairs (GW for tens of seconds
/// on 2,000 x 1,000 rows): a flag set 100 ms in stops them within 250 ms
/// (about 15 ms measured; one GW product here is about 0.4 s).
#[test]
fn a_flag_set_while_a_long_solver_runs_stops_it_promptly() {
    for (spec, n, m, intra) in [
        // Uninterrupted: about 6 s, 6 s and 3 s on the development machine.
        ("gw", 1200, 800, true),
        ("sinkhorn:eps=0.001", 800, 600, false),
        ("uot:eps=0.001,tau=1000", 400, 300, false),
    ] {
        let metric: Metric = spec.parse().unwrap();
        let (a, b) = two_sets(n, m, 5);
        let cost = PairCost::between(&SetView::new(&a, 32), &SetView::new(&b, 32), intra).unwrap();
        let (result, late) = stopped_after(metric, &cost, Duration::from_millis(100));
        assert_eq!(result, Err(SdrError::Stopped), "{spec}");
        let late = late.expect("the flag was set");
        assert!(late < Duration::from_millis(250), "{spec}: {late:?}");
    }
}

/// The exact solvers are fast (tens to hundreds of milliseconds on 1,500
/// rows), so the flag is set at an eighth of the measured solve, and one of
/// a few tries must stop (a busy machine may wake the setter late); a try
/// that finishes first must give the exact value.
#[test]
fn a_flag_set_partway_stops_the_exact_solvers() {
    let (a, b) = two_sets(1500, 1500, 9);
    let cost = PairCost::between(&SetView::new(&a, 32), &SetView::new(&b, 32), false).unwrap();
    for spec in ["ot", "pot:rho=0.8", "hung-nn", "hung-pen"] {
        let metric: Metric = spec.parse().unwrap();
        let t0 = Instant::now();
        let want = metric.evaluate(&cost).unwrap();
        let after = t0.elapsed() / 8;
        let stopped = (0..5).any(|_| match stopped_after(metric, &cost, after) {
            (Err(SdrError::Stopped), _) => true,
            (Ok(got), _) => {
                assert!(same(&got, &want), "{spec}: {got:?} vs {want:?}");
                false
            }
            (Err(e), _) => panic!("{spec}: {e}"),
        });
        assert!(stopped, "{spec}: never stopped at {after:?} of a solve");
    }
}
