//! Section headers of plain-text reports (`Findings:`, `IMPRESSION:`,
//! `**Findings:**`, `## Impression`, `<text>Findings:`, `INDICATION:`, ...).

use super::markup::markup_tag_at;
use super::normalize::starts_with_ignore_case;

/// What a header introduces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SectionKind {
    Findings,
    Impression,
    /// A recognised section whose text is ignored (indication, comparison, ...).
    Other,
}

/// Header names, lower-case ASCII; a space matches any run of spaces/tabs.
/// Only `findings`/`impression` (and their singular/plural) feed the report;
/// synonyms such as `conclusion` or `summary` are recognised so that their
/// text does not leak into a section, but are *not* read as Impression
/// (SPEC §1 names only `Findings:` and `Impression:`).
const HEADERS: &[(&str, SectionKind)] = &[
    ("findings", SectionKind::Findings),
    ("finding", SectionKind::Findings),
    ("impressions", SectionKind::Impression),
    ("impression", SectionKind::Impression),
    ("provisional findings impression", SectionKind::Other),
    ("pfi", SectionKind::Other),
    ("final report", SectionKind::Other),
    ("wet read", SectionKind::Other),
    ("addendum", SectionKind::Other),
    ("indications", SectionKind::Other),
    ("indication", SectionKind::Other),
    ("clinical indications", SectionKind::Other),
    ("clinical indication", SectionKind::Other),
    ("history", SectionKind::Other),
    ("clinical history", SectionKind::Other),
    ("medical history", SectionKind::Other),
    ("patient history", SectionKind::Other),
    ("reason for exam", SectionKind::Other),
    ("reason for examination", SectionKind::Other),
    ("reason for study", SectionKind::Other),
    ("reason", SectionKind::Other),
    ("examination", SectionKind::Other),
    ("exam", SectionKind::Other),
    ("type of examination", SectionKind::Other),
    ("reference exam", SectionKind::Other),
    ("study", SectionKind::Other),
    ("views", SectionKind::Other),
    ("comparisons", SectionKind::Other),
    ("comparison", SectionKind::Other),
    ("technique", SectionKind::Other),
    ("procedure", SectionKind::Other),
    ("clinical information", SectionKind::Other),
    ("clinical info", SectionKind::Other),
    ("clinical data", SectionKind::Other),
    ("clinical details", SectionKind::Other),
    ("recommendations", SectionKind::Other),
    ("recommendation", SectionKind::Other),
    ("notifications", SectionKind::Other),
    ("notification", SectionKind::Other),
    ("conclusions", SectionKind::Other),
    ("conclusion", SectionKind::Other),
    ("summary", SectionKind::Other),
    ("note", SectionKind::Other),
    ("notes", SectionKind::Other),
    ("disclaimer", SectionKind::Other),
    ("report", SectionKind::Other),
    ("radiology report", SectionKind::Other),
    ("dictated by", SectionKind::Other),
    ("signed by", SectionKind::Other),
    ("electronically signed by", SectionKind::Other),
];

/// Where a header may stand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Position {
    /// At a line start: markdown prefixes (`#`, `*`, `_`, `-`, `>`) and markup
    /// tags (`<text>`, `<p><b>`, see [`super::markup`]) allowed, and the colon
    /// may be omitted when the header is alone on its line and either
    /// capitalised (`Impression`, `FINDINGS`) or marked up (`## impression`,
    /// `<h2>impression</h2>`): a bare lower-case `impression` line is a
    /// hard-wrapped sentence.
    LineStart,
    /// After a sentence end inside a line (`... normal. Impression: ...`):
    /// only emphasis markers and markup tags around it (`**Impression:**`,
    /// `<b>Impression:</b>`), and the colon is required.
    Inline,
}

/// A header found at some position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    pub kind: SectionKind,
    /// First character of the section text (after colon and emphasis).
    pub content_start: usize,
    /// The name is written in capitals (`WET READ:`), as MIMIC-CXR writes
    /// section headers.
    pub upper: bool,
}

/// Whitespace within a line (a non-breaking space included: `Findings\u{a0}:`).
fn is_blank(ch: char) -> bool {
    ch != '\n' && ch.is_whitespace()
}

fn is_emphasis(ch: char) -> bool {
    ch == '*' || ch == '_'
}

/// Matches `name` at `c[i..]` (ASCII case-insensitive; a space in `name`
/// matches one or more blanks), ending at a word boundary. Returns the end.
fn match_name(c: &[char], i: usize, name: &str) -> Option<usize> {
    let mut k = i;
    for word in name.split(' ') {
        if k > i {
            let blanks = c[k..].iter().take_while(|&&ch| is_blank(ch)).count();
            if blanks == 0 {
                return None;
            }
            k += blanks;
        }
        if !starts_with_ignore_case(c, k, word) {
            return None;
        }
        k += word.len();
    }
    if c.get(k).is_some_and(|ch| ch.is_alphanumeric()) {
        return None;
    }
    Some(k)
}

/// Skips emphasis, blanks and (closing) markup tags after a header name
/// (`**Findings**:`, `<b>FINDINGS</b>:`, `## Impression </h2>`); at most eight
/// tags, as before the name.
fn skip_closing(c: &[char], k: &mut usize) {
    let mut tags = 0;
    while let Some(&ch) = c.get(*k) {
        if is_emphasis(ch) || is_blank(ch) {
            *k += 1;
        } else if let Some(end) = markup_tag_at(c, *k).filter(|_| tags < 8) {
            tags += 1;
            *k = end;
        } else {
            break;
        }
    }
}

/// The header starting at `i`, if any (longest name wins).
pub(crate) fn header_at(c: &[char], i: usize, position: Position) -> Option<Header> {
    let n = c.len();
    // Indentation is free; decoration is bounded (`### **`, `<p><b>`): eight
    // markdown characters or tags.
    let mut k = i;
    let mut decoration = 0;
    let mut marked_up = false;
    while k < n && decoration < 8 {
        let ch = c[k];
        if position == Position::LineStart && is_blank(ch) {
            k += 1;
            continue;
        }
        if let Some(end) = markup_tag_at(c, k) {
            marked_up = true;
            decoration += 1;
            k = end;
            continue;
        }
        let prefix = match position {
            Position::LineStart => matches!(ch, '#' | '*' | '_' | '-' | '>'),
            Position::Inline => is_emphasis(ch),
        };
        if !prefix {
            break;
        }
        marked_up |= matches!(ch, '#' | '*' | '_');
        decoration += 1;
        k += 1;
    }
    let mut best: Option<(usize, SectionKind)> = None;
    for &(name, kind) in HEADERS {
        if let Some(end) = match_name(c, k, name) {
            if best.is_none_or(|(b, _)| end > b) {
                best = Some((end, kind));
            }
        }
    }
    let name_start = k;
    let (mut k, kind) = best?;
    let name = &c[name_start..k];
    let upper = !name.iter().any(|ch| ch.is_lowercase());
    let header = |content_start| {
        Some(Header {
            kind,
            content_start,
            upper,
        })
    };
    skip_closing(c, &mut k);
    // A short parenthetical before the colon: `PROVISIONAL FINDINGS IMPRESSION (PFI):`.
    if c.get(k) == Some(&'(') {
        if let Some(len) = c[k..]
            .iter()
            .take(24)
            .position(|&ch| ch == ')' || ch == '\n')
        {
            if c[k + len] == ')' {
                k += len + 1;
                skip_closing(c, &mut k);
            }
        }
    }
    if matches!(c.get(k), Some(':' | '：')) {
        k += 1;
        while k < n && is_emphasis(c[k]) {
            k += 1;
        }
        return header(k);
    }
    let capitalised = name.first().is_some_and(|ch| ch.is_uppercase());
    if position == Position::LineStart && (k == n || c[k] == '\n') && (capitalised || marked_up) {
        return header(k);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str, position: Position) -> Option<(SectionKind, String)> {
        let c: Vec<char> = s.chars().collect();
        header_at(&c, 0, position).map(|h| (h.kind, c[h.content_start..].iter().collect()))
    }

    #[test]
    fn colonless_needs_capital_or_markup() {
        use SectionKind::*;
        let ls = Position::LineStart;
        assert_eq!(at("impression\nof x", ls), None);
        assert_eq!(at("findings", ls), None);
        assert_eq!(at("Impression\nx", ls), Some((Impression, "\nx".into())));
        assert_eq!(at("## impression\nx", ls), Some((Impression, "\nx".into())));
        assert_eq!(at("**findings**", ls), Some((Findings, "".into())));
        assert_eq!(at("impression: x", ls), Some((Impression, " x".into())));
        assert_eq!(at("Findings\u{a0}: x", ls), Some((Findings, " x".into())));
    }

    #[test]
    fn markup_tags_are_decoration() {
        use SectionKind::*;
        let ls = Position::LineStart;
        assert_eq!(at("<text>Findings: x", ls), Some((Findings, " x".into())));
        assert_eq!(
            at("<p><b>FINDINGS:</b> x", ls),
            Some((Findings, "</b> x".into()))
        );
        assert_eq!(at("<b>Findings</b>: x", ls), Some((Findings, " x".into())));
        assert_eq!(
            at("<h2>impression</h2>\nx", ls),
            Some((Impression, "\nx".into()))
        );
        assert_eq!(at("1. <text>Findings: x", ls), None);
        assert_eq!(at("< b>Findings: x", ls), None);
        assert_eq!(at("<5>Findings: x", ls), None);
        assert_eq!(at("<think>Findings: x", ls), None);
        assert_eq!(
            at("<b>Impression:</b> x", Position::Inline),
            Some((Impression, "</b> x".into()))
        );
        let nine = format!("{}Findings: x", "<b>".repeat(9));
        assert_eq!(at(&nine, ls), None);
    }

    #[test]
    fn upper_case_names() {
        let c: Vec<char> = "WET READ: x".chars().collect();
        assert!(header_at(&c, 0, Position::Inline).is_some_and(|h| h.upper));
        let c: Vec<char> = "Comparison: x".chars().collect();
        assert!(header_at(&c, 0, Position::Inline).is_some_and(|h| !h.upper));
    }

    #[test]
    fn forms() {
        use SectionKind::*;
        let ls = Position::LineStart;
        assert_eq!(at("Findings: x", ls), Some((Findings, " x".into())));
        assert_eq!(at("FINDINGS:", ls), Some((Findings, "".into())));
        assert_eq!(at("**Findings:** x", ls), Some((Findings, " x".into())));
        assert_eq!(at("**Impression**: x", ls), Some((Impression, " x".into())));
        assert_eq!(at("## Impression\nx", ls), Some((Impression, "\nx".into())));
        assert_eq!(at(" IMPRESSION :\n", ls), Some((Impression, "\n".into())));
        assert_eq!(
            at("CLINICAL  INFORMATION: x", ls),
            Some((Other, " x".into()))
        );
        assert_eq!(
            at("Reason for examination: x", ls),
            Some((Other, " x".into()))
        );
        assert_eq!(at("FINAL REPORT\n", ls), Some((Other, "\n".into())));
        assert_eq!(
            at("                                 FINAL REPORT\n", ls),
            Some((Other, "\n".into()))
        );
        assert_eq!(at("### **Findings:** x", ls), Some((Findings, " x".into())));
        assert_eq!(at("#########Findings: x", ls), None);
        assert_eq!(
            at("PROVISIONAL FINDINGS IMPRESSION (PFI): x", ls),
            Some((Other, " x".into()))
        );
        assert_eq!(
            at("Findings (portable): x", ls),
            Some((Findings, " x".into()))
        );
        assert_eq!(at("Findings (x) are normal.", ls), None);
        assert_eq!(at("Findings are normal.", ls), None);
        assert_eq!(at("Findingsx: y", ls), None);
        assert_eq!(at("## Findings: x", Position::Inline), None);
        assert_eq!(at("Impression x", Position::Inline), None);
        assert_eq!(
            at("**Impression:** x", Position::Inline),
            Some((Impression, " x".into()))
        );
    }
}
