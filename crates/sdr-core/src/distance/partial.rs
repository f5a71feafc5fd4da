//! Exact partial optimal transport.
//!
//! $$\mathcal D^{\rho}_{\mathrm{POT}}(\mathcal A,\mathcal B) =
//!   \min_{\substack{\gamma\ge 0,\ \gamma\mathbf 1_m\le\mathbf p,\
//!   \gamma^\top\mathbf 1_n\le\mathbf q,\ \mathbf 1_n^\top\gamma\mathbf 1_m=\rho}}
//!   \ \sum_{i,j}\gamma_{ij}\widetilde M_{ij}$$
//!
//! where
//! - `M~ = M / max(M)` is the rescaled `n x m` cosine cost (0 when `max(M) = 0`),
//! - `p = 1/n`, `q = 1/m` are the uniform masses,
//! - `rho in (0, 1]` is the transported mass (`adaptive`: `min(n,m)/max(n,m)`).
//!
//! The value is the transport cost itself, not divided by `rho` (SPEC §3).
//!
//! Reduction to balanced OT (Chapel et al. \[1\], as in POT's
//! `partial_wasserstein`): add a dummy column with mass `sum(p) - rho` and a
//! dummy row with mass `sum(q) - rho`, zero cost between real and dummy
//! points, and a positive cost `2 max|C| + 1` between the two dummies. Any
//! dummy-to-dummy flow `f` can be rerouted through a real pair at a strict
//! gain, so the optimum has `f = 0` and the real block is exactly an optimal
//! partial plan of mass `rho`. The balanced problem is solved by the same
//! exact network simplex as [`super::ot::emd`].
//!
//! References:
//! 1. L. Chapel, M. Z. Alaya, G. Gasso (2020). Partial optimal transport with
//!    applications on positive-unlabeled learning. *NeurIPS 2020*.
//! 2. Paper appendix A, Eq. (pot).

use super::ot::{max_pivots, transport_simplex, with_workspace, Problem};
use super::params::Rho;
use super::stop::Stop;
use super::{Evaluation, SolverResult};
use crate::cost::{CostMatrix, PairCost, ZERO_COST_TOL};
use crate::error::{Result, SdrError};

fn bad(message: String) -> SdrError {
    SdrError::BadMetricParameter {
        metric: "pot".into(),
        message,
    }
}

/// Solve the dummy-extended balanced problem for `n` supplies and `m`
/// demands (all positive) and costs `cost` (row-major `n x m`), moving mass
/// `rho`; returns the real-block value, pivots, convergence, and (when
/// `want_plan`) the real `n x m` plan, or [`SdrError::Stopped`] once `stop`
/// is set.
#[allow(clippy::too_many_arguments)]
fn solve_partial<S, D>(
    n: usize,
    m: usize,
    s: S,
    d: D,
    cost: &[f64],
    rho: f64,
    want_plan: bool,
    stop: Stop<'_>,
) -> Result<(f64, usize, bool, Vec<f64>)>
where
    S: Fn(usize) -> f64,
    D: Fn(usize) -> f64,
{
    let total_s: f64 = (0..n).map(&s).sum();
    let total_d: f64 = (0..m).map(&d).sum();
    let (dummy_row, dummy_col) = (total_d - rho, total_s - rho);
    let (hr, hc) = (dummy_row > 0.0, dummy_col > 0.0);
    let (ne, me) = (n + hr as usize, m + hc as usize);
    let cmax = cost.iter().fold(0.0f64, |a, c| a.max(c.abs()));
    let c_dummies = 2.0 * cmax + 1.0;
    let mut ext = Vec::with_capacity(ne * me);
    for i in 0..ne {
        if i < n {
            ext.extend_from_slice(&cost[i * m..(i + 1) * m]);
            if hc {
                ext.push(0.0);
            }
        } else {
            ext.extend(std::iter::repeat_n(0.0, m));
            if hc {
                ext.push(c_dummies);
            }
        }
    }
    let pb = Problem {
        n: ne,
        m: me,
        s: |i| if i < n { s(i) } else { dummy_row },
        d: |j| if j < m { d(j) } else { dummy_col },
        cost: &ext,
    };
    with_workspace(|ws| {
        let out = transport_simplex(ws, pb, max_pivots(ne, me), stop)?;
        let full = ws.plan(ne, me);
        let mut value = 0.0;
        let mut plan = Vec::new();
        let mut leaked = 0.0;
        if want_plan {
            plan.reserve(n * m);
        }
        for i in 0..ne {
            for j in 0..me {
                let g = full[i * me + j];
                if i < n && j < m {
                    value += g * cost[i * m + j];
                    if want_plan {
                        plan.push(g);
                    }
                } else if i >= n && j >= m {
                    leaked += g;
                }
            }
        }
        // Dummy-to-dummy flow would mean less than rho was moved.
        let ok = out.converged && leaked <= 1e-12 * total_s.max(total_d);
        Ok((value, out.pivots, ok, plan))
    })
}

/// Exact partial Wasserstein problem between histograms `p` and `q` for the
/// cost `C` (finite, not rescaled here), moving total mass `rho`.
///
/// $$\min_{\gamma\ge 0,\ \gamma\mathbf 1\le\mathbf p,\ \gamma^\top\mathbf 1\le\mathbf q,\
///   \mathbf 1^\top\gamma\mathbf 1=\rho}\ \sum_{i,j}\gamma_{ij}C_{ij}$$
///
/// where
/// - `cost`: `C`, shape `n x m`,
/// - `p`: length `n`, `q`: length `m`, non-negative (zero masses allowed),
/// - `rho`: `0 <= rho <= min(sum p, sum q)` (a `rho` above that bound by
///   rounding only, `1e-12` relative, is clipped to it).
///
/// Returns the cost `<gamma, C>` (not divided by `rho`), the plan (row-major
/// `n x m`), simplex pivots and whether optimality was proven. Same problem
/// and value as POT's `ot.partial.partial_wasserstein(p, q, C, m=rho)`.
///
/// # Errors
/// [`SdrError::BadMetricParameter`] (metric `pot`) for negative or
/// non-finite masses or costs, or `rho` outside its range.
///
/// # Panics
/// When `p.len() != n` or `q.len() != m` (a programming error).
///
/// ```
/// use sdr_core::distance::partial::partial_wasserstein;
/// use sdr_core::CostMatrix;
/// // Moving half the mass only uses the cheap pair.
/// let c = CostMatrix::new(2, 2, vec![0.1, 0.9, 0.9, 0.7]);
/// let r = partial_wasserstein(&c, &[0.5, 0.5], &[0.5, 0.5], 0.5).unwrap();
/// assert!((r.value - 0.05).abs() < 1e-15);
/// assert!((r.plan[0] - 0.5).abs() < 1e-15 && r.converged);
/// ```
pub fn partial_wasserstein(
    cost: &CostMatrix,
    p: &[f64],
    q: &[f64],
    rho: f64,
) -> Result<SolverResult> {
    let (n, m) = (cost.n, cost.m);
    assert_eq!(p.len(), n, "partial_wasserstein: p has the wrong length");
    assert_eq!(q.len(), m, "partial_wasserstein: q has the wrong length");
    let bad_mass = |w: &[f64]| w.iter().any(|x| !x.is_finite() || *x < 0.0);
    if bad_mass(p) || bad_mass(q) {
        return Err(bad("masses must be finite and >= 0".into()));
    }
    if cost.data.iter().any(|c| !c.is_finite()) {
        return Err(bad("cost has a non-finite entry".into()));
    }
    let (sp, sq): (f64, f64) = (p.iter().sum(), q.iter().sum());
    let cap = sp.min(sq);
    if !(rho.is_finite() && rho >= 0.0 && rho <= cap * (1.0 + 1e-12)) {
        return Err(bad(format!("`rho` must be in [0, {cap}], got {rho}")));
    }
    let rho = rho.min(cap);
    if rho == 0.0 {
        return Ok(SolverResult {
            value: 0.0,
            plan: vec![0.0; n * m],
            iterations: 0,
            converged: true,
        });
    }
    let rows: Vec<usize> = (0..n).filter(|&i| p[i] > 0.0).collect();
    let cols: Vec<usize> = (0..m).filter(|&j| q[j] > 0.0).collect();
    let compressed: Vec<f64> = rows
        .iter()
        .flat_map(|&i| cols.iter().map(move |&j| cost.get(i, j)))
        .collect();
    let (value, iterations, converged, small) = solve_partial(
        rows.len(),
        cols.len(),
        |a| p[rows[a]],
        |b| q[cols[b]],
        &compressed,
        rho,
        true,
        Stop::NEVER,
    )?;
    let mut plan = vec![0.0; n * m];
    for (a, &i) in rows.iter().enumerate() {
        for (b, &j) in cols.iter().enumerate() {
            plan[i * m + j] = small[a * cols.len() + b];
        }
    }
    Ok(SolverResult {
        value,
        plan,
        iterations,
        converged,
    })
}

fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The `pot:rho=R` metric: exact partial OT of mass `rho` on
/// `M~ = M / max(M)` with uniform masses (`n, m >= 1`); 0 when `max(M) = 0`.
/// Range `[0, rho]`.
///
/// $$\min_{\gamma\ge 0,\ \gamma\mathbf 1\le\frac1n\mathbf 1,\
///   \gamma^\top\mathbf 1\le\frac1m\mathbf 1,\ \mathbf 1^\top\gamma\mathbf 1=\rho}
///   \ \sum_{i,j}\gamma_{ij}\frac{M_{ij}}{\max M}$$
///
/// Masses are scaled by `T = nm / gcd(n, m)` to the integers `m/g`, `n/g`;
/// `rho T` is snapped to the nearest integer when within `1e-12 T` of it (the
/// adaptive `rho = min(n,m)/max(n,m)` always is), so those problems run on
/// exact integer flows.
///
/// # Errors
/// [`SdrError::BadMetricParameter`] when `rho` is outside `(0, 1]` (the
/// metric parser never lets such a value through).
///
/// ```
/// use sdr_core::distance::partial::pot_distance;
/// use sdr_core::CostMatrix;
/// // One element against two (rho = 1/2): it matches its nearest neighbour.
/// let m = CostMatrix::new(1, 2, vec![0.2, 0.8]);
/// assert!((pot_distance(&m, 0.5).unwrap().value - 0.5 * 0.2 / 0.8).abs() < 1e-15);
/// ```
pub fn pot_distance(m: &CostMatrix, rho: f64) -> Result<Evaluation> {
    pot_distance_until(m, rho, Stop::NEVER)
}

/// [`pot_distance`], or [`SdrError::Stopped`] once `stop` is set.
fn pot_distance_until(m: &CostMatrix, rho: f64, stop: Stop<'_>) -> Result<Evaluation> {
    if !(rho.is_finite() && rho > 0.0 && rho <= 1.0 + 1e-12) {
        return Err(SdrError::BadMetricParameter {
            metric: "pot".into(),
            message: format!("`rho` must be in (0, 1], got {rho}"),
        });
    }
    let mx = m.scale();
    if mx <= ZERO_COST_TOL {
        return Ok(Evaluation::exact(0.0));
    }
    let (n, k) = (m.n, m.m);
    let g = gcd(n, k);
    let total = (n * k / g) as f64;
    let (si, dj) = ((k / g) as f64, (n / g) as f64);
    let mut mass = rho.min(1.0) * total;
    if (mass - mass.round()).abs() <= 1e-12 * total {
        mass = mass.round();
    }
    let (value, pivots, converged, _) =
        solve_partial(n, k, |_| si, |_| dj, &m.data, mass, false, stop)?;
    Ok(Evaluation {
        value: value / total / mx,
        converged,
        iterations: pivots,
    })
}

/// The family's entry in the metric registry (`distance/spec.rs`).
/// An adaptive `rho` is `min(n, m) / max(n, m)` of the pair.
pub(crate) fn evaluate(cost: &PairCost<'_>, stop: Stop<'_>, rho: Rho) -> Result<Evaluation> {
    let m = &cost.cross;
    let rho = match rho {
        Rho::Adaptive => m.n.min(m.m) as f64 / m.n.max(m.m) as f64,
        Rho::Fixed(r) => r,
    };
    pot_distance_until(m, rho, stop)
}

#[cfg(test)]
mod tests {
    use super::super::ot::emd;
    use super::*;
    use crate::test_support::{random, unif};

    #[test]
    fn plan_respects_the_constraints_and_moves_rho() {
        let mut seed = 4u64;
        for (n, m) in [(1, 1), (1, 5), (3, 4), (6, 2), (9, 9), (15, 11)] {
            let c = random(n, m, &mut seed);
            let (p, q) = (unif(n), unif(m));
            for rho in [0.1, 0.5, 0.8, n.min(m) as f64 / n.max(m) as f64] {
                let r = partial_wasserstein(&c, &p, &q, rho).unwrap();
                assert!(r.converged);
                let moved: f64 = r.plan.iter().sum();
                assert!((moved - rho).abs() < 1e-12, "{n}x{m} rho {rho}: {moved}");
                for (i, &pi) in p.iter().enumerate() {
                    let s: f64 = r.plan[i * m..(i + 1) * m].iter().sum();
                    assert!(s <= pi + 1e-12);
                }
                for (j, &qj) in q.iter().enumerate() {
                    let s: f64 = (0..n).map(|i| r.plan[i * m + j]).sum();
                    assert!(s <= qj + 1e-12);
                }
                let v: f64 = r.plan.iter().zip(&c.data).map(|(g, x)| g * x).sum();
                assert!((v - r.value).abs() < 1e-12);
                assert!((pot_distance(&c, rho).unwrap().value - r.value / c.max()).abs() < 1e-12);
            }
        }
    }

    #[test]
    fn full_mass_equals_emd() {
        let mut seed = 6u64;
        for (n, m) in [(4, 4), (3, 8), (10, 7)] {
            let c = random(n, m, &mut seed);
            let (p, q) = (unif(n), unif(m));
            let full = emd(&c, &p, &q).unwrap();
            let part = partial_wasserstein(&c, &p, &q, 1.0).unwrap();
            assert!((full.value - part.value).abs() < 1e-12);
        }
    }

    #[test]
    fn matches_a_greedy_optimum_on_a_single_source() {
        // One source of mass 1 against m targets of mass 1/m: move rho to the
        // cheapest targets, filling each up to 1/m.
        let c = CostMatrix::new(1, 4, vec![0.4, 0.1, 0.3, 0.2]);
        let r = partial_wasserstein(&c, &[1.0], &unif(4), 0.6).unwrap();
        let expected = 0.25 * 0.1 + 0.25 * 0.2 + 0.1 * 0.3;
        assert!((r.value - expected).abs() < 1e-15);
    }

    #[test]
    fn identical_sets_cost_zero_and_value_is_monotone_in_rho() {
        let mut seed = 8u64;
        let mut data = random(5, 5, &mut seed).data;
        for i in 0..5 {
            data[i * 5 + i] = 0.0;
        }
        let c = CostMatrix::new(5, 5, data);
        assert_eq!(pot_distance(&c, 1.0).unwrap().value, 0.0);
        let c = random(6, 9, &mut seed);
        let vals: Vec<f64> = [0.1, 0.3, 0.5, 0.8, 1.0]
            .iter()
            .map(|&r| pot_distance(&c, r).unwrap().value)
            .collect();
        assert!(vals.windows(2).all(|w| w[0] <= w[1] + 1e-15), "{vals:?}");
    }

    #[test]
    fn rejects_bad_parameters() {
        let c = CostMatrix::new(2, 2, vec![0.0, 1.0, 1.0, 0.0]);
        let p = [0.5, 0.5];
        for rho in [-0.1, 1.5, f64::NAN] {
            assert!(partial_wasserstein(&c, &p, &p, rho).is_err());
            assert!(pot_distance(&c, rho).is_err());
        }
        assert!(partial_wasserstein(&c, &[-0.5, 1.5], &p, 0.5).is_err());
        let r = partial_wasserstein(&c, &p, &p, 0.0).unwrap();
        assert_eq!((r.value, r.converged), (0.0, true));
    }

    #[test]
    fn the_partial_simplex_reads_the_stop_flag() {
        use std::sync::atomic::AtomicBool;
        let (set, unset) = (AtomicBool::new(true), AtomicBool::new(false));
        let mut seed = 14u64;
        let c = random(25, 35, &mut seed);
        let stopped = pot_distance_until(&c, 0.7, Stop::on(&set));
        assert_eq!(stopped, Err(SdrError::Stopped));
        assert_eq!(
            pot_distance_until(&c, 0.7, Stop::on(&unset)),
            pot_distance(&c, 0.7)
        );
    }
}
