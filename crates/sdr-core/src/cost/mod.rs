//! Sets of embeddings and the cosine cost matrix.
//!
//! $$d(u,v) = \tfrac12\Bigl(1 - \frac{u^\top v}{\|u\|_2\|v\|_2}\Bigr) \in \[0,1\],
//! \qquad M_{ij} = d(a_i, b_j)$$
//!
//! SPEC §3. Vectors need not be unit-norm; zero, NaN or infinite vectors are errors.

use std::borrow::Cow;
use std::ops::Range;

use crate::error::{Result, SdrError, Side};

pub mod clinical;
pub use clinical::CostKind;
pub mod gram;
mod kernel;
pub mod named;
pub use named::NamedCost;

/// Why a vector cannot enter a cosine cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowFault {
    NotFinite,
    Zero,
}

impl std::fmt::Display for RowFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RowFault::NotFinite => "not finite",
            RowFault::Zero => "the zero vector",
        })
    }
}

impl RowFault {
    /// The error naming the row.
    pub fn error(self, set: Side, row: usize) -> SdrError {
        match self {
            RowFault::NotFinite => SdrError::NonFiniteVector { set, row },
            RowFault::Zero => SdrError::ZeroVector { set, row },
        }
    }
}

/// What is wrong with a row, if anything: the one vector check of the
/// workspace (sets here, Gram rows in [`gram::inverse_norms`]).
pub fn row_fault<T: Copy + Into<f64>>(row: &[T]) -> Option<RowFault> {
    if row.iter().any(|&x| !x.into().is_finite()) {
        Some(RowFault::NotFinite)
    } else if row.iter().all(|&x| x.into() == 0.0) {
        Some(RowFault::Zero)
    } else {
        None
    }
}

/// The element type of a set's rows: `f64`, or `f32` as encoders emit it.
///
/// Products of two `f32` values are exact in `f64`, so an `f32` set is
/// compared in the same f64 arithmetic as its `f64` copy (same cosines to
/// ~1e-16) while moving half the bytes: no widened copy is made. Sealed: the
/// SIMD kernels exist for these two types only.
pub trait Element: Copy + Into<f64> + Send + Sync + sealed::Sealed + 'static {
    #[doc(hidden)]
    fn dots(a: &[Self], b: &[Self], dim: usize, out: &mut [f64]);
    #[doc(hidden)]
    fn self_dot(x: &[Self]) -> f64;
    /// `dots` plus, with `sq`, the rows' squared norms in one pass, bringing
    /// the rows of `next` into L2 meanwhile; `false` if unavailable.
    #[doc(hidden)]
    fn dots_with_norms(
        a: &[Self],
        b: &[Self],
        dim: usize,
        out: &mut [f64],
        sq: Option<(&mut [f64], &mut [f64])>,
        next: [&[Self]; 2],
    ) -> bool;
    /// Whether a squared norm of this type can leave the range where
    /// `1 / sqrt` is accurate (f64 only: f32 squares stay within 1e-90..1e77).
    #[doc(hidden)]
    const MAY_NEED_RESCALE: bool;
    #[doc(hidden)]
    fn from_f64(x: f64) -> Self;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f64 {}
    impl Sealed for f32 {}
}

impl Element for f64 {
    fn dots(a: &[f64], b: &[f64], dim: usize, out: &mut [f64]) {
        kernel::dots(a, b, dim, out)
    }
    fn self_dot(x: &[f64]) -> f64 {
        kernel::self_dot(x)
    }
    fn dots_with_norms(
        a: &[f64],
        b: &[f64],
        dim: usize,
        out: &mut [f64],
        sq: Option<(&mut [f64], &mut [f64])>,
        next: [&[f64]; 2],
    ) -> bool {
        kernel::dots_with_norms(a, b, dim, out, sq, next)
    }
    const MAY_NEED_RESCALE: bool = true;
    fn from_f64(x: f64) -> f64 {
        x
    }
}

impl Element for f32 {
    fn dots(a: &[f32], b: &[f32], dim: usize, out: &mut [f64]) {
        kernel::dots_f32(a, b, dim, out)
    }
    fn self_dot(x: &[f32]) -> f64 {
        kernel::self_dot_f32(x)
    }
    fn dots_with_norms(
        a: &[f32],
        b: &[f32],
        dim: usize,
        out: &mut [f64],
        sq: Option<(&mut [f64], &mut [f64])>,
        next: [&[f32]; 2],
    ) -> bool {
        kernel::dots_with_norms_f32(a, b, dim, out, sq, next)
    }
    const MAY_NEED_RESCALE: bool = false;
    fn from_f64(x: f64) -> f32 {
        x as f32
    }
}

/// A borrowed set of `n` vectors of dimension `dim`, stored row-major, of
/// `f64` (the default) or `f32` elements.
#[derive(Debug, Clone, Copy)]
pub struct SetView<'a, T = f64> {
    pub data: &'a [T],
    pub n: usize,
    pub dim: usize,
}

impl<'a, T> SetView<'a, T> {
    /// Wrap a row-major buffer; `data.len()` must equal `n * dim`.
    pub fn new(data: &'a [T], dim: usize) -> Self {
        let n = data.len().checked_div(dim).unwrap_or(0);
        SetView { data, n, dim }
    }

    pub fn row(&self, i: usize) -> &'a [T] {
        &self.data[i * self.dim..(i + 1) * self.dim]
    }
}

/// An owned set of vectors (row-major), validated on construction.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddingSet {
    data: Vec<f64>,
    dim: usize,
}

impl EmbeddingSet {
    /// Build from rows, checking that the set is non-empty, rows share one
    /// dimension, and every row is finite and non-zero.
    pub fn from_rows(rows: &[Vec<f64>], set: Side) -> Result<Self> {
        let first = rows.first().ok_or(SdrError::EmptySet { set })?;
        let dim = first.len();
        let mut data = Vec::with_capacity(rows.len() * dim);
        for (row, v) in rows.iter().enumerate() {
            if v.len() != dim {
                return Err(SdrError::DimensionMismatch {
                    set,
                    row,
                    expected: dim,
                    got: v.len(),
                });
            }
            data.extend_from_slice(v);
        }
        Self::from_flat(data, dim, set)
    }

    /// Build from a row-major buffer with the same checks as [`Self::from_rows`].
    pub fn from_flat(data: Vec<f64>, dim: usize, set: Side) -> Result<Self> {
        if dim == 0 || data.is_empty() {
            return Err(SdrError::EmptySet { set });
        }
        for (row, v) in data.chunks(dim).enumerate() {
            if v.len() != dim {
                return Err(SdrError::DimensionMismatch {
                    set,
                    row,
                    expected: dim,
                    got: v.len(),
                });
            }
            if let Some(fault) = row_fault(v) {
                return Err(fault.error(set, row));
            }
        }
        Ok(EmbeddingSet { data, dim })
    }

    pub fn view(&self) -> SetView<'_> {
        SetView::new(&self.data, self.dim)
    }
    pub fn len(&self) -> usize {
        self.data.len() / self.dim
    }
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    pub fn dim(&self) -> usize {
        self.dim
    }
}

/// Largest `max(M)` that counts as `max(M) = 0` (SPEC §3: the OT family is
/// then 0, GW intra-set costs all-zero). Cosines of parallel vectors are 1
/// only up to rounding, so `M` of two sets of parallel vectors is ~1e-16 rather
/// than 0, and `M / max(M)` would blow that noise up to order one (a singleton
/// compared with itself could score 1). Distinct sentences are never within
/// cosine distance 1e-12 of each other.
pub const ZERO_COST_TOL: f64 = 1e-12;

/// A dense `n x m` cost matrix, row-major.
///
/// The fields are private so that `data.len() == n * m` always holds: the
/// metrics' vector paths read rows by that length.
#[derive(Debug, Clone, PartialEq)]
pub struct CostMatrix {
    pub(crate) n: usize,
    pub(crate) m: usize,
    pub(crate) data: Vec<f64>,
    /// The OT family's `max(M)` when it is not this matrix's own maximum:
    /// the clinical cost keeps its cosine part's (`clinical.rs`). `None`
    /// for every cosine cost.
    pub(crate) scale: Option<f64>,
}

impl CostMatrix {
    /// # Panics
    /// When `data.len() != n * m`; [`CostMatrix::try_new`] returns an error
    /// instead.
    pub fn new(n: usize, m: usize, data: Vec<f64>) -> Self {
        assert_eq!(data.len(), n * m, "cost matrix buffer has the wrong length");
        CostMatrix {
            n,
            m,
            data,
            scale: None,
        }
    }

    /// [`CostMatrix::new`] for buffers from outside (a file, a caller).
    ///
    /// # Errors
    /// [`SdrError::CostShape`] when `data.len() != n * m`.
    pub fn try_new(n: usize, m: usize, data: Vec<f64>) -> Result<Self> {
        if n.checked_mul(m) != Some(data.len()) {
            return Err(SdrError::CostShape {
                n,
                m,
                len: data.len(),
            });
        }
        Ok(CostMatrix {
            n,
            m,
            data,
            scale: None,
        })
    }

    /// Rows (elements of the first set).
    #[inline]
    pub fn n(&self) -> usize {
        self.n
    }

    /// Columns (elements of the second set).
    #[inline]
    pub fn m(&self) -> usize {
        self.m
    }

    /// The costs, row-major (`n * m` values).
    #[inline]
    pub fn data(&self) -> &[f64] {
        &self.data
    }

    /// The buffer, row-major.
    pub fn into_data(self) -> Vec<f64> {
        self.data
    }

    #[inline]
    pub fn get(&self, i: usize, j: usize) -> f64 {
        self.data[i * self.m + j]
    }

    pub fn row(&self, i: usize) -> &[f64] {
        &self.data[i * self.m..(i + 1) * self.m]
    }

    pub fn max(&self) -> f64 {
        self.data.iter().copied().fold(0.0, f64::max)
    }

    /// What the OT family divides by, SPEC §3's `max(M)`: the maximum
    /// itself, except for a clinical cost, which keeps its cosine part's
    /// ([`clinical::penalized`]) so that its penalty is not divided away.
    pub fn scale(&self) -> f64 {
        self.scale.unwrap_or_else(|| self.max())
    }

    /// The transpose, `M^T` (`m x n`).
    pub fn transpose(&self) -> CostMatrix {
        let mut data = vec![0.0; self.n * self.m];
        for i in 0..self.n {
            for j in 0..self.m {
                data[j * self.n + i] = self.get(i, j);
            }
        }
        CostMatrix {
            scale: self.scale,
            ..CostMatrix::new(self.m, self.n, data)
        }
    }

    /// `M / max(M)` as used by the OT family; `None` when `max(M) = 0`
    /// (identical sets up to scale), where every OT-family distance is 0.
    /// "Zero" means at most [`ZERO_COST_TOL`], see there.
    pub fn normalized(&self) -> Option<CostMatrix> {
        let mx = self.scale();
        if mx <= ZERO_COST_TOL {
            return None;
        }
        Some(CostMatrix::new(
            self.n,
            self.m,
            self.data.iter().map(|x| x / mx).collect(),
        ))
    }
}

/// The rows of a set ready for cosines: the rows themselves (borrowed) and
/// their inverse norms. An f64 row whose squared norm is not a normal number
/// well inside the range (huge like 1e200, tiny like 1e-300) is replaced, in
/// an owned copy, by itself scaled by its largest component, so its norm
/// neither overflows nor underflows; cosines do not change with scale.
fn prepared<'a, T: Element>(s: &SetView<'a, T>) -> (Cow<'a, [T]>, Vec<f64>) {
    let rows: &'a [T] = &s.data[..s.n * s.dim];
    let mut inv = Vec::with_capacity(s.n);
    if !T::MAY_NEED_RESCALE {
        inv.extend(
            rows.chunks_exact(s.dim.max(1))
                .map(|r| 1.0 / T::self_dot(r).sqrt()),
        );
        return (Cow::Borrowed(rows), inv);
    }
    let mut rows = Cow::Borrowed(rows);
    for i in 0..s.n {
        let row = s.row(i);
        let sq = T::self_dot(row);
        if norm_in_range(&sq) {
            inv.push(1.0 / sq.sqrt());
            continue;
        }
        // Only f64 rows get here; go through f64 for the scaling.
        let mut seg: Vec<f64> = row.iter().map(|&x| x.into()).collect();
        let scale = seg.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        let inv_scale = 1.0 / scale;
        if inv_scale.is_finite() {
            seg.iter_mut().for_each(|x| *x *= inv_scale);
        } else {
            // Subnormal largest component: its reciprocal overflows.
            seg.iter_mut().for_each(|x| *x /= scale);
        }
        inv.push(1.0 / kernel::self_dot(&seg).sqrt());
        let owned = rows.to_mut();
        for (dst, src) in owned[i * s.dim..(i + 1) * s.dim].iter_mut().zip(&seg) {
            *dst = T::from_f64(*src);
        }
    }
    (rows, inv)
}

/// The cost of a raw product `dot = a . b` given `1/|a|` and `1/|b|`: the
/// one formula of every exact cost (the inverse norms' product first, so
/// the cost is symmetric in its arguments bit for bit).
///
/// A cost of at most [`ZERO_COST_TOL`] is returned as exactly 0: a row
/// compared with itself has a cosine of 1 only up to rounding (`|a|^2 *
/// (1/|a|)^2` is a few ulps off 1), and SPEC §3 asks every metric to give
/// 0 for identical sets, so a reward of `1 - d` is exactly 1 for a section
/// equal to its reference. The same bound decides `max(M) = 0`.
#[inline]
fn cost_of(dot: f64, inv_a: f64, inv_b: f64) -> f64 {
    let d = ((1.0 - dot * (inv_a * inv_b)) * 0.5).clamp(0.0, 1.0);
    if d <= ZERO_COST_TOL {
        0.0
    } else {
        d
    }
}

/// Whether the fused kernels (AVX-512) run here: without them a batch's
/// shared norms would go unused.
pub(crate) fn fused_kernels() -> bool {
    kernel::fused_available()
}

/// The squared norms `x . x` of the rows of `s`, each the bits that
/// [`cosine_cost`] accumulates for that row in its own tiles, so a batch can
/// compute them once for a set that several pairs share
/// ([`cosine_cost_normed`]). `None` where the fused kernels are missing
/// (no AVX-512): the costs then come from [`cosine_cost`]'s other path.
pub fn squared_norms<T: Element>(s: &SetView<'_, T>) -> Option<Vec<f64>> {
    if !fused_kernels() || s.dim == 0 {
        return None;
    }
    let mut out = [0.0];
    Some(
        s.data[..s.n * s.dim]
            .chunks_exact(s.dim)
            .map(|r| {
                // A 1 x 1 block: the chain of the fused tiles' norms.
                T::dots(r, r, s.dim, &mut out);
                out[0]
            })
            .collect(),
    )
}

/// [`cosine_cost_ahead`] from the rows' squared norms computed beforehand
/// ([`squared_norms`]): the tiles compute the products only. Same values as
/// [`cosine_cost`], bit for bit.
pub fn cosine_cost_normed<T: Element>(
    a: &SetView<'_, T>,
    b: &SetView<'_, T>,
    sq_a: &[f64],
    sq_b: &[f64],
    next: Option<(&SetView<'_, T>, &SetView<'_, T>)>,
) -> CostMatrix {
    normed_vouched(a, b, sq_a, sq_b, next).0
}

/// [`cosine_cost_normed`], and whether every row's norm vouched for it.
fn normed_vouched<T: Element>(
    a: &SetView<'_, T>,
    b: &SetView<'_, T>,
    sq_a: &[f64],
    sq_b: &[f64],
    next: Option<(&SetView<'_, T>, &SetView<'_, T>)>,
) -> (CostMatrix, bool) {
    assert_eq!(a.dim, b.dim, "sets of different dimension");
    assert!(
        sq_a.len() == a.n && sq_b.len() == b.n,
        "norms of the wrong length"
    );
    if sq_a.iter().chain(sq_b).all(norm_in_range) {
        let mut data = vec![0.0; a.n * b.n];
        let (ra, rb) = (&a.data[..a.n * a.dim], &b.data[..b.n * b.dim]);
        if T::dots_with_norms(ra, rb, a.dim, &mut data, None, rows_of(next)) {
            let inv: Vec<f64> = sq_a.iter().chain(sq_b).map(|s| 1.0 / s.sqrt()).collect();
            let (ia, ib) = inv.split_at(a.n);
            scale_to_costs(&mut data, ia, ib);
            return (CostMatrix::new(a.n, b.n, data), true);
        }
    }
    ahead_vouched(a, b, next)
}

/// Whether `1 / sqrt` of a squared norm is accurate as it is (huge or tiny
/// f64 rows take `prepared`). A squared norm in this range also vouches for
/// its row: a NaN or infinite component would make it NaN or infinite (the
/// squares cannot cancel), an all-zero row would make it 0.
fn norm_in_range(sq: &f64) -> bool {
    (1e-200..=1e200).contains(sq)
}

/// The rows of the pair a batch computes next, for the kernels to fetch
/// (empty for none).
fn rows_of<'a, T>(next: Option<(&SetView<'a, T>, &SetView<'a, T>)>) -> [&'a [T]; 2] {
    next.map_or([&[][..], &[][..]], |(x, y)| {
        [&x.data[..x.n * x.dim], &y.data[..y.n * y.dim]]
    })
}

/// Raw products in `data` (rows of `inv_b.len()`) to costs, in place.
fn scale_to_costs(data: &mut [f64], inv_a: &[f64], inv_b: &[f64]) {
    for (row, &x) in data.chunks_exact_mut(inv_b.len().max(1)).zip(inv_a) {
        for (c, &y) in row.iter_mut().zip(inv_b) {
            *c = cost_of(*c, x, y);
        }
    }
}

/// Cosine cost matrix `M[i][j] = (1 - cos(a_i, b_j)) / 2`, clamped to `[0, 1]`
/// against rounding. Raw products run in f64 SIMD (see `kernel`; f32 rows are
/// widened in registers) and are scaled by `1/|a_i| * 1/|b_j|` (that product
/// first, so `M(A, B)` is exactly the transpose of `M(B, A)`): no unit-norm
/// copy of the rows is made.
///
/// Inputs must already be validated (see [`EmbeddingSet`]); the dimensions of
/// `a` and `b` must agree.
pub fn cosine_cost<T: Element>(a: &SetView<'_, T>, b: &SetView<'_, T>) -> CostMatrix {
    cosine_cost_ahead(a, b, None)
}

/// [`cosine_cost`] that also brings the rows of `next` (the pair a batch
/// computes next) into L2 while the products run, so that pair does not
/// wait on memory. Same values, bit for bit.
pub fn cosine_cost_ahead<T: Element>(
    a: &SetView<'_, T>,
    b: &SetView<'_, T>,
    next: Option<(&SetView<'_, T>, &SetView<'_, T>)>,
) -> CostMatrix {
    ahead_vouched(a, b, next).0
}

/// [`cosine_cost_ahead`], and whether every row's norm vouched for it (see
/// [`norm_in_range`]); rows it did not vouch for are the caller's to check.
fn ahead_vouched<T: Element>(
    a: &SetView<'_, T>,
    b: &SetView<'_, T>,
    next: Option<(&SetView<'_, T>, &SetView<'_, T>)>,
) -> (CostMatrix, bool) {
    assert_eq!(a.dim, b.dim, "sets of different dimension");
    let mut data = vec![0.0; a.n * b.n];
    let mut norms = vec![0.0; a.n + b.n];
    let (sq_a, sq_b) = norms.split_at_mut(a.n);
    let (ra, rb) = (&a.data[..a.n * a.dim], &b.data[..b.n * b.dim]);
    // Norms from the products' own pass; squares outside the range where
    // `1 / sqrt` is accurate (huge or tiny f64 rows) take `prepared` below.
    if T::dots_with_norms(ra, rb, a.dim, &mut data, Some((sq_a, sq_b)), rows_of(next))
        && norms.iter().all(norm_in_range)
    {
        norms.iter_mut().for_each(|s| *s = 1.0 / s.sqrt());
        let (ia, ib) = norms.split_at(a.n);
        scale_to_costs(&mut data, ia, ib);
        return (CostMatrix::new(a.n, b.n, data), true);
    }
    let (ra, ia) = prepared(a);
    let (rb, ib) = prepared(b);
    T::dots(&ra, &rb, a.dim, &mut data);
    scale_to_costs(&mut data, &ia, &ib);
    (CostMatrix::new(a.n, b.n, data), false)
}

/// The cost matrices one pair of sets needs: the cross cost `M = d(A, B)`
/// and, for GW, the intra-set costs `d(A, A)` and `d(B, B)`.
///
/// Built from two sets ([`PairCost::between`]), from blocks of a
/// precomputed Gram matrix ([`PairCost::from_gram`], what the corpus uses),
/// or around matrices the caller already holds ([`PairCost::borrowed`]).
/// Every metric reads it through [`crate::Metric::evaluate`].
#[derive(Debug, Clone)]
pub struct PairCost<'a> {
    pub cross: Cow<'a, CostMatrix>,
    pub intra: Option<(Cow<'a, CostMatrix>, Cow<'a, CostMatrix>)>,
}

impl PairCost<'static> {
    /// Cosine costs of two sets; the intra matrices only when `with_intra`
    /// (GW needs them).
    ///
    /// The rows need not be validated beforehand (as [`EmbeddingSet`]
    /// does): the squared norms that the products' pass computes vouch for
    /// the rows, and rows they do not vouch for (out of range, or no fused
    /// kernels) are checked one by one, so a batch of borrowed rows costs no
    /// extra pass over memory.
    ///
    /// # Errors
    /// An empty set, sets of different dimension, or a row that is not
    /// finite or is the zero vector.
    pub fn between<T: Element>(
        a: &SetView<'_, T>,
        b: &SetView<'_, T>,
        with_intra: bool,
    ) -> Result<Self> {
        Self::between_ahead(a, b, with_intra, None)
    }

    /// [`PairCost::between`] that brings the rows of `next` into L2 while
    /// the cross products run (see [`cosine_cost_ahead`]).
    pub fn between_ahead<T: Element>(
        a: &SetView<'_, T>,
        b: &SetView<'_, T>,
        with_intra: bool,
        next: Option<(&SetView<'_, T>, &SetView<'_, T>)>,
    ) -> Result<Self> {
        Self::checked(a, b, with_intra, || ahead_vouched(a, b, next))
    }

    /// [`PairCost::between_ahead`] from the rows' squared norms computed
    /// beforehand (see [`cosine_cost_normed`]).
    pub fn between_normed<T: Element>(
        a: &SetView<'_, T>,
        b: &SetView<'_, T>,
        (sq_a, sq_b): (&[f64], &[f64]),
        with_intra: bool,
        next: Option<(&SetView<'_, T>, &SetView<'_, T>)>,
    ) -> Result<Self> {
        Self::checked(a, b, with_intra, || normed_vouched(a, b, sq_a, sq_b, next))
    }

    /// The pair's checks, then `cross()`, the rows its norms did not vouch
    /// for, and, when `with_intra`, the intra costs.
    fn checked<T: Element>(
        a: &SetView<'_, T>,
        b: &SetView<'_, T>,
        with_intra: bool,
        cross: impl FnOnce() -> (CostMatrix, bool),
    ) -> Result<Self> {
        check_pair(a, b)?;
        let (cross, vouched) = cross();
        if !vouched {
            check_rows(a, Side::A)?;
            check_rows(b, Side::B)?;
        }
        Ok(PairCost {
            cross: Cow::Owned(cross),
            intra: with_intra
                .then(|| (Cow::Owned(cosine_cost(a, a)), Cow::Owned(cosine_cost(b, b)))),
        })
    }

    /// Blocks of a Gram matrix of raw dot products: rows `a` and `b` of the
    /// `stride`-column matrix `dots`, with the inverse row norms `inv`
    /// (see [`gram`]). The intra blocks only when `with_intra`.
    pub fn from_gram(
        dots: &[f32],
        stride: usize,
        inv: &[f64],
        a: Range<usize>,
        b: Range<usize>,
        with_intra: bool,
    ) -> Self {
        let block = |r: &Range<usize>, c: &Range<usize>| {
            let mut data = Vec::with_capacity(r.len() * c.len());
            for i in r.clone() {
                for j in c.clone() {
                    data.push(gram::cost(dots[i * stride + j], inv[i], inv[j]));
                }
            }
            Cow::Owned(CostMatrix::new(r.len(), c.len(), data))
        };
        let intra = |r: &Range<usize>| {
            let inv = &inv[r.clone()];
            let at = |i: usize, j: usize| dots[(r.start + i) * stride + r.start + j];
            Cow::Owned(gram::intra_cost(r.len(), inv, at))
        };
        PairCost {
            cross: block(&a, &b),
            intra: with_intra.then(|| (intra(&a), intra(&b))),
        }
    }
}

impl<'a> PairCost<'a> {
    /// Around matrices the caller holds (cached intra costs, say).
    pub fn borrowed(
        cross: &'a CostMatrix,
        intra: Option<(&'a CostMatrix, &'a CostMatrix)>,
    ) -> Self {
        PairCost {
            cross: Cow::Borrowed(cross),
            intra: intra.map(|(a, b)| (Cow::Borrowed(a), Cow::Borrowed(b))),
        }
    }
}

/// The first row of `s` that cannot enter a cosine cost, as an error.
fn check_rows<T: Element>(s: &SetView<'_, T>, set: Side) -> Result<()> {
    for (row, v) in s.data[..s.n * s.dim].chunks_exact(s.dim.max(1)).enumerate() {
        if let Some(fault) = row_fault(v) {
            return Err(fault.error(set, row));
        }
    }
    Ok(())
}

/// Check that two sets can be compared; errors name the offending set.
pub fn check_pair<T>(a: &SetView<'_, T>, b: &SetView<'_, T>) -> Result<()> {
    // A hand-built view may claim rows of dimension 0.
    if a.n == 0 || a.dim == 0 {
        return Err(SdrError::EmptySet { set: Side::A });
    }
    if b.n == 0 || b.dim == 0 {
        return Err(SdrError::EmptySet { set: Side::B });
    }
    if a.dim != b.dim {
        return Err(SdrError::DimensionMismatch {
            set: Side::B,
            row: 0,
            expected: a.dim,
            got: b.dim,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn try_new_refuses_a_buffer_of_the_wrong_length() {
        let ok = CostMatrix::try_new(2, 3, vec![0.5; 6]).unwrap();
        assert_eq!((ok.n(), ok.m(), ok.data().len()), (2, 3, 6));
        assert_eq!(ok.row(1), &[0.5; 3]);
        let err = CostMatrix::try_new(2, 3, vec![0.5; 5]).unwrap_err();
        assert_eq!(err, SdrError::CostShape { n: 2, m: 3, len: 5 });
        assert_eq!(err.to_string(), "cost matrix of 2 x 3 holds 5 values");
        // n * m overflows: refused, not wrapped to a small length.
        assert!(CostMatrix::try_new(usize::MAX, 2, vec![0.0; 2]).is_err());
        assert!(CostMatrix::try_new(0, 7, Vec::new())
            .unwrap()
            .into_data()
            .is_empty());
    }

    #[test]
    fn cost_of_identical_and_opposite_vectors() {
        let a = EmbeddingSet::from_rows(&[vec![1.0, 0.0], vec![0.0, 2.0]], Side::A).unwrap();
        let b = EmbeddingSet::from_rows(&[vec![-3.0, 0.0]], Side::B).unwrap();
        let m = cosine_cost(&a.view(), &b.view());
        assert_eq!((m.n, m.m), (2, 1));
        assert!((m.get(0, 0) - 1.0).abs() < 1e-15);
        assert!((m.get(1, 0) - 0.5).abs() < 1e-15);
    }

    #[test]
    fn extreme_magnitudes_keep_their_direction() {
        let a = EmbeddingSet::from_rows(&[vec![1e200, 1e200], vec![1e-300, 0.0]], Side::A).unwrap();
        let b = EmbeddingSet::from_rows(&[vec![1.0, 1.0]], Side::B).unwrap();
        let m = cosine_cost(&a.view(), &b.view());
        assert!(m.get(0, 0).abs() < 1e-15);
        let expected = (1.0 - 0.5f64.sqrt()) / 2.0;
        assert!((m.get(1, 0) - expected).abs() < 1e-15);
    }

    #[test]
    fn subnormal_rows_keep_their_direction() {
        // 1 / 5e-324 overflows: the division fallback of `prepared`.
        let a =
            EmbeddingSet::from_rows(&[vec![5e-324, 0.0], vec![-5e-324, 5e-324]], Side::A).unwrap();
        let b = EmbeddingSet::from_rows(&[vec![1.0, 0.0]], Side::B).unwrap();
        let m = cosine_cost(&a.view(), &b.view());
        assert_eq!(m.get(0, 0), 0.0);
        let expected = (1.0 + 0.5f64.sqrt()) / 2.0;
        assert!((m.get(1, 0) - expected).abs() < 1e-15);
    }

    #[test]
    fn cost_is_exactly_transposed_and_matches_a_naive_cosine() {
        let mut seed = 17;
        let dim = 771;
        let rows = |k: usize, seed: &mut u64| -> Vec<f64> {
            (0..k * dim)
                .map(|_| crate::test_support::lcg(seed) - 0.3)
                .collect()
        };
        let (a, b) = (rows(5, &mut seed), rows(9, &mut seed));
        let (va, vb) = (SetView::new(&a, dim), SetView::new(&b, dim));
        let ab = cosine_cost(&va, &vb);
        let ba = cosine_cost(&vb, &va);
        assert_eq!(ab, ba.transpose());
        for i in 0..5 {
            for j in 0..9 {
                let (x, y) = (va.row(i), vb.row(j));
                let dot: f64 = x.iter().zip(y).map(|(p, q)| p * q).sum();
                let nx = x.iter().map(|p| p * p).sum::<f64>().sqrt();
                let ny = y.iter().map(|p| p * p).sum::<f64>().sqrt();
                let want = (1.0 - dot / (nx * ny)) / 2.0;
                assert!((ab.get(i, j) - want).abs() < 1e-14);
            }
        }
        // The diagonal of a set against itself is exactly zero (SPEC §3),
        // on f64 rows and on the f32 rows an encoder emits.
        let aa = cosine_cost(&va, &va);
        assert!((0..5).all(|i| aa.get(i, i) == 0.0), "{aa:?}");
        let narrow: Vec<f32> = a.iter().map(|&x| x as f32).collect();
        let va32 = SetView::new(&narrow, dim);
        let aa32 = cosine_cost(&va32, &va32);
        assert!((0..5).all(|i| aa32.get(i, i) == 0.0), "{aa32:?}");
    }

    #[test]
    fn f32_sets_cost_what_their_f64_widening_costs() {
        let mut seed = 23;
        let dim = 768;
        let rows = |k: usize, seed: &mut u64| -> Vec<f32> {
            (0..k * dim)
                .map(|_| (crate::test_support::lcg(seed) - 0.4) as f32)
                .collect()
        };
        let (a, b) = (rows(7, &mut seed), rows(10, &mut seed));
        let wide = |v: &[f32]| v.iter().map(|&x| f64::from(x)).collect::<Vec<_>>();
        let (wa, wb) = (wide(&a), wide(&b));
        let narrow = cosine_cost(&SetView::new(&a, dim), &SetView::new(&b, dim));
        let widened = cosine_cost(&SetView::new(&wa, dim), &SetView::new(&wb, dim));
        assert_eq!(narrow, widened);
    }

    #[test]
    fn costs_from_norms_computed_beforehand_are_the_same_bits() {
        let mut seed = 29;
        for dim in [5, 768, 771] {
            for (n, m) in [(1, 1), (3, 7), (4, 4), (9, 12)] {
                let a: Vec<f32> = (0..n * dim)
                    .map(|_| (crate::test_support::lcg(&mut seed) - 0.45) as f32)
                    .collect();
                let b: Vec<f64> = (0..m * dim)
                    .map(|_| crate::test_support::lcg(&mut seed) - 0.55)
                    .collect();
                let wide: Vec<f64> = a.iter().map(|&x| f64::from(x)).collect();
                let (va, vw, vb) = (
                    SetView::new(&a, dim),
                    SetView::new(&wide, dim),
                    SetView::new(&b, dim),
                );
                let Some(sa) = squared_norms(&va) else {
                    return; // no AVX-512: batches take cosine_cost's path
                };
                let sw = squared_norms(&vw).unwrap();
                let sb = squared_norms(&vb).unwrap();
                assert_eq!(sa, sw, "f32 norms are those of the widened rows");
                let fused = cosine_cost(&vw, &vb);
                assert_eq!(cosine_cost_normed(&vw, &vb, &sw, &sb, None), fused);
                assert_eq!(
                    cosine_cost_normed(&va, &va, &sa, &sa, None),
                    cosine_cost(&va, &va)
                );
                // Rows out of the range where norms are used as they are.
                let huge: Vec<f64> = b.iter().map(|x| x * 1e150).collect();
                let vh = SetView::new(&huge, dim);
                let sh = squared_norms(&vh).unwrap();
                assert_eq!(
                    cosine_cost_normed(&vw, &vh, &sw, &sh, None),
                    cosine_cost(&vw, &vh)
                );
            }
        }
    }

    #[test]
    fn rejects_bad_rows() {
        assert_eq!(
            EmbeddingSet::from_rows(&[], Side::A),
            Err(SdrError::EmptySet { set: Side::A })
        );
        assert!(matches!(
            EmbeddingSet::from_rows(&[vec![1.0, f64::NAN]], Side::B),
            Err(SdrError::NonFiniteVector {
                set: Side::B,
                row: 0
            })
        ));
        assert!(matches!(
            EmbeddingSet::from_rows(&[vec![1.0], vec![0.0]], Side::A),
            Err(SdrError::ZeroVector { row: 1, .. })
        ));
        assert!(matches!(
            EmbeddingSet::from_rows(&[vec![1.0], vec![0.0, 1.0]], Side::A),
            Err(SdrError::DimensionMismatch { row: 1, .. })
        ));
    }
}
