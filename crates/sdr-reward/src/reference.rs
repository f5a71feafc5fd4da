//! References: the ground-truth reports rewards compare against.
//!
//! A reference is either one report text, in the training template
//! `<think>F</think><answer>I</answer>` or with plain `Findings:` /
//! `Impression:` headers (SPEC §1), or the two section texts given apart (as
//! in datasets with separate findings and impression columns). Either way it
//! must yield at least one sentence per section: an empty section is an input
//! error naming the reference's index (SPEC §4).

use sdr_core::report::{parse_report, split_sentences};
use sdr_core::SdrError;

use crate::error::{Result, RewardError};

/// One reference report, its text borrowed (`S = &str`, [`Reference`]) or
/// owned (`S = String`, [`OwnedReference`]: a queued server request, a Python
/// argument): the one reference type of the reward, `sdr serve` and Python.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReferenceText<S> {
    /// A whole report (template or plain headers; the layout is detected).
    Report(S),
    /// Findings and Impression texts given separately.
    Sections { findings: S, impression: S },
}

/// A reference borrowed from the caller.
pub type Reference<'a> = ReferenceText<&'a str>;

/// A reference that owns its text.
pub type OwnedReference = ReferenceText<String>;

impl<S: AsRef<str>> ReferenceText<S> {
    /// The same reference, borrowed.
    pub fn as_reference(&self) -> Reference<'_> {
        match self {
            ReferenceText::Report(t) => ReferenceText::Report(t.as_ref()),
            ReferenceText::Sections {
                findings,
                impression,
            } => ReferenceText::Sections {
                findings: findings.as_ref(),
                impression: impression.as_ref(),
            },
        }
    }

    /// The sentences of its Findings and Impression as the reward splits them
    /// (either may be empty), and whether a whole report keeps its layout's
    /// rules (always true for sections given apart): the one split that
    /// [`parse_reference`], the missing-section policy and `sdr check-data` read.
    pub fn sentences(&self) -> (Vec<String>, Vec<String>, bool) {
        match self.as_reference() {
            Reference::Report(text) => {
                let p = parse_report(text);
                (p.findings, p.impression, p.format_valid)
            }
            Reference::Sections {
                findings,
                impression,
            } => (split_sentences(findings), split_sentences(impression), true),
        }
    }
}

/// The sentences of a reference's two sections, both non-empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReferenceSections {
    pub findings: Vec<String>,
    pub impression: Vec<String>,
}

/// Split a reference into its section sentences.
///
/// # Errors
/// [`SdrError::EmptySection`] when a section has no sentence;
/// [`RewardError::BadReference`] when both sections are present but the
/// report breaks its layout's rules (text outside the template tags, a
/// repeated tag).
///
/// ```
/// use sdr_reward::{parse_reference, Reference};
/// let r = parse_reference(&Reference::Report("Findings: Clear lungs.\nImpression: Normal."), 0).unwrap();
/// assert_eq!(r.findings, ["Clear lungs."]);
/// let e = parse_reference(&Reference::Sections { findings: "A.", impression: " " }, 4).unwrap_err();
/// assert_eq!(e.to_string(), "reference 4: section `impression` is empty");
/// ```
pub fn parse_reference(reference: &Reference<'_>, index: usize) -> Result<ReferenceSections> {
    let (findings, impression, valid) = reference.sentences();
    if findings.is_empty() {
        return Err(SdrError::EmptySection {
            index,
            section: "findings",
        }
        .into());
    }
    if impression.is_empty() {
        return Err(SdrError::EmptySection {
            index,
            section: "impression",
        }
        .into());
    }
    if !valid {
        return Err(RewardError::BadReference {
            index,
            reason: "it uses the <think>/<answer> tags but breaks the template \
                     (each tag exactly once, in order, only whitespace outside them)"
                .into(),
        });
    }
    Ok(ReferenceSections {
        findings,
        impression,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_plain_and_sections_agree() {
        let a = parse_reference(
            &Reference::Report(
                "<think>Heart normal. Lungs clear.</think><answer>No acute disease.</answer>",
            ),
            0,
        )
        .unwrap();
        let b = parse_reference(
            &Reference::Report(
                "FINDINGS: Heart normal. Lungs clear.\n\nIMPRESSION: No acute disease.",
            ),
            0,
        )
        .unwrap();
        let c = parse_reference(
            &Reference::Sections {
                findings: "Heart normal. Lungs clear.",
                impression: "No acute disease.",
            },
            0,
        )
        .unwrap();
        assert_eq!(a, b);
        assert_eq!(b, c);
        assert_eq!(a.findings.len(), 2);
    }

    #[test]
    fn empty_sections_name_the_index() {
        let e = parse_reference(
            &Reference::Report("<think></think><answer>Normal.</answer>"),
            3,
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "reference 3: section `findings` is empty");
        let e = parse_reference(&Reference::Report("no headers at all"), 9).unwrap_err();
        assert!(e.to_string().starts_with("reference 9: section"), "{e}");
    }

    #[test]
    fn broken_template_is_rejected() {
        let e = parse_reference(
            &Reference::Report("junk <think>A.</think><answer>B.</answer>"),
            2,
        )
        .unwrap_err();
        assert!(
            matches!(e, RewardError::BadReference { index: 2, .. }),
            "{e}"
        );
    }
}
