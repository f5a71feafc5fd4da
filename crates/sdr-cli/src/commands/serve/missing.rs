//! `--missing-section`: what the server does with a reference that lacks a
//! section.
//!
//! `error` (the default) answers 400 naming the reference. OpenRLHF 0.11
//! retries a failed reward request, logs it at INFO level and trains on with
//! reward `None` for the sample: the sample is lost without a word. With
//! `score` the present section is scored, the missing one's term is 0 and
//! the reply counts it per sample (`missing_sections`, 0-2; OpenRLHF logs
//! `extra_logs`):
//!
//! `R = λ_fmt·R_fmt + λ_sem·(R_present + 0) (+ λ_clin·F1)`
//!
//! Within a GRPO group (one reference, many completions) a term that is the
//! same for every completion moves no advantage. With both sections missing
//! only the format term remains (and the clinical term is 0). The same policy
//! as Python's `missing_section="score"` (`sdr/missing_section.py`).
//!
//! The present section is scored by giving it in place of the missing one and
//! setting that term to 0 afterwards; the CheXpert labels of a section given
//! twice are those of the section once.

use sdr_core::report::{parse_report, split_sentences};
use sdr_core::reward::RewardBreakdown;
use sdr_reward::RewardOptions;

use super::batcher::OwnedReference;

/// Stands in for a reference with no section at all; its terms are set to 0.
const PLACEHOLDER: &str = "Not reported.";

/// The policy of `--missing-section`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MissingSection {
    /// 400 naming the reference.
    #[default]
    Error,
    /// Score the present section; the missing one's term is 0 and counted.
    Score,
}

/// Which of (findings, impression) a reference lacks.
pub type Missing = (bool, bool);

/// `reference` with each missing section filled in (by the other section, or
/// the placeholder when both are missing), and which were missing.
pub fn fill(reference: OwnedReference) -> (OwnedReference, Missing) {
    let (f_text, i_text, f_empty, i_empty) = match &reference {
        OwnedReference::Report(text) => {
            let p = parse_report(text);
            // The sentences rejoined as paragraphs: split again they give the same
            // sentences (checked on every IU X-ray report by the Python tests).
            (
                p.findings.join("\n\n"),
                p.impression.join("\n\n"),
                p.findings.is_empty(),
                p.impression.is_empty(),
            )
        }
        OwnedReference::Sections {
            findings,
            impression,
        } => (
            findings.clone(),
            impression.clone(),
            split_sentences(findings).is_empty(),
            split_sentences(impression).is_empty(),
        ),
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

/// `score` (of a filled reference) with the missing terms set to 0 and the
/// reward composed again as the scorer composes it.
pub fn apply(score: &mut RewardBreakdown, missing: Missing, options: &RewardOptions) {
    let (no_f, no_i) = missing;
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
        score.reward += options.clinical_weight * score.clinical;
    }
}

/// The count a reply reports per sample.
pub fn count(missing: Missing) -> u8 {
    u8::from(missing.0) + u8::from(missing.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_section_is_filled_by_the_other() {
        let (r, m) = fill(OwnedReference::Report(
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
        let (_, m) = fill(OwnedReference::Sections {
            findings: " ".into(),
            impression: "".into(),
        });
        assert_eq!(m, (true, true));
        let whole = OwnedReference::Report("Findings: A.\nImpression: B.".into());
        assert_eq!(fill(whole.clone()), (whole, (false, false)));
    }

    #[test]
    fn the_missing_term_is_zero_and_the_reward_recomposed() {
        let options = RewardOptions::default();
        let mut s = RewardBreakdown {
            format: 1.0,
            findings: 0.75,
            impression: 0.75,
            reward: 2.5,
            ..Default::default()
        };
        apply(&mut s, (false, true), &options);
        assert_eq!((s.impression, s.reward), (0.0, 1.75));
        let mut bad = RewardBreakdown::default();
        apply(&mut bad, (true, true), &options);
        assert_eq!(bad.reward, 0.0);
        assert_eq!(count((true, true)), 2);
    }
}
