//! Stabilised Sinkhorn sweeps (Schmitzer 2019): potentials absorbed into the
//! kernel, bounded scalings iterated on top (see the parent module's docs).

// Index loops mirror the formulas (i over rows, j over columns).
#![allow(clippy::needless_range_loop)]

use crate::distance::logdomain::{log_sum_exp, mul_transposed, transpose_into};

/// Scalings outside `[1/BIG, BIG]` trigger an absorption into the potentials.
const BIG: f64 = 1e100;

/// Stabilised Sinkhorn state: potentials `alpha`, `beta` absorbed in `k`,
/// scalings `u`, `v` on top. Plan `u_i k_ij v_j`.
pub(super) struct Scaling<'a> {
    c: &'a [f64],
    n: usize,
    m: usize,
    p: &'a [f64],
    q: &'a [f64],
    eps: f64,
    alpha: Vec<f64>,
    beta: Vec<f64>,
    k: Vec<f64>,
    /// `k` transposed (`m x n`), so that both products are in axpy form.
    kt: Vec<f64>,
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
        // c-transform start: alpha_i = min_j c_ij, beta_j = min_i (c_ij - alpha_i),
        // so that every row and every column of k holds an entry equal to 1.
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
        let mut s = Scaling {
            c,
            n,
            m,
            p,
            q,
            eps,
            alpha,
            beta,
            k: vec![0.0; n * m],
            kt: vec![0.0; n * m],
            u: vec![1.0; n],
            v: vec![1.0; m],
            ktu: vec![0.0; m],
            kv: vec![0.0; n],
        };
        s.rebuild_kernel();
        s
    }

    fn rebuild_kernel(&mut self) {
        let inv = 1.0 / self.eps;
        for i in 0..self.n {
            let ai = self.alpha[i];
            let row = &mut self.k[i * self.m..(i + 1) * self.m];
            for ((kij, &cij), &bj) in row
                .iter_mut()
                .zip(&self.c[i * self.m..(i + 1) * self.m])
                .zip(&self.beta)
            {
                *kij = ((ai + bj - cij) * inv).exp();
            }
        }
        transpose_into(&self.k, self.n, self.m, &mut self.kt);
    }

    /// One sweep: column update then row update. Returns the L1 column
    /// marginal error of the plan *before* the sweep (rows exact), computed
    /// from the `K^T u` the column update needs anyway.
    pub(super) fn sweep(&mut self) -> f64 {
        let (n, m) = (self.n, self.m);
        mul_transposed(&self.k, n, m, &self.u, &mut self.ktu);
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
        mul_transposed(&self.kt, m, n, &self.v, &mut self.kv);
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
        let (n, m, eps) = (self.n, self.m, self.eps);
        for i in 0..n {
            self.alpha[i] += eps * self.u[i].ln();
            self.u[i] = 1.0;
        }
        for j in 0..m {
            let lse = log_sum_exp((0..n).map(|i| (self.alpha[i] - self.c[i * m + j]) / eps));
            self.beta[j] = eps * (self.q[j].ln() - lse);
            self.v[j] = 1.0;
        }
        self.rebuild_kernel();
    }

    /// Redo the row update in the log domain from the (valid) column
    /// scalings, absorb everything, and rebuild the kernel.
    fn exact_row_step(&mut self) {
        let (n, m, eps) = (self.n, self.m, self.eps);
        for j in 0..m {
            self.beta[j] += eps * self.v[j].ln();
            self.v[j] = 1.0;
        }
        for i in 0..n {
            let row = &self.c[i * m..(i + 1) * m];
            let lse = log_sum_exp(row.iter().zip(&self.beta).map(|(c, b)| (b - c) / eps));
            self.alpha[i] = eps * (self.p[i].ln() - lse);
            self.u[i] = 1.0;
        }
        self.rebuild_kernel();
    }

    /// Current log-domain potentials `(f, g)`.
    pub(super) fn potentials(&self) -> (Vec<f64>, Vec<f64>) {
        let f = self
            .alpha
            .iter()
            .zip(&self.u)
            .map(|(a, u)| a + self.eps * u.ln())
            .collect();
        let g = self
            .beta
            .iter()
            .zip(&self.v)
            .map(|(b, v)| b + self.eps * v.ln())
            .collect();
        (f, g)
    }

    /// Plan `u_i k_ij v_j` and its cost.
    pub(super) fn plan(&self) -> (Vec<f64>, f64) {
        let m = self.m;
        let mut plan = vec![0.0; self.n * m];
        let mut value = 0.0;
        for i in 0..self.n {
            for j in 0..m {
                let g = self.u[i] * self.k[i * m + j] * self.v[j];
                plan[i * m + j] = g;
                value += g * self.c[i * m + j];
            }
        }
        (plan, value)
    }
}
