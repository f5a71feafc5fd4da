//! The one error type of `sdr-core`. Every variant names the offending input.

use thiserror::Error;

/// Which of the two sets of a pair an error refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    A,
    B,
}

impl std::fmt::Display for Side {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Side::A => "a",
            Side::B => "b",
        })
    }
}

#[derive(Debug, Error, Clone, PartialEq)]
pub enum SdrError {
    #[error("set `{set}` is empty")]
    EmptySet { set: Side },
    #[error("set `{set}` row {row} is not finite (NaN or infinite component)")]
    NonFiniteVector { set: Side, row: usize },
    #[error("set `{set}` row {row} is the zero vector (cosine undefined)")]
    ZeroVector { set: Side, row: usize },
    #[error("set `{set}` row {row} has dimension {got}, expected {expected}")]
    DimensionMismatch {
        set: Side,
        row: usize,
        expected: usize,
        got: usize,
    },
    #[error("unknown metric `{0}` (known: chamfer, hausdorff, ot, sinkhorn, uot, gw, hung-nn, hung-pen, pot)")]
    UnknownMetric(String),
    #[error("metric `{metric}`: {message}")]
    BadMetricParameter { metric: String, message: String },
    #[error("reference {index}: section `{section}` is empty")]
    EmptySection { index: usize, section: &'static str },
    #[error("threshold {value} is outside [0, 1] (the range of the cosine cost)")]
    BadThreshold { value: f64 },
    #[error("cost matrix of {n} x {m} holds {len} values")]
    CostShape { n: usize, m: usize, len: usize },
    #[error("set `{set}` has {sentences} sentences but {vectors} vectors")]
    SentenceCount {
        set: Side,
        sentences: usize,
        vectors: usize,
    },
    /// A sentence-cost spec (`cosine`, `clinical`, `clinical:lambda=1`) that
    /// does not parse.
    #[error("cost `{spec}`: {message}")]
    BadCost { spec: String, message: String },
    /// The caller's stop flag was set while a distance was being computed
    /// ([`crate::Metric::evaluate_until`]).
    #[error("stopped before the distance was computed")]
    Stopped,
}

pub type Result<T> = std::result::Result<T, SdrError>;

/// A number as an error message writes it back: `1e-30` and `1e308`, not
/// dozens of digits; ordinary magnitudes as Rust prints them.
pub fn shown(x: f64) -> String {
    if x != 0.0 && (x.abs() < 1e-3 || x.abs() >= 1e6) {
        format!("{x:e}")
    } else {
        x.to_string()
    }
}
