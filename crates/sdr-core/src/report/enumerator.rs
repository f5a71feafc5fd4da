//! List enumerators and bullets (`1.`, `2)`, `(3)`, `a)`, `-`, `*`, `•`).
//!
//! SPEC §1: an enumerator starts a new sentence and is removed from its text.
//! This file only *recognises* them; the segmenter decides where to look
//! (sentence starts, line starts, and mid-line only for the next number of a
//! running list, see [`super::segment`]).

/// Bullet characters recognised at a sentence or line start when followed by
/// whitespace. A `-` or `*` inside a line is a dash or an emphasis marker, not a
/// bullet, so the segmenter never looks for bullets mid-line.
const BULLETS: &[char] = &[
    '-', '*', '•', '·', '–', '—', '‣', '▪', '◦', '●', '○', '■', '□', '►', '▸', '➢',
];

/// An enumerator found at some position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Enumerator {
    /// Index just past the enumerator (not past the whitespace after it).
    pub end: usize,
    /// The list number for numeric enumerators (`1.`, `2)`, `(3)`).
    pub number: Option<u32>,
}

/// True when `ch` may directly follow a numeric enumerator: whitespace, end of
/// text or an upper-case letter (IU X-ray writes `1.Severe ...` without a space).
/// A digit after the dot means a decimal (`1.5 cm`), a lower-case letter means
/// something else (`2.nd`), so neither is an enumerator.
fn may_follow_number(next: Option<&char>) -> bool {
    match next {
        None => true,
        Some(ch) => ch.is_whitespace() || ch.is_uppercase(),
    }
}

/// Reads 1 or 2 ASCII digits at `i`; returns (value, index past them).
/// Three or more digits (a year, a measurement) are never a list number.
fn digits(c: &[char], i: usize) -> Option<(u32, usize)> {
    let mut k = i;
    let mut value = 0u32;
    while k < c.len() && c[k].is_ascii_digit() && k - i < 3 {
        value = value * 10 + c[k].to_digit(10).unwrap_or(0);
        k += 1;
    }
    let len = k - i;
    if len == 0 || len > 2 {
        return None;
    }
    Some((value, k))
}

/// A numeric enumerator at `i`: `N.` / `N)` / `(N)` with N of 1-2 digits.
pub(crate) fn numeric_at(c: &[char], i: usize) -> Option<Enumerator> {
    let open = c.get(i) == Some(&'(');
    let first = if open { i + 1 } else { i };
    let (number, k) = digits(c, first)?;
    let punct = *c.get(k)?;
    let ok = if open {
        punct == ')'
    } else {
        punct == '.' || punct == ')'
    };
    if !ok || !may_follow_number(c.get(k + 1)) {
        return None;
    }
    Some(Enumerator {
        end: k + 1,
        number: Some(number),
    })
}

/// Any enumerator at `i`: numeric, a single ASCII letter list marker
/// (`a)`, `(b)`), or a bullet character; all must be followed by whitespace
/// (numeric ones also by end of text or an upper-case letter).
pub(crate) fn enumerator_at(c: &[char], i: usize) -> Option<Enumerator> {
    if let Some(e) = numeric_at(c, i) {
        return Some(e);
    }
    let followed_by_space = |k: usize| c.get(k).is_some_and(|ch| ch.is_whitespace());
    let ch = *c.get(i)?;
    // `a)` and `(a)` letter markers.
    let open = ch == '(';
    let letter_at = if open { i + 1 } else { i };
    if let (Some(l), Some(')')) = (c.get(letter_at), c.get(letter_at + 1)) {
        if l.is_ascii_alphabetic() && followed_by_space(letter_at + 2) {
            return Some(Enumerator {
                end: letter_at + 2,
                number: None,
            });
        }
    }
    if BULLETS.contains(&ch) && followed_by_space(i + 1) {
        return Some(Enumerator {
            end: i + 1,
            number: None,
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chars(s: &str) -> Vec<char> {
        s.chars().collect()
    }

    #[test]
    fn numeric_forms() {
        for (s, n, end) in [
            ("1. No", 1, 2),
            ("2) No", 2, 2),
            ("(3) No", 3, 3),
            ("12. x", 12, 3),
            ("1.Severe", 1, 2),
            ("4.", 4, 2),
        ] {
            let e = enumerator_at(&chars(s), 0).unwrap_or_else(|| panic!("{s}"));
            assert_eq!(e.number, Some(n), "{s}");
            assert_eq!(e.end, end, "{s}");
        }
    }

    #[test]
    fn not_enumerators() {
        for s in [
            "1.5 cm", "2 views", "2019. x", "2.nd", "-5", "*bold*", "a.", "", "(1", "XXXX.",
        ] {
            assert_eq!(enumerator_at(&chars(s), 0), None, "{s:?}");
        }
    }

    #[test]
    fn bullets_and_letters() {
        for s in ["- No", "* No", "• No", "a) No", "(b) No", "– No"] {
            let e = enumerator_at(&chars(s), 0).unwrap_or_else(|| panic!("{s}"));
            assert_eq!(e.number, None);
        }
    }
}
