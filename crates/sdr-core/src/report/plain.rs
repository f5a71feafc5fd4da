//! Plain-text reports: `Findings:` / `Impression:` headers (SPEC §1, paper
//! appendix B prompts), as written by API models and in MIMIC-CXR free text.
//!
//! Rules:
//! - A header is a known name (see [`super::header`]), case-insensitive,
//!   followed by `:`; markdown and markup tags around it are allowed
//!   (`**Findings:**`, `**Impression**:`, `## Impression`, `<text>Findings:`,
//!   `<p><b>IMPRESSION:</b>`). Tags are otherwise transparent to the scanner
//!   (`clear.</p> <p>Impression:` stands after a sentence end) and removed
//!   by the segmenter. At a line start the colon may be
//!   omitted when the header is alone on its line and capitalised or marked
//!   up (`FINDINGS`, `Impression`, `## impression`; a bare `impression` line
//!   is a hard wrap). Inside a line a header is recognised only right after a
//!   sentence end (`.`, `!`, `?`, then closers and blanks: `... clear.
//!   Impression: ...`, `clear.Impression:`, `(see prior.) Impression:`) and
//!   needs its colon.
//! - Text on the header's line after the colon belongs to the section, as do
//!   the following lines up to the next header. Exception: an ignored
//!   section's header inside a line and not in capitals (`Heart normal.
//!   Comparison: none. Lungs clear.`) is a label that covers one sentence;
//!   the interrupted section goes on after it. MIMIC-CXR's capitalised
//!   `WET READ:` still runs to the next header.
//! - Recognised non-report sections (INDICATION, COMPARISON, TECHNIQUE, HISTORY,
//!   EXAMINATION, CLINICAL INFORMATION, RECOMMENDATION(S), NOTIFICATION, FINAL
//!   REPORT, WET READ, ...) and any preamble before the first header
//!   (`Sure, here is the report:`) are dropped.
//! - The report is the first Findings section and the first Impression
//!   section after it. A second Findings header, a second Impression header
//!   (also when the first one stood before the Findings), or a line that
//!   starts another example or report (`Example 2`, `**Report 3:**`, `Case
//!   #4`, `Sample 1`) after any Findings or Impression header ends it: what
//!   follows is ignored. Small models often write their report (or just an
//!   Impression) and then repeat the prompt's examples. A marker before any
//!   such header is preamble (`Example 5` labelling the model's own report).
//!   When no Findings header stands before the end, the Impression is kept,
//!   so impression-only text shows its impression (and is not valid).
//! - The report is valid when Findings and Impression each hold at least one
//!   sentence.

use super::header::{header_at, Position, SectionKind};
use super::markup::markup_tag_at;
use super::normalize::{normalize, starts_with_ignore_case};
use super::section::Section;
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
            Some(Section::Findings) => report.findings.push(unit.text),
            Some(Section::Impression) => report.impression.push(unit.text),
            None => {}
        }
    }
    report.format_valid = !report.findings.is_empty() && !report.impression.is_empty();
    report
}

/// One sentence of a plain-text report, tagged with its section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unit {
    /// The section the sentence belongs to; `None` for the preamble, other
    /// headed sections (indication, ...), or text with no header at all.
    pub section: Option<Section>,
    /// The sentence, as [`split_sentences`](super::split_sentences) gives it.
    pub text: String,
}

/// Every sentence of a plain-text report in text order, including the
/// preamble and ignored sections (tagged `None`), up to the
/// report's end (see the module rules); nothing after the end is returned.
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
///         (None, "Sure."),
///         (Some(Section::Findings), "A."),
///         (Some(Section::Findings), "B."),
///         (Some(Section::Impression), "C"),
///     ]
/// );
/// ```
pub fn plain_units(text: &str) -> Vec<Unit> {
    let c = normalize(text);
    let n = c.len();
    let (headers, markers) = scan(&c);
    let (headers, end) = report_headers(&headers, &markers);
    let n = end.unwrap_or(n);
    let mut units = Vec::new();
    let mut push = |section: Option<Section>, sentences: Vec<String>| {
        units.extend(sentences.into_iter().map(|text| Unit { section, text }));
    };
    let preamble_end = headers.first().map_or(n, |h| h.at).min(n);
    if preamble_end > 0 {
        push(None, split_normalized(&c[..preamble_end]));
    }
    // The section that an inline label (`... Comparison: none. ...`) interrupts.
    let mut current: Option<Section> = None;
    for (k, h) in headers.iter().enumerate() {
        let end = headers.get(k + 1).map_or(n, |h| h.at).min(n);
        let section = match h.kind {
            SectionKind::Findings => Some(Section::Findings),
            SectionKind::Impression => Some(Section::Impression),
            SectionKind::Other => None,
        };
        let sentences = if h.content < end {
            split_normalized(&c[h.content..end])
        } else {
            Vec::new()
        };
        if h.label {
            let mut rest = sentences;
            let label: Vec<String> = rest.drain(..rest.len().min(1)).collect();
            push(None, label);
            push(current, rest);
        } else {
            current = section;
            push(section, sentences);
        }
    }
    units
}

/// Whether the report in `text` has ended: a second Findings or Impression
/// header, or a line opening another example or report after a Findings or
/// Impression header (the module rules). Streaming generation stops a
/// candidate there, since nothing after it can change the parsed report.
///
/// # Examples
/// ```
/// use sdr_core::report::plain_report_ended;
///
/// assert!(!plain_report_ended("Findings: Clear.\nImpression: Normal."));
/// assert!(plain_report_ended("Findings: Clear.\nImpression: Normal.\nExample 2"));
/// assert!(plain_report_ended("Findings: A.\nImpression: B.\nFindings: C."));
/// assert!(plain_report_ended("Impression: B.\n\nExample 2:\nFindings: C."));
/// ```
pub fn plain_report_ended(text: &str) -> bool {
    let c = normalize(text);
    let (headers, markers) = scan(&c);
    report_headers(&headers, &markers).1.is_some()
}

/// A header found in the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Found {
    /// Where the header starts (and the previous section ends).
    at: usize,
    kind: SectionKind,
    /// First character of the section text.
    content: usize,
    /// An inline label of an ignored section not written in capitals
    /// (`... Heart normal. Comparison: none. Lungs clear.`): it covers one
    /// sentence, after which the interrupted section goes on. Capitalised
    /// inline headers (`WET READ:`) and headers at a line start cover the text
    /// up to the next header.
    label: bool,
}

/// Headers and example-marker line starts of normalised text.
fn scan(c: &[char]) -> (Vec<Found>, Vec<usize>) {
    let n = c.len();
    let mut headers: Vec<Found> = Vec::new();
    // Starts of lines that open another example or report.
    let mut markers: Vec<usize> = Vec::new();
    let mut i = 0;
    // The text so far ends a sentence: a terminator, then only closers and
    // blanks. The segmenter splits there too, also when the next word is
    // glued on (`clear.Impression:`) or behind a closer (`(see prior.) Impression:`).
    let mut after_end = false;
    while i < n {
        let line_start = i == 0 || c[i - 1] == '\n';
        let inline = !line_start && after_end && !c[i].is_whitespace() && !is_closer(c[i]);
        if line_start && example_marker_at(c, i) {
            markers.push(i);
        }
        let found = if line_start {
            header_at(c, i, Position::LineStart)
        } else if inline {
            header_at(c, i, Position::Inline)
        } else {
            None
        };
        if let Some(h) = found {
            // `content_start > i` always holds (a name was consumed), so this advances.
            headers.push(Found {
                at: i,
                kind: h.kind,
                content: h.content_start,
                label: inline && h.kind == SectionKind::Other && !h.upper,
            });
            i = h.content_start.max(i + 1);
            after_end = false;
            continue;
        }
        // Markup tags are transparent: `clear.</p> <p>Impression:` is after a
        // sentence end, and a tag's characters are never scanned.
        if let Some(end) = markup_tag_at(c, i) {
            i = end;
            continue;
        }
        let ch = c[i];
        if ch == '\n' {
            after_end = false;
        } else if matches!(ch, '.' | '!' | '?') {
            after_end = true;
        } else if !(ch.is_whitespace() || is_closer(ch)) {
            after_end = false;
        }
        i += 1;
    }
    (headers, markers)
}

/// Closing brackets and quotes that may follow a sentence end.
fn is_closer(ch: char) -> bool {
    matches!(ch, ')' | ']' | '}' | '"' | '\'' | '’' | '”' | '»')
}

/// The headers that belong to the report, each with its kind demoted to
/// `Other` where it is not the report's Findings or Impression, and the
/// position where the report ends, if it does.
///
/// The report ends at the second Findings header, at the second Impression
/// header (counting one before the Findings), and at an example marker after
/// any Findings or Impression header; a marker before them is preamble.
/// Within the part before the end, an Impression header followed by a
/// Findings header is not the report's: the report is the first Findings
/// section and the first Impression after it. Without a Findings header the
/// Impression is kept (impression-only text shows its impression, invalid).
fn report_headers(headers: &[Found], markers: &[usize]) -> (Vec<Found>, Option<usize>) {
    // Events in text order; a marker sorts before a header at the same place.
    let mut events: Vec<(usize, Option<&Found>)> = markers
        .iter()
        .map(|&m| (m, None))
        .chain(headers.iter().map(|h| (h.at, Some(h))))
        .collect();
    events.sort_by_key(|&(at, h)| (at, h.is_some()));
    let (mut seen_f, mut seen_i) = (false, false);
    let mut end = None;
    for (at, header) in events {
        let ends = match header.map(|h| h.kind) {
            None => seen_f || seen_i,
            Some(SectionKind::Findings) => std::mem::replace(&mut seen_f, true),
            Some(SectionKind::Impression) => std::mem::replace(&mut seen_i, true),
            Some(SectionKind::Other) => false,
        };
        if ends {
            end = Some(at);
            break;
        }
    }
    let before_end = |h: &&Found| end.is_none_or(|e| h.at < e);
    let findings_at = headers
        .iter()
        .filter(before_end)
        .find(|h| h.kind == SectionKind::Findings)
        .map(|h| h.at);
    let kept = headers
        .iter()
        .filter(before_end)
        .map(|&h| match (h.kind, findings_at) {
            // An Impression before the Findings is not part of the report.
            (SectionKind::Impression, Some(f)) if h.at < f => Found {
                kind: SectionKind::Other,
                ..h
            },
            _ => h,
        })
        .collect();
    (kept, end)
}

/// A line (at `i`) that opens another example or report: after markdown
/// decoration and markup tags (`<h2>Example 5</h2>`), `example`, `report`,
/// `case` or `sample` (any case), optional spaces and `#`, then a digit.
fn example_marker_at(c: &[char], mut i: usize) -> bool {
    while i < c.len() {
        if matches!(c[i], ' ' | '\t' | '#' | '*' | '_' | '-' | '>') {
            i += 1;
        } else if let Some(end) = markup_tag_at(c, i) {
            i = end;
        } else {
            break;
        }
    }
    for word in ["example", "report", "case", "sample"] {
        if starts_with_ignore_case(c, i, word) {
            let mut j = i + word.len();
            while j < c.len() && matches!(c[j], ' ' | '\t' | '#') {
                j += 1;
            }
            return j < c.len() && c[j].is_ascii_digit();
        }
    }
    false
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
    fn other_sections_ignored() {
        let r = parse_plain(
            "INDICATION: Cough.\nFindings: A.\nCOMPARISON: None.\nIMPRESSION: C.\nRECOMMENDATION(S): CT.",
        );
        assert_eq!(r.findings, ["A."]);
        assert_eq!(r.impression, ["C."]);
    }

    #[test]
    fn a_second_findings_header_ends_the_report() {
        let r = parse_plain("Findings: A.\nFindings: B.\nImpression: C.");
        assert_eq!(r.findings, ["A."]);
        assert!(r.impression.is_empty());
        assert!(!r.format_valid);
        let r = parse_plain("Findings: A.\nImpression: C.\nFindings: B.\nImpression: D.");
        assert!(r.format_valid);
        assert_eq!(
            (r.findings.as_slice(), r.impression.as_slice()),
            (&["A.".to_string()][..], &["C.".to_string()][..])
        );
    }

    #[test]
    fn an_example_after_a_lone_impression_ends_the_report() {
        let text = "Impression: A.\n\nExample 2:\nFindings: B.\nImpression: C.";
        let r = parse_plain(text);
        assert!(!r.format_valid);
        assert!(r.findings.is_empty());
        assert_eq!(r.impression, ["A."]);
        assert!(plain_report_ended(text));
        // A second Impression header ends it before the Findings.
        let r = parse_plain("Impression: A.\nImpression: A.\nFindings: B.\nImpression: C.");
        assert_eq!(
            (r.findings.len(), r.impression.as_slice()),
            (0, &["A.".to_string()][..])
        );
    }

    #[test]
    fn impression_before_findings_is_not_the_report() {
        let r = parse_plain("Impression: C.\nFindings: A.");
        assert!(!r.format_valid);
        assert!(r.impression.is_empty());
        // With no Findings header anywhere, the Impression still counts.
        let r = parse_plain("IMPRESSION: No acute disease.");
        assert_eq!(r.impression, ["No acute disease."]);
        assert!(!r.format_valid);
    }

    /// Real SmolLM2-135M-Instruct outputs (prompt p2, IU test studies): the
    /// model writes a report, then continues with the prompt's examples.
    #[test]
    fn smollm2_outputs_that_repeat_the_examples() {
        let text = "Example 5\nFindings: Mild cardiomegaly. No swelling in the lower extremities. \
Minimal pleural effusion is detected. No pleural effusion is present.\nImpression: Mild cardiomegaly. \
Minimal pleural effusion detected.\n\nExample 6\nFindings: Mild cardiomegaly. Mild cardioneuroendocardiole \
subcutaneous mass is present. No swelling is present.\nImpression: Mild cardioneuroendocardiole \
subcutaneous mass present. Mild cardiomegaly present.";
        let r = parse_plain(text);
        assert!(r.format_valid);
        assert_eq!(
            r.findings,
            [
                "Mild cardiomegaly.",
                "No swelling in the lower extremities.",
                "Minimal pleural effusion is detected.",
                "No pleural effusion is present."
            ]
        );
        assert_eq!(
            r.impression,
            ["Mild cardiomegaly.", "Minimal pleural effusion detected."]
        );
        let text =
            "Findings: The heart is normal. The lungs are clear.\nImpression: No acute disease.\n\
**Report 2:**\nFindings: Mild cardiomegaly.\nImpression: Cardiomegaly.";
        let r = parse_plain(text);
        assert_eq!(r.impression, ["No acute disease."]);
        assert_eq!(r.findings.len(), 2);
        // A marker before the report is preamble, not an end.
        let r = parse_plain("Example 0\nFindings: A.\nImpression: B.");
        assert!(r.format_valid);
        // Words that merely start like a marker do not end the report.
        let r = parse_plain(
            "Findings: A.\nReport the lungs as clear.\nImpression: B.\nExamples are given.",
        );
        assert_eq!(r.findings, ["A.", "Report the lungs as clear."]);
        assert_eq!(r.impression, ["B.", "Examples are given."]);
    }
}
