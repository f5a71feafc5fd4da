//! Entropy-regularised optimal transport: the Sinkhorn distance.
//!
//! $$\gamma_\varepsilon = \operatorname*{arg\,min}_{\gamma \in \Gamma(p, q)}
//!   \langle \gamma, \tilde M \rangle_F - \varepsilon H(\gamma),
//! \qquad H(\gamma) = -\sum_{ij} \gamma_{ij} (\log \gamma_{ij} - 1),$$
//! $$\mathcal D^{\varepsilon}_{\mathrm{Sinkhorn}}(A, B) = \langle \gamma_\varepsilon, \tilde M \rangle_F$$
//!
//! where
//! - $\tilde M = M / \max M$ is the normalised `n x m` cosine cost (SPEC §3;
//!   the distance is 0 when $\max M = 0$),
//! - $p = \mathbf 1_n / n$ and $q = \mathbf 1_m / m$ are the uniform masses,
//! - $\Gamma(p, q) = \{\gamma \ge 0 : \gamma \mathbf 1_m = p,\ \gamma^\top \mathbf 1_n = q\}$,
//! - $\varepsilon > 0$ is the entropic regularisation (`sinkhorn:eps=E`).
//!
//! The reported value is the transport cost of the entropic plan, without the
//! entropy term (paper appendix A, Eq. (sinkhorn); POT's `ot.sinkhorn` plan
//! followed by `<plan, M~>`).
//!
//! # Algorithm
//! The plan is $\gamma_{ij} = \exp((f_i + g_j - \tilde M_{ij}) / \varepsilon)$ for dual
//! potentials $f, g$ held in the log domain. The solver alternates
//! 1. Sinkhorn sweeps [1] in the *stabilised* form of [2]: potentials are
//!    absorbed into a kernel $K_{ij} = \exp((\alpha_i + \beta_j - \tilde M_{ij})/\varepsilon)$ and
//!    only bounded scalings $u, v$ are iterated, so one sweep costs two
//!    matrix-vector products and no `exp`; the potentials are re-absorbed
//!    (with an exact log-sum-exp half-step) whenever a scaling leaves
//!    $[10^{-100}, 10^{100}]$, so no `eps` under- or overflows;
//! 2. when the sweeps converge too slowly (small `eps`, near-degenerate plans,
//!    where Sinkhorn's error decays like $1/k$), Newton steps on the
//!    semi-dual [3, 4] $F(g) = \langle g, q\rangle + \sum_i p_i f_i(g)$,
//!    $f_i(g) = \varepsilon \log p_i - \varepsilon \log \sum_j e^{(g_j - \tilde M_{ij})/\varepsilon}$,
//!    whose Hessian is a graph Laplacian solved by cancellation-free
//!    Gaussian elimination (GTH), with a step cap and Armijo backtracking.
//!
//! Both converge to the same unique entropic plan. The stopping rule is on the
//! marginal error: rows are exact after each row update, and iteration stops
//! when $\|\gamma^\top \mathbf 1_n - q\|_1 \le$ `tol` (default $10^{-9}$, SPEC §3).
//!
//! # References
//! 1. M. Cuturi. *Sinkhorn Distances: Lightspeed Computation of Optimal
//!    Transport.* NeurIPS 2013.
//! 2. B. Schmitzer. *Stabilized Sparse Scaling Algorithms for Entropy
//!    Regularized Transport Problems.* SIAM J. Sci. Comput. 41(3), 2019.
//! 3. G. Peyré, M. Cuturi. *Computational Optimal Transport.* Foundations and
//!    Trends in Machine Learning 11(5–6), 2019, §4.1 (semi-dual).
//! 4. C. Brauer, C. Clason, D. Lorenz, B. Wirth. *A Sinkhorn-Newton method for
//!    entropic optimal transport.* arXiv:1710.06635, 2017.
//! 5. W. Grassmann, M. Taksar, D. Heyman. *Regenerative analysis and steady
//!    state distributions for Markov chains.* Operations Research 33(5), 1985
//!    (GTH elimination).

//! # Layout
//! This file holds the API (`sinkhorn_distance`, `sinkhorn_log`) and the
//! switch between the two phases; `scaling.rs` the stabilised sweeps,
//! `newton.rs` the semi-dual Newton steps. Input checks and the log-domain
//! helpers that UOT and GW share live in `super::logdomain`.

// Index loops mirror the formulas (i over rows, j over columns).
#![allow(clippy::needless_range_loop)]

mod newton;
mod scaling;

use newton::{Newton, MAX_NEWTON};
use scaling::Scaling;

use super::logdomain::{bad, check_masses, transpose_into};
use super::params::{check_range, EPS_RANGE};
use super::stop::Stop;
use super::{uniform, Evaluation, SolverResult};
use crate::cost::{CostMatrix, PairCost};
use crate::error::Result;

/// Default stopping threshold on the L1 column-marginal error (SPEC §3).
pub const DEFAULT_TOL: f64 = 1e-9;
/// Default cap on iterations (Sinkhorn sweeps plus Newton steps).
pub const DEFAULT_MAX_ITER: usize = 100_000;

/// Sweeps always tried before Newton is considered.
const MIN_SWEEPS: usize = 40;
/// Newton is used when the observed linear rate predicts more sweeps than this.
const SWEEP_BUDGET: f64 = 300.0;

/// Sinkhorn distance `<gamma_eps, M~>` with uniform masses (SPEC §3).
///
/// `m` is the raw cosine cost (`n x m`, `n, m >= 1`); it is normalised here.
/// Returns 0 when `max(M) = 0`; otherwise the value, iterations and
/// convergence of [`sinkhorn_log`] (the last iterate when it did not
/// converge). Errors as there: `eps` not finite and positive (the metric
/// parser never lets such a value through).
///
/// ```
/// use sdr_core::cost::CostMatrix;
/// use sdr_core::distance::sinkhorn::sinkhorn_distance;
///
/// let m = CostMatrix::new(2, 2, vec![0.0, 0.5, 0.5, 0.0]);
/// let d = sinkhorn_distance(&m, 0.1).unwrap().value;
/// // Close to the exact OT value 0 (diagonal plan), up to the regularisation.
/// assert!(d > 0.0 && d < 0.01);
/// ```
pub fn sinkhorn_distance(m: &CostMatrix, eps: f64) -> Result<Evaluation> {
    sinkhorn_distance_until(m, eps, Stop::NEVER)
}

/// [`sinkhorn_distance`], or [`crate::SdrError::Stopped`] once `stop` is set.
fn sinkhorn_distance_until(m: &CostMatrix, eps: f64, stop: Stop<'_>) -> Result<Evaluation> {
    let Some(mt) = m.normalized() else {
        return Ok(Evaluation::exact(0.0));
    };
    let r = sinkhorn_log_until(
        &mt,
        &uniform(m.n),
        &uniform(m.m),
        eps,
        DEFAULT_TOL,
        DEFAULT_MAX_ITER,
        stop,
    )?;
    Ok(r.into())
}

/// Entropic OT plan between masses `p` (length `n`) and `q` (length `m`) for
/// the cost `cost` (`n x m`), by stabilised log-domain Sinkhorn sweeps with
/// Newton acceleration (see the module docs).
///
/// Arguments:
/// - `cost`: `n x m`, finite entries (any range; the SDR metric passes `M~`);
/// - `p`, `q`: positive finite masses with equal totals (relative 1e-9);
/// - `eps`: regularisation, finite and `> 0`;
/// - `tol`: threshold on `||gamma^T 1 - q||_1` (rows are exact);
/// - `max_iter`: cap on Sinkhorn sweeps plus Newton steps.
///
/// Returns the plan (row-major `n x m`), `value = <plan, cost>`, the number
/// of sweeps and Newton steps used, and whether `tol` was reached. When it was
/// not, `value` and `plan` are those of the last iterate.
///
/// # Errors
/// [`SdrError::BadMetricParameter`] (metric `sinkhorn`) when `eps` is not
/// finite and positive, the masses have the wrong length, are not positive
/// and finite or have different totals, or `cost` is empty or not finite.
///
/// ```
/// use sdr_core::cost::CostMatrix;
/// use sdr_core::distance::sinkhorn::sinkhorn_log;
///
/// let c = CostMatrix::new(2, 3, vec![0.0, 1.0, 0.5, 1.0, 0.0, 0.5]);
/// let r = sinkhorn_log(&c, &[0.5, 0.5], &[0.25, 0.25, 0.5], 0.05, 1e-12, 10_000).unwrap();
/// assert!(r.converged);
/// let col0: f64 = r.plan[0] + r.plan[3];
/// assert!((col0 - 0.25).abs() < 1e-12);
/// ```
pub fn sinkhorn_log(
    cost: &CostMatrix,
    p: &[f64],
    q: &[f64],
    eps: f64,
    tol: f64,
    max_iter: usize,
) -> Result<SolverResult> {
    sinkhorn_log_until(cost, p, q, eps, tol, max_iter, Stop::NEVER)
}

/// [`sinkhorn_log`], or [`crate::SdrError::Stopped`] once `stop` is set (read
/// every `RATE_LAG` sweeps and in each Newton step).
pub(crate) fn sinkhorn_log_until(
    cost: &CostMatrix,
    p: &[f64],
    q: &[f64],
    eps: f64,
    tol: f64,
    max_iter: usize,
    stop: Stop<'_>,
) -> Result<SolverResult> {
    check_balanced("sinkhorn", cost, p, q, eps)?;
    let (n, m) = (cost.n, cost.m);
    let mut sk = Scaling::new(&cost.data, n, m, p, q, eps);
    let mut iterations = 0;
    let mut converged = false;
    let mut newton_allowed = n > 1 && m > 1;
    let mut errs: [f64; 2] = [f64::INFINITY; 2]; // error now and `RATE_LAG` sweeps ago
    const RATE_LAG: usize = 10;
    loop {
        let mut try_newton = false;
        while iterations < max_iter {
            if iterations % RATE_LAG == 0 {
                stop.check()?;
            }
            let err = sk.sweep();
            iterations += 1;
            if err <= tol {
                converged = true;
                break;
            }
            if iterations % RATE_LAG == 0 {
                errs = [err, errs[0]];
                if newton_allowed && iterations >= MIN_SWEEPS {
                    // Linear rate over the last RATE_LAG sweeps; switch to
                    // Newton when the sweeps left would exceed the budget.
                    let rate = (errs[0] / errs[1]).powf(1.0 / RATE_LAG as f64);
                    let left = if rate < 1.0 {
                        (tol / err).ln() / rate.ln()
                    } else {
                        f64::INFINITY
                    };
                    if left > SWEEP_BUDGET {
                        try_newton = true;
                        break;
                    }
                }
            }
        }
        if !try_newton {
            let (plan, value) = sk.plan();
            return Ok(SolverResult {
                value,
                plan,
                iterations,
                converged,
            });
        }
        // Newton on the smaller side's potentials, the other side eliminated.
        let (f, g) = sk.potentials();
        let budget = (max_iter - iterations).min(MAX_NEWTON);
        let (plan, steps, ok) = if m <= n {
            let mut nt = Newton::new(&cost.data, n, m, p, q, eps, g);
            let (steps, ok) = nt.solve(tol, budget, stop)?;
            (nt.plan(), steps, ok)
        } else {
            let ct = cost.transpose();
            let mut nt = Newton::new(&ct.data, m, n, q, p, eps, f);
            let (steps, ok) = nt.solve(tol, budget, stop)?;
            let pt = nt.plan();
            let mut plan = vec![0.0; n * m];
            transpose_into(&pt, m, n, &mut plan);
            (plan, steps, ok)
        };
        iterations += steps;
        if ok || iterations >= max_iter {
            let value = plan.iter().zip(&cost.data).map(|(g, c)| g * c).sum();
            return Ok(SolverResult {
                value,
                plan,
                iterations,
                converged: ok,
            });
        }
        // Newton stalled (e.g. couplings underflowed for a tiny `eps`): go
        // on with plain sweeps from where they were.
        newton_allowed = false;
    }
}

fn check_balanced(metric: &str, cost: &CostMatrix, p: &[f64], q: &[f64], eps: f64) -> Result<()> {
    check_masses(metric, cost.n, cost.m, p, q, eps)?;
    let (sp, sq): (f64, f64) = (p.iter().sum(), q.iter().sum());
    if (sp - sq).abs() > 1e-9 * sp.max(sq) {
        return Err(bad(
            metric,
            format!("masses have different totals ({sp} vs {sq})"),
        ));
    }
    if let Some(k) = cost.data.iter().position(|x| !x.is_finite()) {
        return Err(bad(metric, format!("cost entry {k} is not finite")));
    }
    Ok(())
}

/// The family's entry in the metric registry (`distance/spec.rs`).
pub(crate) fn evaluate(cost: &PairCost<'_>, stop: Stop<'_>, eps: f64) -> Result<Evaluation> {
    check_range("sinkhorn", "eps", eps, EPS_RANGE)?;
    sinkhorn_distance_until(&cost.cross, eps, stop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{lcg_matrix, marginals};

    #[test]
    fn plan_has_the_prescribed_marginals() {
        for &(n, m, eps) in &[(3, 5, 0.5), (7, 4, 0.1), (12, 12, 0.01), (1, 6, 0.1)] {
            let c = lcg_matrix(n, m, (n * 31 + m) as u64);
            let (p, q) = (uniform(n), uniform(m));
            let r = sinkhorn_log(&c, &p, &q, eps, 1e-10, 100_000).unwrap();
            assert!(r.converged, "{n}x{m} eps {eps}");
            let (rows, cols) = marginals(&r.plan, n, m);
            for (a, b) in rows.iter().zip(&p) {
                assert!((a - b).abs() < 1e-12);
            }
            let err: f64 = cols.iter().zip(&q).map(|(a, b)| (a - b).abs()).sum();
            assert!(err <= 1e-10, "column error {err}");
            let value: f64 = r.plan.iter().zip(&c.data).map(|(a, b)| a * b).sum();
            assert!((value - r.value).abs() < 1e-14);
        }
    }

    /// The entropic plan is the Gibbs kernel scaled: `log gamma_ij + c_ij/eps`
    /// must be of the form `a_i + b_j` (checked on 2x2 minors).
    #[test]
    fn plan_is_a_diagonal_scaling_of_the_gibbs_kernel() {
        let c = lcg_matrix(5, 6, 7);
        let eps = 0.05;
        let r = sinkhorn_log(&c, &uniform(5), &uniform(6), eps, 1e-12, 100_000).unwrap();
        let l = |i: usize, j: usize| r.plan[i * 6 + j].ln() + c.get(i, j) / eps;
        for i in 1..5 {
            for j in 1..6 {
                let minor = l(i, j) - l(i, 0) - l(0, j) + l(0, 0);
                assert!(minor.abs() < 1e-8, "minor {minor}");
            }
        }
    }

    #[test]
    fn identical_sets_cost_little_and_zero_cost_is_zero() {
        // Cost 0 on the diagonal, 1 elsewhere: the plan concentrates on the
        // diagonal as eps shrinks.
        let n = 6;
        let data = (0..n * n)
            .map(|k| if k / n == k % n { 0.0 } else { 1.0 })
            .collect();
        let c = CostMatrix::new(n, n, data);
        let d01 = sinkhorn_distance(&c, 0.01).unwrap().value;
        let d05 = sinkhorn_distance(&c, 0.5).unwrap().value;
        assert!(d01 < 1e-30, "{d01}");
        assert!(d05 > d01 && d05 < 1.0);
        assert_eq!(
            sinkhorn_distance(&CostMatrix::new(2, 3, vec![0.0; 6]), 0.1)
                .unwrap()
                .value,
            0.0
        );
    }

    /// Near-degenerate case where plain Sinkhorn decays like 1/k: the Newton
    /// phase must still reach the tolerance.
    #[test]
    fn newton_phase_converges_on_a_slow_case() {
        let c = CostMatrix::new(
            3,
            3,
            vec![
                0.97134, 1.0, 0.90157, 0.87261, 0.89406, 0.34643, 0.92034, 0.93719, 0.91247,
            ],
        );
        let r = sinkhorn_log(&c, &uniform(3), &uniform(3), 0.01, 1e-9, 100_000).unwrap();
        assert!(r.converged);
        assert!(r.iterations < 2_000, "{} iterations", r.iterations);
        let (_, cols) = marginals(&r.plan, 3, 3);
        let err: f64 = cols.iter().map(|x| (x - 1.0 / 3.0).abs()).sum();
        assert!(err <= 1e-9);
        // Reference: POT `sinkhorn_log` (stopThr 1e-14) warm-started at the
        // converged potentials; plain Sinkhorn is still 3e-6 away after 1e5 sweeps.
        assert!((r.value - 0.753056834303568).abs() < 1e-9, "{}", r.value);
    }

    #[test]
    fn symmetric_and_permutation_invariant() {
        let c = lcg_matrix(5, 8, 3);
        for eps in [0.01, 0.1, 0.5] {
            let d = sinkhorn_distance(&c, eps).unwrap().value;
            let dt = sinkhorn_distance(&c.transpose(), eps).unwrap().value;
            assert!((d - dt).abs() < 1e-9, "{d} vs {dt}");
            // Reverse the rows.
            let mut data = Vec::new();
            for i in (0..5).rev() {
                data.extend_from_slice(c.row(i));
            }
            let dp = sinkhorn_distance(&CostMatrix::new(5, 8, data), eps)
                .unwrap()
                .value;
            assert!((d - dp).abs() < 1e-9);
        }
    }

    #[test]
    fn tiny_eps_does_not_overflow() {
        let c = lcg_matrix(4, 5, 11);
        let r = sinkhorn_log(&c, &uniform(4), &uniform(5), 1e-4, 1e-9, 100_000).unwrap();
        assert!(r.value.is_finite());
        assert!(r.converged);
    }

    #[test]
    fn reports_non_convergence() {
        let c = lcg_matrix(6, 6, 5);
        let r = sinkhorn_log(&c, &uniform(6), &uniform(6), 0.01, 1e-15, 3).unwrap();
        assert!(!r.converged);
        assert_eq!(r.iterations, 3);
    }

    #[test]
    fn rejects_bad_input() {
        let c = lcg_matrix(2, 2, 1);
        let p = uniform(2);
        assert!(sinkhorn_log(&c, &p, &p, 0.0, 1e-9, 10).is_err());
        assert!(sinkhorn_log(&c, &p, &p, f64::NAN, 1e-9, 10).is_err());
        assert!(sinkhorn_log(&c, &p, &uniform(3), 0.1, 1e-9, 10).is_err());
        assert!(sinkhorn_log(&c, &p, &[0.5, 0.6], 0.1, 1e-9, 10).is_err());
        assert!(sinkhorn_log(&c, &[1.0, 0.0], &p, 0.1, 1e-9, 10).is_err());
        assert!(sinkhorn_distance(&c, -1.0).is_err());
    }

    #[test]
    fn sweeps_and_newton_steps_read_the_stop_flag() {
        use crate::SdrError;
        use std::sync::atomic::AtomicBool;
        let (set, unset) = (AtomicBool::new(true), AtomicBool::new(false));
        let c = lcg_matrix(9, 7, 4);
        let (p, q) = (uniform(9), uniform(7));
        let run = |flag| sinkhorn_log_until(&c, &p, &q, 0.01, 1e-9, 100_000, Stop::on(flag));
        assert_eq!(run(&set), Err(SdrError::Stopped));
        assert_eq!(run(&unset), sinkhorn_log(&c, &p, &q, 0.01, 1e-9, 100_000));
        // Newton alone, from potentials short of the optimum.
        let mut nt = Newton::new(&c.data, 9, 7, &p, &q, 0.01, vec![0.0; 7]);
        assert_eq!(nt.solve(1e-9, 10, Stop::on(&set)), Err(SdrError::Stopped));
        let mut nt = Newton::new(&c.data, 9, 7, &p, &q, 0.01, vec![0.0; 7]);
        let (steps, _) = nt.solve(1e-9, 10, Stop::on(&unset)).unwrap();
        assert!(steps > 0);
    }
}
