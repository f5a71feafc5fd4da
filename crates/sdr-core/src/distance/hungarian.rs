//! Hungarian matching: rectangular linear sum assignment, Hung-NN and Hung-Pen.
//!
//! Assignment of the smaller set (paper appendix A, Eq. hungarian-assignment):
//!
//! $$\pi^* = \operatorname*{arg\,min}_{\pi:\{1..n\}\hookrightarrow\{1..m\}}
//!   \sum_{i=1}^{n} M_{i,\pi(i)} \qquad (n \le m;\ \text{otherwise on } M^\top)$$
//!
//! Nearest-neighbour fallback (Eq. hung-nn) and count penalty (Eq. hung-pen):
//!
//! $$\mathcal D_{\mathrm{Hung\text{-}NN}} = \frac{1}{\max(n,m)}\Bigl[\sum_{i=1}^{n}
//!   M_{i,\pi^*(i)} + \sum_{j\in\mathcal U}\min_{1\le i\le n} M_{ij}\Bigr],\qquad
//! \mathcal D^{\alpha}_{\mathrm{Hung\text{-}Pen}} = \frac{1}{\min(n,m)}\sum_{i}
//!   M_{i,\pi^*(i)} + \alpha\,|n-m|$$
//!
//! where
//! - `M` is the raw `n x m` cosine cost matrix (not rescaled),
//! - `U` is the set of elements of the larger set left unmatched by `pi*`,
//! - `alpha >= 0` is the per-element count penalty.
//!
//! The solver is the shortest augmenting path method of Jonker and Volgenant
//! \[1\] in the rectangular form of Crouse \[2\] (the algorithm behind SciPy's
//! `linear_sum_assignment`): one Dijkstra-like search per row of the smaller
//! side, with dual potentials kept feasible, so the result is an optimal
//! assignment of the floating-point costs (no scaling, no epsilon). Where
//! several assignments are optimal (ties), [`linear_sum_assignment`] and
//! Hung-NN return SciPy's, searching rows in SciPy's order (Hung-NN's value
//! depends on which elements stay unmatched; `tests/hungarian_ties.rs`).
//! Hung-Pen's value depends only on the cost, so it first matches most rows
//! cheaply with the row reduction and augmenting row reduction of \[1\], and
//! searches only from the rows they leave free.
//!
//! References:
//! 1. R. Jonker, A. Volgenant (1987). A shortest augmenting path algorithm for
//!    dense and sparse linear assignment problems. *Computing* 38, 325–340.
//! 2. D. F. Crouse (2016). On implementing 2D rectangular assignment
//!    algorithms. *IEEE Trans. Aerospace and Electronic Systems* 52(4), 1679–1696.

use std::cell::RefCell;

use super::Evaluation;
use crate::cost::{CostMatrix, PairCost};
use crate::distance::logdomain::bad;
use crate::error::Result;

const NONE: usize = usize::MAX;

/// How an assignment is searched for. Where several assignments are optimal
/// they differ in which one they find; the cost is the same.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Order {
    /// SciPy's: one shortest augmenting path per row, in row order, so ties
    /// resolve to SciPy's assignment (Hung-NN's value and the matched pairs
    /// depend on it).
    Scipy,
    /// Row reduction and augmenting row reduction first (Jonker and
    /// Volgenant): faster, for values that depend only on the cost (Hung-Pen).
    Reduced,
}

/// Working memory of the solver, kept per thread: at report sizes (a dozen
/// rows) allocating it was a tenth of the solve.
#[derive(Default)]
struct Scratch {
    reals: Vec<f64>,
    indices: Vec<usize>,
    flags: Vec<bool>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::default();
}

/// Optimal assignment for an `nr x nc` cost given by `cost(i, j)`, `nr <= nc`.
/// Returns `(col4row, row4col)`: the column assigned to each row, and the
/// row assigned to each column (`NONE` for the `nc - nr` left free), in
/// `scratch`. Costs are finite (checked by [`linear_sum_assignment`]); the
/// fallback below only keeps a non-finite reduced cost from looping.
fn assign_rows<C: Fn(usize, usize) -> f64>(
    nr: usize,
    nc: usize,
    cost: C,
    scratch: &mut Scratch,
    order: Order,
) -> (&[usize], &[usize]) {
    debug_assert!(nr <= nc);
    let Scratch {
        reals,
        indices,
        flags,
    } = scratch;
    reals.clear();
    reals.resize(nr + 2 * nc, 0.0);
    let (u, rest) = reals.split_at_mut(nr);
    let (v, shortest) = rest.split_at_mut(nc);
    indices.clear();
    indices.resize(3 * nc + nr, NONE);
    let (path, rest) = indices.split_at_mut(nc);
    let (row4col, rest) = rest.split_at_mut(nc);
    let (remaining, col4row) = rest.split_at_mut(nc);
    flags.clear();
    flags.resize(nr + nc, false);
    let (in_sr, in_sc) = flags.split_at_mut(nr);

    if order == Order::Reduced {
        reduce_rows(nr, nc, &cost, u, v, row4col, col4row, remaining);
    }
    for cur_row in 0..nr {
        if col4row[cur_row] != NONE {
            continue;
        }
        // Dijkstra over columns from `cur_row`, reduced costs c - u - v >= 0.
        let mut min_val = 0.0f64;
        let mut num_remaining = nc;
        for (it, r) in remaining.iter_mut().enumerate() {
            // Reverse order, as SciPy, so ties resolve to the same columns.
            *r = nc - it - 1;
        }
        in_sr.iter_mut().for_each(|x| *x = false);
        in_sc.iter_mut().for_each(|x| *x = false);
        shortest.iter_mut().for_each(|x| *x = f64::INFINITY);

        let mut i = cur_row;
        let sink = loop {
            in_sr[i] = true;
            let mut index = NONE;
            let mut lowest = f64::INFINITY;
            for (it, &j) in remaining[..num_remaining].iter().enumerate() {
                let r = min_val + cost(i, j) - u[i] - v[j];
                if r < shortest[j] {
                    path[j] = i;
                    shortest[j] = r;
                }
                if shortest[j] < lowest || (shortest[j] == lowest && row4col[j] == NONE) {
                    lowest = shortest[j];
                    index = it;
                }
            }
            if index == NONE {
                // Only non-finite reduced costs left: take any column.
                index = 0;
                let j = remaining[0];
                if path[j] == NONE || !in_sr[path[j]] {
                    path[j] = i;
                }
                lowest = min_val;
                shortest[j] = lowest;
            }
            min_val = lowest;
            let j = remaining[index];
            in_sc[j] = true;
            num_remaining -= 1;
            remaining[index] = remaining[num_remaining];
            if row4col[j] == NONE {
                break j;
            }
            i = row4col[j];
        };

        // Dual update keeps reduced costs >= 0 and tight on the new path.
        u[cur_row] += min_val;
        for r in 0..nr {
            if in_sr[r] && r != cur_row {
                u[r] += min_val - shortest[col4row[r]];
            }
        }
        for c in 0..nc {
            if in_sc[c] {
                v[c] -= min_val - shortest[c];
            }
        }

        // Augment along the alternating path ending at `sink`.
        let mut j = sink;
        loop {
            let r = path[j];
            row4col[j] = r;
            std::mem::swap(&mut col4row[r], &mut j);
            if r == cur_row {
                break;
            }
        }
    }
    (col4row, row4col)
}

/// Jonker and Volgenant's first two phases: they match most rows cheaply,
/// so the searches of [`assign_rows`] start only from the rows they leave
/// free. Where several assignments are optimal they may pick another one
/// than SciPy's searches alone (the same cost).
#[allow(clippy::too_many_arguments)]
fn reduce_rows<C: Fn(usize, usize) -> f64>(
    nr: usize,
    nc: usize,
    cost: &C,
    u: &mut [f64],
    v: &mut [f64],
    row4col: &mut [usize],
    col4row: &mut [usize],
    remaining: &mut [usize],
) {
    // Row reduction: u_i = min_j c_ij, v = 0 keeps every reduced cost >= 0, and
    // a row whose cheapest column is still free takes it (a tight edge). The
    // shortest-path rounds below then start only from the other rows; the
    // invariants they need hold (feasible duals, matched edges tight, v = 0 on
    // free columns), so the result is still optimal. On sets of sentences most
    // rows' nearest neighbours differ, and the searches were most of the solve.
    for (i, ui) in u.iter_mut().enumerate() {
        let (mut best, mut arg) = (f64::INFINITY, NONE);
        for j in 0..nc {
            let c = cost(i, j);
            let below = c < best;
            arg = if below { j } else { arg };
            best = if below { c } else { best };
        }
        if !best.is_finite() {
            continue;
        }
        *ui = best;
        if row4col[arg] == NONE {
            row4col[arg] = i;
            col4row[i] = arg;
        }
    }

    // Augmenting row reduction (Jonker and Volgenant's second phase): a free
    // row takes its cheapest column under the current `v`, lowering that
    // column's `v` by the gap to the row's second-cheapest so the edge is
    // tight, and the column's previous row becomes free and goes next. Each
    // step keeps the invariants above (`v` only decreases, and only on
    // matched columns); rows still free after it go to the searches, which
    // cost a dozen row scans each.
    if nc >= 2 {
        let free = &mut remaining[..];
        let mut pending = 0;
        for i in 0..nr {
            if col4row[i] == NONE && u[i].is_finite() {
                free[pending] = i;
                pending += 1;
            }
        }
        // A bound against float rounding that would stop `v` from moving.
        let mut budget = 4 * nc;
        while pending > 0 && budget > 0 {
            budget -= 1;
            pending -= 1;
            let i = free[pending];
            let (mut u1, mut j1, mut u2, mut j2) = (f64::INFINITY, NONE, f64::INFINITY, NONE);
            for (j, &vj) in v.iter().enumerate() {
                let h = cost(i, j) - vj;
                // Selects, not branches: on fresh pairs the outcomes are random.
                let (below1, below2) = (h < u1, h < u2);
                j2 = if below1 {
                    j1
                } else if below2 {
                    j
                } else {
                    j2
                };
                u2 = if below1 {
                    u1
                } else if below2 {
                    h
                } else {
                    u2
                };
                j1 = if below1 { j } else { j1 };
                u1 = if below1 { h } else { u1 };
            }
            if !(u1.is_finite() && u2.is_finite()) {
                continue;
            }
            let mut owner = row4col[j1];
            if u1 < u2 {
                v[j1] -= u2 - u1;
            } else if owner != NONE {
                // A tie: the second column is as cheap.
                j1 = j2;
                owner = row4col[j1];
            }
            u[i] = u2;
            row4col[j1] = i;
            col4row[i] = j1;
            if owner != NONE {
                col4row[owner] = NONE;
                if u1 < u2 {
                    free[pending] = owner;
                    pending += 1;
                }
            }
        }
    }
}

/// Calls `pair(row, col)` for every matched pair of an optimal assignment of
/// `M`, by increasing row (so sums over the pairs keep one order).
fn for_each_match(m: &CostMatrix, order: Order, mut pair: impl FnMut(usize, usize)) -> Result<()> {
    if let Some(k) = m.data.iter().position(|x| !x.is_finite()) {
        return Err(bad(
            "hungarian",
            format!(
                "cost entry ({}, {}) is {}; costs must be finite",
                k / m.m,
                k % m.m,
                m.data[k]
            ),
        ));
    }
    if m.n == 0 || m.m == 0 {
        return Ok(());
    }
    let mut solve = |scratch: &mut Scratch| {
        if m.n <= m.m {
            let (col4row, _) = assign_rows(m.n, m.m, |i, j| m.data[i * m.m + j], scratch, order);
            col4row.iter().enumerate().for_each(|(i, &j)| pair(i, j));
        } else {
            // On M^T the columns are M's rows, in order.
            let (_, row4col) = assign_rows(m.m, m.n, |i, j| m.data[j * m.m + i], scratch, order);
            row4col
                .iter()
                .enumerate()
                .filter(|(_, &c)| c != NONE)
                .for_each(|(i, &j)| pair(i, j));
        }
    };
    SCRATCH.with(|s| match s.try_borrow_mut() {
        Ok(mut scratch) => solve(&mut scratch),
        // Only if `pair` itself solved an assignment: fresh memory then.
        Err(_) => solve(&mut Scratch::default()),
    });
    Ok(())
}

/// An optimal assignment: the matched pairs `(row, col)` sorted by row, and
/// the sum of their costs.
#[derive(Debug, Clone, PartialEq)]
pub struct Assignment {
    pub pairs: Vec<(usize, usize)>,
    pub cost: f64,
}

/// Optimal rectangular linear sum assignment of `M` (`n x m`).
///
/// $$\min_{\pi} \sum_{(i,j)\in\pi} M_{ij}$$ over injective matchings of size
/// `min(n, m)`: every row is matched when `n <= m`, every column otherwise.
///
/// Returns the matched pairs `(row, col)` sorted by row, like SciPy's
/// `linear_sum_assignment`, with their total cost; an empty matrix has the
/// empty assignment.
///
/// # Errors
/// [`crate::SdrError::BadMetricParameter`] (metric `hungarian`) naming the
/// first non-finite cost entry: the optimum of such costs is undefined.
///
/// ```
/// use sdr_core::distance::hungarian::linear_sum_assignment;
/// use sdr_core::CostMatrix;
/// let m = CostMatrix::new(2, 3, vec![0.9, 0.1, 0.5, 0.2, 0.3, 0.8]);
/// let a = linear_sum_assignment(&m).unwrap();
/// assert_eq!(a.pairs, vec![(0, 1), (1, 0)]);
/// assert!((a.cost - 0.3).abs() < 1e-15);
/// ```
pub fn linear_sum_assignment(m: &CostMatrix) -> Result<Assignment> {
    let mut pairs = Vec::with_capacity(m.n.min(m.m));
    for_each_match(m, Order::Scipy, |i, j| pairs.push((i, j)))?;
    let cost = pairs.iter().map(|&(i, j)| m.get(i, j)).sum();
    Ok(Assignment { pairs, cost })
}

/// The optimal assignment's total cost (summed by increasing row, as
/// [`linear_sum_assignment`]) without collecting its pairs.
fn matched_total(m: &CostMatrix, order: Order, mut also: impl FnMut(usize, usize)) -> Result<f64> {
    let mut total = -0.0;
    for_each_match(m, order, |i, j| {
        total += m.get(i, j);
        also(i, j);
    })?;
    Ok(total)
}

/// Hung-NN distance (paper Eq. hung-nn) on the raw cost matrix `M` (`n, m >= 1`).
///
/// $$\frac{1}{\max(n,m)}\Bigl[\sum_{i} M_{i,\pi^*(i)}
///   + \sum_{j\in\mathcal U}\min_{i} M_{ij}\Bigr]$$
///
/// where `pi*` is the optimal assignment of the smaller set and `U` the
/// unmatched elements of the larger set, each charged its nearest-neighbour
/// cost on the smaller side. Range `[0, 1]`.
///
/// ```
/// use sdr_core::distance::hungarian::hung_nn;
/// use sdr_core::CostMatrix;
/// // One element against two: match the cheaper, the other adds its NN cost.
/// let m = CostMatrix::new(1, 2, vec![0.2, 0.4]);
/// assert!((hung_nn(&m).unwrap() - 0.3).abs() < 1e-15);
/// ```
///
/// # Errors
/// As [`linear_sum_assignment`] (a non-finite cost).
pub fn hung_nn(m: &CostMatrix) -> Result<f64> {
    // Whether each element of the larger side is matched.
    let mut matched = vec![false; m.n.max(m.m)];
    // SciPy's search order: which elements stay unmatched under ties sets
    // the value, and parity with SciPy holds there too (SPEC §3, "Ties").
    let total = matched_total(m, Order::Scipy, |i, j| {
        matched[if m.n <= m.m { j } else { i }] = true
    })?;
    let mut extra = 0.0;
    if m.n <= m.m {
        for (j, _) in matched.iter().enumerate().filter(|(_, &k)| !k) {
            extra += (0..m.n).map(|i| m.get(i, j)).fold(f64::INFINITY, f64::min);
        }
    } else {
        for (i, _) in matched.iter().enumerate().filter(|(_, &k)| !k) {
            extra += m.row(i).iter().copied().fold(f64::INFINITY, f64::min);
        }
    }
    Ok((total + extra) / m.n.max(m.m) as f64)
}

/// Hung-Pen distance (paper Eq. hung-pen) on the raw cost matrix `M` (`n, m >= 1`).
///
/// $$\frac{1}{\min(n,m)}\sum_{i=1}^{\min(n,m)} M_{i,\pi^*(i)} + \alpha\,|n-m|$$
///
/// where `alpha >= 0` is the penalty per unmatched element. Not bounded by 1.
///
/// ```
/// use sdr_core::distance::hungarian::hung_pen;
/// use sdr_core::CostMatrix;
/// let m = CostMatrix::new(1, 3, vec![0.2, 0.4, 0.1]);
/// assert!((hung_pen(&m, 0.5).unwrap() - (0.1 + 0.5 * 2.0)).abs() < 1e-15);
/// ```
///
/// # Errors
/// As [`linear_sum_assignment`] (a non-finite cost).
pub fn hung_pen(m: &CostMatrix, alpha: f64) -> Result<f64> {
    let total = matched_total(m, Order::Reduced, |_, _| ())?;
    Ok(total / m.n.min(m.m) as f64 + alpha * m.n.abs_diff(m.m) as f64)
}

/// The family's entry in the metric registry (`distance/spec.rs`).
pub(crate) fn evaluate_nn(cost: &PairCost<'_>) -> Result<Evaluation> {
    Ok(Evaluation::exact(hung_nn(&cost.cross)?))
}

/// The penalised family's entry in the metric registry.
pub(crate) fn evaluate_pen(cost: &PairCost<'_>, alpha: f64) -> Result<Evaluation> {
    super::spec::check_range("hung-pen", "alpha", alpha, super::spec::ALPHA_RANGE)?;
    Ok(Evaluation::exact(hung_pen(&cost.cross, alpha)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::lcg;

    /// Exhaustive minimum over injective maps of the smaller side.
    fn brute_force(m: &CostMatrix) -> f64 {
        let (small, large, t) = if m.n <= m.m {
            (m.n, m.m, false)
        } else {
            (m.m, m.n, true)
        };
        fn rec(
            k: usize,
            small: usize,
            large: usize,
            used: &mut Vec<bool>,
            c: &dyn Fn(usize, usize) -> f64,
        ) -> f64 {
            if k == small {
                return 0.0;
            }
            let mut best = f64::INFINITY;
            for j in 0..large {
                if !used[j] {
                    used[j] = true;
                    best = best.min(c(k, j) + rec(k + 1, small, large, used, c));
                    used[j] = false;
                }
            }
            best
        }
        let c = |i: usize, j: usize| if t { m.get(j, i) } else { m.get(i, j) };
        rec(0, small, large, &mut vec![false; large], &c)
    }

    #[test]
    fn matches_brute_force_with_ties_and_shared_nearest_columns() {
        // Few distinct values: many rows share their cheapest column (the row
        // reduction's greedy start leaves them to the shortest-path rounds) and
        // optimal assignments tie.
        let mut seed = 29u64;
        for n in 1..=7 {
            for m in 1..=7 {
                for levels in [2.0, 3.0, 5.0] {
                    for _ in 0..40 {
                        let data = (0..n * m)
                            .map(|_| (lcg(&mut seed) * levels).floor() / levels)
                            .collect();
                        let c = CostMatrix::new(n, m, data);
                        let a = linear_sum_assignment(&c).unwrap();
                        assert_eq!(a.pairs.len(), n.min(m));
                        let mut cols: Vec<_> = a.pairs.iter().map(|p| p.1).collect();
                        cols.sort_unstable();
                        cols.dedup();
                        assert_eq!(cols.len(), n.min(m), "{n}x{m}: a column used twice");
                        assert!((a.cost - brute_force(&c)).abs() < 1e-12, "{n}x{m}: {c:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn matches_brute_force_on_random_rectangles() {
        let mut seed = 7u64;
        for n in 1..=6 {
            for m in 1..=6 {
                for _ in 0..5 {
                    let data = (0..n * m).map(|_| lcg(&mut seed)).collect();
                    let c = CostMatrix::new(n, m, data);
                    let pairs = linear_sum_assignment(&c).unwrap().pairs;
                    assert_eq!(pairs.len(), n.min(m));
                    let mut rows: Vec<_> = pairs.iter().map(|p| p.0).collect();
                    let mut cols: Vec<_> = pairs.iter().map(|p| p.1).collect();
                    rows.dedup();
                    cols.sort_unstable();
                    cols.dedup();
                    assert_eq!((rows.len(), cols.len()), (n.min(m), n.min(m)));
                    let total: f64 = pairs.iter().map(|&(i, j)| c.get(i, j)).sum();
                    assert!((total - brute_force(&c)).abs() < 1e-12, "{n}x{m}");
                }
            }
        }
    }

    #[test]
    fn recovers_a_permutation() {
        // Cost 0 on a hidden permutation, positive elsewhere.
        let perm = [3usize, 0, 4, 1, 2];
        let mut data = vec![0.0; 25];
        let mut seed = 11u64;
        for i in 0..5 {
            for j in 0..5 {
                data[i * 5 + j] = if perm[i] == j {
                    0.0
                } else {
                    0.1 + lcg(&mut seed)
                };
            }
        }
        let c = CostMatrix::new(5, 5, data);
        let pairs = linear_sum_assignment(&c).unwrap().pairs;
        assert_eq!(pairs, perm.iter().copied().enumerate().collect::<Vec<_>>());
        assert_eq!(hung_nn(&c).unwrap(), 0.0);
        assert_eq!(hung_pen(&c, 0.5).unwrap(), 0.0);
    }

    #[test]
    fn transposed_problem_gives_the_same_values() {
        let mut seed = 3u64;
        for (n, m) in [(2, 5), (4, 3), (1, 6), (6, 1), (3, 3)] {
            let c = CostMatrix::new(n, m, (0..n * m).map(|_| lcg(&mut seed)).collect());
            let t = c.transpose();
            assert!((hung_nn(&c).unwrap() - hung_nn(&t).unwrap()).abs() < 1e-15);
            assert!((hung_pen(&c, 0.1).unwrap() - hung_pen(&t, 0.1).unwrap()).abs() < 1e-15);
        }
    }

    #[test]
    fn nearest_neighbour_fallback_and_penalty() {
        // Rows are the larger side: row 2 is unmatched and adds min(0.7, 0.6).
        let c = CostMatrix::new(3, 2, vec![0.1, 0.9, 0.8, 0.2, 0.7, 0.6]);
        assert_eq!(
            linear_sum_assignment(&c).unwrap().pairs,
            vec![(0, 0), (1, 1)]
        );
        assert!((hung_nn(&c).unwrap() - (0.1 + 0.2 + 0.6) / 3.0).abs() < 1e-15);
        assert!((hung_pen(&c, 0.1).unwrap() - (0.15 + 0.1)).abs() < 1e-15);
    }

    #[test]
    fn non_finite_costs_are_an_error_naming_the_entry() {
        let c = CostMatrix::new(2, 3, vec![1.0, 1.0, f64::INFINITY, 0.0, f64::NAN, 2.0]);
        let err = linear_sum_assignment(&c).unwrap_err().to_string();
        assert!(err.contains("(0, 2)") && err.contains("inf"), "{err}");
        assert!(hung_nn(&c).is_err() && hung_pen(&c, 0.1).is_err());
        let empty = linear_sum_assignment(&CostMatrix::new(0, 3, Vec::new())).unwrap();
        assert_eq!((empty.pairs.len(), empty.cost), (0, 0.0));
    }
}
