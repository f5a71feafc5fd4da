//! The exact-match baseline reward `R_exact` (paper §4, SPEC §4).
//!
//! Per section, 1 when the generated and reference texts are equal after
//! [`normalize_for_exact_match`], summed over Findings and Impression, plus the
//! format term. Both sides go through the same segmenter first (sentences
//! joined by one space), so list enumerators and line layout never decide a
//! match; as with `R_sem`, the section terms are 0 when `R_fmt = 0`.

use super::segment::split_sentences;
use super::ParsedReport;
use crate::error::{Result, SdrError};

/// Lower-cases, collapses whitespace runs to one space, trims, and strips
/// trailing punctuation (and whitespace uncovered by it), so that
/// `"No acute disease."` and `"no  acute disease"` compare equal.
/// Punctuation inside the text is kept.
///
/// # Examples
/// ```
/// use sdr_core::report::normalize_for_exact_match;
/// assert_eq!(normalize_for_exact_match("  No acute\n disease. ! "), "no acute disease");
/// ```
pub fn normalize_for_exact_match(text: &str) -> String {
    let lower = text.to_lowercase();
    let collapsed = lower.split_whitespace().collect::<Vec<_>>().join(" ");
    collapsed
        .trim_end_matches(|c: char| c.is_whitespace() || is_punctuation(c))
        .to_string()
}

/// ASCII punctuation plus the Unicode marks that end sentences or close quotes.
fn is_punctuation(c: char) -> bool {
    c.is_ascii_punctuation()
        || matches!(
            c,
            '…' | '。'
                | '’'
                | '”'
                | '»'
                | '–'
                | '—'
                | '·'
                | '•'
                | '！'
                | '？'
                | '．'
                | '，'
                | '；'
                | '：'
        )
}

/// The three terms of `R_exact`, each 0 or 1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExactMatchReward {
    /// `R_fmt`.
    pub format: f64,
    /// Findings match (0 when the format is invalid).
    pub findings: f64,
    /// Impression match (0 when the format is invalid).
    pub impression: f64,
}

impl ExactMatchReward {
    /// `R_exact = R_fmt + match_F + match_I`, in {0, 1, 2, 3}.
    pub fn total(&self) -> f64 {
        self.format + self.findings + self.impression
    }
}

/// Section text as compared: sentences joined by one space, normalised.
fn section_key(sentences: &[String]) -> String {
    normalize_for_exact_match(&sentences.join(" "))
}

/// `R_exact` of one generated report against reference section texts.
///
/// `index` is the reference's position in the caller's batch, used only in the
/// error.
///
/// # Errors
/// [`SdrError::EmptySection`] when a reference section holds no sentence.
///
/// # Examples
/// ```
/// use sdr_core::report::{exact_match_reward, parse_report};
///
/// let g = parse_report("<think>Heart normal. Lungs clear</think><answer>Normal chest.</answer>");
/// let r = exact_match_reward(&g, "heart normal.  lungs clear.", "1. No acute disease.", 0).unwrap();
/// assert_eq!((r.format, r.findings, r.impression, r.total()), (1.0, 1.0, 0.0, 2.0));
/// ```
pub fn exact_match_reward(
    generated: &ParsedReport,
    reference_findings: &str,
    reference_impression: &str,
    index: usize,
) -> Result<ExactMatchReward> {
    let ref_f = split_sentences(reference_findings);
    if ref_f.is_empty() {
        return Err(SdrError::EmptySection {
            index,
            section: "findings",
        });
    }
    let ref_i = split_sentences(reference_impression);
    if ref_i.is_empty() {
        return Err(SdrError::EmptySection {
            index,
            section: "impression",
        });
    }
    if !generated.format_valid {
        return Ok(ExactMatchReward {
            format: 0.0,
            findings: 0.0,
            impression: 0.0,
        });
    }
    let equal = |g: &[String], r: &[String]| f64::from(u8::from(section_key(g) == section_key(r)));
    Ok(ExactMatchReward {
        format: 1.0,
        findings: equal(&generated.findings, &ref_f),
        impression: equal(&generated.impression, &ref_i),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::parse_template;

    #[test]
    fn normalisation() {
        assert_eq!(normalize_for_exact_match(""), "");
        assert_eq!(normalize_for_exact_match("..."), "");
        assert_eq!(normalize_for_exact_match("A, b. C"), "a, b. c");
        assert_eq!(normalize_for_exact_match("ÉTÉ.»"), "été");
    }

    #[test]
    fn reward_terms() {
        let g = parse_template("<think>No effusion.</think><answer>Normal.</answer>");
        let r = exact_match_reward(&g, "No effusion", "NORMAL!", 3).unwrap();
        assert_eq!(r.total(), 3.0);
        let bad = parse_template("<think>No effusion.</think>");
        let r = exact_match_reward(&bad, "No effusion", "Normal", 3).unwrap();
        assert_eq!(r.total(), 0.0);
        assert_eq!(
            exact_match_reward(&g, "No effusion", " . ", 7),
            Err(SdrError::EmptySection {
                index: 7,
                section: "impression"
            })
        );
        assert_eq!(
            exact_match_reward(&g, "", "x", 2),
            Err(SdrError::EmptySection {
                index: 2,
                section: "findings"
            })
        );
    }
}
