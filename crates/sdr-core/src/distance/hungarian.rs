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
//! cheaply with the row reduction and augmenting row reduction of \[1\]
//! (with AVX-512 on sets of up to 16 elements, the same choices), and
//! searches only from the rows they leave free.
//!
//! References:
//! 1. R. Jonker, A. Volgenant (1987). A shortest augmenting path algorithm for
//!    dense and sparse linear assignment problems. *Computing* 38, 325–340.
//! 2. D. F. Crouse (2016). On implementing 2D rectangular assignment
//!    algorithms. *IEEE Trans. Aerospace and Electronic Systems* 52(4), 1679–1696.

use std::cell::RefCell;

use super::params::{check_range, ALPHA_RANGE};
use super::stop::Stop;
use super::Evaluation;
use crate::cost::{CostMatrix, PairCost};
use crate::distance::logdomain::bad;
use crate::error::{Result, SdrError};

const NONE: usize = usize::MAX;

/// The largest |cost| for which [`Order::Reduced`] runs: its differences and
/// their sums in `v` stay far from overflow (cosine costs are in [0, 1]).
const REDUCED_MAX: f64 = 1e300;

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
    /// The costs as the vector reductions read them ([`pad_rows`]).
    padded: Vec<Lanes>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::default();
}

/// Optimal assignment for an `nr x nc` cost given by `cost(i, j)`, `nr <= nc`.
/// Returns `(col4row, row4col)`: the column assigned to each row, and the
/// row assigned to each column (`NONE` for the `nc - nr` left free), in
/// `scratch`. Costs are finite (checked by [`linear_sum_assignment`]); the
/// fallback below only keeps a non-finite reduced cost from looping.
/// `None` once `stop` is set (read before each row's search, which scans at
/// least `nc` reduced costs; a read in the loop over all rows slowed the
/// report-sized Hung-Pen, whose reductions leave no search, by 5%).
fn assign_rows<'s, C: Fn(usize, usize) -> f64>(
    nr: usize,
    nc: usize,
    cost: C,
    scratch: &'s mut Scratch,
    order: Order,
    padded: Option<&[Lanes]>,
    stop: Stop<'_>,
) -> Option<(&'s [usize], &'s [usize])> {
    debug_assert!(nr <= nc);
    let Scratch {
        reals,
        indices,
        flags,
        ..
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

    match (order, padded) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `padded` is only given where `wide::available()`.
        (Order::Reduced, Some(rows)) => unsafe {
            debug_assert!(wide::available() && nc <= LANES);
            wide::reduce(rows, u, v, row4col, col4row, remaining)
        },
        #[cfg(not(target_arch = "x86_64"))]
        (Order::Reduced, Some(_)) => unreachable!(),
        (Order::Reduced, None) => reduce_rows(nr, nc, &cost, u, v, row4col, col4row, remaining),
        (Order::Scipy, _) => {}
    }
    for cur_row in 0..nr {
        if col4row[cur_row] != NONE {
            continue;
        }
        if stop.is_set() {
            return None;
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
    Some((col4row, row4col))
}

/// Jonker and Volgenant's first two phases with scalar scans of the
/// columns (see [`reductions`]).
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
    let first_min = |i: usize| {
        let (mut best, mut arg) = (f64::INFINITY, NONE);
        for j in 0..nc {
            let c = cost(i, j);
            let below = c < best;
            arg = if below { j } else { arg };
            best = if below { c } else { best };
        }
        (arg, best)
    };
    let two_min = |v: &[f64], i: usize| {
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
        (j1, u1, j2, u2)
    };
    let lower = |v: &mut [f64], j: usize, gap: f64| v[j] -= gap;
    reductions(
        nr, nc, v, first_min, two_min, lower, u, row4col, col4row, remaining,
    );
}

/// Jonker and Volgenant's first two phases: they match most rows cheaply,
/// so the searches of [`assign_rows`] start only from the rows they leave
/// free. Where several assignments are optimal they may pick another one
/// than SciPy's searches alone (the same cost).
///
/// The scans of a row are given: `first_min(i)`, the first cheapest column
/// of row `i` and its cost; `two_min(v, i)`, the two smallest reduced costs
/// `c_ij - v_j` of row `i` (`(j1, u1, j2, u2)`: `u1` at its first column
/// `j1`, `u2` the smallest of the other columns at its first column `j2`);
/// `lower(v, j, gap)`, `v_j -= gap`. `v` starts at 0 on every column.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn reductions<V: ?Sized>(
    nr: usize,
    nc: usize,
    v: &mut V,
    first_min: impl Fn(usize) -> (usize, f64),
    two_min: impl Fn(&V, usize) -> (usize, f64, usize, f64),
    lower: impl Fn(&mut V, usize, f64),
    u: &mut [f64],
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
    for (i, ui) in u.iter_mut().enumerate().take(nr) {
        let (arg, best) = first_min(i);
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
    if nc < 2 {
        return;
    }
    let free = remaining;
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
        let (mut j1, u1, j2, u2) = two_min(v, i);
        if !(u1.is_finite() && u2.is_finite()) {
            continue;
        }
        let mut owner = row4col[j1];
        if u1 < u2 {
            lower(v, j1, u2 - u1);
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

/// Columns of the vector reductions ([`wide`]): the larger side of a
/// report's sections (3-12 sentences) fits, padded with `+inf`.
const LANES: usize = 16;
type Lanes = [f64; LANES];

/// [`reduce_rows`] with each row's minimum (and the two smallest entries in
/// the augmenting row reduction) found by AVX-512 over all [`LANES`]
/// columns at once. On fresh pairs a scalar scan waited on its compare chain
/// and mispredicted its exit once per row; the reductions were most of
/// Hung-Pen's solve. The same choices, tie for tie: the first of equal
/// minima, as a scan with `<` keeps it, so the same assignment.
#[cfg(target_arch = "x86_64")]
mod wide {
    use super::{Lanes, LANES};
    use std::arch::x86_64::*;

    pub(super) fn available() -> bool {
        std::arch::is_x86_feature_detected!("avx512f")
    }

    /// The smallest of 16 lanes and the first lane that holds it.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn first_min(lo: __m512d, hi: __m512d) -> (usize, f64) {
        let m = _mm512_reduce_min_pd(_mm512_min_pd(lo, hi));
        let b = _mm512_set1_pd(m);
        let bits = u32::from(_mm512_cmp_pd_mask::<_CMP_EQ_OQ>(lo, b))
            | (u32::from(_mm512_cmp_pd_mask::<_CMP_EQ_OQ>(hi, b)) << 8);
        // Costs are finite (checked before), so some lane equals the minimum.
        ((bits.trailing_zeros() as usize) % LANES, m)
    }

    /// The two smallest of 16 lanes, `(j1, u1, j2, u2)`: `u1` the minimum at
    /// its first lane `j1`, `u2` the smallest of the other lanes at its first
    /// lane `j2` (`u2 == u1` on a tie). One pass of sorted-pair merges: the
    /// second minimum's search does not wait on the first's.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn two_min(lo: __m512d, hi: __m512d) -> (usize, f64, usize, f64) {
        // Per lane the smaller and larger of a pair; each step merges two
        // sorted pairs (a1, a2), (b1, b2) into min(a1, b1) and
        // min(max(a1, b1), min(a2, b2)).
        let (mut a, mut b) = (_mm512_min_pd(lo, hi), _mm512_max_pd(lo, hi));
        macro_rules! merge {
            ($swap:expr) => {{
                let (sa, sb) = ($swap(a), $swap(b));
                b = _mm512_min_pd(_mm512_max_pd(a, sa), _mm512_min_pd(b, sb));
                a = _mm512_min_pd(a, sa);
            }};
        }
        merge!(|x| _mm512_shuffle_f64x2::<0b01_00_11_10>(x, x));
        merge!(|x| _mm512_shuffle_f64x2::<0b10_11_00_01>(x, x));
        merge!(|x| _mm512_permute_pd::<0b0101_0101>(x));
        let lanes = |x: __m512d| {
            u32::from(_mm512_cmp_pd_mask::<_CMP_EQ_OQ>(lo, x))
                | (u32::from(_mm512_cmp_pd_mask::<_CMP_EQ_OQ>(hi, x)) << 8)
        };
        let j1 = (lanes(a).trailing_zeros() as usize) % LANES;
        let j2 = ((lanes(b) & !(1 << j1)).trailing_zeros() as usize) % LANES;
        (j1, _mm512_cvtsd_f64(a), j2, _mm512_cvtsd_f64(b))
    }

    /// `v.len()` (the columns) is at most [`LANES`]; more would panic.
    ///
    /// # Safety
    /// AVX-512F must be available ([`available`]).
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn reduce(
        rows: &[Lanes],
        u: &mut [f64],
        v: &mut [f64],
        row4col: &mut [usize],
        col4row: &mut [usize],
        remaining: &mut [usize],
    ) {
        let (nr, nc) = (rows.len(), v.len());
        let load = |i: usize| {
            // SAFETY: each row holds LANES = 16 values.
            unsafe {
                (
                    _mm512_loadu_pd(rows[i].as_ptr()),
                    _mm512_loadu_pd(rows[i].as_ptr().add(8)),
                )
            }
        };
        // v = 0 on every column (padding included) until the loop moves it.
        let mut vv = (_mm512_setzero_pd(), _mm512_setzero_pd());
        super::reductions(
            nr,
            nc,
            &mut vv,
            |i| {
                let (lo, hi) = load(i);
                first_min(lo, hi)
            },
            |&(v_lo, v_hi), i| {
                let (lo, hi) = load(i);
                two_min(_mm512_sub_pd(lo, v_lo), _mm512_sub_pd(hi, v_hi))
            },
            |(v_lo, v_hi), j, gap| {
                let (k, gap) = (1u32 << j, _mm512_set1_pd(gap));
                *v_lo = _mm512_mask_sub_pd(*v_lo, k as u8, *v_lo, gap);
                *v_hi = _mm512_mask_sub_pd(*v_hi, (k >> 8) as u8, *v_hi, gap);
            },
            u,
            row4col,
            col4row,
            remaining,
        );
        let (v_lo, v_hi) = vv;
        let mut all = [0.0; LANES];
        // SAFETY: `all` holds 16 values.
        unsafe {
            _mm512_storeu_pd(all.as_mut_ptr(), v_lo);
            _mm512_storeu_pd(all.as_mut_ptr().add(8), v_hi);
        }
        v.copy_from_slice(&all[..nc]);
    }
}

/// The rows of `M`'s smaller side (`M` or `M^T`) into `rows`, padded with
/// `+inf` to [`LANES`] columns; `M` has at most `LANES` rows and columns.
fn pad_rows(m: &CostMatrix, rows: &mut Vec<Lanes>) {
    rows.clear();
    rows.resize(m.n.min(m.m), [f64::INFINITY; LANES]);
    if m.n <= m.m {
        for (row, costs) in rows.iter_mut().zip(m.data.chunks_exact(m.m)) {
            row[..m.m].copy_from_slice(costs);
        }
    } else {
        for (i, costs) in m.data.chunks_exact(m.m).enumerate() {
            for (row, &x) in rows.iter_mut().zip(costs) {
                row[i] = x;
            }
        }
    }
}

fn wide_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    return wide::available();
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// `f` on this thread's solver memory.
fn with_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    SCRATCH.with(|s| match s.try_borrow_mut() {
        Ok(mut scratch) => f(&mut scratch),
        // Only if `pair` itself solved an assignment: fresh memory then.
        Err(_) => f(&mut Scratch::default()),
    })
}

/// `pair(row, col)` for the matches of an assignment of `M`'s smaller side
/// (`M^T` when `M` has more rows), by increasing row of `M`.
fn emit(m: &CostMatrix, col4row: &[usize], row4col: &[usize], pair: &mut impl FnMut(usize, usize)) {
    if m.n <= m.m {
        col4row.iter().enumerate().for_each(|(i, &j)| pair(i, j));
    } else {
        // On M^T the columns are M's rows, in order.
        row4col
            .iter()
            .enumerate()
            .filter(|(_, &c)| c != NONE)
            .for_each(|(i, &j)| pair(i, j));
    }
}

/// Calls `pair(row, col)` for every matched pair of an optimal assignment of
/// `M`, by increasing row (so sums over the pairs keep one order), unless
/// `stop` is set first.
fn for_each_match(
    m: &CostMatrix,
    order: Order,
    stop: Stop<'_>,
    mut pair: impl FnMut(usize, usize),
) -> Result<()> {
    // One pass with no early exit (it vectorises), false on NaN and inf too;
    // the non-finite entry is looked for only when it fails.
    let moderate = m
        .data
        .iter()
        .fold(true, |ok, x| ok & (x.abs() <= REDUCED_MAX));
    let bad_entry = (!moderate)
        .then(|| m.data.iter().position(|x| !x.is_finite()))
        .flatten();
    if let Some(k) = bad_entry {
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
    // The reductions subtract costs and accumulate the differences in `v`;
    // near f64::MAX that overflows (a reduced cost of -inf hung the search or
    // sent it past the end), so such costs take SciPy's search alone.
    let order = if moderate { order } else { Order::Scipy };
    let (small, large) = (m.n.min(m.m), m.n.max(m.m));
    // Report-sized sets: the vector reductions, on the smaller side's rows
    // copied and padded to LANES columns (whole-row loads, no strides).
    if order == Order::Reduced && large <= LANES && wide_available() {
        with_scratch(|scratch| {
            // Taken out of `scratch` while the solver borrows the rest.
            let mut rows = std::mem::take(&mut scratch.padded);
            pad_rows(m, &mut rows);
            let found = assign_rows(
                small,
                large,
                |i, j| rows[i][j],
                scratch,
                order,
                Some(&rows),
                stop,
            )
            .map(|(col4row, row4col)| emit(m, col4row, row4col, &mut pair))
            .ok_or(SdrError::Stopped);
            scratch.padded = rows;
            found
        })
    } else if m.n <= m.m {
        with_scratch(|scratch| {
            let cost = |i, j| m.data[i * m.m + j];
            let (col4row, row4col) =
                assign_rows(m.n, m.m, cost, scratch, order, None, stop).ok_or(SdrError::Stopped)?;
            emit(m, col4row, row4col, &mut pair);
            Ok(())
        })
    } else {
        with_scratch(|scratch| {
            let cost = |i, j| m.data[j * m.m + i];
            let (col4row, row4col) =
                assign_rows(m.m, m.n, cost, scratch, order, None, stop).ok_or(SdrError::Stopped)?;
            emit(m, col4row, row4col, &mut pair);
            Ok(())
        })
    }
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
    for_each_match(m, Order::Scipy, Stop::NEVER, |i, j| pairs.push((i, j)))?;
    let cost = pairs.iter().map(|&(i, j)| m.get(i, j)).sum();
    Ok(Assignment { pairs, cost })
}

/// The optimal assignment's total cost (summed by increasing row, as
/// [`linear_sum_assignment`]) without collecting its pairs.
fn matched_total(
    m: &CostMatrix,
    order: Order,
    stop: Stop<'_>,
    mut also: impl FnMut(usize, usize),
) -> Result<f64> {
    let mut total = -0.0;
    for_each_match(m, order, stop, |i, j| {
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
    hung_nn_until(m, Stop::NEVER)
}

/// [`hung_nn`], or [`crate::SdrError::Stopped`] once `stop` is set.
fn hung_nn_until(m: &CostMatrix, stop: Stop<'_>) -> Result<f64> {
    // Whether each element of the larger side is matched.
    let mut matched = vec![false; m.n.max(m.m)];
    // SciPy's search order: which elements stay unmatched under ties sets
    // the value, and parity with SciPy holds there too (SPEC §3, "Ties").
    let total = matched_total(m, Order::Scipy, stop, |i, j| {
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
    hung_pen_until(m, alpha, Stop::NEVER)
}

/// [`hung_pen`], or [`crate::SdrError::Stopped`] once `stop` is set.
fn hung_pen_until(m: &CostMatrix, alpha: f64, stop: Stop<'_>) -> Result<f64> {
    let total = matched_total(m, Order::Reduced, stop, |_, _| ())?;
    Ok(total / m.n.min(m.m) as f64 + alpha * m.n.abs_diff(m.m) as f64)
}

/// The family's entry in the metric registry (`distance/spec.rs`).
pub(crate) fn evaluate_nn(cost: &PairCost<'_>, stop: Stop<'_>) -> Result<Evaluation> {
    Ok(Evaluation::exact(hung_nn_until(&cost.cross, stop)?))
}

/// The penalised family's entry in the metric registry.
pub(crate) fn evaluate_pen(cost: &PairCost<'_>, stop: Stop<'_>, alpha: f64) -> Result<Evaluation> {
    check_range("hung-pen", "alpha", alpha, ALPHA_RANGE)?;
    Ok(Evaluation::exact(hung_pen_until(&cost.cross, alpha, stop)?))
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

    /// The reduced search's matched pairs (by row of `m`): through the
    /// vector reductions where they run, or the scalar ones.
    fn reduced_pairs(m: &CostMatrix, scalar: bool) -> Vec<(usize, usize)> {
        let mut pairs = Vec::new();
        if scalar {
            let mut scratch = Scratch::default();
            let t = m.transpose();
            let (small, large) = if m.n <= m.m { (m, false) } else { (&t, true) };
            let (col4row, _) = assign_rows(
                small.n,
                small.m,
                |i, j| small.get(i, j),
                &mut scratch,
                Order::Reduced,
                None,
                Stop::NEVER,
            )
            .unwrap();
            pairs.extend(col4row.iter().enumerate().map(|(i, &j)| (i, j)));
            if large {
                pairs = pairs.iter().map(|&(i, j)| (j, i)).collect();
                pairs.sort_unstable();
            }
        } else {
            for_each_match(m, Order::Reduced, Stop::NEVER, |i, j| pairs.push((i, j))).unwrap();
        }
        pairs
    }

    #[test]
    fn vector_reductions_choose_as_the_scalar_ones() {
        // Up to LANES columns (the vector path), one past it (scalar either
        // way); few distinct levels make ties, where the first minimum wins.
        if !wide_available() {
            eprintln!("no AVX-512 here: both sides run the scalar reductions");
        }
        let mut seed = 31u64;
        for n in 1..=LANES + 1 {
            for m in [1, 2, 3, 7, 12, LANES, LANES + 1] {
                for levels in [2.0, 4.0, 0.0] {
                    for _ in 0..12 {
                        let data = (0..n * m)
                            .map(|_| {
                                let x = lcg(&mut seed);
                                if levels > 0.0 {
                                    (x * levels).floor() / levels
                                } else {
                                    x
                                }
                            })
                            .collect();
                        let c = CostMatrix::new(n, m, data);
                        let (wide, scalar) = (reduced_pairs(&c, false), reduced_pairs(&c, true));
                        assert_eq!(wide, scalar, "{n}x{m}: {c:?}");
                        let total: f64 = wide.iter().map(|&(i, j)| c.get(i, j)).sum();
                        let want = linear_sum_assignment(&c).unwrap().cost;
                        assert!((total - want).abs() < 1e-12, "{n}x{m}: {total} vs {want}");
                        if n.max(m) <= 7 {
                            assert!((total - brute_force(&c)).abs() < 1e-12, "{n}x{m}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn huge_costs_neither_hang_nor_panic() {
        // Finite costs near f64::MAX overflowed the reductions' differences
        // (a hang, or an index out of bounds); such matrices take SciPy's
        // search. Costs of one scale up to 1e300 cannot overflow a sum and
        // the optimum is checked; beyond, only that a value comes back.
        let mut seed = 37u64;
        let moderate = [1e300, -1e300, 5e299, -2.5e299, 0.0, 7.5e299];
        let extreme = [f64::MAX, -f64::MAX, 1e308, -1e300, 0.0, 1.0];
        for (levels, exact) in [(&moderate, true), (&extreme, false)] {
            for n in 1..=6 {
                for m in 1..=6 {
                    for _ in 0..60 {
                        let data = (0..n * m)
                            .map(|_| levels[(lcg(&mut seed) * levels.len() as f64) as usize])
                            .collect();
                        let c = CostMatrix::new(n, m, data);
                        let got = hung_pen(&c, 0.0).unwrap() * n.min(m) as f64;
                        hung_nn(&c).unwrap();
                        let want = brute_force(&c);
                        if exact {
                            let tol = 1e-12 * 1e300;
                            assert!((got - want).abs() <= tol, "{n}x{m}: {got} vs {want}: {c:?}");
                        }
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

    #[test]
    fn searches_read_the_stop_flag() {
        use crate::SdrError;
        use std::sync::atomic::AtomicBool;
        let (set, unset) = (AtomicBool::new(true), AtomicBool::new(false));
        let mut seed = 15u64;
        // The vector reductions' sizes, and the scalar ones past LANES.
        for (n, m) in [(5, 9), (12, 16), (16, 12), (20, 30), (40, 25)] {
            let c = CostMatrix::new(n, m, (0..n * m).map(|_| lcg(&mut seed)).collect());
            // SciPy's order searches from every row.
            assert_eq!(hung_nn_until(&c, Stop::on(&set)), Err(SdrError::Stopped));
            assert_eq!(hung_nn_until(&c, Stop::on(&unset)), hung_nn(&c));
            // Hung-Pen's reductions may match every row (no search to
            // stop): then the value, never another number.
            let pen = hung_pen(&c, 0.5);
            let stopped = hung_pen_until(&c, 0.5, Stop::on(&set));
            assert!(
                stopped == Err(SdrError::Stopped) || stopped == pen,
                "{n}x{m}"
            );
            assert_eq!(hung_pen_until(&c, 0.5, Stop::on(&unset)), pen);
        }
        // Identical rows: the augmenting row reduction runs out of its
        // budget, and searches match the rest.
        for (n, m) in [(8, 12), (30, 30)] {
            let c = CostMatrix::new(n, m, (0..n * m).map(|k| (k % m) as f64).collect());
            let stopped = hung_pen_until(&c, 0.5, Stop::on(&set));
            assert_eq!(stopped, Err(SdrError::Stopped), "{n}x{m}");
            let pen = hung_pen_until(&c, 0.5, Stop::on(&unset));
            assert_eq!(pen, hung_pen(&c, 0.5));
        }
    }
}
