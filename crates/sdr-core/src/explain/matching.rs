//! Who is paired with whom under each metric: the correspondence behind a
//! set distance, read off the quantity the metric already optimises.
//!
//! - Chamfer, Hausdorff: each element's nearest neighbour in the other set,
//!   `argmin_j M_ij` (the terms of their sums and maxima).
//! - Hung-NN, Hung-Pen: the optimal assignment `pi*` of the smaller set
//!   (`linear_sum_assignment`, the rectangular Jonker-Volgenant solver); an element of the larger set left out of it
//!   takes its nearest neighbour under Hung-NN (the cost that metric charges)
//!   and no partner under Hung-Pen (which charges `alpha` instead).
//! - OT, Sinkhorn, UOT, partial OT, GW: the transport plan `gamma` of the same
//!   problem the metric solves; row `i` is paired with `argmax_j gamma_ij` (the
//!   element that receives most of its mass) and column `j` with
//!   `argmax_i gamma_ij`. An element that sends or receives no mass (partial
//!   OT moves only `rho`) has no partner. GW's plan couples the two intra-set
//!   geometries; its pairs are reported with their cross cost `M_ij` too.
//!
//! Ties go to the lowest index. `cost` is always the raw cosine cost `M_ij`
//! (SPEC §3), never `M~ = M / max M`, so one threshold reads every metric.

use crate::cost::{CostMatrix, PairCost};
use crate::distance::hungarian::linear_sum_assignment;
use crate::distance::{gw, ot, partial, sinkhorn, uniform, uot, Metric, Rho};
use crate::error::{Result, SdrError};

/// The partner of one element under a metric.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Partner {
    /// Index into the other set.
    pub index: usize,
    /// `M_ij`, the raw cosine cost of the pair.
    pub cost: f64,
    /// The plan entry `gamma_ij` for plan-based metrics (total mass 1, so each
    /// of `n` elements holds `1/n`); `None` for the others.
    pub mass: Option<f64>,
}

/// The correspondence of an `n x m` pair: one optional partner per row
/// (candidate) and per column (reference), and the plan when there is one.
#[derive(Debug, Clone, PartialEq)]
pub struct Matching {
    pub rows: Vec<Option<Partner>>,
    pub cols: Vec<Option<Partner>>,
    /// Row-major `n x m` plan of plan-based metrics.
    pub plan: Option<Vec<f64>>,
}

/// Plan entries at or below this carry no mass (exact solvers write 0;
/// entropic plans are strictly positive and their row maxima are >= 1/(nm)).
const NO_MASS: f64 = 1e-12;

/// Nearest neighbour of every row and of every column of `m`, ties to the
/// lowest index.
pub fn nearest(m: &CostMatrix) -> (Vec<Partner>, Vec<Partner>) {
    let pick = |costs: &mut dyn Iterator<Item = f64>| {
        let mut best = Partner {
            index: 0,
            cost: f64::INFINITY,
            mass: None,
        };
        for (k, c) in costs.enumerate() {
            if c < best.cost {
                best = Partner {
                    index: k,
                    cost: c,
                    mass: None,
                };
            }
        }
        best
    };
    let rows = (0..m.n)
        .map(|i| pick(&mut m.row(i).iter().copied()))
        .collect();
    let cols = (0..m.m)
        .map(|j| pick(&mut (0..m.n).map(|i| m.get(i, j))))
        .collect();
    (rows, cols)
}

/// The metric's correspondence on the cost matrices of one pair (`n, m >= 1`;
/// `cost.intra` present when the metric is GW).
///
/// # Errors
/// As the metric's solver: a parameter the parser would reject, or GW
/// without the intra-set costs.
pub fn matching(metric: &Metric, cost: &PairCost<'_>) -> Result<Matching> {
    let m: &CostMatrix = &cost.cross;
    let (n, k) = (m.n, m.m);
    let plan = match *metric {
        Metric::HungNn | Metric::HungPen { .. } => {
            return assignment(m, matches!(metric, Metric::HungNn));
        }
        // The problems the metrics solve, on `M~` (`M` itself when max(M) = 0:
        // every pair then costs nothing and any plan is optimal).
        Metric::Ot => ot::emd(&scaled(m), &uniform(n), &uniform(k))?.plan,
        Metric::Sinkhorn { eps } => {
            sinkhorn::sinkhorn_log(
                &scaled(m),
                &uniform(n),
                &uniform(k),
                eps,
                sinkhorn::DEFAULT_TOL,
                sinkhorn::DEFAULT_MAX_ITER,
            )?
            .plan
        }
        Metric::Uot { eps, tau } => {
            uot::sinkhorn_unbalanced(
                &scaled(m),
                &uniform(n),
                &uniform(k),
                eps,
                tau,
                uot::DEFAULT_TOL,
                uot::DEFAULT_MAX_ITER,
            )?
            .plan
        }
        Metric::Pot { rho } => {
            let rho = match rho {
                Rho::Adaptive => n.min(k) as f64 / n.max(k) as f64,
                Rho::Fixed(r) => r,
            };
            partial::partial_wasserstein(&scaled(m), &uniform(n), &uniform(k), rho)?.plan
        }
        Metric::Gw { eps } => {
            let Some((ca, cb)) = &cost.intra else {
                return Err(SdrError::BadMetricParameter {
                    metric: metric.to_string(),
                    message: "needs the intra-set cost matrices (PairCost built without them)"
                        .into(),
                });
            };
            if n.min(k) < 2 {
                // A singleton has one coupling, p q^T (the metric is then 1).
                (0..n * k).map(|_| 1.0 / (n * k) as f64).collect()
            } else {
                let norm = |c: &CostMatrix| c.normalized().unwrap_or_else(|| c.clone());
                gw::entropic_gromov_wasserstein(
                    &norm(ca),
                    &norm(cb),
                    &uniform(n),
                    &uniform(k),
                    eps,
                    gw::DEFAULT_TOL,
                    gw::DEFAULT_MAX_ITER,
                )?
                .plan
            }
        }
        // Chamfer, Hausdorff, and any family added later without a plan of
        // its own: each sentence's nearest neighbour (a new family needs no
        // entry here).
        _ => {
            let (rows, cols) = nearest(m);
            return Ok(Matching {
                rows: rows.into_iter().map(Some).collect(),
                cols: cols.into_iter().map(Some).collect(),
                plan: None,
            });
        }
    };
    Ok(from_plan(m, plan))
}

fn scaled(m: &CostMatrix) -> CostMatrix {
    m.normalized().unwrap_or_else(|| m.clone())
}

/// Partners from a plan: the largest entry of each row and column.
fn from_plan(m: &CostMatrix, plan: Vec<f64>) -> Matching {
    let (n, k) = (m.n, m.m);
    let partner = |i: usize, j: usize| Partner {
        index: 0,
        cost: m.get(i, j),
        mass: Some(plan[i * k + j]),
    };
    let rows = (0..n)
        .map(|i| {
            let j = argmax((0..k).map(|j| plan[i * k + j]))?;
            Some(Partner {
                index: j,
                ..partner(i, j)
            })
        })
        .collect();
    let cols = (0..k)
        .map(|j| {
            let i = argmax((0..n).map(|i| plan[i * k + j]))?;
            Some(Partner {
                index: i,
                ..partner(i, j)
            })
        })
        .collect();
    Matching {
        rows,
        cols,
        plan: Some(plan),
    }
}

/// Index of the largest value above [`NO_MASS`], ties to the lowest index.
fn argmax(values: impl Iterator<Item = f64>) -> Option<usize> {
    let mut best: Option<(usize, f64)> = None;
    for (k, v) in values.enumerate() {
        if v > NO_MASS && best.is_none_or(|(_, b)| v > b) {
            best = Some((k, v));
        }
    }
    best.map(|(k, _)| k)
}

/// The Hungarian family: assigned pairs, then the unassigned elements of the
/// larger set (nearest neighbour when `nn_fallback`, else no partner).
fn assignment(m: &CostMatrix, nn_fallback: bool) -> Result<Matching> {
    let (near_rows, near_cols) = nearest(m);
    let mut rows: Vec<Option<Partner>> = vec![None; m.n];
    let mut cols: Vec<Option<Partner>> = vec![None; m.m];
    for (i, j) in linear_sum_assignment(m)?.pairs {
        let p = |index| Partner {
            index,
            cost: m.get(i, j),
            mass: None,
        };
        rows[i] = Some(p(j));
        cols[j] = Some(p(i));
    }
    if nn_fallback {
        for (slot, near) in rows.iter_mut().zip(near_rows) {
            slot.get_or_insert(near);
        }
        for (slot, near) in cols.iter_mut().zip(near_cols) {
            slot.get_or_insert(near);
        }
    }
    Ok(Matching {
        rows,
        cols,
        plan: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{lcg_matrix, marginals};

    fn pair(m: &CostMatrix) -> PairCost<'_> {
        PairCost::borrowed(m, None)
    }

    #[test]
    fn nearest_breaks_ties_to_the_lowest_index() {
        let m = CostMatrix::new(2, 3, vec![0.3, 0.1, 0.1, 0.5, 0.5, 0.2]);
        let (r, c) = nearest(&m);
        assert_eq!(r.iter().map(|p| p.index).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(c.iter().map(|p| p.index).collect::<Vec<_>>(), [0, 0, 0]);
        assert_eq!(r[0].cost, 0.1);
    }

    #[test]
    fn plan_based_partners_are_the_plan_maxima_and_the_plan_gives_the_distance() {
        let m = lcg_matrix(4, 6, 11);
        for spec in [
            "ot",
            "sinkhorn:eps=0.1",
            "sinkhorn:eps=0.01",
            "uot:eps=0.1,tau=1",
            "pot:rho=adaptive",
            "pot:rho=0.5",
        ] {
            let metric: Metric = spec.parse().unwrap();
            let out = matching(&metric, &pair(&m)).unwrap();
            let plan = out.plan.as_ref().unwrap();
            // The plan is the metric's: <plan, M~> is its value.
            let mt = m.normalized().unwrap();
            let value: f64 = plan.iter().zip(&mt.data).map(|(g, c)| g * c).sum();
            let expected = metric.evaluate(&pair(&m)).unwrap().value;
            assert!(
                (value - expected).abs() < 1e-9,
                "{spec}: {value} vs {expected}"
            );
            for (i, p) in out.rows.iter().enumerate() {
                let row = &plan[i * 6..(i + 1) * 6];
                let max = row.iter().copied().fold(0.0, f64::max);
                match p {
                    Some(p) => {
                        assert_eq!(p.mass, Some(max), "{spec} row {i}");
                        assert_eq!(row[p.index], max);
                        assert_eq!(p.cost, m.get(i, p.index));
                    }
                    None => assert!(max <= NO_MASS, "{spec} row {i}"),
                }
            }
            for (j, p) in out.cols.iter().enumerate() {
                let max = (0..4).map(|i| plan[i * 6 + j]).fold(0.0, f64::max);
                match p {
                    Some(p) => assert_eq!(plan[p.index * 6 + j], max, "{spec} col {j}"),
                    None => assert!(max <= NO_MASS, "{spec} col {j}"),
                }
            }
        }
    }

    #[test]
    fn exact_ot_of_a_permutation_pairs_the_permutation() {
        // Sets that are a relabelling of each other: zero-cost pairs on a permutation.
        let perm = [2usize, 0, 3, 1];
        let mut data = vec![0.5; 16];
        for (i, &j) in perm.iter().enumerate() {
            data[i * 4 + j] = 0.0;
        }
        let m = CostMatrix::new(4, 4, data);
        for spec in [
            "ot",
            "hung-nn",
            "hung-pen",
            "pot:rho=adaptive",
            "sinkhorn:eps=0.01",
        ] {
            let out = matching(&spec.parse().unwrap(), &pair(&m)).unwrap();
            for (i, &j) in perm.iter().enumerate() {
                assert_eq!(out.rows[i].unwrap().index, j, "{spec}");
                assert_eq!(out.cols[j].unwrap().index, i, "{spec}");
            }
            if let Some(plan) = &out.plan {
                let (r, c) = marginals(plan, 4, 4);
                assert!(
                    r.iter().chain(&c).all(|x| (x - 0.25).abs() < 1e-9),
                    "{spec}"
                );
            }
        }
    }

    #[test]
    fn hungarian_leftovers_take_their_nearest_neighbour_or_none() {
        // Two candidates, three references; reference 2 is left out of the assignment.
        let m = CostMatrix::new(2, 3, vec![0.0, 0.6, 0.3, 0.6, 0.0, 0.4]);
        let nn = matching(&Metric::HungNn, &pair(&m)).unwrap();
        assert_eq!(nn.cols[2].unwrap().index, 0);
        assert_eq!(nn.cols[2].unwrap().cost, 0.3);
        let pen = matching(&Metric::HungPen { alpha: 0.5 }, &pair(&m)).unwrap();
        assert_eq!(pen.cols[2], None);
        assert_eq!(pen.rows[1].unwrap().index, 1);
    }

    #[test]
    fn partial_ot_leaves_unmoved_elements_without_partner() {
        // One candidate, two references: adaptive rho = 1/2 moves all of the
        // candidate's mass to its nearest reference only.
        let m = CostMatrix::new(1, 2, vec![0.2, 0.8]);
        let out = matching(&"pot".parse().unwrap(), &pair(&m)).unwrap();
        assert_eq!(out.rows[0].unwrap().index, 0);
        assert_eq!(out.cols[1], None);
    }

    #[test]
    fn gw_uses_its_plan_and_singletons_their_one_coupling() {
        let a = [1.0, 0.0, 0.0, 1.0, 0.7, 0.7];
        let b = [0.0, 1.0, 1.0, 0.0, 0.72, 0.7];
        let (a, b) = (crate::SetView::new(&a, 2), crate::SetView::new(&b, 2));
        let cost = PairCost::between(&a, &b, true).unwrap();
        let out = matching(&Metric::Gw { eps: 0.1 }, &cost).unwrap();
        let (r, c) = marginals(out.plan.as_ref().unwrap(), 3, 3);
        assert!(r.iter().chain(&c).all(|x| (x - 1.0 / 3.0).abs() < 1e-6));
        // Without the intra costs it is the metric's error, not a panic.
        assert!(matching(
            &Metric::Gw { eps: 0.1 },
            &PairCost::between(&a, &b, false).unwrap()
        )
        .is_err());
        let one = [1.0, 0.0];
        let one = crate::SetView::new(&one, 2);
        let cost = PairCost::between(&one, &b, true).unwrap();
        let out = matching(&Metric::Gw { eps: 0.1 }, &cost).unwrap();
        assert_eq!(out.rows[0].unwrap().index, 0);
        assert!(out.cols.iter().all(|p| p.unwrap().index == 0));
    }
}
