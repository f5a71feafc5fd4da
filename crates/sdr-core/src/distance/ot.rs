//! Exact optimal transport (earth mover's distance).
//!
//! $$\mathcal D_{\mathrm{OT}}(\mathcal A,\mathcal B) = \min_{\gamma\in\Gamma(\mathbf p,\mathbf q)}
//!   \sum_{i,j}\gamma_{ij}\widetilde M_{ij},\qquad
//!   \Gamma(\mathbf p,\mathbf q) = \{\gamma\in\mathbb R^{n\times m}_{\ge 0} :
//!   \gamma\mathbf 1_m = \mathbf p,\ \gamma^\top\mathbf 1_n = \mathbf q\}$$
//!
//! where
//! - `M~ = M / max(M)` is the rescaled `n x m` cosine cost (SPEC §3; the
//!   distance is 0 when `max(M) = 0`, see [`crate::cost::ZERO_COST_TOL`]),
//! - `p = 1/n`, `q = 1/m` are the uniform masses.
//!
//! Solved exactly by a primal network simplex (module `network_simplex`).
//! For the metric, masses are scaled to the integers `m/g` and `n/g`
//! (`g = gcd(n, m)`), so every flow the simplex computes is an exact integer
//! and degenerate pivots are recognised exactly.
//!
//! Reference: paper appendix A, Eq. (ot); POT's `ot.emd2` solves the same
//! problem with LEMON's network simplex (Bonneel et al. 2011).

mod network_simplex;

pub(crate) use network_simplex::{solve as transport_simplex, with_workspace, Problem};

use super::stop::{never_stopped, Stop};
use super::{Evaluation, SolverResult};
use crate::cost::{CostMatrix, PairCost, ZERO_COST_TOL};
use crate::error::{Result, SdrError};

/// Pivot budget: far above what the strongly feasible simplex needs
/// (about `n + m` for the sizes of SDR, ~8e3 at 500 x 500).
pub(crate) fn max_pivots(n: usize, m: usize) -> usize {
    1_000 + 200 * (n + m) * (n + m)
}

/// Indices with positive mass; `None` when a mass is negative or not finite,
/// or all are zero.
fn support(w: &[f64]) -> Option<Vec<usize>> {
    if w.iter().any(|x| !x.is_finite() || *x < 0.0) {
        return None;
    }
    let idx: Vec<usize> = (0..w.len()).filter(|&i| w[i] > 0.0).collect();
    (!idx.is_empty()).then_some(idx)
}

fn bad(message: &str) -> SdrError {
    SdrError::BadMetricParameter {
        metric: "ot".into(),
        message: message.into(),
    }
}

/// Exact earth mover's distance between histograms `p` and `q` for the cost
/// `C` (any finite costs; not rescaled here).
///
/// $$\min_{\gamma\ge 0,\ \gamma\mathbf 1 = \mathbf p,\ \gamma^\top\mathbf 1 = \mathbf q}
///   \ \sum_{i,j}\gamma_{ij}C_{ij}$$
///
/// where
/// - `cost`: `C`, shape `n x m`,
/// - `p`: source masses, length `n`, `q`: target masses, length `m`; both
///   non-negative with the same total (`q` is rescaled to the total of `p`
///   when they differ by rounding, as POT does). Zero-mass points are left
///   out of the problem and get zero rows/columns in the plan.
///
/// Returns the optimal cost, the plan (row-major `n x m`), the number of
/// simplex pivots and whether optimality was proven.
///
/// # Errors
/// [`SdrError::BadMetricParameter`] (metric `ot`) for masses that are
/// negative, non-finite, all zero, or whose totals differ by more than `1e-9`
/// (relative), or a non-finite cost.
///
/// # Panics
/// When `p.len() != n` or `q.len() != m` (a programming error).
///
/// ```
/// use sdr_core::distance::ot::emd;
/// use sdr_core::CostMatrix;
/// let c = CostMatrix::new(2, 2, vec![0.0, 1.0, 1.0, 0.0]);
/// let r = emd(&c, &[0.5, 0.5], &[0.5, 0.5]).unwrap();
/// assert_eq!(r.value, 0.0);
/// assert_eq!(r.plan, vec![0.5, 0.0, 0.0, 0.5]);
/// assert!(r.converged);
/// ```
///
/// References: Ahuja, Magnanti, Orlin (1993), *Network Flows*, ch. 11;
/// Bonneel et al. (2011), *ACM TOG* 30(6).
pub fn emd(cost: &CostMatrix, p: &[f64], q: &[f64]) -> Result<SolverResult> {
    let (n, m) = (cost.n, cost.m);
    assert_eq!(p.len(), n, "emd: p has the wrong length");
    assert_eq!(q.len(), m, "emd: q has the wrong length");
    let (Some(rows), Some(cols)) = (support(p), support(q)) else {
        return Err(bad("masses must be finite, >= 0 and not all zero"));
    };
    let (sp, sq): (f64, f64) = (p.iter().sum(), q.iter().sum());
    if (sp - sq).abs() > 1e-9 * sp.max(sq) {
        return Err(bad(&format!("mass totals differ: {sp} vs {sq}")));
    }
    if cost.data.iter().any(|c| !c.is_finite()) {
        return Err(bad("cost has a non-finite entry"));
    }
    let s: Vec<f64> = rows.iter().map(|&i| p[i]).collect();
    let d: Vec<f64> = cols.iter().map(|&j| q[j] * (sp / sq)).collect();
    let compressed: Vec<f64>;
    let c: &[f64] = if s.len() == n && d.len() == m {
        &cost.data
    } else {
        compressed = rows
            .iter()
            .flat_map(|&i| cols.iter().map(move |&j| cost.get(i, j)))
            .collect();
        &compressed
    };
    let mut plan = vec![0.0; n * m];
    let (value, iterations, converged) = if s.len() == 1 || d.len() == 1 {
        // One point on a side: the plan is forced.
        let mut v = 0.0;
        for (a, &sa) in s.iter().enumerate() {
            for (b, &db) in d.iter().enumerate() {
                let g = if s.len() == 1 { db } else { sa };
                plan[rows[a] * m + cols[b]] = g;
                v += g * c[a * d.len() + b];
            }
        }
        (v, 0, true)
    } else {
        with_workspace(|ws| {
            let pb = Problem {
                n: s.len(),
                m: d.len(),
                s: |a| s[a],
                d: |b| d[b],
                cost: c,
            };
            let out = transport_simplex(ws, pb, max_pivots(s.len(), d.len()), Stop::NEVER)?;
            let small = ws.plan(s.len(), d.len());
            for (a, &i) in rows.iter().enumerate() {
                for (b, &j) in cols.iter().enumerate() {
                    plan[i * m + j] = small[a * d.len() + b];
                }
            }
            Ok((out.value, out.pivots, out.converged))
        })?
    };
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

/// The `ot` metric: exact EMD on `M~ = M / max(M)` with uniform masses
/// (`n, m >= 1`); 0 when `max(M) = 0`. Range `[0, 1]`.
///
/// $$\mathcal D_{\mathrm{OT}} = \min_{\gamma\in\Gamma(\frac1n\mathbf 1,\frac1m\mathbf 1)}
///   \sum_{i,j}\gamma_{ij}\frac{M_{ij}}{\max M}$$
///
/// Masses are scaled to the integers `m/g`, `n/g` (`g = gcd(n, m)`) so the
/// simplex works on exact integer flows; the value is then divided by the
/// total `nm/g` and by `max(M)`.
///
/// ```
/// use sdr_core::distance::ot::ot_distance;
/// use sdr_core::CostMatrix;
/// // Two points against one: each half of the mass moves.
/// let m = CostMatrix::new(2, 1, vec![0.2, 0.4]);
/// assert!((ot_distance(&m).value - 0.75).abs() < 1e-15);
/// ```
pub fn ot_distance(m: &CostMatrix) -> Evaluation {
    never_stopped(ot_distance_until(m, Stop::NEVER))
}

/// [`ot_distance`], or [`SdrError::Stopped`] once `stop` is set.
fn ot_distance_until(m: &CostMatrix, stop: Stop<'_>) -> Result<Evaluation> {
    let mx = m.scale();
    if mx <= ZERO_COST_TOL {
        return Ok(Evaluation::exact(0.0));
    }
    let (n, k) = (m.n, m.m);
    if n == 1 || k == 1 {
        return Ok(Evaluation::exact(
            m.data.iter().sum::<f64>() / (n * k) as f64 / mx,
        ));
    }
    let g = gcd(n, k);
    let (si, dj) = ((k / g) as f64, (n / g) as f64);
    let pb = Problem {
        n,
        m: k,
        s: |_| si,
        d: |_| dj,
        cost: &m.data,
    };
    let out = with_workspace(|ws| transport_simplex(ws, pb, max_pivots(n, k), stop))?;
    Ok(Evaluation {
        value: out.value / (n * k / g) as f64 / mx,
        converged: out.converged,
        iterations: out.pivots,
    })
}

/// The family's entry in the metric registry (`distance/spec.rs`).
pub(crate) fn evaluate(cost: &PairCost<'_>, stop: Stop<'_>) -> Result<Evaluation> {
    ot_distance_until(&cost.cross, stop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{lcg, random};

    fn check_plan(r: &SolverResult, c: &CostMatrix, p: &[f64], q: &[f64]) {
        assert!(r.converged);
        for (i, &pi) in p.iter().enumerate() {
            let s: f64 = r.plan[i * c.m..(i + 1) * c.m].iter().sum();
            assert!((s - pi).abs() < 1e-12, "row {i}: {s} vs {pi}");
        }
        for (j, &qj) in q.iter().enumerate() {
            let s: f64 = (0..c.n).map(|i| r.plan[i * c.m + j]).sum();
            assert!((s - qj).abs() < 1e-12, "col {j}: {s} vs {qj}");
        }
        assert!(r.plan.iter().all(|&g| g >= 0.0));
        let v: f64 = r.plan.iter().zip(&c.data).map(|(g, x)| g * x).sum();
        assert!((v - r.value).abs() < 1e-12);
    }

    fn brute_force_uniform(c: &CostMatrix) -> f64 {
        // For n == m uniform masses the optimum is a permutation (Birkhoff).
        fn rec(k: usize, n: usize, used: &mut [bool], c: &CostMatrix) -> f64 {
            if k == n {
                return 0.0;
            }
            let mut best = f64::INFINITY;
            for j in 0..n {
                if !used[j] {
                    used[j] = true;
                    best = best.min(c.get(k, j) + rec(k + 1, n, used, c));
                    used[j] = false;
                }
            }
            best
        }
        rec(0, c.n, &mut vec![false; c.n], c) / c.n as f64
    }

    #[test]
    fn square_uniform_matches_best_permutation() {
        let mut seed = 1u64;
        for n in 2..=7 {
            for _ in 0..10 {
                let c = random(n, n, &mut seed);
                let p = vec![1.0 / n as f64; n];
                let r = emd(&c, &p, &p).unwrap();
                check_plan(&r, &c, &p, &p);
                assert!((r.value - brute_force_uniform(&c)).abs() < 1e-12);
            }
        }
    }

    #[test]
    fn rectangular_plans_have_the_right_marginals() {
        let mut seed = 2u64;
        for (n, m) in [(2, 3), (3, 7), (7, 3), (5, 12), (15, 4), (30, 30), (40, 25)] {
            let c = random(n, m, &mut seed);
            let p: Vec<f64> = (0..n).map(|_| 0.1 + lcg(&mut seed)).collect();
            let sp: f64 = p.iter().sum();
            let mut q: Vec<f64> = (0..m).map(|_| 0.1 + lcg(&mut seed)).collect();
            let sq: f64 = q.iter().sum();
            q.iter_mut().for_each(|x| *x *= sp / sq);
            let r = emd(&c, &p, &q).unwrap();
            check_plan(&r, &c, &p, &q);
            // Uniform version through the metric agrees with emd().
            let u = emd(&c, &vec![1.0 / n as f64; n], &vec![1.0 / m as f64; m]).unwrap();
            assert!((ot_distance(&c).value - u.value / c.max()).abs() < 1e-12);
        }
    }

    #[test]
    fn identical_sets_and_permutations_cost_zero() {
        // Zero diagonal under a hidden permutation: OT recovers it.
        let perm = [2usize, 0, 3, 1];
        let mut seed = 5u64;
        let mut data = vec![0.0; 16];
        for i in 0..4 {
            for j in 0..4 {
                data[i * 4 + j] = if perm[i] == j {
                    0.0
                } else {
                    0.2 + lcg(&mut seed)
                };
            }
        }
        let c = CostMatrix::new(4, 4, data);
        let r = emd(&c, &[0.25; 4], &[0.25; 4]).unwrap();
        assert_eq!(r.value, 0.0);
        for (i, &j) in perm.iter().enumerate() {
            assert_eq!(r.plan[i * 4 + j], 0.25);
        }
        assert_eq!(ot_distance(&c).value, 0.0);
        assert_eq!(ot_distance(&CostMatrix::new(2, 2, vec![0.0; 4])).value, 0.0);
    }

    #[test]
    fn zero_masses_and_bad_masses() {
        let c = CostMatrix::new(3, 2, vec![0.0, 1.0, 5.0, 5.0, 1.0, 0.0]);
        let r = emd(&c, &[0.5, 0.0, 0.5], &[0.5, 0.5]).unwrap();
        check_plan(&r, &c, &[0.5, 0.0, 0.5], &[0.5, 0.5]);
        assert_eq!(r.value, 0.0);
        for bad in [[-0.5, 1.0, 0.5], [f64::NAN, 0.5, 0.5], [0.0, 0.0, 0.0]] {
            assert!(emd(&c, &bad, &[0.5, 0.5]).is_err());
        }
        let err = emd(&c, &[0.5, 0.5, 0.5], &[0.5, 0.5]).unwrap_err();
        assert!(err.to_string().contains("totals differ"), "{err}");
    }

    #[test]
    fn large_degenerate_problem_is_solved() {
        // 200 x 200 uniform: an assignment problem, maximally degenerate.
        let mut seed = 9u64;
        let c = random(200, 200, &mut seed);
        let p = vec![1.0 / 200.0; 200];
        let r = emd(&c, &p, &p).unwrap();
        check_plan(&r, &c, &p, &p);
        let lsa = super::super::hungarian::linear_sum_assignment(&c).unwrap();
        let best: f64 = lsa.cost / 200.0;
        assert!((r.value - best).abs() < 1e-12, "{} vs {best}", r.value);
    }

    #[test]
    fn the_simplex_reads_the_stop_flag() {
        use std::sync::atomic::AtomicBool;
        let (set, unset) = (AtomicBool::new(true), AtomicBool::new(false));
        let mut seed = 13u64;
        let c = random(40, 30, &mut seed);
        let stopped = ot_distance_until(&c, Stop::on(&set));
        assert_eq!(stopped, Err(SdrError::Stopped));
        assert_eq!(ot_distance_until(&c, Stop::on(&unset)), Ok(ot_distance(&c)));
    }
}
