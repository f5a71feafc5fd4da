//! Metric parameters: their types and admissible ranges, checked both by
//! the spec parser (`spec.rs`) and by the solvers for metrics built in code.
//! A leaf, so the registry and the solvers import it without importing each
//! other.

use std::fmt;

use super::logdomain::bad;
use crate::error::Result;

/// Mass moved by partial OT.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rho {
    /// `min(n, m) / max(n, m)`.
    Adaptive,
    Fixed(f64),
}

impl fmt::Display for Rho {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rho::Adaptive => f.write_str("adaptive"),
            Rho::Fixed(r) => write!(f, "{r}"),
        }
    }
}

/// The range of the entropic regularisation `eps` of `sinkhorn`, `uot` and
/// `gw`. Costs are scaled to [0, 1] (SPEC §3), so below 1e-3 the plans are
/// as sharp as exact OT's but the solvers stop at their budgets unconverged
/// (or take minutes, GW), and above 1e3 the plan is the product of the masses.
pub const EPS_RANGE: (f64, f64) = (1e-3, 1e3);
/// The range of `uot`'s marginal penalty `tau` (weights beyond it make the
/// problem balanced OT, or let it drop all mass, and overflow `eps + tau`).
pub const TAU_RANGE: (f64, f64) = (1e-3, 1e3);
/// The range of `hung-pen`'s per-element count penalty `alpha` (the metric
/// values stay finite, and beyond 1 any count mismatch already costs a
/// reward its whole section).
pub const ALPHA_RANGE: (f64, f64) = (0.0, 1e3);

/// `x` within `[lo, hi]`, else an error naming `metric` and `key`: checked
/// when a spec is parsed and again when a metric built in code is evaluated.
pub(crate) fn check_range(metric: &str, key: &str, x: f64, (lo, hi): (f64, f64)) -> Result<()> {
    if x.is_finite() && (lo..=hi).contains(&x) {
        return Ok(());
    }
    let shown = crate::error::shown(x);
    Err(bad(
        metric,
        format!("`{key}` must be in [{lo}, {hi}], got {shown}"),
    ))
}
