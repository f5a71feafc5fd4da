//! An Impression checked against its own Findings, with no reference
//! (SPEC §10a): what it contradicts, what the Findings never support, and
//! which of the Findings' abnormal findings it leaves out.
//!
//! The rule is asymmetric. An Impression should name the Findings' abnormal
//! findings and state nothing the Findings contradict or never mention; the
//! Findings' many normal statements ("No pneumothorax.", "The heart is normal
//! in size.") are not expected in it. Per finding `o` (CheXpert's 13 and the
//! extras of `data/clinical/sentence_facts.json`), with `I_o` and `F_o` the
//! facts (SPEC §10) of the Impression's and the Findings' sentences that name
//! `o`:
//!
//! - **contradiction** (both name `o`): the larger of
//!   `max_{f in I_o} min_{g in F_o} c(f, g)` (an Impression statement no
//!   Findings statement agrees with) and
//!   `max_{g in F_o, g not absent} min_{f in I_o} c(g, f)` counted only for
//!   polarity or hedge conflicts (a present or hedged finding the Impression
//!   denies or hedges), with `c` the pair conflict of [`ClinicalWeights`]
//!   (present against absent 1, hedged against either 1/2, left against
//!   right 1, bilateral against one side 1/2, grades two apart 1, one apart
//!   1/2). At most 1 per finding.
//! - **unsupported** (`F_o` empty): 1 when the Impression states `o` present,
//!   1/2 when it only hedges it, 0 when it denies it ("No pneumothorax." in an
//!   Impression whose Findings never mention one is harmless), and 0 when
//!   the Findings state a finding related to `o` in CheXpert's hierarchy
//!   ([`related`]: "opacity" in the Findings supports "pneumonia" or
//!   "atelectasis" in the Impression, and the other way round).
//! - **omission** (`I_o` empty, and the Impression states no finding related
//!   to `o`): `e(o)` when the Findings state `o` present, `e(o) / 2` when they
//!   hedge it, 0 when they deny it (the asymmetric rule). `e(o)` is how often
//!   radiologists' Impressions name `o` when their Findings state it
//!   ([`Expectations`], measured on IU X-ray's train split: a pleural
//!   effusion 0.8, a device 0.14, degenerative changes of the spine 0.02).
//!
//! Findings outside the vocabulary (facts whose id is past
//! [`Labeler::fact_observations`], a site with a side) count only as
//! contradictions (a side swap of one site); they are never unsupported or
//! omitted, since the rules cannot tell what they are.
//!
//! $$s(I \mid F) = w_c \sum_o \mathrm{contra}_o + w_u \sum_o \mathrm{unsup}_o
//!   + w_o \sum_o \mathrm{omit}_o, \qquad \text{lower is better}$$
//!
//! Each finding counts once however many sentences state it. A sentence that
//! names no finding ("No acute cardiopulmonary abnormality.") has no fact and
//! costs nothing: a normal Impression of normal Findings scores 0.

use std::sync::Arc;

use sdr_core::cost::clinical::{ClinicalWeights, ConflictKind, Fact, Polarity};
use sdr_core::report::split_sentences;
use serde::Serialize;

use crate::cost::{fact_text, ClinicalCost};
use crate::labeler::Labeler;
use crate::observation::Observation;

/// The weights of the three terms of [`Consistency::check`]'s score.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ConsistencyWeights {
    /// `w_c`: one contradicted finding.
    pub contradiction: f64,
    /// `w_u`: one present finding the Findings never name.
    pub unsupported: f64,
    /// `w_o`: one present finding of the Findings the Impression never names.
    pub omission: f64,
}

impl Default for ConsistencyWeights {
    /// `1 / 0.5 / 0.5`: a contradiction is an error whatever the Impression
    /// is for; an unsupported or omitted finding weighs half of one, as the
    /// clinical cost's unmatched finding does (SPEC §10), since the rules miss
    /// rephrasings ("calcified nodule" / "granuloma") and an Impression may
    /// leave a minor finding out.
    fn default() -> Self {
        ConsistencyWeights {
            contradiction: 1.0,
            unsupported: 0.5,
            omission: 0.5,
        }
    }
}

impl ConsistencyWeights {
    /// Checks that every weight is finite and non-negative; the error names it.
    pub fn check(&self) -> Result<(), String> {
        for (name, w) in [
            ("contradiction", self.contradiction),
            ("unsupported", self.unsupported),
            ("omission", self.omission),
        ] {
            if !(w.is_finite() && w >= 0.0) {
                return Err(format!("weight `{name}` must be finite and >= 0, got {w}"));
            }
        }
        Ok(())
    }
}

/// One statement of a section: its sentence (0-based) and text, and the fact
/// in words ("present Pleural Effusion (right, grade 1)").
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Statement {
    /// The sentence's index in its section.
    pub sentence: usize,
    /// The sentence.
    pub text: String,
    /// The fact, as [`fact_text`] writes it.
    pub fact: String,
}

/// One finding the Impression contradicts, leaves unsupported or omits.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Issue {
    /// The finding's name (CheXpert's spelling, or the extras').
    pub finding: String,
    /// `polarity`, `hedge`, `side`, `bilateral`, `grade` for a
    /// contradiction; `unmatched` for an unsupported or omitted finding.
    pub kind: &'static str,
    /// Its weight in `(0, 1]` before the term's weight.
    pub weight: f64,
    /// The Impression's statement (none for an omission).
    pub impression: Option<Statement>,
    /// The Findings' statement (none for an unsupported finding).
    pub findings: Option<Statement>,
}

/// What [`Consistency::check`] found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConsistencyReport {
    /// `w_c C + w_u U + w_o O`; lower is better, 0 is consistent.
    pub score: f64,
    /// `C`: the sum of the contradictions' weights.
    pub contradiction: f64,
    /// `U`: the sum of the unsupported findings' weights.
    pub unsupported: f64,
    /// `O`: the sum of the omitted findings' weights.
    pub omission: f64,
    /// Per finding, in the order the Impression (then the Findings) names them.
    pub contradictions: Vec<Issue>,
    /// Findings the Impression states present or hedged that the Findings never name.
    pub unsupported_findings: Vec<Issue>,
    /// Present or hedged findings of the Findings that the Impression never names.
    pub omissions: Vec<Issue>,
    /// The Impression's sentences.
    pub impression_sentences: usize,
    /// The Findings' sentences.
    pub findings_sentences: usize,
}

impl ConsistencyReport {
    /// Whether anything was found.
    pub fn is_consistent(&self) -> bool {
        self.contradictions.is_empty()
            && self.unsupported_findings.is_empty()
            && self.omissions.is_empty()
    }
}

/// The checker: a clinical cost (its labeler, pair conflicts and fact cache),
/// the three weights, and the expectation of each finding in an Impression.
/// Cheap to share across threads.
///
/// ```
/// use sdr_clinical::Consistency;
///
/// let c = Consistency::default();
/// let findings = "Heart size is normal. There is a small right pleural effusion. No pneumothorax.";
/// let faithful = c.check("Small right pleural effusion.", findings);
/// assert_eq!(faithful.score, 0.0);
/// let denied = c.check("No pleural effusion.", findings);
/// assert_eq!(denied.contradictions[0].kind, "polarity");
/// assert!(denied.score > faithful.score);
/// // The Findings' normal statements are not expected in the Impression;
/// // the effusion is.
/// let normal = c.check("No acute cardiopulmonary abnormality.", findings);
/// assert_eq!(normal.omissions[0].finding, "Pleural Effusion");
/// assert!(normal.score > 0.0);
/// ```
#[derive(Debug)]
pub struct Consistency {
    cost: Arc<ClinicalCost>,
    weights: ConsistencyWeights,
    expectations: Expectations,
    /// `parent[o]`: the finding `o` specialises in CheXpert's hierarchy.
    parent: Vec<Option<u16>>,
}

impl Default for Consistency {
    /// The bundled rules, the default weights and the bundled expectations.
    fn default() -> Self {
        Consistency::new(
            Arc::new(ClinicalCost::default()),
            ConsistencyWeights::default(),
        )
        .expect("the default weights and the bundled expectations are valid")
    }
}

/// The bundled expectations, `data/clinical/impression_expectation.json`.
pub const BUNDLED_EXPECTATIONS: &str =
    include_str!("../../../data/clinical/impression_expectation.json");

/// How much an omitted finding costs: per finding `o`, `e(o)` in `[0, 1]`,
/// the share of radiologists' Impressions that name `o` (or a related
/// finding) when their Findings state it. The bundled file is measured on IU
/// X-ray's train split by `cargo run --release -p sdr-clinical --example
/// findings_consistency`; a finding it does not list weighs 1.
#[derive(Debug, Clone, PartialEq)]
pub struct Expectations {
    by_id: Vec<f64>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpectationFile {
    #[serde(default)]
    #[allow(dead_code)]
    comment: Option<serde_json::Value>,
    #[serde(default)]
    #[allow(dead_code)]
    source: Option<serde_json::Value>,
    findings: std::collections::BTreeMap<String, ExpectationEntry>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpectationEntry {
    expectation: f64,
    #[serde(default)]
    #[allow(dead_code)]
    studies: Option<u64>,
}

impl Expectations {
    /// Every finding expected (`e = 1`): omissions counted, not weighed.
    pub fn uniform(labeler: &Labeler) -> Self {
        Expectations {
            by_id: vec![1.0; labeler.fact_observations()],
        }
    }

    /// Expectations from a JSON file's text (the bundled file's layout:
    /// `{"findings": {"Pleural Effusion": {"expectation": 0.82}, ...}}`).
    ///
    /// # Errors
    /// Bad JSON, a finding the labeler does not know, an expectation outside
    /// `[0, 1]`; one line naming it.
    pub fn from_json(labeler: &Labeler, json: &str) -> Result<Self, String> {
        let file: ExpectationFile =
            serde_json::from_str(json).map_err(|e| format!("expectations: {e}"))?;
        let mut out = Expectations::uniform(labeler);
        let check = |name: &str, e: f64| {
            if (0.0..=1.0).contains(&e) {
                Ok(e)
            } else {
                Err(format!("expectations: `{name}` must be in [0, 1], got {e}"))
            }
        };
        for (name, entry) in &file.findings {
            let id = (0..labeler.fact_observations() as u16)
                .find(|&id| labeler.fact_name(id) == name)
                .ok_or_else(|| format!("expectations: unknown finding `{name}`"))?;
            out.by_id[id as usize] = check(name, entry.expectation)?;
        }
        Ok(out)
    }

    /// `e(o)` of fact id `o` (0 for a finding outside the vocabulary).
    pub fn of(&self, o: u16) -> f64 {
        self.by_id.get(o as usize).copied().unwrap_or(0.0)
    }
}

/// A fact with where it stands.
#[derive(Clone, Copy)]
struct At {
    sentence: usize,
    fact: Fact,
}

impl Consistency {
    /// A checker with `cost`'s labeler, pair conflicts and fact cache (share
    /// the one a reward or a corpus already holds), `weights`, and the
    /// bundled expectations.
    ///
    /// # Errors
    /// A weight out of range, as one line naming it.
    pub fn new(cost: Arc<ClinicalCost>, weights: ConsistencyWeights) -> Result<Self, String> {
        weights.check()?;
        let expectations = Expectations::from_json(cost.labeler(), BUNDLED_EXPECTATIONS)?;
        let parent = hierarchy(cost.labeler());
        Ok(Consistency {
            cost,
            weights,
            expectations,
            parent,
        })
    }

    /// The same checker with other expectations (e.g.
    /// [`Expectations::uniform`]: every omission weighs the same).
    pub fn with_expectations(mut self, expectations: Expectations) -> Self {
        self.expectations = expectations;
        self
    }

    /// The weights in use.
    pub fn weights(&self) -> &ConsistencyWeights {
        &self.weights
    }

    /// The expectations in use.
    pub fn expectations(&self) -> &Expectations {
        &self.expectations
    }

    /// The clinical cost whose facts and pair conflicts are read.
    pub fn cost(&self) -> &ClinicalCost {
        &self.cost
    }

    /// Whether findings `a` and `b` are one, or one specialises the other in
    /// CheXpert's hierarchy (Irvin et al. 2019, Fig. 2: Lung Opacity over
    /// Edema, Consolidation, Pneumonia, Lung Lesion and Atelectasis,
    /// Consolidation over Pneumonia, Enlarged Cardiomediastinum over
    /// Cardiomegaly), with Granuloma (a calcified nodule) under Lung Lesion.
    pub fn related(&self, a: u16, b: u16) -> bool {
        let above = |mut x: u16, y: u16| loop {
            if x == y {
                return true;
            }
            match self.parent.get(x as usize).copied().flatten() {
                Some(p) => x = p,
                None => return false,
            }
        };
        above(a, b) || above(b, a)
    }

    /// Checks `impression` against `findings` (texts, split into sentences as
    /// everywhere in SDR, SPEC §1).
    pub fn check(&self, impression: &str, findings: &str) -> ConsistencyReport {
        let i = split_sentences(impression);
        let f = split_sentences(findings);
        let i: Vec<&str> = i.iter().map(String::as_str).collect();
        let f: Vec<&str> = f.iter().map(String::as_str).collect();
        self.check_sentences(&i, &f)
    }

    /// [`Consistency::check`] on sentences already split.
    pub fn check_sentences(&self, impression: &[&str], findings: &[&str]) -> ConsistencyReport {
        let fi = self.cost.facts(impression);
        let ff = self.cost.facts(findings);
        let flat = |facts: &[Arc<Vec<Fact>>]| -> Vec<At> {
            facts
                .iter()
                .enumerate()
                .flat_map(|(sentence, fs)| fs.iter().map(move |&fact| At { sentence, fact }))
                .collect()
        };
        let (ai, af) = (flat(&fi), flat(&ff));
        // Findings in the order the Impression names them, then the Findings.
        let mut order: Vec<u16> = Vec::new();
        for a in ai.iter().chain(&af) {
            if !order.contains(&a.fact.observation) {
                order.push(a.fact.observation);
            }
        }
        let w = self.cost.weights();
        let labeler = self.cost.labeler();
        let known = labeler.fact_observations() as u16;
        // Whether a section states (present or hedged) a finding related to `o`.
        let states_related = |facts: &[At], o: u16| {
            facts
                .iter()
                .any(|a| a.fact.polarity != Polarity::Absent && self.related(a.fact.observation, o))
        };
        let statement = |texts: &[&str], a: &At| Statement {
            sentence: a.sentence,
            text: texts[a.sentence].to_string(),
            fact: fact_text(labeler, &a.fact),
        };
        let mut out = ConsistencyReport {
            score: 0.0,
            contradiction: 0.0,
            unsupported: 0.0,
            omission: 0.0,
            contradictions: Vec::new(),
            unsupported_findings: Vec::new(),
            omissions: Vec::new(),
            impression_sentences: impression.len(),
            findings_sentences: findings.len(),
        };
        for o in order {
            let io: Vec<&At> = ai.iter().filter(|a| a.fact.observation == o).collect();
            let fo: Vec<&At> = af.iter().filter(|a| a.fact.observation == o).collect();
            let finding = labeler.fact_name(o).to_string();
            match (io.is_empty(), fo.is_empty()) {
                (false, true) => {
                    if o >= known || states_related(&af, o) {
                        continue;
                    }
                    if let Some((weight, a)) = unmatched(&io) {
                        out.unsupported_findings.push(Issue {
                            finding,
                            kind: ConflictKind::Unmatched.name(),
                            weight,
                            impression: Some(statement(impression, a)),
                            findings: None,
                        });
                    }
                }
                (true, false) => {
                    let e = self.expectations.of(o);
                    if e == 0.0 || states_related(&ai, o) {
                        continue;
                    }
                    if let Some((weight, a)) = unmatched(&fo) {
                        out.omissions.push(Issue {
                            finding,
                            kind: ConflictKind::Unmatched.name(),
                            weight: e * weight,
                            impression: None,
                            findings: Some(statement(findings, a)),
                        });
                    }
                }
                (false, false) => {
                    if let Some((weight, kind, a, b)) = contradiction(w, &io, &fo) {
                        out.contradictions.push(Issue {
                            finding,
                            kind: kind.name(),
                            weight,
                            impression: Some(statement(impression, a)),
                            findings: Some(statement(findings, b)),
                        });
                    }
                }
                (true, true) => {}
            }
        }
        // (`Iterator::sum` of no floats is -0.0.)
        let sum = |v: &[Issue]| v.iter().fold(0.0, |acc, x| acc + x.weight);
        out.contradiction = sum(&out.contradictions);
        out.unsupported = sum(&out.unsupported_findings);
        out.omission = sum(&out.omissions);
        out.score = self.weights.contradiction * out.contradiction
            + self.weights.unsupported * out.unsupported
            + self.weights.omission * out.omission;
        out
    }
}

/// `parent[o]` of every fact id of `labeler` (see [`Consistency::related`]).
fn hierarchy(labeler: &Labeler) -> Vec<Option<u16>> {
    use Observation::*;
    let mut parent = vec![None; labeler.fact_observations()];
    let id = |o: Observation| o.index() as u16;
    for child in [Edema, Consolidation, LungLesion, Atelectasis] {
        parent[child.index()] = Some(id(LungOpacity));
    }
    parent[Pneumonia.index()] = Some(id(Consolidation));
    parent[Cardiomegaly.index()] = Some(id(EnlargedCardiomediastinum));
    if let Some(g) =
        (0..labeler.fact_observations() as u16).find(|&i| labeler.fact_name(i) == "Granuloma")
    {
        parent[g as usize] = Some(id(LungLesion));
    }
    parent
}

/// The weight of a finding the other section never names, with the statement
/// that gives it: 1 for a present statement (the first), 1/2 for a hedged one
/// when none is present, `None` when every statement denies it.
fn unmatched<'a>(facts: &[&'a At]) -> Option<(f64, &'a At)> {
    let first = |p: Polarity| facts.iter().copied().find(|a| a.fact.polarity == p);
    first(Polarity::Present)
        .map(|a| (1.0, a))
        .or_else(|| first(Polarity::Uncertain).map(|a| (0.5, a)))
}

/// A contradiction of one finding both sections name: (weight, kind, the
/// Impression's statement, the Findings' statement), or `None` when they agree.
fn contradiction<'a>(
    w: &ClinicalWeights,
    io: &[&'a At],
    fo: &[&'a At],
) -> Option<(f64, ConflictKind, &'a At, &'a At)> {
    // The smallest pair conflict of `x` against `others`: 0 when one agrees.
    let best = |x: &At, others: &[&'a At]| -> Option<(f64, ConflictKind, &'a At)> {
        let mut best: Option<(f64, ConflictKind, &'a At)> = None;
        for &y in others {
            match w.pair(&x.fact, &y.fact) {
                None => return None,
                Some((c, kind)) => {
                    if best.is_none_or(|b| c < b.0) {
                        best = Some((c, kind, y));
                    }
                }
            }
        }
        best.filter(|b| b.0 > 0.0)
    };
    let mut worst: Option<(f64, ConflictKind, &'a At, &'a At)> = None;
    let mut consider = |c: (f64, ConflictKind, &'a At, &'a At)| {
        if worst.is_none_or(|w| c.0 > w.0) {
            worst = Some(c);
        }
    };
    // An Impression statement no Findings statement agrees with.
    for &a in io {
        if let Some((c, kind, b)) = best(a, fo) {
            consider((c, kind, a, b));
        }
    }
    // A present or hedged finding the Impression denies or hedges (a side or
    // grade apart is another instance the Impression leaves out, not a
    // contradiction, when its own statement agrees with the Findings).
    for &b in fo {
        if b.fact.polarity == Polarity::Absent {
            continue;
        }
        if let Some((c, kind, a)) = best(b, io) {
            if matches!(kind, ConflictKind::Polarity | ConflictKind::Hedge) {
                consider((c, kind, a, b));
            }
        }
    }
    worst.map(|(c, kind, a, b)| (c.min(1.0), kind, a, b))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every finding expected: omissions counted, not weighed.
    fn checker() -> &'static Consistency {
        static C: std::sync::OnceLock<Consistency> = std::sync::OnceLock::new();
        C.get_or_init(|| {
            let c = Consistency::default();
            let uniform = Expectations::uniform(c.cost().labeler());
            c.with_expectations(uniform)
        })
    }

    fn kinds(v: &[Issue]) -> Vec<(&str, &str)> {
        v.iter().map(|x| (x.finding.as_str(), x.kind)).collect()
    }

    // Findings and Impressions quoted from IU X-ray (data/iu-xray/indiana_reports.csv).

    /// uid 267.
    const EFFUSION_F: &str = "Endotracheal tube and NG tube have been removed. Mild patchy \
        bilateral airspace disease. There are small bilateral pleural effusions. No pneumothorax. \
        Heart and mediastinum are stable with normal size heart. Degenerative changes in the spine.";
    const EFFUSION_I: &str = "Small bilateral pleural effusions with a few scattered areas of \
        patchy bilateral airspace disease.";
    /// uid 10.
    const GRANULOMA_F: &str = "The cardiomediastinal silhouette is within normal limits for \
        size and contour. The lungs are normally inflated without evidence of focal airspace \
        disease, pleural effusion, or pneumothorax. Stable calcified granuloma within the right \
        upper lung. No acute bone abnormality..";
    /// uid 518: Findings that state only normal things.
    const NORMAL_F: &str = "Stable normal cardiac size and contour, unremarkable mediastinal \
        silhouette. Normal pulmonary XXXX and interstitium. Lungs clear, no airspace disease, \
        pleural effusion, or pneumothorax. No active/acute cardiopulmonary disease.";

    #[test]
    fn a_normal_impression_of_normal_findings_scores_zero() {
        let r = checker().check("No acute cardiopulmonary process.", NORMAL_F);
        assert_eq!(r.score, 0.0, "{r:?}");
        assert!(r.is_consistent());
        // The Findings' normal statements are not expected in the Impression:
        // many denied findings, none omitted.
        assert!(checker()
            .cost()
            .facts(
                &split_sentences(NORMAL_F)
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>()
            )
            .iter()
            .any(|f| !f.is_empty()));
        assert!(r.omissions.is_empty());
        // Repeating them is harmless too.
        let r = checker().check("No pneumothorax or pleural effusion.", NORMAL_F);
        assert_eq!(r.score, 0.0, "{r:?}");
    }

    #[test]
    fn the_reference_impression_is_consistent_and_a_contradiction_costs_more() {
        let c = checker();
        let faithful = c.check(EFFUSION_I, EFFUSION_F);
        // It leaves out only the spine (removed tubes are no device).
        assert!(faithful.contradictions.is_empty(), "{faithful:?}");
        assert!(faithful.unsupported_findings.is_empty(), "{faithful:?}");
        assert_eq!(
            kinds(&faithful.omissions),
            [("Degenerative spine", "unmatched")]
        );
        let contra = c.check(
            "No pleural effusion. Patchy bilateral airspace disease.",
            EFFUSION_F,
        );
        assert_eq!(
            kinds(&contra.contradictions),
            [("Pleural Effusion", "polarity")],
            "{contra:?}"
        );
        let issue = &contra.contradictions[0];
        assert_eq!(
            issue.impression.as_ref().unwrap().text,
            "No pleural effusion."
        );
        assert_eq!(
            issue.findings.as_ref().unwrap().text,
            "There are small bilateral pleural effusions."
        );
        assert!(contra.score > faithful.score);
        assert_eq!(contra.contradiction, 1.0);
    }

    #[test]
    fn a_side_swap_is_a_contradiction() {
        let r = checker().check("Small left pleural effusion.", EFFUSION_F);
        assert_eq!(
            kinds(&r.contradictions),
            [("Pleural Effusion", "bilateral")],
            "{r:?}"
        );
        let r = checker().check("Severe cardiomegaly.", EFFUSION_F);
        assert_eq!(
            kinds(&r.contradictions),
            [("Cardiomegaly", "polarity")],
            "{r:?}"
        );
    }

    #[test]
    fn an_omitted_abnormal_finding_costs_and_a_normal_impression_omits_it() {
        let c = checker();
        let r = c.check("No acute cardiopulmonary process.", GRANULOMA_F);
        assert_eq!(kinds(&r.omissions), [("Granuloma", "unmatched")], "{r:?}");
        assert_eq!(r.score, c.weights().omission);
        let named = c.check(
            "No acute cardiopulmonary process. Stable right upper lobe granuloma.",
            GRANULOMA_F,
        );
        assert_eq!(named.score, 0.0, "{named:?}");
        // Omitting more costs more.
        let r = c.check("Small bilateral pleural effusions.", EFFUSION_F);
        assert_eq!(
            kinds(&r.omissions),
            [
                ("Lung Opacity", "unmatched"),
                ("Degenerative spine", "unmatched")
            ],
            "{r:?}"
        );
        assert_eq!(r.omission, 2.0);
    }

    #[test]
    fn an_unsupported_finding_costs_and_a_denied_one_does_not() {
        let c = checker();
        let r = c.check(
            "Right upper lobe granuloma. Small hiatal hernia.",
            GRANULOMA_F,
        );
        assert_eq!(
            kinds(&r.unsupported_findings),
            [("Hiatal hernia", "unmatched")],
            "{r:?}"
        );
        assert_eq!(r.score, c.weights().unsupported);
        let hedged = c.check(
            "Possible hiatal hernia. Right upper lobe granuloma.",
            GRANULOMA_F,
        );
        assert_eq!(hedged.unsupported, 0.5, "{hedged:?}");
        let denied = c.check("No hiatal hernia. Right upper lobe granuloma.", GRANULOMA_F);
        assert_eq!(denied.score, 0.0, "{denied:?}");
    }

    #[test]
    fn findings_radiologists_leave_out_cost_little_to_omit() {
        let c = Consistency::default();
        let e = |name: &str| {
            let l = c.cost().labeler();
            let id = (0..l.fact_observations() as u16)
                .find(|&i| l.fact_name(i) == name)
                .unwrap();
            c.expectations().of(id)
        };
        assert!(e("Support Devices") < 0.25);
        assert!(e("Degenerative spine") < 0.1);
        assert!(e("Pleural Effusion") > 0.75);
        let f = "Heart size normal. Pacemaker in place. Lungs clear. No pleural effusion.";
        let device = c.check("No acute disease.", f);
        assert_eq!(kinds(&device.omissions), [("Support Devices", "unmatched")]);
        let effusion = c.check("No acute disease.", EFFUSION_F);
        assert!(
            effusion.score > 4.0 * device.score,
            "{effusion:?} vs {device:?}"
        );
        // A device the Findings never name is unsupported all the same.
        let r = c.check("Endotracheal tube in place.", NORMAL_F);
        assert_eq!(
            kinds(&r.unsupported_findings),
            [("Support Devices", "unmatched")]
        );
        assert!(Expectations::from_json(
            c.cost().labeler(),
            r#"{"findings": {"Nope": {"expectation": 1}}}"#
        )
        .unwrap_err()
        .contains("Nope"));
        assert!(Expectations::from_json(
            c.cost().labeler(),
            r#"{"findings": {"Edema": {"expectation": 2}}}"#
        )
        .unwrap_err()
        .contains("Edema"));
    }

    #[test]
    fn related_findings_support_and_cover_each_other() {
        let c = checker();
        // IU uid 742's kind: the Impression names the diagnosis of the Findings' opacity.
        let f = "There is patchy opacity in the right lung base. No pleural effusion.";
        let r = c.check(
            "Right basilar opacity which may be compatible with pneumonia.",
            f,
        );
        assert_eq!(r.score, 0.0, "{r:?}");
        let r = c.check("Right lower lobe pneumonia.", f);
        assert_eq!(r.score, 0.0, "{r:?}");
        let r = c.check("Possible right pleural effusion.", f);
        assert_eq!(
            kinds(&r.contradictions),
            [("Pleural Effusion", "hedge")],
            "{r:?}"
        );
        assert_eq!(
            kinds(&r.omissions),
            [("Lung Opacity", "unmatched")],
            "{r:?}"
        );
        assert!(c.related(
            Observation::Pneumonia.index() as u16,
            Observation::LungOpacity.index() as u16
        ));
        assert!(!c.related(
            Observation::Pneumonia.index() as u16,
            Observation::Cardiomegaly.index() as u16
        ));
    }

    #[test]
    fn a_finding_the_impression_denies_is_caught_from_the_findings_side() {
        // One Findings statement agrees with the denial, another states it.
        let f = "No left pleural effusion. Small right pleural effusion.";
        let r = checker().check("No pleural effusion.", f);
        assert_eq!(
            kinds(&r.contradictions),
            [("Pleural Effusion", "polarity")],
            "{r:?}"
        );
        assert_eq!(
            r.contradictions[0].findings.as_ref().unwrap().text,
            "Small right pleural effusion."
        );
        // A second instance on another side is not a contradiction when the
        // Impression's own statement agrees with the Findings.
        let f = "Small right pleural effusion. Large left pleural effusion.";
        let r = checker().check("Small right pleural effusion.", f);
        assert!(r.contradictions.is_empty(), "{r:?}");
    }

    #[test]
    fn each_finding_counts_once_and_weights_scale_the_terms() {
        let f = "Stable cardiomegaly. The heart is enlarged.";
        let c = checker();
        let r = c.check("No acute disease.", f);
        assert_eq!(r.omissions.len(), 1);
        let heavy = Consistency::new(
            Arc::new(ClinicalCost::default()),
            ConsistencyWeights {
                omission: 2.0,
                ..Default::default()
            },
        )
        .unwrap()
        .with_expectations(Expectations::uniform(c.cost().labeler()));
        assert_eq!(heavy.check("No acute disease.", f).score, 2.0);
        assert!(Consistency::new(
            Arc::new(ClinicalCost::default()),
            ConsistencyWeights {
                unsupported: f64::NAN,
                ..Default::default()
            }
        )
        .unwrap_err()
        .contains("unsupported"));
    }

    #[test]
    fn empty_texts_have_nothing_to_check() {
        let r = checker().check("", EFFUSION_F);
        assert_eq!(r.impression_sentences, 0);
        assert_eq!(r.omission, 3.0, "{r:?}");
        assert_eq!(r.contradiction.to_bits(), 0.0f64.to_bits());
        assert_eq!(
            checker()
                .check("Small right pleural effusion.", "")
                .unsupported,
            1.0
        );
    }
}
