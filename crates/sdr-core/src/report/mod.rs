//! Reports -> sections -> sentences (SPEC §1, paper §3.1).
//!
//! A report has a Findings and an Impression section. Model output under
//! training uses the template `<think>F</think><answer>I</answer>`
//! ([`parse_template`], which also gives the format reward `R_fmt`);
//! API models and datasets write `Findings:` / `Impression:` headers
//! ([`parse_plain`]). [`parse_report`] picks between the two. Each section is
//! segmented into sentences by [`split_sentences`], whose rules are pinned by
//! [`SEGMENTER_VERSION`].
//!
//! Files: `template.rs` and `tags.rs` (tags and `R_fmt`), `plain.rs` and
//! `header.rs` (headed plain text), `markup.rs` (HTML/XML-like tags in plain
//! text), `segment.rs`, `normalize.rs`, `abbrev.rs` and `enumerator.rs`
//! (sentences), `reward_exact.rs` (`R_exact`).

mod abbrev;
mod enumerator;
mod header;
mod markup;
mod normalize;
mod plain;
mod reward_exact;
mod section;
mod segment;
mod tags;
mod template;

use serde::{Deserialize, Serialize};

pub use plain::{parse_plain, plain_report_ended, plain_units, Unit};
pub use reward_exact::{exact_match_reward, normalize_for_exact_match, ExactMatchReward};
pub use section::Section;
pub use segment::{split_sentences, SEGMENTER_VERSION, SHORT_LINE};
pub use tags::{ANSWER_CLOSE, ANSWER_OPEN, TEMPLATE_TAGS, THINK_CLOSE, THINK_OPEN};
pub use template::{has_template_tag, parse_template};

/// A report split into its two sections, each a list of sentences.
///
/// Sentences keep their order and repeats; SDR treats each section as a
/// multiset (SPEC §1), which is the consumer's business. Serialises as
/// `{"format_valid": bool, "findings": [...], "impression": [...]}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParsedReport {
    /// Whether the text follows its format: the template rules for tagged
    /// output, both sections non-empty for plain text. For tagged output this
    /// is `R_fmt`. When false the sections are a best-effort extraction and
    /// must not feed a reward.
    pub format_valid: bool,
    /// Findings sentences.
    pub findings: Vec<String>,
    /// Impression sentences.
    pub impression: Vec<String>,
}

impl ParsedReport {
    /// The format reward `R_fmt`: 1 when [`format_valid`](Self::format_valid), else 0.
    pub fn format_reward(&self) -> f64 {
        if self.format_valid {
            1.0
        } else {
            0.0
        }
    }
}

/// Parses a report in either layout: template rules when `text` contains any
/// of the four template tags (a model that tried the template is judged by
/// it), plain-header rules otherwise.
///
/// # Examples
/// ```
/// use sdr_core::report::parse_report;
///
/// let tagged = parse_report("<think>No effusion. Heart normal.</think><answer>Normal.</answer>");
/// assert!(tagged.format_valid);
/// assert_eq!(tagged.findings, ["No effusion.", "Heart normal."]);
///
/// let plain = parse_report("FINDINGS: No effusion.\n\nIMPRESSION:\n1. Normal.\n2. No change.");
/// assert!(plain.format_valid);
/// assert_eq!(plain.impression, ["Normal.", "No change."]);
///
/// // A stray tag means template rules, and this one is malformed.
/// assert!(!parse_report("Findings: A.\nImpression: B.</answer>").format_valid);
/// ```
pub fn parse_report(text: &str) -> ParsedReport {
    if has_template_tag(text) {
        parse_template(text)
    } else {
        parse_plain(text)
    }
}

/// Whether a (possibly still streaming) output has reached the end of its report:
/// `</answer>` in the template, or the end rule of plain-header text (SPEC §1, see
/// [`plain_report_ended`]). Nothing after that point can change [`parse_report`].
///
/// # Examples
/// ```
/// use sdr_core::report::report_ended;
///
/// assert!(report_ended("<think>A.</think><answer>B.</answer>"));
/// assert!(!report_ended("<think>A.</think><answer>B."));
/// assert!(report_ended("Findings: A.\nImpression: B.\n\nExample 2:"));
/// ```
pub fn report_ended(text: &str) -> bool {
    if has_template_tag(text) {
        text.contains(ANSWER_CLOSE)
    } else {
        plain_report_ended(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_shape() {
        let r = parse_report("<think>A.</think><answer>B.</answer>");
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(
            json,
            r#"{"format_valid":true,"findings":["A."],"impression":["B."]}"#
        );
        let back: ParsedReport = serde_json::from_str(&json).unwrap();
        assert_eq!(back, r);
        assert_eq!(r.format_reward(), 1.0);
        assert_eq!(ParsedReport::default().format_reward(), 0.0);
    }
}
