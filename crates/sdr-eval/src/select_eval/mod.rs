//! The evaluation of `sdr select --all-policies` (SPEC §5, §7), as a library:
//! the candidates each policy chose, scored against the reference reports
//! next to the two random baselines, as the tables and heatmaps that
//! `sdr select-eval` writes.
//!
//! 1. [`SelectionRecord`]: one line of `sdr select --all-policies` output, its
//!    policies in file order; [`chosen_indices`] checks a line's policies
//!    against the first line's.
//! 2. [`score_selection`]: every study's candidate sections scored once with
//!    every text metric and labelled with CheXpert-rule labels, over the one
//!    evaluation table ([`crate::evaluation`]; every policy and random seed
//!    reuses these values); [`SelectionScores::bertscore_f1`] adds
//!    BERTScore-F1.
//! 3. [`tables`]: per section, the values, improvement-over-random and strata
//!    tables (Markdown, CSV) and heatmaps, overall and per group (normal,
//!    abnormal, single finding, multiple findings), with the summary lines.
//! 4. [`crate::publish::publish`] writes them into a folder, all or nothing.

mod score;
mod tables;

use indexmap::IndexMap;
use serde::Deserialize;

use crate::error::{EvalError, Result};

#[allow(deprecated)]
pub use score::bertscore_f1;
pub use score::{
    add_judge_labels, score_selection, score_studies, BertF1, JudgeLabels, Reference, ScoredStudy,
    SelectionScores, StudyToScore,
};
pub use tables::{tables, Tables, TablesConfig};

/// What one policy chose for a study.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct PolicyChoice {
    /// The candidate's index.
    pub chosen: usize,
}

/// One line of `sdr select --all-policies` output.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SelectionRecord {
    pub id: serde_json::Value,
    /// Whether each candidate parses into both sections.
    pub well_formed: Vec<bool>,
    /// Fingerprint of the candidate texts selected from; selections written
    /// before `sdr select` had it have none.
    #[serde(default)]
    pub candidates_hash: Option<String>,
    /// Each policy's choice, by policy key, in file order.
    pub policies: IndexMap<String, PolicyChoice>,
}

/// Each policy's pick of study `id`'s `n` candidates, in the order of
/// `keys` (the first line's policies), checked: the same policies, in the
/// same order, each pick in range.
///
/// # Errors
/// [`EvalError::Study`] naming the missing, extra or out-of-range policy.
pub fn chosen_indices(
    keys: &[String],
    policies: &IndexMap<String, PolicyChoice>,
    id: &str,
    n: usize,
) -> Result<Vec<usize>> {
    let fail = |message: String| EvalError::Study {
        id: id.to_string(),
        message,
    };
    if let Some(k) = keys.iter().find(|k| !policies.contains_key(*k)) {
        return Err(fail(format!(
            "policy {k} is missing (the first line has it)"
        )));
    }
    if let Some(k) = policies.keys().find(|k| !keys.contains(k)) {
        return Err(fail(format!("policy {k} is not on the first line")));
    }
    let mut chosen = Vec::with_capacity(keys.len());
    for (k, (k2, c)) in keys.iter().zip(policies) {
        if k != k2 {
            return Err(fail(
                "policies in another order than on the first line".into(),
            ));
        }
        if c.chosen >= n {
            return Err(fail(format!(
                "policy {k} chose {} of {n} candidates",
                c.chosen
            )));
        }
        chosen.push(c.chosen);
    }
    Ok(chosen)
}

/// The family a heatmap groups a policy key under: the metric's family
/// ([`sdr_core::Metric::family`]: `sinkhorn:eps=0.1@min` -> `sinkhorn`),
/// `consensus` for a consensus policy, behind its sentence cost's name for a
/// key under another cost (`clinical/chamfer@min` -> `clinical/chamfer`,
/// `clinical:lambda=2/ot@consensus` -> `clinical/consensus`). A metric that
/// does not parse keeps the text before its `:`.
pub fn policy_family(key: &str) -> String {
    if let Some((cost, rest)) = key.split_once('/') {
        let name = cost.split(':').next().unwrap_or(cost);
        return format!("{name}/{}", policy_family(rest));
    }
    let (metric, agg) = key.split_once('@').unwrap_or((key, ""));
    if agg == "consensus" {
        return "consensus".into();
    }
    match metric.parse::<sdr_core::Metric>() {
        Ok(m) => m.family().to_string(),
        Err(_) => metric.split(':').next().unwrap_or(metric).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_keep_file_order() {
        let line = r#"{"id": 7, "well_formed": [true, false, true],
            "policies": {"sinkhorn:eps=0.1@min": {"chosen": 2}, "chamfer@min": {"chosen": 0},
                         "ot@consensus": {"chosen": 1, "scores": [0.1, 0.2, 0.3]}}}"#;
        let r: SelectionRecord = serde_json::from_str(line).unwrap();
        let keys: Vec<&str> = r.policies.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            ["sinkhorn:eps=0.1@min", "chamfer@min", "ot@consensus"]
        );
        assert_eq!(r.candidates_hash, None);
        let keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        assert_eq!(
            chosen_indices(&keys, &r.policies, "7", 3).unwrap(),
            [2, 0, 1]
        );
    }

    #[test]
    fn chosen_indices_name_what_is_wrong() {
        let keys = vec!["a@min".to_string(), "b@min".to_string()];
        let map = |pairs: &[(&str, usize)]| -> IndexMap<String, PolicyChoice> {
            pairs
                .iter()
                .map(|&(k, c)| (k.to_string(), PolicyChoice { chosen: c }))
                .collect()
        };
        for (pairs, want) in [
            (
                &[("a@min", 0)][..],
                "study 3: policy b@min is missing (the first line has it)",
            ),
            (
                &[("a@min", 0), ("b@min", 0), ("c@min", 0)],
                "study 3: policy c@min is not on the first line",
            ),
            (
                &[("b@min", 0), ("a@min", 0)],
                "study 3: policies in another order than on the first line",
            ),
            (
                &[("a@min", 0), ("b@min", 4)],
                "study 3: policy b@min chose 4 of 2 candidates",
            ),
        ] {
            let e = chosen_indices(&keys, &map(pairs), "3", 2).unwrap_err();
            assert_eq!(e.to_string(), want);
        }
    }

    #[test]
    fn families_of_policy_keys() {
        for (key, want) in [
            ("chamfer@min", "chamfer"),
            ("sinkhorn:eps=0.1@min", "sinkhorn"),
            ("uot:eps=0.1,tau=0.5@knn:k=5", "uot"),
            ("hung-pen:alpha=0.1@avg", "hung-pen"),
            ("pot:rho=adaptive@min", "pot"),
            ("ot@consensus", "consensus"),
            ("clinical/chamfer@min", "clinical/chamfer"),
            ("clinical:lambda=2/ot@consensus", "clinical/consensus"),
            ("good@min", "good"),
            ("made-up:x=1@min", "made-up"),
        ] {
            assert_eq!(policy_family(key), want, "{key}");
        }
        // Every metric's canonical key: the family is what the key starts with.
        for m in sdr_core::Metric::all() {
            let key = format!("{m}@min");
            let text = key.split([':', '@']).next().unwrap();
            assert_eq!(policy_family(&key), text, "{key}");
        }
    }
}
