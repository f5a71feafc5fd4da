//! Sets of embeddings and the cosine cost matrix.
//!
//! $$d(u,v) = \tfrac12\Bigl(1 - \frac{u^\top v}{\|u\|_2\|v\|_2}\Bigr) \in [0,1],
//! \qquad M_{ij} = d(a_i, b_j)$$
//!
//! SPEC §3. Vectors need not be unit-norm; zero, NaN or infinite vectors are errors.

use crate::error::{Result, SdrError, Side};

/// A borrowed set of `n` vectors of dimension `dim`, stored row-major.
#[derive(Debug, Clone, Copy)]
pub struct SetView<'a> {
    pub data: &'a [f64],
    pub n: usize,
    pub dim: usize,
}

impl<'a> SetView<'a> {
    /// Wrap a row-major buffer; `data.len()` must equal `n * dim`.
    pub fn new(data: &'a [f64], dim: usize) -> Self {
        let n = data.len().checked_div(dim).unwrap_or(0);
        SetView { data, n, dim }
    }

    pub fn row(&self, i: usize) -> &'a [f64] {
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
            if v.iter().any(|x| !x.is_finite()) {
                return Err(SdrError::NonFiniteVector { set, row });
            }
            if v.iter().all(|&x| x == 0.0) {
                return Err(SdrError::ZeroVector { set, row });
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
#[derive(Debug, Clone, PartialEq)]
pub struct CostMatrix {
    pub n: usize,
    pub m: usize,
    pub data: Vec<f64>,
}

impl CostMatrix {
    pub fn new(n: usize, m: usize, data: Vec<f64>) -> Self {
        assert_eq!(data.len(), n * m, "cost matrix buffer has the wrong length");
        CostMatrix { n, m, data }
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

    /// The transpose, `M^T` (`m x n`).
    pub fn transpose(&self) -> CostMatrix {
        let mut data = vec![0.0; self.n * self.m];
        for i in 0..self.n {
            for j in 0..self.m {
                data[j * self.n + i] = self.get(i, j);
            }
        }
        CostMatrix::new(self.m, self.n, data)
    }

    /// `M / max(M)` as used by the OT family; `None` when `max(M) = 0`
    /// (identical sets up to scale), where every OT-family distance is 0.
    /// "Zero" means at most [`ZERO_COST_TOL`], see there.
    pub fn normalized(&self) -> Option<CostMatrix> {
        let mx = self.max();
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

/// Rows scaled to unit norm. Scaling by the largest component first keeps
/// the norm finite for huge (1e200) and non-zero for tiny (1e-300) vectors.
/// Multiplies by reciprocals (one division per row, not two per component:
/// divisions dominated the whole cost matrix at 768 dimensions).
fn unit_rows(s: &SetView<'_>) -> Vec<f64> {
    let mut out = Vec::with_capacity(s.n * s.dim);
    for i in 0..s.n {
        let row = s.row(i);
        let scale = row.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        let inv_scale = 1.0 / scale;
        let start = out.len();
        if inv_scale.is_finite() {
            out.extend(row.iter().map(|x| x * inv_scale));
        } else {
            // Subnormal largest component: its reciprocal overflows.
            out.extend(row.iter().map(|x| x / scale));
        }
        let seg = &mut out[start..];
        let inv_norm = 1.0 / dot(seg, seg).sqrt();
        seg.iter_mut().for_each(|y| *y *= inv_norm);
    }
    out
}

#[inline]
fn dot(a: &[f64], b: &[f64]) -> f64 {
    // Four accumulators let the compiler vectorise without reassociation flags.
    let mut acc = [0.0f64; 4];
    let chunks = a.len() / 4;
    for k in 0..chunks {
        for l in 0..4 {
            acc[l] += a[4 * k + l] * b[4 * k + l];
        }
    }
    let mut s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    for k in chunks * 4..a.len() {
        s += a[k] * b[k];
    }
    s
}

/// Cosine cost matrix `M[i][j] = (1 - cos(a_i, b_j)) / 2`, clamped to `[0, 1]`
/// against rounding.
///
/// Inputs must already be validated (see [`EmbeddingSet`]); the dimensions of
/// `a` and `b` must agree.
pub fn cosine_cost(a: &SetView<'_>, b: &SetView<'_>) -> CostMatrix {
    assert_eq!(a.dim, b.dim, "sets of different dimension");
    let ua = unit_rows(a);
    let ub = unit_rows(b);
    let d = a.dim;
    let mut data = Vec::with_capacity(a.n * b.n);
    for ai in ua.chunks_exact(d) {
        for bj in ub.chunks_exact(d) {
            let c = dot(ai, bj);
            data.push(((1.0 - c) * 0.5).clamp(0.0, 1.0));
        }
    }
    CostMatrix::new(a.n, b.n, data)
}

/// Check that two sets can be compared; errors name the offending set.
pub fn check_pair(a: &SetView<'_>, b: &SetView<'_>) -> Result<()> {
    if a.n == 0 {
        return Err(SdrError::EmptySet { set: Side::A });
    }
    if b.n == 0 {
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
        // 1 / 5e-324 overflows: the division fallback of `unit_rows`.
        let a =
            EmbeddingSet::from_rows(&[vec![5e-324, 0.0], vec![-5e-324, 5e-324]], Side::A).unwrap();
        let b = EmbeddingSet::from_rows(&[vec![1.0, 0.0]], Side::B).unwrap();
        let m = cosine_cost(&a.view(), &b.view());
        assert_eq!(m.get(0, 0), 0.0);
        let expected = (1.0 + 0.5f64.sqrt()) / 2.0;
        assert!((m.get(1, 0) - expected).abs() < 1e-15);
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
