//! The registry of sentence costs: from a spec to the
//! [`SentenceCost`] every reward, selection, pruning run, explanation,
//! `sdr serve` and Python class reads. The cosine cost (SPEC §3) opens as
//! `None`: the distances read the cosine matrix as it is, bit for bit.
//!
//! A new cost is its file (a type implementing [`SentenceCost`]) and one
//! arm of [`open_cost`]; every caller holds an `Arc<dyn SentenceCost>` and
//! needs no edit.

use std::sync::Arc;

use sdr_core::cost::CostKind;
use sdr_core::{SdrError, SentenceCost};

use crate::cost::ClinicalCost;
use crate::labeler::Labeler;

/// The cost of `kind`, with the bundled rules where it needs a labeler;
/// `None` for the cosine cost.
///
/// ```
/// let c = sdr_clinical::open_cost(&"clinical:lambda=0.8".parse().unwrap()).unwrap().unwrap();
/// assert_eq!(c.spec(), "clinical:lambda=0.8");
/// assert!(sdr_clinical::open_cost(&"cosine".parse().unwrap()).unwrap().is_none());
/// ```
///
/// # Errors
/// [`SdrError::BadCost`] for weights out of range (a `CostKind` built by hand).
pub fn open_cost(kind: &CostKind) -> Result<Option<Arc<dyn SentenceCost>>, SdrError> {
    let bad = |message: String| SdrError::BadCost {
        spec: kind.to_string(),
        message,
    };
    Ok(match kind {
        CostKind::Cosine => None,
        CostKind::Clinical { .. } => {
            let w = kind.weights().expect("a clinical spec has weights");
            Some(Arc::new(
                ClinicalCost::new(Labeler::default(), w).map_err(bad)?,
            ))
        }
    })
}

/// [`open_cost`] of a spec string (`cosine`, `clinical:lambda=1`).
///
/// # Errors
/// The spec's parse error, or [`open_cost`]'s.
pub fn open_cost_spec(spec: &str) -> Result<Option<Arc<dyn SentenceCost>>, SdrError> {
    open_cost(&spec.parse::<CostKind>()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spec_reads_back_through_the_registry() {
        for spec in [
            "clinical",
            "clinical:lambda=0.8",
            "clinical:lambda=1,added=0.25,omitted=1",
        ] {
            let kind: CostKind = spec.parse().unwrap();
            let cost = open_cost(&kind).unwrap().unwrap();
            assert_eq!(cost.spec(), kind.to_string());
            assert_eq!(
                open_cost_spec(&cost.spec()).unwrap().unwrap().spec(),
                cost.spec()
            );
        }
        assert!(open_cost_spec("cosine").unwrap().is_none());
        assert!(open_cost_spec("nope").is_err());
        let hand_made = CostKind::Clinical {
            lambda: -1.0,
            unmatched: 0.5,
            omitted: 0.5,
        };
        let e = open_cost(&hand_made).unwrap_err().to_string();
        assert!(e.contains("lambda"), "{e}");
    }
}
