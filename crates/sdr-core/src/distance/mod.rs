//! Set-to-set distances (paper appendix A, SPEC §3).
//!
//! One file per family. Every distance takes the cosine cost matrix
//! `M[i][j] = d(a_i, b_j)` (see [`crate::cost`]); the OT family works on
//! `M~ = M / max(M)` and is 0 when `max(M) = 0`. Masses are uniform,
//! `p = 1/n`, `q = 1/m`.
//!
//! [`evaluate_all`] computes several metrics for one pair from one cost
//! matrix; [`evaluate_pairs`] and [`Metric::distances`] do the same for many
//! pairs in parallel. [`evaluate_all_until`] and [`Metric::evaluate_until`]
//! stop partway when the caller's flag is set (`stop.rs`).
//!
//! [`Metric`] is a parsed metric spec; its [`Display`](std::fmt::Display) is
//! the canonical spec string used as output key everywhere (`sinkhorn:eps=0.1`).

mod batch;
mod hausdorff;
mod logdomain;
mod params;
mod spec;
mod stop;

/// The solver modules are private: a caller reaches a distance through
/// [`Metric`], which checks its parameters and honours its stop flag. The
/// `internals` feature opens them to this crate's own tests, doctests and
/// benchmarks (not a stable interface).
macro_rules! solver_modules {
    ($($name:ident),*) => {$(
        #[cfg(feature = "internals")]
        pub mod $name;
        // Their direct entry points (`ot_distance`, `hung_nn`, ...) serve
        // the tests only.
        #[cfg(not(feature = "internals"))]
        #[allow(dead_code)]
        pub(crate) mod $name;
    )*};
}
solver_modules!(chamfer, gw, hungarian, ot, partial, sinkhorn, uot);

pub use batch::{evaluate_pairs, evaluate_pairs_until, Pair};
pub use params::{Rho, ALPHA_RANGE, EPS_RANGE, TAU_RANGE};
pub use spec::{evaluate_all, evaluate_all_until, Metric};

/// Outcome of an iterative or exact solver, like POT's `OTResult`.
#[derive(Debug, Clone, PartialEq)]
pub struct SolverResult {
    /// The distance value (what the metric reports).
    pub value: f64,
    /// Transport plan / coupling, row-major `n x m` (empty when not applicable).
    pub plan: Vec<f64>,
    /// Iterations used (0 for closed-form or exact combinatorial solvers).
    pub iterations: usize,
    /// Whether the stopping criterion was met within `max_iter`.
    pub converged: bool,
}

/// What a metric reports for one pair of sets: the value, and whether and
/// in how many steps the solver reached it.
///
/// Closed forms (chamfer, hausdorff, hung-*) are always `converged` with 0
/// iterations. An iterative or simplex solver that hits its budget reports
/// `converged = false` and the value of its last iterate; callers count such
/// pairs (SPEC §3, "Convergence") rather than fold them silently into a number.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Evaluation {
    pub value: f64,
    pub converged: bool,
    pub iterations: usize,
}

impl Evaluation {
    /// A closed-form (or trivially exact) value.
    pub fn exact(value: f64) -> Self {
        Evaluation {
            value,
            converged: true,
            iterations: 0,
        }
    }

    /// Whether the value is usable as is: converged and finite.
    pub fn is_clean(&self) -> bool {
        self.converged && self.value.is_finite()
    }
}

impl From<SolverResult> for Evaluation {
    fn from(r: SolverResult) -> Self {
        Evaluation {
            value: r.value,
            converged: r.converged,
            iterations: r.iterations,
        }
    }
}

/// Uniform masses `1/n`.
pub fn uniform(n: usize) -> Vec<f64> {
    vec![1.0 / n as f64; n]
}
