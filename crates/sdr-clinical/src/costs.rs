//! The registry of sentence costs: from a spec to the [`SentenceCost`]
//! every reward, selection, pruning run, explanation, `sdr serve` and
//! Python class reads. The cosine cost (SPEC §3) opens as `None`: the
//! distances read the cosine matrix as it is, bit for bit.
//!
//! A new cost is its file (a type implementing [`SentenceCost`] and its
//! [`CostFamily`]) and one entry of [`FAMILIES`]; a cost outside this
//! repository is registered at start-up with [`register_cost`]. Every
//! caller parses `--cost` / `cost=` with [`parse_cost`] and holds the
//! `Arc<dyn SentenceCost>` of [`open_cost`], so nothing else changes.
//! The clinical cost keeps its typed spec ([`CostKind::Clinical`]).

use std::sync::{Arc, RwLock};

use sdr_core::cost::{CostKind, NamedCost};
use sdr_core::{CostFamily, SdrError, SentenceCost};

use crate::cost::open_clinical;

/// The costs of this repository beyond `cosine`; a new one is one entry
/// here. (The clinical cost's spec is also typed, [`CostKind::Clinical`],
/// and opens from it.)
pub const FAMILIES: &[CostFamily] = &[crate::cost::CLINICAL];

/// Costs registered while the process runs ([`register_cost`]).
static REGISTERED: RwLock<Vec<CostFamily>> = RwLock::new(Vec::new());

/// Makes `family` known to [`parse_cost`] and [`open_cost`] in this
/// process (a cost defined outside this repository), replacing a family
/// registered before under the same name.
///
/// # Errors
/// A name that `cosine` or [`FAMILIES`] already has, or that is not a
/// cost name.
pub fn register_cost(family: CostFamily) -> Result<(), SdrError> {
    let bad = |message: String| SdrError::BadCost {
        spec: family.name.to_string(),
        message,
    };
    let named = NamedCost::parse(family.name).map_err(bad)?;
    if named.name() != family.name
        || family.name == "cosine"
        || FAMILIES.iter().any(|f| f.name == family.name)
    {
        return Err(bad(format!(
            "`{}` is a built-in cost's name or not a name",
            family.name
        )));
    }
    let mut r = REGISTERED.write().unwrap_or_else(|e| e.into_inner());
    r.retain(|f| f.name != family.name);
    r.push(family);
    Ok(())
}

/// The family named `name`, built in or registered.
fn family(name: &str) -> Option<CostFamily> {
    FAMILIES
        .iter()
        .copied()
        .find(|f| f.name == name)
        .or_else(|| {
            let r = REGISTERED.read().unwrap_or_else(|e| e.into_inner());
            r.iter().copied().find(|f| f.name == name)
        })
}

/// Every cost spec form known now, for help texts and errors: `cosine`,
/// then each family as `name[:params]`.
pub fn cost_forms() -> Vec<String> {
    let mut out = vec!["cosine".to_string()];
    let registered = REGISTERED.read().unwrap_or_else(|e| e.into_inner()).clone();
    for f in FAMILIES.iter().chain(&registered) {
        out.push(if f.params.is_empty() {
            f.name.to_string()
        } else {
            format!("{}[:{}]", f.name, f.params)
        });
    }
    out
}

/// Parses and checks a spec: its name known, its values valid, its form
/// canonical. Loads nothing.
///
/// ```
/// let c = sdr_clinical::parse_cost("clinical:lambda=1").unwrap();
/// assert_eq!(c.to_string(), "clinical:lambda=1");
/// let e = sdr_clinical::parse_cost("euclid").unwrap_err().to_string();
/// assert!(e.contains("unknown cost `euclid`"), "{e}");
/// ```
///
/// # Errors
/// [`SdrError::BadCost`], one line naming the spec and what is wrong.
pub fn parse_cost(spec: &str) -> Result<CostKind, SdrError> {
    let kind: CostKind = spec.parse()?;
    let CostKind::Named(named) = kind else {
        return Ok(kind);
    };
    let bad = |message: String| SdrError::BadCost {
        spec: spec.trim().to_string(),
        message,
    };
    let Some(f) = family(named.name()) else {
        return Err(bad(format!(
            "unknown cost `{}` (known: {})",
            named.name(),
            cost_forms().join(", ")
        )));
    };
    let canonical = (f.check)(&named).map_err(bad)?;
    NamedCost::parse(&canonical)
        .map(CostKind::Named)
        .map_err(bad)
}

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
/// [`SdrError::BadCost`] for an unknown name or invalid values.
pub fn open_cost(kind: &CostKind) -> Result<Option<Arc<dyn SentenceCost>>, SdrError> {
    let bad = |message: String| SdrError::BadCost {
        spec: kind.to_string(),
        message,
    };
    Ok(match kind {
        CostKind::Cosine => None,
        CostKind::Clinical { .. } => Some(open_clinical(kind).map_err(bad)?),
        CostKind::Named(named) => {
            let checked = parse_cost(named.as_str())?;
            let CostKind::Named(named) = checked else {
                return open_cost(&checked);
            };
            let Some(f) = family(named.name()) else {
                return Err(bad(format!("unknown cost `{}`", named.name())));
            };
            Some((f.open)(&named).map_err(bad)?)
        }
    })
}

/// [`open_cost`] of a spec string (`cosine`, `clinical:lambda=1`).
///
/// # Errors
/// [`parse_cost`]'s and [`open_cost`]'s.
pub fn open_cost_spec(spec: &str) -> Result<Option<Arc<dyn SentenceCost>>, SdrError> {
    open_cost(&parse_cost(spec)?)
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
            let kind: CostKind = parse_cost(spec).unwrap();
            let cost = open_cost(&kind).unwrap().unwrap();
            assert_eq!(cost.spec(), kind.to_string());
            assert_eq!(
                open_cost_spec(&cost.spec()).unwrap().unwrap().spec(),
                cost.spec()
            );
        }
        assert!(open_cost_spec("cosine").unwrap().is_none());
        let e = open_cost_spec("nope:x=1").unwrap_err().to_string();
        assert!(
            e.contains("unknown cost `nope`") && e.contains("clinical"),
            "{e}"
        );
        let hand_made = CostKind::Clinical {
            lambda: -1.0,
            unmatched: 0.5,
            omitted: 0.5,
        };
        let e = open_cost(&hand_made).unwrap_err().to_string();
        assert!(e.contains("lambda"), "{e}");
    }

    #[test]
    fn built_in_names_cannot_be_registered() {
        let f = CostFamily {
            name: "clinical",
            params: "",
            check: |s| Ok(s.to_string()),
            open: |_| Err("never".into()),
        };
        assert!(register_cost(f).is_err());
        assert!(register_cost(CostFamily {
            name: "Bad Name",
            ..f
        })
        .is_err());
    }
}
