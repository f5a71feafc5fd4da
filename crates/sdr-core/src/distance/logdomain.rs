//! Input checks and log-domain helpers shared by the entropic solvers
//! (Sinkhorn, unbalanced Sinkhorn, entropic GW).

use crate::error::{Result, SdrError};

pub(crate) fn bad(metric: &str, message: String) -> SdrError {
    SdrError::BadMetricParameter {
        metric: metric.to_string(),
        message,
    }
}

/// Input checks shared by the balanced solvers (also used by GW).
pub(crate) fn check_masses(
    metric: &str,
    n: usize,
    m: usize,
    p: &[f64],
    q: &[f64],
    eps: f64,
) -> Result<()> {
    if !(eps.is_finite() && eps > 0.0) {
        return Err(bad(
            metric,
            format!("`eps` must be a finite number > 0, got {eps}"),
        ));
    }
    if n == 0 || m == 0 {
        return Err(bad(metric, format!("empty cost matrix ({n} x {m})")));
    }
    if p.len() != n || q.len() != m {
        return Err(bad(
            metric,
            format!(
                "masses of length {} and {} for a {n} x {m} problem",
                p.len(),
                q.len()
            ),
        ));
    }
    if let Some((k, x)) = p
        .iter()
        .chain(q)
        .enumerate()
        .find(|(_, x)| !(x.is_finite() && **x > 0.0))
    {
        return Err(bad(
            metric,
            format!("mass {k} is {x}; masses must be finite and > 0"),
        ));
    }
    Ok(())
}

/// `out = A^T x` for `A` row-major `rows x cols`, as a sum of scaled rows
/// (axpy form, which vectorises; a dot-product form would not, as float
/// sums may not be reordered). `K v` is computed from a stored `K^T`.
#[inline]
pub(crate) fn mul_transposed(a: &[f64], rows: usize, cols: usize, x: &[f64], out: &mut [f64]) {
    out.fill(0.0);
    let out = &mut out[..cols];
    // Four rows per pass: `out` is loaded and stored a quarter as often.
    let mut r = 0;
    while r + 4 <= rows {
        let (x0, x1, x2, x3) = (x[r], x[r + 1], x[r + 2], x[r + 3]);
        let a0 = &a[r * cols..(r + 1) * cols];
        let a1 = &a[(r + 1) * cols..(r + 2) * cols];
        let a2 = &a[(r + 2) * cols..(r + 3) * cols];
        let a3 = &a[(r + 3) * cols..(r + 4) * cols];
        for c in 0..cols {
            out[c] += (x0 * a0[c] + x1 * a1[c]) + (x2 * a2[c] + x3 * a3[c]);
        }
        r += 4;
    }
    for r in r..rows {
        let xr = x[r];
        for (o, &ar) in out.iter_mut().zip(&a[r * cols..(r + 1) * cols]) {
            *o += xr * ar;
        }
    }
}

/// Transpose of a row-major `rows x cols` buffer into `out` (`cols x rows`).
#[inline]
pub(crate) fn transpose_into(a: &[f64], rows: usize, cols: usize, out: &mut [f64]) {
    for r in 0..rows {
        for c in 0..cols {
            out[c * rows + r] = a[r * cols + c];
        }
    }
}

/// Numerically stable `log(sum_k exp(x_k))` over an iterator of finite values.
pub(crate) fn log_sum_exp(xs: impl Iterator<Item = f64> + Clone) -> f64 {
    let mx = xs.clone().fold(f64::NEG_INFINITY, f64::max);
    if mx == f64::NEG_INFINITY {
        return mx;
    }
    mx + xs.map(|x| (x - mx).exp()).sum::<f64>().ln()
}

/// The stabilised Gibbs kernel `k_ij = exp((alpha_i + beta_j - c_ij) / eps)`
/// of the scaling solvers (balanced Sinkhorn and UOT): the potentials
/// `alpha`, `beta` are absorbed into `k`, and bounded scalings `u`, `v` are
/// iterated on top, so the plan `u_i k_ij v_j` neither under- nor overflows
/// (Schmitzer 2019; POT's `sinkhorn_stabilized`).
pub(crate) struct GibbsKernel<'a> {
    /// The cost, row-major `n x m`.
    pub c: &'a [f64],
    pub n: usize,
    pub m: usize,
    pub eps: f64,
    pub alpha: Vec<f64>,
    pub beta: Vec<f64>,
    pub k: Vec<f64>,
    /// `k` transposed (`m x n`), so that both products are in axpy form.
    pub kt: Vec<f64>,
}

impl<'a> GibbsKernel<'a> {
    /// The kernel at the c-transform potentials: `alpha_i = min_j c_ij`,
    /// `beta_j = min_i (c_ij - alpha_i)`, so that every row and every column
    /// of `k` holds an entry equal to 1 whatever `eps`.
    pub fn new(c: &'a [f64], n: usize, m: usize, eps: f64) -> Self {
        let alpha: Vec<f64> = (0..n)
            .map(|i| {
                c[i * m..(i + 1) * m]
                    .iter()
                    .copied()
                    .fold(f64::INFINITY, f64::min)
            })
            .collect();
        let mut beta = vec![f64::INFINITY; m];
        for i in 0..n {
            for (b, &cij) in beta.iter_mut().zip(&c[i * m..(i + 1) * m]) {
                *b = b.min(cij - alpha[i]);
            }
        }
        let mut kernel = GibbsKernel {
            c,
            n,
            m,
            eps,
            alpha,
            beta,
            k: vec![0.0; n * m],
            kt: vec![0.0; n * m],
        };
        kernel.rebuild();
        kernel
    }

    /// Recomputes `k` and `kt` from the current potentials.
    pub fn rebuild(&mut self) {
        let (n, m) = (self.n, self.m);
        let inv = 1.0 / self.eps;
        for i in 0..n {
            let ai = self.alpha[i];
            let row = &mut self.k[i * m..(i + 1) * m];
            for ((kij, &cij), &bj) in row
                .iter_mut()
                .zip(&self.c[i * m..(i + 1) * m])
                .zip(&self.beta)
            {
                *kij = ((ai + bj - cij) * inv).exp();
            }
        }
        transpose_into(&self.k, n, m, &mut self.kt);
    }

    /// Plan `u_i k_ij v_j` (row-major) and its cost `<plan, c>`.
    pub fn plan(&self, u: &[f64], v: &[f64]) -> (Vec<f64>, f64) {
        let m = self.m;
        let mut plan = vec![0.0; self.n * m];
        let mut value = 0.0;
        for i in 0..self.n {
            for j in 0..m {
                let g = u[i] * self.k[i * m + j] * v[j];
                plan[i * m + j] = g;
                value += g * self.c[i * m + j];
            }
        }
        (plan, value)
    }
}
