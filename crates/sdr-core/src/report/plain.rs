//! Plain-text reports: `Findings:` / `Impression:` headers (SPEC §1, paper
//! appendix B prompts), as written by API models and in MIMIC-CXR free text.
//!
//! Rules:
//! - A header is a known name (see [`super::header`]), case-insensitive,
//!   followed by `:`; markdown around it is allowed (`**Findings:**`,
//!   `**Impression**:`, `## Impression`). At a line start the colon may be
//!   omitted when the header is alone on its line (`FINDINGS`, `## Impression`).
//!   Inside a line a header is recognised only right after a sentence end
//!   (`... clear. Impression: ...`) and needs its colon.
//! - Text on the header's line after the colon belongs to the section, as do
//!   the following lines up to the next header.
//! - Recognised non-report sections (INDICATION, COMPARISON, TECHNIQUE, HISTORY,
//!   EXAMINATION, CLINICAL INFORMATION, RECOMMENDATION(S), NOTIFICATION, FINAL
//!   REPORT, WET READ, ...) and any preamble before the first header
//!   (`Sure, here is the report:`) are dropped.
//! - A section header that occurs more than once contributes all its
//!   occurrences, in order.
//! - The report is valid when Findings and Impression each hold at least one
//!   sentence; their order does not matter.

use super::header::{header_at, Position, SectionKind};
use super::normalize::normalize;
use super::segment::split_normalized;
use super::ParsedReport;
use serde::{Deserialize, Serialize};

/// Parses a plain-text report with `Findings:` / `Impression:` headers.
///
/// `format_valid` is true when both sections hold at least one sentence; when
/// it is false the sections hold whatever was found (possibly nothing).
///
/// # Examples
/// ```
/// use sdr_core::report::parse_plain;
///
/// let r = parse_plain("Sure! Here it is:\n**Findings:** Heart normal. Lungs clear.\n**Impression:** No acute disease.");
/// assert!(r.format_valid);
/// assert_eq!(r.findings, ["Heart normal.", "Lungs clear."]);
/// assert_eq!(r.impression, ["No acute disease."]);
/// ```
pub fn parse_plain(text: &str) -> ParsedReport {
    let mut report = ParsedReport::default();
    for unit in plain_units(text) {
        match unit.section {
            Section::Findings => report.findings.push(unit.text),
            Section::Impression => report.impression.push(unit.text),
            Section::Other => {}
        }
    }
    report.format_valid = !report.findings.is_empty() && !report.impression.is_empty();
    report
}

/// Where a sentence of a plain-text report belongs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Section {
    /// The Findings section.
    Findings,
    /// The Impression section.
    Impression,
    /// Preamble, other headed sections (indication, ...), or text with no header at all.
    Other,
}

/// One sentence of a plain-text report, tagged with its section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unit {
    /// The section the sentence belongs to.
    pub section: Section,
    /// The sentence, as [`split_sentences`](super::split_sentences) gives it.
    pub text: String,
}

/// Every sentence of a plain-text report in text order, including the
/// preamble and ignored sections (tagged [`Section::Other`]).
///
/// Streaming generation uses this to count sentences as they complete, even
/// before (or without) a `Findings:` header; [`parse_plain`] keeps only the
/// Findings and Impression units.
///
/// # Examples
/// ```
/// use sdr_core::report::{plain_units, Section};
///
/// let u = plain_units("Sure.\nFindings: A. B.\nImpression: C");
/// let tags: Vec<_> = u.iter().map(|u| (u.section, u.text.as_str())).collect();
/// assert_eq!(
///     tags,
///     [
///         (Section::Other, "Sure."),
///         (Section::Findings, "A."),
///         (Section::Findings, "B."),
///         (Section::Impression, "C"),
///     ]
/// );
/// ```
pub fn plain_units(text: &str) -> Vec<Unit> {
    let c = normalize(text);
    let n = c.len();
    // (header start, kind, content start)
    let mut headers: Vec<(usize, SectionKind, usize)> = Vec::new();
    let mut i = 0;
    let mut last_non_blank: Option<char> = None;
    while i < n {
        let line_start = i == 0 || c[i - 1] == '\n';
        let inline = !line_start
            && matches!(c[i - 1], ' ' | '\t')
            && !c[i].is_whitespace()
            && matches!(last_non_blank, Some('.' | '!' | '?'));
        let found = if line_start {
            header_at(&c, i, Position::LineStart)
        } else if inline {
            header_at(&c, i, Position::Inline)
        } else {
            None
        };
        if let Some(h) = found {
            // `content_start > i` always holds (a name was consumed), so this advances.
            headers.push((i, h.kind, h.content_start));
            i = h.content_start.max(i + 1);
            last_non_blank = Some(':');
            continue;
        }
        if !c[i].is_whitespace() {
            last_non_blank = Some(c[i]);
        }
        i += 1;
    }
    let mut units = Vec::new();
    let mut push = |section: Section, chars: &[char]| {
        units.extend(
            split_normalized(chars)
                .into_iter()
                .map(|text| Unit { section, text }),
        );
    };
    let preamble_end = headers.first().map_or(n, |h| h.0);
    if preamble_end > 0 {
        push(Section::Other, &c[..preamble_end]);
    }
    for (k, &(_, kind, content_start)) in headers.iter().enumerate() {
        let end = headers.get(k + 1).map_or(n, |h| h.0);
        let section = match kind {
            SectionKind::Findings => Section::Findings,
            SectionKind::Impression => Section::Impression,
            SectionKind::Other => Section::Other,
        };
        if content_start < end {
            push(section, &c[content_start..end]);
        }
    }
    units
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_format() {
        let r =
            parse_plain("Findings: Mild cardiomegaly. No edema.\nImpression: Mild cardiomegaly.");
        assert!(r.format_valid);
        assert_eq!(r.findings, ["Mild cardiomegaly.", "No edema."]);
        assert_eq!(r.impression, ["Mild cardiomegaly."]);
    }

    #[test]
    fn one_line_and_case() {
        let r = parse_plain("FINDINGS: Lungs clear. impression: Normal.");
        assert!(r.format_valid);
        assert_eq!(r.findings, ["Lungs clear."]);
        assert_eq!(r.impression, ["Normal."]);
    }

    #[test]
    fn header_words_inside_sentences_are_text() {
        let r = parse_plain(
            "Findings: No change in findings: stable. The impression is good.\nImpression: Ok.",
        );
        assert_eq!(
            r.findings,
            ["No change in findings: stable.", "The impression is good."]
        );
        assert!(r.format_valid);
    }

    #[test]
    fn missing_sections() {
        assert!(!parse_plain("Heart normal. Lungs clear.").format_valid);
        let r = parse_plain("Findings: Heart normal.");
        assert!(!r.format_valid);
        assert_eq!(r.findings, ["Heart normal."]);
        let r = parse_plain("Findings: Heart normal.\nImpression:\n   \nIndication: cough.");
        assert!(!r.format_valid);
        assert!(r.impression.is_empty());
        assert!(!parse_plain("").format_valid);
    }

    #[test]
    fn markdown_headers_and_preamble() {
        let r = parse_plain(
            "Sure, here is the report:\n\n## Findings\nThe heart is normal.\n\n## Impression\n- No acute disease.\n\nI hope this helps!",
        );
        assert!(r.format_valid);
        assert_eq!(r.findings, ["The heart is normal."]);
        // Trailing chatter after the last header cannot be told apart from the section.
        assert_eq!(r.impression, ["No acute disease.", "I hope this helps!"]);
    }

    #[test]
    fn other_sections_ignored_and_repeats_concatenated() {
        let r = parse_plain(
            "INDICATION: Cough.\nFindings: A.\nCOMPARISON: None.\nFindings: B.\nIMPRESSION: C.\nRECOMMENDATION(S): CT.",
        );
        assert_eq!(r.findings, ["A.", "B."]);
        assert_eq!(r.impression, ["C."]);
    }
}
