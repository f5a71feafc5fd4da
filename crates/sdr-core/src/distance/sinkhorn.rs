//! Entropy-regularised optimal transport: the Sinkhorn distance.
//!
//! $$\gamma_\varepsilon = \operatorname*{arg\,min}_{\gamma \in \Gamma(p, q)}
//!   \langle \gamma, \tilde M \rangle_F - \varepsilon H(\gamma),
//! \qquad H(\gamma) = -\sum_{ij} \gamma_{ij} (\log \gamma_{ij} - 1),$$
//! $$\mathcal D^{\varepsilon}_{\mathrm{Sinkhorn}}(A, B) = \langle \gamma_\varepsilon, \tilde M \rangle_F$$
//!
//! where
//! - $\tilde M = M / \max M$ is the normalised `n x m` cosine cost (SPEC §3;
//!   the distance is 0 when $\max M = 0$),
//! - $p = \mathbf 1_n / n$ and $q = \mathbf 1_m / m$ are the uniform masses,
//! - $\Gamma(p, q) = \{\gamma \ge 0 : \gamma \mathbf 1_m = p,\ \gamma^\top \mathbf 1_n = q\}$,
//! - $\varepsilon > 0$ is the entropic regularisation (`sinkhorn:eps=E`).
//!
//! The reported value is the transport cost of the entropic plan, without the
//! entropy term (paper appendix A, Eq. (sinkhorn); POT's `ot.sinkhorn` plan
//! followed by `<plan, M~>`).
//!
//! # Algorithm
//! The plan is $\gamma_{ij} = \exp((f_i + g_j - \tilde M_{ij}) / \varepsilon)$ for dual
//! potentials $f, g$ held in the log domain. The solver alternates
//! 1. Sinkhorn sweeps [1] in the *stabilised* form of [2]: potentials are
//!    absorbed into a kernel $K_{ij} = \exp((\alpha_i + \beta_j - \tilde M_{ij})/\varepsilon)$ and
//!    only bounded scalings $u, v$ are iterated, so one sweep costs two
//!    matrix-vector products and no `exp`; the potentials are re-absorbed
//!    (with an exact log-sum-exp half-step) whenever a scaling leaves
//!    $[10^{-100}, 10^{100}]$, so no `eps` under- or overflows;
//! 2. when the sweeps converge too slowly (small `eps`, near-degenerate plans,
//!    where Sinkhorn's error decays like $1/k$), Newton steps on the
//!    semi-dual [3, 4] $F(g) = \langle g, q\rangle + \sum_i p_i f_i(g)$,
//!    $f_i(g) = \varepsilon \log p_i - \varepsilon \log \sum_j e^{(g_j - \tilde M_{ij})/\varepsilon}$,
//!    whose Hessian is a graph Laplacian solved by cancellation-free
//!    Gaussian elimination (GTH), with a step cap and Armijo backtracking.
//!
//! Both converge to the same unique entropic plan. The stopping rule is on the
//! marginal error: rows are exact after each row update, and iteration stops
//! when $\|\gamma^\top \mathbf 1_n - q\|_1 \le$ `tol` (default $10^{-9}$, SPEC §3).
//!
//! # References
//! 1. M. Cuturi. *Sinkhorn Distances: Lightspeed Computation of Optimal
//!    Transport.* NeurIPS 2013.
//! 2. B. Schmitzer. *Stabilized Sparse Scaling Algorithms for Entropy
//!    Regularized Transport Problems.* SIAM J. Sci. Comput. 41(3), 2019.
//! 3. G. Peyré, M. Cuturi. *Computational Optimal Transport.* Foundations and
//!    Trends in Machine Learning 11(5–6), 2019, §4.1 (semi-dual).
//! 4. C. Brauer, C. Clason, D. Lorenz, B. Wirth. *A Sinkhorn-Newton method for
//!    entropic optimal transport.* arXiv:1710.06635, 2017.
//! 5. W. Grassmann, M. Taksar, D. Heyman. *Regenerative analysis and steady
//!    state distributions for Markov chains.* Operations Research 33(5), 1985
//!    (GTH elimination).

// Index loops mirror the formulas (i over rows, j over columns).
#![allow(clippy::needless_range_loop)]

use super::{uniform, SolverResult};
use crate::cost::CostMatrix;
use crate::error::{Result, SdrError};

/// Default stopping threshold on the L1 column-marginal error (SPEC §3).
pub const DEFAULT_TOL: f64 = 1e-9;
/// Default cap on iterations (Sinkhorn sweeps plus Newton steps).
pub const DEFAULT_MAX_ITER: usize = 100_000;

/// Scalings outside `[1/BIG, BIG]` trigger an absorption into the potentials.
const BIG: f64 = 1e100;
/// Sweeps always tried before Newton is considered.
const MIN_SWEEPS: usize = 40;
/// Newton is used when the observed linear rate predicts more sweeps than this.
const SWEEP_BUDGET: f64 = 300.0;
/// Newton steps move no potential by more than `STEP_CAP * eps`.
const STEP_CAP: f64 = 20.0;
/// Newton steps tried at most, per call.
const MAX_NEWTON: usize = 500;

/// Sinkhorn distance `<gamma_eps, M~>` with uniform masses (SPEC §3).
///
/// `m` is the raw cosine cost (`n x m`, `n, m >= 1`); it is normalised here.
/// Returns 0 when `max(M) = 0`, and NaN when `eps` is not a finite positive
/// number (the metric parser never lets such a value through).
///
/// ```
/// use sdr_core::cost::CostMatrix;
/// use sdr_core::distance::sinkhorn::sinkhorn_distance;
///
/// let m = CostMatrix::new(2, 2, vec![0.0, 0.5, 0.5, 0.0]);
/// let d = sinkhorn_distance(&m, 0.1);
/// // Close to the exact OT value 0 (diagonal plan), up to the regularisation.
/// assert!(d > 0.0 && d < 0.01);
/// ```
pub fn sinkhorn_distance(m: &CostMatrix, eps: f64) -> f64 {
    let Some(mt) = m.normalized() else {
        return 0.0;
    };
    match sinkhorn_log(
        &mt,
        &uniform(m.n),
        &uniform(m.m),
        eps,
        DEFAULT_TOL,
        DEFAULT_MAX_ITER,
    ) {
        Ok(r) => r.value,
        Err(_) => f64::NAN,
    }
}

/// Entropic OT plan between masses `p` (length `n`) and `q` (length `m`) for
/// the cost `cost` (`n x m`), by stabilised log-domain Sinkhorn sweeps with
/// Newton acceleration (see the module docs).
///
/// Arguments:
/// - `cost`: `n x m`, finite entries (any range; the SDR metric passes `M~`);
/// - `p`, `q`: positive finite masses with equal totals (relative 1e-9);
/// - `eps`: regularisation, finite and `> 0`;
/// - `tol`: threshold on `||gamma^T 1 - q||_1` (rows are exact);
/// - `max_iter`: cap on Sinkhorn sweeps plus Newton steps.
///
/// Returns the plan (row-major `n x m`), `value = <plan, cost>`, the number
/// of sweeps and Newton steps used, and whether `tol` was reached. When it was
/// not, `value` and `plan` are those of the last iterate.
///
/// # Errors
/// [`SdrError::BadMetricParameter`] (metric `sinkhorn`) when `eps` is not
/// finite and positive, the masses have the wrong length, are not positive
/// and finite or have different totals, or `cost` is empty or not finite.
///
/// ```
/// use sdr_core::cost::CostMatrix;
/// use sdr_core::distance::sinkhorn::sinkhorn_log;
///
/// let c = CostMatrix::new(2, 3, vec![0.0, 1.0, 0.5, 1.0, 0.0, 0.5]);
/// let r = sinkhorn_log(&c, &[0.5, 0.5], &[0.25, 0.25, 0.5], 0.05, 1e-12, 10_000).unwrap();
/// assert!(r.converged);
/// let col0: f64 = r.plan[0] + r.plan[3];
/// assert!((col0 - 0.25).abs() < 1e-12);
/// ```
pub fn sinkhorn_log(
    cost: &CostMatrix,
    p: &[f64],
    q: &[f64],
    eps: f64,
    tol: f64,
    max_iter: usize,
) -> Result<SolverResult> {
    check_balanced("sinkhorn", cost, p, q, eps)?;
    let (n, m) = (cost.n, cost.m);
    let mut sk = Scaling::new(&cost.data, n, m, p, q, eps);
    let mut iterations = 0;
    let mut converged = false;
    let mut newton_allowed = n > 1 && m > 1;
    let mut errs: [f64; 2] = [f64::INFINITY; 2]; // error now and `RATE_LAG` sweeps ago
    const RATE_LAG: usize = 10;
    loop {
        let mut try_newton = false;
        while iterations < max_iter {
            let err = sk.sweep();
            iterations += 1;
            if err <= tol {
                converged = true;
                break;
            }
            if iterations % RATE_LAG == 0 {
                errs = [err, errs[0]];
                if newton_allowed && iterations >= MIN_SWEEPS {
                    // Linear rate over the last RATE_LAG sweeps; switch to
                    // Newton when the sweeps left would exceed the budget.
                    let rate = (errs[0] / errs[1]).powf(1.0 / RATE_LAG as f64);
                    let left = if rate < 1.0 {
                        (tol / err).ln() / rate.ln()
                    } else {
                        f64::INFINITY
                    };
                    if left > SWEEP_BUDGET {
                        try_newton = true;
                        break;
                    }
                }
            }
        }
        if !try_newton {
            let (plan, value) = sk.plan();
            return Ok(SolverResult {
                value,
                plan,
                iterations,
                converged,
            });
        }
        // Newton on the smaller side's potentials, the other side eliminated.
        let (f, g) = sk.potentials();
        let budget = (max_iter - iterations).min(MAX_NEWTON);
        let (plan, steps, ok) = if m <= n {
            let mut nt = Newton::new(&cost.data, n, m, p, q, eps, g);
            let (steps, ok) = nt.solve(tol, budget);
            (nt.plan(), steps, ok)
        } else {
            let ct = cost.transpose();
            let mut nt = Newton::new(&ct.data, m, n, q, p, eps, f);
            let (steps, ok) = nt.solve(tol, budget);
            let pt = nt.plan();
            let mut plan = vec![0.0; n * m];
            transpose_into(&pt, m, n, &mut plan);
            (plan, steps, ok)
        };
        iterations += steps;
        if ok || iterations >= max_iter {
            let value = plan.iter().zip(&cost.data).map(|(g, c)| g * c).sum();
            return Ok(SolverResult {
                value,
                plan,
                iterations,
                converged: ok,
            });
        }
        // Newton stalled (e.g. couplings underflowed for a tiny `eps`): go
        // on with plain sweeps from where they were.
        newton_allowed = false;
    }
}

fn bad(metric: &str, message: String) -> SdrError {
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

fn check_balanced(metric: &str, cost: &CostMatrix, p: &[f64], q: &[f64], eps: f64) -> Result<()> {
    check_masses(metric, cost.n, cost.m, p, q, eps)?;
    let (sp, sq): (f64, f64) = (p.iter().sum(), q.iter().sum());
    if (sp - sq).abs() > 1e-9 * sp.max(sq) {
        return Err(bad(
            metric,
            format!("masses have different totals ({sp} vs {sq})"),
        ));
    }
    if let Some(k) = cost.data.iter().position(|x| !x.is_finite()) {
        return Err(bad(metric, format!("cost entry {k} is not finite")));
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

/// Stabilised Sinkhorn state: potentials `alpha`, `beta` absorbed in `k`,
/// scalings `u`, `v` on top. Plan `u_i k_ij v_j`.
struct Scaling<'a> {
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
    fn new(c: &'a [f64], n: usize, m: usize, p: &'a [f64], q: &'a [f64], eps: f64) -> Self {
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
    fn sweep(&mut self) -> f64 {
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
    fn potentials(&self) -> (Vec<f64>, Vec<f64>) {
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
    fn plan(&self) -> (Vec<f64>, f64) {
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

/// Newton's method on the semi-dual in the column potentials `g` (rows
/// eliminated by their exact log-sum-exp update).
struct Newton<'a> {
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
    fn new(
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
    fn direction(&mut self) {
        let m = self.m;
        self.w.fill(0.0);
        for i in 0..self.n {
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
    }

    /// Iterate until `||grad||_1 <= tol`; returns (steps, converged).
    fn solve(&mut self, tol: f64, max_steps: usize) -> (usize, bool) {
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
                return (steps, true);
            }
            if steps >= max_steps || m < 2 {
                return (steps, false);
            }
            steps += 1;
            self.direction();
            let slope: f64 = self.grad.iter().zip(&self.dir).map(|(a, b)| a * b).sum();
            if !(slope > 0.0 && slope.is_finite()) {
                return (steps, false);
            }
            // Armijo backtracking; the slack absorbs rounding in F near the
            // optimum, where the quadratic convergence makes F flat.
            let slack = 1e-15 * (1.0 + val.abs());
            let mut t = 1.0;
            let mut accepted = false;
            for _ in 0..50 {
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
                return (steps, false);
            }
            std::mem::swap(&mut self.g, &mut self.g_try);
            std::mem::swap(&mut self.e, &mut self.e_try);
            std::mem::swap(&mut self.rs, &mut self.rs_try);
        }
    }

    /// Plan `p_i e_ij / rs_i` (row-major `n x m`; rows exact).
    fn plan(&self) -> Vec<f64> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg_matrix(n: usize, m: usize, seed: u64) -> CostMatrix {
        let mut s = seed;
        let data = (0..n * m)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (s >> 11) as f64 / (1u64 << 53) as f64
            })
            .collect();
        CostMatrix::new(n, m, data)
    }

    fn marginals(plan: &[f64], n: usize, m: usize) -> (Vec<f64>, Vec<f64>) {
        let mut r = vec![0.0; n];
        let mut c = vec![0.0; m];
        for i in 0..n {
            for j in 0..m {
                r[i] += plan[i * m + j];
                c[j] += plan[i * m + j];
            }
        }
        (r, c)
    }

    #[test]
    fn plan_has_the_prescribed_marginals() {
        for &(n, m, eps) in &[(3, 5, 0.5), (7, 4, 0.1), (12, 12, 0.01), (1, 6, 0.1)] {
            let c = lcg_matrix(n, m, (n * 31 + m) as u64);
            let (p, q) = (uniform(n), uniform(m));
            let r = sinkhorn_log(&c, &p, &q, eps, 1e-10, 100_000).unwrap();
            assert!(r.converged, "{n}x{m} eps {eps}");
            let (rows, cols) = marginals(&r.plan, n, m);
            for (a, b) in rows.iter().zip(&p) {
                assert!((a - b).abs() < 1e-12);
            }
            let err: f64 = cols.iter().zip(&q).map(|(a, b)| (a - b).abs()).sum();
            assert!(err <= 1e-10, "column error {err}");
            let value: f64 = r.plan.iter().zip(&c.data).map(|(a, b)| a * b).sum();
            assert!((value - r.value).abs() < 1e-14);
        }
    }

    /// The entropic plan is the Gibbs kernel scaled: `log gamma_ij + c_ij/eps`
    /// must be of the form `a_i + b_j` (checked on 2x2 minors).
    #[test]
    fn plan_is_a_diagonal_scaling_of_the_gibbs_kernel() {
        let c = lcg_matrix(5, 6, 7);
        let eps = 0.05;
        let r = sinkhorn_log(&c, &uniform(5), &uniform(6), eps, 1e-12, 100_000).unwrap();
        let l = |i: usize, j: usize| r.plan[i * 6 + j].ln() + c.get(i, j) / eps;
        for i in 1..5 {
            for j in 1..6 {
                let minor = l(i, j) - l(i, 0) - l(0, j) + l(0, 0);
                assert!(minor.abs() < 1e-8, "minor {minor}");
            }
        }
    }

    #[test]
    fn identical_sets_cost_little_and_zero_cost_is_zero() {
        // Cost 0 on the diagonal, 1 elsewhere: the plan concentrates on the
        // diagonal as eps shrinks.
        let n = 6;
        let data = (0..n * n)
            .map(|k| if k / n == k % n { 0.0 } else { 1.0 })
            .collect();
        let c = CostMatrix::new(n, n, data);
        let d01 = sinkhorn_distance(&c, 0.01);
        let d05 = sinkhorn_distance(&c, 0.5);
        assert!(d01 < 1e-30, "{d01}");
        assert!(d05 > d01 && d05 < 1.0);
        assert_eq!(
            sinkhorn_distance(&CostMatrix::new(2, 3, vec![0.0; 6]), 0.1),
            0.0
        );
    }

    /// Near-degenerate case where plain Sinkhorn decays like 1/k: the Newton
    /// phase must still reach the tolerance.
    #[test]
    fn newton_phase_converges_on_a_slow_case() {
        let c = CostMatrix::new(
            3,
            3,
            vec![
                0.97134, 1.0, 0.90157, 0.87261, 0.89406, 0.34643, 0.92034, 0.93719, 0.91247,
            ],
        );
        let r = sinkhorn_log(&c, &uniform(3), &uniform(3), 0.01, 1e-9, 100_000).unwrap();
        assert!(r.converged);
        assert!(r.iterations < 2_000, "{} iterations", r.iterations);
        let (_, cols) = marginals(&r.plan, 3, 3);
        let err: f64 = cols.iter().map(|x| (x - 1.0 / 3.0).abs()).sum();
        assert!(err <= 1e-9);
        // Reference: POT `sinkhorn_log` (stopThr 1e-14) warm-started at the
        // converged potentials; plain Sinkhorn is still 3e-6 away after 1e5 sweeps.
        assert!((r.value - 0.753056834303568).abs() < 1e-9, "{}", r.value);
    }

    #[test]
    fn symmetric_and_permutation_invariant() {
        let c = lcg_matrix(5, 8, 3);
        for eps in [0.01, 0.1, 0.5] {
            let d = sinkhorn_distance(&c, eps);
            let dt = sinkhorn_distance(&c.transpose(), eps);
            assert!((d - dt).abs() < 1e-9, "{d} vs {dt}");
            // Reverse the rows.
            let mut data = Vec::new();
            for i in (0..5).rev() {
                data.extend_from_slice(c.row(i));
            }
            let dp = sinkhorn_distance(&CostMatrix::new(5, 8, data), eps);
            assert!((d - dp).abs() < 1e-9);
        }
    }

    #[test]
    fn tiny_eps_does_not_overflow() {
        let c = lcg_matrix(4, 5, 11);
        let r = sinkhorn_log(&c, &uniform(4), &uniform(5), 1e-4, 1e-9, 100_000).unwrap();
        assert!(r.value.is_finite());
        assert!(r.converged);
    }

    #[test]
    fn reports_non_convergence() {
        let c = lcg_matrix(6, 6, 5);
        let r = sinkhorn_log(&c, &uniform(6), &uniform(6), 0.01, 1e-15, 3).unwrap();
        assert!(!r.converged);
        assert_eq!(r.iterations, 3);
    }

    #[test]
    fn rejects_bad_input() {
        let c = lcg_matrix(2, 2, 1);
        let p = uniform(2);
        assert!(sinkhorn_log(&c, &p, &p, 0.0, 1e-9, 10).is_err());
        assert!(sinkhorn_log(&c, &p, &p, f64::NAN, 1e-9, 10).is_err());
        assert!(sinkhorn_log(&c, &p, &uniform(3), 0.1, 1e-9, 10).is_err());
        assert!(sinkhorn_log(&c, &p, &[0.5, 0.6], 0.1, 1e-9, 10).is_err());
        assert!(sinkhorn_log(&c, &[1.0, 0.0], &p, 0.1, 1e-9, 10).is_err());
        assert!(sinkhorn_distance(&c, -1.0).is_nan());
    }
}
