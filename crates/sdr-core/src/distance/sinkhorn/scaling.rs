//! Stabilised Sinkhorn sweeps (Schmitzer 2019): potentials absorbed into the
//! kernel, bounded scalings iterated on top (see the parent module's docs).

// Index loops mirror the formulas (i over rows, j over columns).
#![allow(clippy::needless_range_loop)]

use crate::distance::logdomain::{log_sum_exp, mul_transposed, GibbsKernel};

/// Scalings outside `[1/BIG, BIG]` trigger an absorption into the potentials.
const BIG: f64 = 1e100;

/// Stabilised Sinkhorn state: the Gibbs kernel with its absorbed potentials,
/// scalings `u`, `v` on top. Plan `u_i k_ij v_j`.
pub(super) struct Scaling<'a> {
    kern: GibbsKernel<'a>,
    p: &'a [f64],
    q: &'a [f64],
    u: Vec<f64>,
    v: Vec<f64>,
    ktu: Vec<f64>,
    kv: Vec<f64>,
}

impl<'a> Scaling<'a> {
    pub(super) fn new(
        c: &'a [f64],
        n: usize,
        m: usize,
        p: &'a [f64],
        q: &'a [f64],
        eps: f64,
    ) -> Self {
        Scaling {
            kern: GibbsKernel::new(c, n, m, eps),
            p,
            q,
            u: vec![1.0; n],
            v: vec![1.0; m],
            ktu: vec![0.0; m],
            kv: vec![0.0; n],
        }
    }

    /// One sweep: column update then row update. Returns the L1 column
    /// marginal error of the plan *before* the sweep (rows exact), computed
    /// from the `K^T u` the column update needs anyway.
    pub(super) fn sweep(&mut self) -> f64 {
        let (n, m) = (self.kern.n, self.kern.m);
        mul_transposed(&self.kern.k, n, m, &self.u, &mut self.ktu);
        let mut err = 0.0;
        let mut ok = true;
        for j in 0..m {
            err += (self.v[j] * self.ktu[j] - self.q[j]).abs();
            let vj = self.q[j] / self.ktu[j];
            ok &= vj > 1.0 / BIG && vj < BIG;
            self.v[j] = vj;
        }
        if !ok {
            self.exact_column_step();
        }
        let mut ok = true;
        mul_transposed(&self.kern.kt, m, n, &self.v, &mut self.kv);
        for i in 0..n {
            let ui = self.p[i] / self.kv[i];
            ok &= ui > 1.0 / BIG && ui < BIG;
            self.u[i] = ui;
        }
        if !ok {
            self.exact_row_step();
        }
        err
    }

    /// Redo the column update in the log domain from the (valid) row
    /// scalings, absorb everything, and rebuild the kernel.
    fn exact_column_step(&mut self) {
        let k = &mut self.kern;
        let (n, m, eps) = (k.n, k.m, k.eps);
        for i in 0..n {
            k.alpha[i] += eps * self.u[i].ln();
            self.u[i] = 1.0;
        }
        for j in 0..m {
            let lse = log_sum_exp((0..n).map(|i| (k.alpha[i] - k.c[i * m + j]) / eps));
            k.beta[j] = eps * (self.q[j].ln() - lse);
            self.v[j] = 1.0;
        }
        k.rebuild();
    }

    /// Redo the row update in the log domain from the (valid) column
    /// scalings, absorb everything, and rebuild the kernel.
    fn exact_row_step(&mut self) {
        let k = &mut self.kern;
        let (n, m, eps) = (k.n, k.m, k.eps);
        for j in 0..m {
            k.beta[j] += eps * self.v[j].ln();
            self.v[j] = 1.0;
        }
        for i in 0..n {
            let row = &k.c[i * m..(i + 1) * m];
            let lse = log_sum_exp(row.iter().zip(&k.beta).map(|(c, b)| (b - c) / eps));
            k.alpha[i] = eps * (self.p[i].ln() - lse);
            self.u[i] = 1.0;
        }
        k.rebuild();
    }

    /// Current log-domain potentials `(f, g)`.
    pub(super) fn potentials(&self) -> (Vec<f64>, Vec<f64>) {
        let eps = self.kern.eps;
        let f = self
            .kern
            .alpha
            .iter()
            .zip(&self.u)
            .map(|(a, u)| a + eps * u.ln())
            .collect();
        let g = self
            .kern
            .beta
            .iter()
            .zip(&self.v)
            .map(|(b, v)| b + eps * v.ln())
            .collect();
        (f, g)
    }

    /// Plan `u_i k_ij v_j` and its cost.
    pub(super) fn plan(&self) -> (Vec<f64>, f64) {
        self.kern.plan(&self.u, &self.v)
    }
}
