//! Exact lower bounds on set distances, used to skip corpus reports that
//! cannot enter the `k` smallest distances (`min` and `knn` aggregations).
//!
//! Notation: `M` is the `n x m` cost block of a candidate section `A` against
//! a corpus set `B`; `r_i = min_j M_ij` (row minima), `c_j = min_i M_ij`
//! (column minima), `mx = max M`, `p = 1/n`, `q = 1/m`.
//!
//! Each bound `L` satisfies `L <= D(A, B)`; the proofs sit beside the code.
//! Bounds are lowered by [`SLACK`] before use so that floating-point
//! rounding (and, for Sinkhorn, the solver's marginal tolerance) can never
//! make a bound exceed the value the solver returns. A report is skipped
//! only when its lowered bound is `>=` the current `k`-th smallest distance;
//! a report whose true distance equals that threshold cannot change the
//! multiset of the `k` smallest values, so pruned and unpruned aggregation
//! agree exactly (tested in `tests/pruning.rs`).
//!
//! Metrics without a useful bound (UOT: mass is not conserved; GW: its value
//! ignores the cross costs) are always computed.

use sdr_core::cost::ZERO_COST_TOL;
use sdr_core::distance::Rho;
use sdr_core::SentenceCost;
use sdr_core::{CostMatrix, Metric};

/// Subtracted from every bound (absolute; distances are O(1)).
pub const SLACK: f64 = 1e-9;
/// Extra slack for entropic plans, whose marginals hold to the solver's
/// tolerance (1e-9 per SPEC §3) rather than exactly: a marginal error `e`
/// (L1) moves `<gamma, M~>` by at most `e`, since `0 <= M~ <= 1`.
pub const ENTROPIC_SLACK: f64 = 1e-6;

/// Which bound a metric has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoundKind {
    /// From per-sentence minima alone, without gathering the block
    /// (Chamfer, Hausdorff).
    Sentence,
    /// From the block's row/column minima and maximum.
    Block,
    /// None: always computed.
    None,
}

pub fn kind(metric: &Metric) -> BoundKind {
    match metric {
        Metric::Chamfer | Metric::Hausdorff => BoundKind::Sentence,
        Metric::Ot
        | Metric::Sinkhorn { .. }
        | Metric::HungNn
        | Metric::HungPen { .. }
        | Metric::Pot { .. } => BoundKind::Block,
        // UOT, GW and any family added later: no proven bound, always
        // computed (exact and safe; a new family needs no entry here).
        _ => BoundKind::None,
    }
}

/// Which bound a metric has under the clinical cost (SPEC §10) when
/// `clinical`, else [`kind`].
///
/// Proof that the cosine bounds stay valid. The clinical cost `M'` adds
/// non-negative penalties to the cosine cost `M` (`M' >= M` elementwise)
/// and keeps `max(M)` as the OT family's scale. Chamfer, Hausdorff, exact
/// OT, partial OT (an exact linear program), Hung-NN and Hung-Pen are
/// minima or maxima of sums of entries of the cost, each non-decreasing in
/// every entry, so `D(M') >= D(M) >= L(M)`: a bound computed on the cosine
/// block bounds the clinical distance too. Sinkhorn's value is the
/// transport cost of the entropic plan, which moves with `M` and is not
/// monotone in it: it has no bound here and is always computed (as UOT and
/// GW already are).
pub fn kind_under(metric: &Metric, clinical: bool) -> BoundKind {
    match metric {
        Metric::Sinkhorn { .. } if clinical => BoundKind::None,
        _ => kind(metric),
    }
}

/// Which bound a metric has under the sentence cost `cost` (`None`: the
/// cosine cost, [`kind`]). A cost that only adds non-negative values and
/// keeps the cosine scale ([`SentenceCost::adds_only`], the clinical cost)
/// keeps the bounds of [`kind_under`]; any other turns them off (every set
/// computed: exact, slower).
pub fn kind_for(metric: &Metric, cost: Option<&dyn SentenceCost>) -> BoundKind {
    match cost {
        None => kind(metric),
        Some(c) if c.adds_only() => kind_under(metric, true),
        Some(_) => BoundKind::None,
    }
}

/// Sentence-level bound for Chamfer and Hausdorff.
///
/// `g[i]` is the smallest cost of candidate sentence `i` to *any* sentence
/// the section uses in the corpus, and `col_min` yields `c_j` for the set's
/// sentences (computed once per distinct corpus sentence).
///
/// Proof. `B` is a subset of the section's sentences, so `r_i >= g_i`; the
/// column minima are exactly `c_j`. Chamfer `(mean r + mean c)/2` is monotone
/// in every `r_i`, hence `>= (mean g + mean c)/2`; floating-point sums,
/// quotients and products by positive constants are monotone too, and the
/// same operation order is used as in `sdr_core`'s Chamfer. Hausdorff
/// `max(max r, max c) >= max(max g, max c)` likewise.
pub fn sentence_bound(metric: &Metric, g: &[f64], col_min: impl Iterator<Item = f64>) -> f64 {
    match metric {
        Metric::Chamfer => {
            let mut sum_c = 0.0;
            let mut m = 0usize;
            for c in col_min {
                sum_c += c;
                m += 1;
            }
            let a = g.iter().sum::<f64>() / g.len() as f64;
            let b = sum_c / m as f64;
            0.5 * (a + b) - SLACK
        }
        Metric::Hausdorff => {
            let a = g.iter().copied().fold(0.0, f64::max);
            let b = col_min.fold(0.0, f64::max);
            a.max(b) - SLACK
        }
        _ => f64::NEG_INFINITY,
    }
}

fn minima(m: &CostMatrix) -> (Vec<f64>, Vec<f64>, f64) {
    let mut r = vec![f64::INFINITY; m.n()];
    let mut c = vec![f64::INFINITY; m.m()];
    let mut mx = 0.0f64;
    for (i, ri) in r.iter_mut().enumerate() {
        for (j, &x) in m.row(i).iter().enumerate() {
            *ri = ri.min(x);
            c[j] = c[j].min(x);
            mx = mx.max(x);
        }
    }
    (r, c, mx)
}

/// Cheapest way to move `rho` mass when each source `i` may send at most
/// `cap` at unit cost `cost[i]`: fill the cheapest sources first (the optimum
/// of this fractional knapsack).
fn knapsack(cost: &[f64], cap: f64, rho: f64) -> f64 {
    let mut c = cost.to_vec();
    c.sort_by(f64::total_cmp);
    let mut left = rho;
    let mut total = 0.0;
    for x in c {
        if left <= 0.0 {
            break;
        }
        let take = cap.min(left);
        total += take * x;
        left -= take;
    }
    total
}

/// Block-level bound for OT, Sinkhorn, Hung-NN, Hung-Pen and partial OT.
pub fn block_bound(metric: &Metric, m: &CostMatrix) -> f64 {
    let (r, c, mx) = minima(m);
    let (n, k) = (m.n() as f64, m.m() as f64);
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    match *metric {
        // Proof. Any plan gamma with row sums p_i has
        // <gamma, M> = sum_i sum_j gamma_ij M_ij >= sum_i p_i r_i = mean(r);
        // with column sums q_j, likewise >= mean(c). OT divides the optimum
        // by mx (and is 0 when mx <= ZERO_COST_TOL, where the bound is 0 too).
        Metric::Ot => {
            if mx <= ZERO_COST_TOL {
                return 0.0;
            }
            mean(&r).max(mean(&c)) / mx - SLACK
        }
        // Proof. The entropic plan's marginals are p and q up to the solver
        // tolerance, so the OT argument holds up to ENTROPIC_SLACK.
        Metric::Sinkhorn { .. } => {
            if mx <= ZERO_COST_TOL {
                return 0.0;
            }
            mean(&r).max(mean(&c)) / mx - ENTROPIC_SLACK
        }
        // Proof. If n <= m, every matched pair (i, pi(i)) costs at least
        // c_pi(i) and every unmatched column j adds exactly c_j, so the sum is
        // >= sum_j c_j; it is also >= sum_i r_i (matched part alone). The
        // case n > m is the transpose. Both are divided by max(n, m).
        Metric::HungNn => {
            let s = r.iter().sum::<f64>().max(c.iter().sum::<f64>());
            s / n.max(k) - SLACK
        }
        // Proof. All elements of the smaller side are matched, each at a
        // cost >= its own minimum (r_i or c_j), so the mean matched cost is
        // >= the mean of the smaller side's minima (both sides when n = m);
        // the count penalty is exact.
        Metric::HungPen { alpha } => {
            let matched = if m.n() < m.m() {
                mean(&r)
            } else if m.n() > m.m() {
                mean(&c)
            } else {
                mean(&r).max(mean(&c))
            };
            matched + alpha * (n - k).abs() - SLACK
        }
        // Proof. Dropping the column constraints of the partial OT linear
        // program leaves: move rho mass out of rows of capacity p, row i at
        // unit cost >= r_i; its optimum is the fractional knapsack filling
        // the cheapest rows first, a lower bound of the full program. The
        // same holds for columns. The value is divided by mx (0 when
        // mx <= ZERO_COST_TOL).
        Metric::Pot { rho } => {
            if mx <= ZERO_COST_TOL {
                return 0.0;
            }
            let rho = match rho {
                Rho::Adaptive => n.min(k) / n.max(k),
                Rho::Fixed(x) => x.min(1.0),
            };
            let lr = knapsack(&r, 1.0 / n, rho);
            let lc = knapsack(&c, 1.0 / k, rho);
            lr.max(lc) / mx - SLACK
        }
        _ => f64::NEG_INFINITY,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knapsack_fills_cheapest_first() {
        assert!((knapsack(&[0.5, 0.1, 0.3], 0.25, 0.5) - (0.25 * 0.1 + 0.25 * 0.3)).abs() < 1e-15);
        assert!((knapsack(&[0.5, 0.1], 0.5, 1.0) - 0.3).abs() < 1e-15);
    }

    #[test]
    fn kinds() {
        assert_eq!(kind(&Metric::Chamfer), BoundKind::Sentence);
        assert_eq!(kind(&Metric::Ot), BoundKind::Block);
        assert_eq!(kind(&Metric::Gw { eps: 0.1 }), BoundKind::None);
        let sk = Metric::Sinkhorn { eps: 0.1 };
        assert_eq!(kind_under(&sk, false), BoundKind::Block);
        assert_eq!(kind_under(&sk, true), BoundKind::None);
        assert_eq!(kind_under(&Metric::Ot, true), BoundKind::Block);
    }
}
