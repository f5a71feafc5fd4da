//! Newton steps on the semi-dual of entropic OT (Brauer et al. 2017), with
//! a GTH-eliminated Laplacian, a step cap and Armijo backtracking (see the
//! parent module's docs).

// Index loops mirror the formulas (i over rows, j over columns).
#![allow(clippy::needless_range_loop)]

use crate::distance::stop::Stop;
use crate::error::Result;

/// Newton steps move no potential by more than `STEP_CAP * eps`.
const STEP_CAP: f64 = 20.0;
/// Newton steps tried at most, per call.
pub(super) const MAX_NEWTON: usize = 500;
/// Rows (of the Hessian's sum, of the elimination) between two reads of the
/// stop flag: a Newton step costs `O(n m^2 + m^3)`, about a second at
/// `m = 1000`, and such a block a few milliseconds.
const ROWS_PER_CHECK: usize = 64;

/// Newton's method on the semi-dual in the column potentials `g` (rows
/// eliminated by their exact log-sum-exp update).
pub(super) struct Newton<'a> {
    c: &'a [f64],
    n: usize,
    m: usize,
    p: &'a [f64],
    q: &'a [f64],
    eps: f64,
    g: Vec<f64>,
    /// `exp((g_j - c_ij - s_i)/eps)` for the current `g`, and its row sums.
    e: Vec<f64>,
    rs: Vec<f64>,
    /// Same for the line-search trial point.
    e_try: Vec<f64>,
    rs_try: Vec<f64>,
    g_try: Vec<f64>,
    grad: Vec<f64>,
    dir: Vec<f64>,
    w: Vec<f64>,
    piv: Vec<f64>,
}

impl<'a> Newton<'a> {
    pub(super) fn new(
        c: &'a [f64],
        n: usize,
        m: usize,
        p: &'a [f64],
        q: &'a [f64],
        eps: f64,
        g: Vec<f64>,
    ) -> Self {
        Newton {
            c,
            n,
            m,
            p,
            q,
            eps,
            g,
            e: vec![0.0; n * m],
            rs: vec![0.0; n],
            e_try: vec![0.0; n * m],
            rs_try: vec![0.0; n],
            g_try: vec![0.0; m],
            grad: vec![0.0; m],
            dir: vec![0.0; m],
            w: vec![0.0; m * m],
            piv: vec![0.0; m],
        }
    }

    /// Semi-dual value `F(g)`; fills `e` and `rs` for this `g`.
    #[allow(clippy::too_many_arguments)]
    fn eval(
        c: &[f64],
        n: usize,
        m: usize,
        p: &[f64],
        q: &[f64],
        eps: f64,
        g: &[f64],
        e: &mut [f64],
        rs: &mut [f64],
    ) -> f64 {
        let inv = 1.0 / eps;
        let mut val: f64 = q.iter().zip(g).map(|(a, b)| a * b).sum();
        for i in 0..n {
            let row = &c[i * m..(i + 1) * m];
            let s = row
                .iter()
                .zip(g)
                .map(|(c, g)| g - c)
                .fold(f64::NEG_INFINITY, f64::max);
            let er = &mut e[i * m..(i + 1) * m];
            let mut sum = 0.0;
            for ((x, &cij), &gj) in er.iter_mut().zip(row).zip(g) {
                *x = ((gj - cij - s) * inv).exp();
                sum += *x;
            }
            rs[i] = sum;
            // p_i f_i with f_i = eps ln p_i - s - eps ln sum (the constant
            // eps ln p_i is kept so that F is the true semi-dual).
            val += p[i] * (eps * p[i].ln() - s - eps * sum.ln());
        }
        val
    }

    /// Gradient `q - gamma^T 1` into `grad`; returns its L1 norm.
    fn gradient(&mut self) -> f64 {
        self.grad.copy_from_slice(self.q);
        for i in 0..self.n {
            let scale = self.p[i] / self.rs[i];
            for (gr, &x) in self
                .grad
                .iter_mut()
                .zip(&self.e[i * self.m..(i + 1) * self.m])
            {
                *gr -= scale * x;
            }
        }
        self.grad.iter().map(|x| x.abs()).sum()
    }

    /// Newton direction: solve `L d = grad` for the Hessian Laplacian
    /// `L = diag(W 1) - W`, `W_jk = sum_i gamma_ij gamma_ik / (p_i eps)`,
    /// grounding the last potential (the gauge direction `1` is free).
    fn direction(&mut self, stop: Stop<'_>) -> Result<()> {
        let m = self.m;
        self.w.fill(0.0);
        for i in 0..self.n {
            if i.is_multiple_of(ROWS_PER_CHECK) {
                stop.check()?;
            }
            let scale = self.p[i] / self.rs[i];
            let wi = scale * scale / (self.p[i] * self.eps);
            let er = &self.e[i * m..(i + 1) * m];
            for j in 0..m {
                let a = er[j] * wi;
                if a == 0.0 {
                    continue;
                }
                for k in (j + 1)..m {
                    self.w[j * m + k] += a * er[k];
                }
            }
        }
        for j in 0..m {
            for k in (j + 1)..m {
                self.w[k * m + j] = self.w[j * m + k];
            }
        }
        // GTH elimination: pivots are sums of remaining weights, never
        // differences, so tiny couplings keep full relative accuracy. Pivots
        // are floored relative to the largest degree (a Levenberg-Marquardt
        // style safeguard for couplings that underflowed to 0).
        let max_degree = (0..m)
            .map(|j| self.w[j * m..(j + 1) * m].iter().sum::<f64>())
            .fold(0.0f64, f64::max);
        let floor = 1e-13 * max_degree + f64::MIN_POSITIVE;
        self.dir.copy_from_slice(&self.grad);
        for k in 0..m - 1 {
            if k.is_multiple_of(ROWS_PER_CHECK) {
                stop.check()?;
            }
            let piv: f64 = self.w[k * m + k + 1..(k + 1) * m].iter().sum();
            let piv = piv.max(floor);
            self.piv[k] = piv;
            let bk = self.dir[k];
            for j in (k + 1)..m {
                let f = self.w[j * m + k] / piv;
                if f == 0.0 {
                    continue;
                }
                for l in (k + 1)..m {
                    if l != j {
                        self.w[j * m + l] += f * self.w[k * m + l];
                    }
                }
                self.dir[j] += f * bk;
            }
        }
        self.dir[m - 1] = 0.0;
        for k in (0..m - 1).rev() {
            let s: f64 = (k + 1..m).map(|l| self.w[k * m + l] * self.dir[l]).sum();
            self.dir[k] = (self.dir[k] + s) / self.piv[k];
        }
        let mx = self.dir.iter().fold(0.0f64, |a, x| a.max(x.abs()));
        let cap = STEP_CAP * self.eps;
        if mx > cap {
            let s = cap / mx;
            self.dir.iter_mut().for_each(|x| *x *= s);
        }
        Ok(())
    }

    /// Iterate until `||grad||_1 <= tol`; returns (steps, converged), or
    /// [`crate::SdrError::Stopped`] once `stop` is set.
    pub(super) fn solve(
        &mut self,
        tol: f64,
        max_steps: usize,
        stop: Stop<'_>,
    ) -> Result<(usize, bool)> {
        let (n, m, eps) = (self.n, self.m, self.eps);
        let mut val = Self::eval(
            self.c,
            n,
            m,
            self.p,
            self.q,
            eps,
            &self.g,
            &mut self.e,
            &mut self.rs,
        );
        let mut steps = 0;
        loop {
            let err = self.gradient();
            if err <= tol {
                return Ok((steps, true));
            }
            if steps >= max_steps || m < 2 {
                return Ok((steps, false));
            }
            steps += 1;
            self.direction(stop)?;
            let slope: f64 = self.grad.iter().zip(&self.dir).map(|(a, b)| a * b).sum();
            if !(slope > 0.0 && slope.is_finite()) {
                return Ok((steps, false));
            }
            // Armijo backtracking; the slack absorbs rounding in F near the
            // optimum, where the quadratic convergence makes F flat.
            let slack = 1e-15 * (1.0 + val.abs());
            let mut t = 1.0;
            let mut accepted = false;
            for _ in 0..50 {
                // Each trial is `n m` exponentials.
                stop.check()?;
                for ((gt, g), d) in self.g_try.iter_mut().zip(&self.g).zip(&self.dir) {
                    *gt = g + t * d;
                }
                let v = Self::eval(
                    self.c,
                    n,
                    m,
                    self.p,
                    self.q,
                    eps,
                    &self.g_try,
                    &mut self.e_try,
                    &mut self.rs_try,
                );
                if v >= val + 1e-4 * t * slope - slack {
                    val = v;
                    accepted = true;
                    break;
                }
                t *= 0.5;
            }
            if !accepted {
                return Ok((steps, false));
            }
            std::mem::swap(&mut self.g, &mut self.g_try);
            std::mem::swap(&mut self.e, &mut self.e_try);
            std::mem::swap(&mut self.rs, &mut self.rs_try);
        }
    }

    /// Plan `p_i e_ij / rs_i` (row-major `n x m`; rows exact).
    pub(super) fn plan(&self) -> Vec<f64> {
        let mut plan = self.e.clone();
        for i in 0..self.n {
            let scale = self.p[i] / self.rs[i];
            plan[i * self.m..(i + 1) * self.m]
                .iter_mut()
                .for_each(|x| *x *= scale);
        }
        plan
    }
}
