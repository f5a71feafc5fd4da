//! What the reward does with a reference that lacks a section (SPEC §4).
//!
//! A training label whose Findings or Impression is empty has no set to
//! compare that section against. Two policies, one rule for every interface
//! (`SDRReward(missing_section=)`, verl's `reward_kwargs`, OpenRLHF's
//! `SDR_MISSING_SECTION`, `sdr serve --missing-section`):
//!
//! - `error` (the default): an input error naming the reference
//!   (`reference 3: section `impression` is empty`). Right where an exception
//!   stops the run (TRL, verl); wrong where the trainer swallows it: OpenRLHF
//!   0.11 logs a failed reward call at INFO level and trains on with reward
//!   `None` for the sample, so the sample is lost without a word.
//! - `score`: the present section is scored, the missing one's term is 0 and
//!   counted per sample (`missing_sections`, 0-2):
//!
//!   `R = λ_fmt·R_fmt + λ_sem·(R_present + 0) (+ λ_clin·F1)`
//!
//!   Within a GRPO group (one reference, many completions) a term that is the
//!   same for every completion moves no advantage, so the group still learns
//!   from the section that is there. With both sections missing only the
//!   format term remains (and the clinical term is 0).
//!
//! The present section is scored by giving it in place of the missing one
//! ([`MissingSection::fill`]) and setting the missing term to 0 afterwards
//! ([`Gaps::apply`]); the CheXpert labels of a section given twice are those
//! of the section once, so the clinical term is the one against the present
//! section alone. `sdr check-data` finds such references before a run.

// The tests check the split a filled section gives.
#[cfg(test)]
use sdr_core::report::split_sentences;
use sdr_core::reward::RewardBreakdown;

use crate::reference::OwnedReference;
use crate::scorer::RewardOptions;

/// Stands in for a reference with no section at all; its terms are set to 0.
const PLACEHOLDER: &str = "Not reported.";

/// The policy for a reference with an empty section.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum MissingSection {
    /// An input error naming the reference (a 400 from `sdr serve`).
    #[default]
    Error,
    /// Score the present section; the missing one's term is 0 and counted.
    Score,
}

impl MissingSection {
    /// The policies' names, as every interface spells them.
    pub const NAMES: [&'static str; 2] = ["error", "score"];

    /// The policy named `name`, if any.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "error" => Some(MissingSection::Error),
            "score" => Some(MissingSection::Score),
            _ => None,
        }
    }

    /// The policy's name.
    pub fn name(self) -> &'static str {
        match self {
            MissingSection::Error => "error",
            MissingSection::Score => "score",
        }
    }

    /// `references` as the policy scores them: under `score`, each missing
    /// section filled in (by the other section, or a placeholder when both are
    /// missing) and which were missing remembered; under `error`, as they are
    /// (an empty section is then the scorer's input error).
    pub fn fill(self, references: Vec<OwnedReference>) -> (Vec<OwnedReference>, Gaps) {
        if self == MissingSection::Error {
            return (references, Gaps { missing: None });
        }
        let (references, missing) = references.into_iter().map(fill_one).unzip();
        (
            references,
            Gaps {
                missing: Some(missing),
            },
        )
    }
}

/// Which of (findings, impression) a reference lacks.
type Missing = (bool, bool);

/// The sections [`MissingSection::fill`] filled in, which [`Gaps::apply`] sets to 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gaps {
    missing: Option<Vec<Missing>>,
}

impl Gaps {
    /// The scores (of the filled references, in order) with each missing
    /// section's term set to 0 and the reward composed again as the scorer
    /// composes it; the per-sample count of missing sections, or `None` under
    /// the `error` policy.
    pub fn apply(
        &self,
        scores: &mut [RewardBreakdown],
        options: &RewardOptions,
    ) -> Option<Vec<u8>> {
        let missing = self.missing.as_ref()?;
        Some(
            scores
                .iter_mut()
                .zip(missing)
                .map(|(score, &m)| {
                    apply_one(score, m, options);
                    u8::from(m.0) + u8::from(m.1)
                })
                .collect(),
        )
    }
}

fn fill_one(reference: OwnedReference) -> (OwnedReference, Missing) {
    let (f_sentences, i_sentences, _) = reference.sentences();
    let (f_empty, i_empty) = (f_sentences.is_empty(), i_sentences.is_empty());
    let (f_text, i_text) = match &reference {
        // The sentences rejoined as paragraphs: split again they give the same
        // sentences (a line break alone does not end a numbered item without a
        // full stop; checked on every IU X-ray report by the Python tests).
        OwnedReference::Report(_) => (f_sentences.join("\n\n"), i_sentences.join("\n\n")),
        OwnedReference::Sections {
            findings,
            impression,
        } => (findings.clone(), impression.clone()),
    };
    let both = |t: &str| OwnedReference::Sections {
        findings: t.to_string(),
        impression: t.to_string(),
    };
    match (f_empty, i_empty) {
        (false, false) => (reference, (false, false)),
        (true, true) => (both(PLACEHOLDER), (true, true)),
        (true, false) => (both(&i_text), (true, false)),
        (false, true) => (both(&f_text), (false, true)),
    }
}

fn apply_one(score: &mut RewardBreakdown, (no_f, no_i): Missing, options: &RewardOptions) {
    if !(no_f || no_i) {
        return;
    }
    if no_f {
        score.findings = 0.0;
    }
    if no_i {
        score.impression = 0.0;
    }
    if no_f && no_i {
        score.clinical = 0.0;
    }
    if score.format == 0.0 {
        return; // a malformed completion scores 0 whatever the reference
    }
    score.reward = options
        .config
        .combine(score.format, score.findings, score.impression);
    if options.clinical_weight > 0.0 {
        score.add_clinical(options.clinical_weight, score.clinical);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_section_is_filled_by_the_other() {
        let (r, m) = fill_one(OwnedReference::Report(
            "<think>Heart normal. Lungs clear.</think><answer></answer>".into(),
        ));
        assert_eq!(m, (false, true));
        match r {
            OwnedReference::Sections {
                findings,
                impression,
            } => {
                assert_eq!(findings, impression);
                assert_eq!(
                    split_sentences(&findings),
                    ["Heart normal.", "Lungs clear."]
                );
            }
            other => panic!("{other:?}"),
        }
        let (_, m) = fill_one(OwnedReference::Sections {
            findings: " ".into(),
            impression: "".into(),
        });
        assert_eq!(m, (true, true));
        let whole = OwnedReference::Report("Findings: A.\nImpression: B.".into());
        assert_eq!(fill_one(whole.clone()), (whole, (false, false)));
    }

    #[test]
    fn the_missing_term_is_zero_and_the_reward_recomposed() {
        let options = RewardOptions::default();
        let (_, gaps) = MissingSection::Score.fill(vec![
            OwnedReference::Report("<think>A.</think><answer></answer>".into()),
            OwnedReference::Report(String::new()),
        ]);
        let mut scores = [
            RewardBreakdown {
                format: 1.0,
                findings: 0.75,
                impression: 0.75,
                reward: 2.5,
                ..Default::default()
            },
            RewardBreakdown::default(),
        ];
        assert_eq!(gaps.apply(&mut scores, &options), Some(vec![1, 2]));
        assert_eq!((scores[0].impression, scores[0].reward), (0.0, 1.75));
        assert_eq!(scores[1].reward, 0.0);
        let (kept, gaps) = MissingSection::Error.fill(vec![OwnedReference::Report(String::new())]);
        assert_eq!(kept, [OwnedReference::Report(String::new())]);
        assert_eq!(gaps.apply(&mut scores, &options), None);
    }

    #[test]
    fn names_round_trip() {
        for name in MissingSection::NAMES {
            assert_eq!(MissingSection::from_name(name).unwrap().name(), name);
        }
        assert_eq!(MissingSection::from_name("skip"), None);
    }
}
