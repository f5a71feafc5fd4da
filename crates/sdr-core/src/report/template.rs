//! The model-output template `<think>F</think><answer>I</answer>` and the
//! format reward `R_fmt` (paper §3.1 "Format reward", SPEC §1).
//!
//! Valid when each of the four tags occurs exactly once, in that order, the
//! enclosed Findings and Impression each hold at least one sentence (after
//! [`split_sentences`](super::split_sentences)), and only whitespace (Unicode
//! `White_Space`) stands outside the tags. Tags are matched exactly and
//! case-sensitively (`<Think>` and `< think >` are text). A label naming the
//! enclosed section at its start (`<think>Findings: ...`, `<answer>**Impression:**
//! ...`) is dropped, as in plain text, so that it does not join the first
//! sentence; any other header inside the tags is text.

use super::header::{header_at, Position, SectionKind};
use super::normalize::normalize;
use super::segment::split_normalized;
use super::tags::{ANSWER_CLOSE, ANSWER_OPEN, TEMPLATE_TAGS, THINK_CLOSE, THINK_OPEN};
use super::ParsedReport;

/// True when `text` contains any of the four template tags.
pub fn has_template_tag(text: &str) -> bool {
    TEMPLATE_TAGS.iter().any(|t| text.contains(t))
}

/// Byte offset of `tag` in `text` at or after `from`.
fn find_from(text: &str, tag: &str, from: usize) -> Option<usize> {
    text.get(from..)?.find(tag).map(|k| from + k)
}

/// Parses model output in the `<think>F</think><answer>I</answer>` template.
///
/// `format_valid` is `R_fmt` as a bool. When the output is malformed the
/// sections are still extracted best-effort, which the pruning loop needs for
/// unfinished candidates (SPEC §6): Findings is the text after the first
/// `<think>` up to the next `</think>`, `<answer>` or the end; Impression the
/// text after the first `<answer>` up to the next `</answer>` or the end.
/// Rewards must not use the sections of an invalid output (SPEC §4).
///
/// # Examples
/// ```
/// use sdr_core::report::parse_template;
///
/// let r = parse_template("<think>Heart normal. Lungs clear.</think>\n<answer>Normal chest.</answer>");
/// assert!(r.format_valid);
/// assert_eq!(r.findings, ["Heart normal.", "Lungs clear."]);
///
/// let partial = parse_template("<think>Heart normal. Lungs");
/// assert!(!partial.format_valid);
/// assert_eq!(partial.findings, ["Heart normal.", "Lungs"]);
/// ```
pub fn parse_template(text: &str) -> ParsedReport {
    let think = text.find(THINK_OPEN);
    let answer = text.find(ANSWER_OPEN);

    let findings_span = think.map(|t| {
        let from = t + THINK_OPEN.len();
        let end = [
            find_from(text, THINK_CLOSE, from),
            find_from(text, ANSWER_OPEN, from),
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(text.len());
        (from, end)
    });
    let impression_span = answer.map(|a| {
        let from = a + ANSWER_OPEN.len();
        (
            from,
            find_from(text, ANSWER_CLOSE, from).unwrap_or(text.len()),
        )
    });
    let sentences = |span: Option<(usize, usize)>, kind| {
        span.and_then(|(a, b)| text.get(a..b))
            .map(|s| section_sentences(s, kind))
            .unwrap_or_default()
    };
    let findings = sentences(findings_span, SectionKind::Findings);
    let impression = sentences(impression_span, SectionKind::Impression);

    let format_valid = layout_valid(text) && !findings.is_empty() && !impression.is_empty();
    ParsedReport {
        format_valid,
        findings,
        impression,
    }
}

/// The sentences of an enclosed section, without a leading label of its own kind.
fn section_sentences(text: &str, kind: SectionKind) -> Vec<String> {
    let c = normalize(text);
    let first = c
        .iter()
        .position(|ch| !ch.is_whitespace())
        .unwrap_or(c.len());
    let from = header_at(&c, first, Position::LineStart)
        .filter(|h| h.kind == kind)
        .map_or(0, |h| h.content_start);
    split_normalized(&c[from..])
}

/// Tags once each, in order, only whitespace outside them.
fn layout_valid(text: &str) -> bool {
    if TEMPLATE_TAGS.iter().any(|t| text.matches(t).count() != 1) {
        return false;
    }
    let pos: Vec<usize> = TEMPLATE_TAGS.iter().filter_map(|t| text.find(t)).collect();
    let [t0, t1, a0, a1] = pos[..] else {
        return false;
    };
    if !(t0 < t1 && t1 < a0 && a0 < a1) {
        return false;
    }
    let blank = |a: usize, b: usize| text.get(a..b).is_some_and(|s| s.trim().is_empty());
    blank(0, t0) && blank(t1 + THINK_CLOSE.len(), a0) && blank(a1 + ANSWER_CLOSE.len(), text.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(s: &str) -> bool {
        parse_template(s).format_valid
    }

    #[test]
    fn valid_forms() {
        assert!(valid("<think>A.</think><answer>B.</answer>"));
        assert!(valid(
            "  \n<think>\nA. B.\n</think>\n\n<answer> B </answer>\n\t"
        ));
        assert!(valid("\u{2003}<think>A</think>\u{00A0}<answer>B</answer>"));
        let r = parse_template("<think>1. A. 2. B.</think><answer>- C</answer>");
        assert_eq!(r.findings, ["A.", "B."]);
        assert_eq!(r.impression, ["C"]);
    }

    #[test]
    fn invalid_forms() {
        for s in [
            "",
            "A. B.",
            "<think>A.</think>",
            "<answer>B.</answer>",
            "<think>A.<answer>B.</answer>", // missing </think>
            "<think>A.</think><answer>B.",  // missing </answer>
            "<think>A.</think><think>A.</think><answer>B.</answer>", // repeated tag
            "<think>A.</think><answer>B.</answer></answer>", // repeated closing
            "<answer>B.</answer><think>A.</think>", // wrong order
            "<think>A.<answer>B.</think></answer>", // interleaved
            "Sure! <think>A.</think><answer>B.</answer>", // text before
            "<think>A.</think> so <answer>B.</answer>", // text between
            "<think>A.</think><answer>B.</answer> Done.", // text after
            "<think></think><answer>B.</answer>", // empty section
            "<think>A.</think><answer> \n </answer>", // whitespace-only
            "<think> . - </think><answer>B.</answer>", // no sentence
            "<Think>A.</Think><answer>B.</answer>", // case matters
        ] {
            assert!(!valid(s), "{s:?}");
        }
    }

    #[test]
    fn own_section_labels_are_dropped() {
        let r = parse_template(
            "<think>\n**Findings:** No effusion.</think><answer>Impression: Normal.</answer>",
        );
        assert!(r.format_valid);
        assert_eq!(r.findings, ["No effusion."]);
        assert_eq!(r.impression, ["Normal."]);
        // A label alone is no sentence; the other section's label is text.
        assert!(!valid("<think>Findings:</think><answer>B.</answer>"));
        let r = parse_template("<think>Impression: A.</think><answer>B.</answer>");
        assert_eq!(r.findings, ["Impression: A."]);
    }

    #[test]
    fn best_effort_sections() {
        let r = parse_template("<think>A. B</think><answer>C. D");
        assert!(!r.format_valid);
        assert_eq!(r.findings, ["A.", "B"]);
        assert_eq!(r.impression, ["C.", "D"]);
        let r = parse_template("<think>A. <answer>C.</answer>");
        assert_eq!(r.findings, ["A."]);
        assert_eq!(r.impression, ["C."]);
    }
}
