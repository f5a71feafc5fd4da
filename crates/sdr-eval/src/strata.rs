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

/// The two-way split of the selection tables (`sdr select-eval`): a study is
/// normal when its `Problems` value is exactly `normal` (case and spaces
/// ignored, repeats allowed), abnormal otherwise; the same rule as
/// [`Stratum::NoFinding`] against the other two strata.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum Abnormality {
    Normal,
    Abnormal,
}

impl Abnormality {
    /// Both, in table order.
    pub const ALL: [Abnormality; 2] = [Abnormality::Normal, Abnormality::Abnormal];

    /// The label used in tables and file names.
    pub fn label(self) -> &'static str {
        match self {
            Abnormality::Normal => "normal",
            Abnormality::Abnormal => "abnormal",
        }
    }

    /// The split of one IU X-ray `Problems` value.
    ///
    /// # Errors
    /// [`EvalError::EmptyProblems`] when the value holds no label.
    ///
    /// ```
    /// use sdr_eval::strata::Abnormality;
    /// assert_eq!(Abnormality::from_problems("normal").unwrap(), Abnormality::Normal);
    /// assert_eq!(Abnormality::from_problems("Opacity;normal").unwrap(), Abnormality::Abnormal);
    /// ```
    pub fn from_problems(problems: &str) -> Result<Abnormality> {
        Ok(match stratum_from_problems(problems)? {
            Stratum::NoFinding => Abnormality::Normal,
            _ => Abnormality::Abnormal,
        })
    }
}

/// Study indices per [`Abnormality`], in [`Abnormality::ALL`] order.
///
/// ```
/// use sdr_eval::strata::{split_abnormality, Abnormality::*};
/// assert_eq!(split_abnormality(&[Abnormal, Normal, Abnormal]), [(Normal, vec![1]), (Abnormal, vec![0, 2])]);
/// ```
pub fn split_abnormality(of: &[Abnormality]) -> [(Abnormality, Vec<usize>); 2] {
    Abnormality::ALL.map(|a| {
        let idx = of
            .iter()
            .enumerate()
            .filter(|(_, &x)| x == a)
            .map(|(i, _)| i)
            .collect();
        (a, idx)
    })
}

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

    #[test]
    fn normal_vs_abnormal() {
        use Abnormality::*;
        for (p, want) in [
            ("normal", Normal),
            (" NORMAL ; normal", Normal),
            ("No Indexing", Abnormal),
            ("normal;Cardiomegaly", Abnormal),
            ("Cardiomegaly;Opacity", Abnormal),
        ] {
            assert_eq!(Abnormality::from_problems(p).unwrap(), want, "{p}");
        }
        assert!(Abnormality::from_problems(";").is_err());
        let g = split_abnormality(&[Normal, Abnormal, Normal]);
        assert_eq!(g[0].1, vec![0, 2]);
        assert_eq!(g[1].1, vec![1]);
        assert!(split_abnormality(&[])[0].1.is_empty());
    }
}
