//! Finding strata for the stratified analysis (SPEC §7, paper Tab. strata):
//! no finding / single finding / multiple findings, from dataset labels.
//!
//! IU X-ray labels each study in its `Problems` column: `;`-separated labels,
//! `normal` for a normal study. The rule: split on `;`, trim, drop empty
//! pieces, keep distinct labels (case-insensitively); `{normal}` is
//! [`Stratum::NoFinding`]; otherwise `normal` is ignored and one remaining
//! label is [`Stratum::SingleFinding`], more is
//! [`Stratum::MultipleFindings`]. Labels such as `No Indexing` count as a
//! finding label, which reproduces the README's counts (1,195 / 770 / 1,366
//! among the 3,331 reports with both sections).

use std::collections::BTreeSet;

use crate::error::{EvalError, Result};

/// A finding stratum.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum Stratum {
    NoFinding,
    SingleFinding,
    MultipleFindings,
}

impl Stratum {
    /// All strata in table order.
    pub const ALL: [Stratum; 3] = [
        Stratum::NoFinding,
        Stratum::SingleFinding,
        Stratum::MultipleFindings,
    ];

    /// The label used in tables.
    pub fn label(self) -> &'static str {
        match self {
            Stratum::NoFinding => "no finding",
            Stratum::SingleFinding => "single finding",
            Stratum::MultipleFindings => "multiple findings",
        }
    }
}

impl std::fmt::Display for Stratum {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// The stratum of one IU X-ray `Problems` value.
///
/// # Errors
/// [`EvalError::EmptyProblems`] when the value holds no label.
///
/// ```
/// use sdr_eval::strata::{stratum_from_problems, Stratum};
/// assert_eq!(stratum_from_problems("normal").unwrap(), Stratum::NoFinding);
/// assert_eq!(stratum_from_problems("Cardiomegaly;Cardiomegaly").unwrap(), Stratum::SingleFinding);
/// assert_eq!(stratum_from_problems("Cardiomegaly;Opacity").unwrap(), Stratum::MultipleFindings);
/// ```
pub fn stratum_from_problems(problems: &str) -> Result<Stratum> {
    let labels: BTreeSet<String> = problems
        .split(';')
        .map(|s| s.trim().to_lowercase())
        .filter(|s| !s.is_empty())
        .collect();
    if labels.is_empty() {
        return Err(EvalError::EmptyProblems(problems.to_string()));
    }
    let findings = labels.iter().filter(|l| l.as_str() != "normal").count();
    Ok(match findings {
        0 => Stratum::NoFinding,
        1 => Stratum::SingleFinding,
        _ => Stratum::MultipleFindings,
    })
}

/// Study indices per stratum, in [`Stratum::ALL`] order (strata without a
/// study get an empty list), to evaluate policies and baselines per stratum.
///
/// ```
/// use sdr_eval::strata::{group_by_stratum, Stratum::*};
/// let g = group_by_stratum(&[SingleFinding, NoFinding, SingleFinding]);
/// assert_eq!(g[1], (SingleFinding, vec![0, 2]));
/// assert!(g[2].1.is_empty());
/// ```
pub fn group_by_stratum(strata: &[Stratum]) -> [(Stratum, Vec<usize>); 3] {
    Stratum::ALL.map(|s| {
        let idx = strata
            .iter()
            .enumerate()
            .filter(|(_, &x)| x == s)
            .map(|(i, _)| i)
            .collect();
        (s, idx)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edge_cases() {
        assert!(stratum_from_problems("").is_err());
        assert!(stratum_from_problems(" ; ").is_err());
        assert_eq!(
            stratum_from_problems(" Normal ").unwrap(),
            Stratum::NoFinding
        );
        assert_eq!(
            stratum_from_problems("normal;Lung").unwrap(),
            Stratum::SingleFinding
        );
    }
}
