//! Validation against IU X-ray's human MeSH coding.
//!
//! `data/clinical/iu_mesh_map.json` maps MeSH terms (`Heading/qualifier/...`)
//! to CheXpert observations; [`validate`] labels every study's Findings +
//! Impression and scores the labels against the mapped positives. The
//! example `iu_validate` prints the result and writes
//! `docs/results/labeler.md`; a test keeps the macro F1 above
//! [`IU_MACRO_F1_GOAL`].

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::error::{ClinicalError, Result};
use crate::f1::{chexpert_f1, F1Report, Scores, UncertainPolicy};
use crate::labeler::Labeler;
use crate::observation::{Label, Labels, Observation};

/// The bundled map, `data/clinical/iu_mesh_map.json`.
pub const BUNDLED_MESH_MAP: &str = include_str!("../../../data/clinical/iu_mesh_map.json");

/// The macro F1 the labeler must reach over the observations with at least
/// [`IU_MIN_SUPPORT`] positive studies.
pub const IU_MACRO_F1_GOAL: f64 = 0.90;

/// Observations with fewer positive studies than this are reported but left
/// out of the macro average the goal applies to.
pub const IU_MIN_SUPPORT: usize = 20;

/// How the validation counts the labeler's uncertain labels: as absent. IU's
/// indexers code what a report asserts: they code "probable" findings and
/// the first term of "X versus Y" but not "may represent" or "cannot be
/// excluded", so no policy matches them exactly; the labeler's definite
/// positives are the fairer comparison. `docs/results/labeler.md` gives both.
pub const IU_POLICY: UncertainPolicy = UncertainPolicy::Negative;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct MapFile {
    #[serde(default)]
    #[allow(dead_code)]
    comment: Option<serde_json::Value>,
    version: u32,
    /// Headings that mark a study as not coded at all.
    unindexed: Vec<String>,
    observations: BTreeMap<String, Vec<TermRule>>,
    /// Terms deliberately not mapped, with the reason (documentation only).
    #[serde(default)]
    #[allow(dead_code)]
    left_out: BTreeMap<String, String>,
}

/// A MeSH heading, optionally restricted by its qualifiers.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct TermRule {
    heading: String,
    /// At least one of these qualifiers must be present (when non-empty).
    #[serde(default)]
    any: Vec<String>,
    /// None of these qualifiers may be present.
    #[serde(default)]
    none: Vec<String>,
}

/// IU X-ray MeSH terms → CheXpert observations.
#[derive(Debug, Clone)]
pub struct MeshMap {
    unindexed: Vec<String>,
    rules: Vec<(Observation, TermRule)>,
}

fn canon(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

impl Default for MeshMap {
    /// The bundled map ([`BUNDLED_MESH_MAP`]).
    fn default() -> Self {
        MeshMap::from_json(BUNDLED_MESH_MAP).expect("the bundled MeSH map parses (tested)")
    }
}

impl MeshMap {
    /// Parses a map in the format of `data/clinical/iu_mesh_map.json`.
    pub fn from_json(json: &str) -> Result<MeshMap> {
        let file: MapFile =
            serde_json::from_str(json).map_err(|e| ClinicalError::MeshMap(e.to_string()))?;
        if file.version != 1 {
            return Err(ClinicalError::MeshMap(format!(
                "version {} is not supported (expected 1)",
                file.version
            )));
        }
        let mut rules = Vec::new();
        for (name, terms) in file.observations {
            let o = match Observation::from_name(&name) {
                Some(Observation::NoFinding) => {
                    return Err(ClinicalError::MeshMap(
                        "`No Finding` is derived from the other observations".into(),
                    ))
                }
                Some(o) => o,
                None => return Err(ClinicalError::UnknownObservation(name)),
            };
            for mut t in terms {
                t.heading = canon(&t.heading);
                t.any = t.any.iter().map(|q| canon(q)).collect();
                t.none = t.none.iter().map(|q| canon(q)).collect();
                rules.push((o, t));
            }
        }
        Ok(MeshMap {
            unindexed: file.unindexed.iter().map(|h| canon(h)).collect(),
            rules,
        })
    }

    /// Reference labels of a study's MeSH field (`;`-separated terms):
    /// mapped observations positive, the rest not mentioned, `No Finding`
    /// by CheXpert's rule from those. `None` for an unindexed study.
    pub fn reference(&self, mesh: &str) -> Option<Labels> {
        let mut labels = Labels::default();
        for term in mesh.split(';') {
            let mut parts = term.split('/').map(canon);
            let Some(heading) = parts.next().filter(|h| !h.is_empty()) else {
                continue;
            };
            if self.unindexed.contains(&heading) {
                return None;
            }
            let qualifiers: Vec<String> = parts.collect();
            for (o, rule) in &self.rules {
                let matches = rule.heading == heading
                    && (rule.any.is_empty() || rule.any.iter().any(|q| qualifiers.contains(q)))
                    && !rule.none.iter().any(|q| qualifiers.contains(q));
                if matches {
                    labels[*o] = Some(Label::Positive);
                }
            }
        }
        labels.no_finding_from_others();
        Some(labels)
    }
}

/// One IU X-ray study (a row of `indiana_reports.csv`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Study {
    /// The `uid` column.
    pub uid: String,
    /// The `MeSH` column (`;`-separated terms).
    pub mesh: String,
    /// The `findings` column.
    pub findings: String,
    /// The `impression` column.
    pub impression: String,
}

impl Study {
    /// The text the labeler sees: both sections under plain headers.
    pub fn text(&self) -> String {
        format!(
            "FINDINGS: {}\nIMPRESSION: {}",
            self.findings.trim(),
            self.impression.trim()
        )
    }
}

/// A study where the labeler and the MeSH coding disagree on one observation.
#[derive(Debug, Clone, PartialEq)]
pub struct Disagreement {
    /// The study's `uid`.
    pub uid: String,
    /// The observation they disagree on.
    pub observation: Observation,
    /// The labeler's label.
    pub labeler: Option<Label>,
    /// Whether the MeSH coding maps to the observation.
    pub reference_positive: bool,
    /// The text the labeler saw.
    pub text: String,
}

/// The outcome of [`validate`].
#[derive(Debug, Clone)]
pub struct Validation {
    /// CheXpert-rule F1 of the labels against the MeSH-derived references.
    pub report: F1Report,
    /// Studies scored.
    pub studies: usize,
    /// Studies left out: MeSH `No Indexing`.
    pub unindexed: usize,
    /// Studies left out: neither findings nor impression.
    pub empty: usize,
    /// Observations with at least `min_support` positive studies.
    pub supported: Vec<Observation>,
    /// The support threshold of [`Validation::supported`].
    pub min_support: usize,
    /// Macro scores over [`Validation::supported`].
    pub macro_supported: Scores,
    /// Micro scores over [`Validation::supported`].
    pub micro_supported: Scores,
    /// The labeler's `No Finding` against MeSH `normal` (stricter: IU codes
    /// findings outside CheXpert's 14, such as granulomas, as not normal).
    pub no_finding_vs_mesh_normal: Scores,
    /// Every study/observation pair where labeler and reference differ.
    pub disagreements: Vec<Disagreement>,
}

/// Labels every study and scores the labels against the MeSH-derived
/// references (studies without coding or without text are left out).
pub fn validate(
    labeler: &Labeler,
    map: &MeshMap,
    studies: &[Study],
    min_support: usize,
    policy: UncertainPolicy,
) -> Validation {
    let (mut hyps, mut refs) = (Vec::new(), Vec::new());
    let (mut unindexed, mut empty) = (0, 0);
    let mut disagreements = Vec::new();
    let (mut tp, mut fp, mut fn_) = (0, 0, 0);
    let u = policy == UncertainPolicy::Positive;
    for s in studies {
        if s.findings.trim().is_empty() && s.impression.trim().is_empty() {
            empty += 1;
            continue;
        }
        let Some(r) = map.reference(&s.mesh) else {
            unindexed += 1;
            continue;
        };
        let text = s.text();
        let h = labeler.label(&text);
        for o in Observation::ALL {
            if h.is_positive(o, u) != r.is_positive(o, u) {
                disagreements.push(Disagreement {
                    uid: s.uid.clone(),
                    observation: o,
                    labeler: h[o],
                    reference_positive: r.is_positive(o, u),
                    text: text.clone(),
                });
            }
        }
        let normal = s.mesh.trim().eq_ignore_ascii_case("normal");
        match (h.is_positive(Observation::NoFinding, u), normal) {
            (true, true) => tp += 1,
            (true, false) => fp += 1,
            (false, true) => fn_ += 1,
            (false, false) => {}
        }
        hyps.push(h);
        refs.push(r);
    }
    let report = chexpert_f1(&hyps, &refs, policy).expect("one reference per candidate");
    let supported: Vec<Observation> = report
        .per_observation
        .iter()
        .filter(|s| s.support >= min_support)
        .map(|s| s.observation)
        .collect();
    Validation {
        macro_supported: report.macro_over(&supported),
        micro_supported: report.micro_over(&supported),
        no_finding_vs_mesh_normal: Scores::from_counts(tp, fp, fn_),
        studies: hyps.len(),
        unindexed,
        empty,
        supported,
        min_support,
        report,
        disagreements,
    }
}

impl Validation {
    /// The result as a Markdown table with the summary lines under it.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        s.push_str(&format!(
            "Studies scored: {} (left out: {} `No Indexing`, {} without text). Uncertain counts as {}.\n\n",
            self.studies,
            self.unindexed,
            self.empty,
            match self.report.policy {
                UncertainPolicy::Positive => "positive",
                UncertainPolicy::Negative => "negative",
            }
        ));
        s.push_str(
            "| observation | support | predicted | TP | FP | FN | precision | recall | F1 |\n",
        );
        s.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for o in &self.report.per_observation {
            let mark = if self.supported.contains(&o.observation) {
                ""
            } else {
                " †"
            };
            s.push_str(&format!(
                "| {}{} | {} | {} | {} | {} | {} | {:.3} | {:.3} | {:.3} |\n",
                o.observation,
                mark,
                o.support,
                o.tp + o.fp,
                o.tp,
                o.fp,
                o.fn_,
                o.scores.precision,
                o.scores.recall,
                o.scores.f1
            ));
        }
        let row = |name: &str, sc: &Scores| {
            format!(
                "| **{name}** | | | | | | {:.3} | {:.3} | **{:.3}** |\n",
                sc.precision, sc.recall, sc.f1
            )
        };
        s.push_str(&row(
            &format!("macro, support ≥ {}", self.min_support),
            &self.macro_supported,
        ));
        s.push_str(&row(
            &format!("micro, support ≥ {}", self.min_support),
            &self.micro_supported,
        ));
        s.push_str(&row("macro, all 14", &self.report.macro_14));
        s.push_str(&row("micro, all 14", &self.report.micro_14));
        s.push_str(&row("macro, 5", &self.report.macro_5));
        s.push_str(&row("micro, 5", &self.report.micro_5));
        s.push_str(&format!(
            "\n† fewer than {} positive studies: left out of the \"support ≥ {}\" averages.\n\n\
             `No Finding` against MeSH `normal` instead of the derived reference: \
             precision {:.3}, recall {:.3}, F1 {:.3}.\n",
            self.min_support,
            self.min_support,
            self.no_finding_vs_mesh_normal.precision,
            self.no_finding_vs_mesh_normal.recall,
            self.no_finding_vs_mesh_normal.f1
        ));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_map_maps_headings_and_qualifiers() {
        let m = MeshMap::default();
        let r = m
            .reference("Cardiomegaly/borderline;Pulmonary Artery/enlarged")
            .unwrap();
        assert_eq!(r[Observation::Cardiomegaly], Some(Label::Positive));
        assert_eq!(r[Observation::NoFinding], None);
        let r = m.reference("normal").unwrap();
        assert_eq!(r[Observation::NoFinding], Some(Label::Positive));
        assert!(m.reference("No Indexing").is_none());
        let r = m.reference("Opacity/ribs/left").unwrap();
        assert_eq!(r[Observation::LungOpacity], None);
        let r = m.reference("Opacity/lung/base/left").unwrap();
        assert_eq!(r[Observation::LungOpacity], Some(Label::Positive));
        // Devices do not stop No Finding.
        let r = m.reference("Catheters, Indwelling/right").unwrap();
        assert_eq!(r[Observation::SupportDevices], Some(Label::Positive));
        assert_eq!(r[Observation::NoFinding], Some(Label::Positive));
    }

    #[test]
    fn map_errors_name_the_input() {
        let e =
            MeshMap::from_json(r#"{"version":1,"unindexed":[],"observations":{"Effusion":[]}}"#)
                .unwrap_err();
        assert!(e.to_string().contains("`Effusion`"), "{e}");
        assert!(MeshMap::from_json("{").is_err());
    }

    #[test]
    fn validation_counts_and_markdown() {
        let studies = [
            Study {
                uid: "1".into(),
                mesh: "Cardiomegaly/mild".into(),
                findings: "Mild cardiomegaly.".into(),
                impression: "No edema.".into(),
            },
            Study {
                uid: "2".into(),
                mesh: "normal".into(),
                findings: "".into(),
                impression: "Small left pleural effusion.".into(),
            },
            Study {
                uid: "3".into(),
                mesh: "No Indexing".into(),
                findings: "x".into(),
                impression: "".into(),
            },
            Study {
                uid: "4".into(),
                mesh: "normal".into(),
                findings: " ".into(),
                impression: "".into(),
            },
        ];
        let v = validate(
            &Labeler::default(),
            &MeshMap::default(),
            &studies,
            1,
            UncertainPolicy::Positive,
        );
        assert_eq!((v.studies, v.unindexed, v.empty), (2, 1, 1));
        assert_eq!(v.report.observation(Observation::Cardiomegaly).tp, 1);
        assert_eq!(v.report.observation(Observation::PleuralEffusion).fp, 1);
        assert_eq!(
            v.supported,
            [Observation::NoFinding, Observation::Cardiomegaly]
        );
        assert!(v
            .disagreements
            .iter()
            .any(|d| d.uid == "2" && d.observation == Observation::PleuralEffusion));
        let md = v.markdown();
        assert!(
            md.contains("| Pleural Effusion † | 0 | 1 | 0 | 1 | 0 |"),
            "{md}"
        );
    }
}
