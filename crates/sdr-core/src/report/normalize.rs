//! Rule 1 of the segmenter: line endings and HTML remnants.
//!
//! IU X-ray text carries `<BR>` line breaks and `&gt;`-style entities from its
//! XML origin; model output carries `\r\n`. Both the segmenter and the
//! plain-text header scanner work on the normalised characters, so line
//! starts mean the same thing to both.

/// Line separators folded to `\n`.
fn is_line_separator(ch: char) -> bool {
    matches!(
        ch,
        '\n' | '\r' | '\u{0B}' | '\u{0C}' | '\u{85}' | '\u{2028}' | '\u{2029}'
    )
}

/// HTML remnants decoded by [`normalize`]; `<br>` variants become a line break.
const REPLACEMENTS: &[(&str, char)] = &[
    ("<br>", '\n'),
    ("<br/>", '\n'),
    ("<br />", '\n'),
    ("&gt;", '>'),
    ("&lt;", '<'),
    ("&amp;", '&'),
    ("&quot;", '"'),
    ("&#39;", '\''),
    ("&apos;", '\''),
    ("&nbsp;", ' '),
];

/// True when `pattern` (ASCII) occurs at `c[i..]`, ignoring ASCII case.
pub(crate) fn starts_with_ignore_case(c: &[char], i: usize, pattern: &str) -> bool {
    let mut k = i;
    for p in pattern.chars() {
        match c.get(k) {
            Some(ch) if ch.to_ascii_lowercase() == p => k += 1,
            _ => return false,
        }
    }
    true
}

/// Rule 1: line endings and HTML remnants, in one pass (no double decoding).
pub(crate) fn normalize(text: &str) -> Vec<char> {
    let c: Vec<char> = text.chars().collect();
    let mut out = Vec::with_capacity(c.len());
    let mut i = 0;
    'outer: while i < c.len() {
        let ch = c[i];
        if ch == '\r' && c.get(i + 1) == Some(&'\n') {
            i += 1;
            continue;
        }
        if is_line_separator(ch) {
            out.push('\n');
            i += 1;
            continue;
        }
        if ch == '<' || ch == '&' {
            for (pattern, replacement) in REPLACEMENTS {
                if starts_with_ignore_case(&c, i, pattern) {
                    out.push(*replacement);
                    i += pattern.len();
                    continue 'outer;
                }
            }
        }
        out.push(ch);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> String {
        normalize(s).into_iter().collect()
    }

    #[test]
    fn line_endings() {
        assert_eq!(n("a\r\nb\rc\u{2028}d\u{85}e"), "a\nb\nc\nd\ne");
    }

    #[test]
    fn html_once() {
        assert_eq!(n("a<BR>b<br/>c<Br />d"), "a\nb\nc\nd");
        assert_eq!(n("&GT;&lt;&amp;gt;&quot;&#39;&nbsp;"), "><&gt;\"' ");
        assert_eq!(n("<b>&x; & <"), "<b>&x; & <");
    }

    #[test]
    fn case_insensitive_prefix() {
        let c: Vec<char> = "xFiNdInGs".chars().collect();
        assert!(starts_with_ignore_case(&c, 1, "findings"));
        assert!(!starts_with_ignore_case(&c, 2, "findings"));
        assert!(!starts_with_ignore_case(&c, 9, "f"));
    }
}
