//! List enumerators and bullets (`1.`, `2)`, `(3)`, `a)`, `B.`, `ii)`, `-`, `*`, `•`).
//!
//! SPEC §1: an enumerator starts a new sentence and is removed from its text.
//! This file only *recognises* them; the segmenter decides where to look
//! (sentence starts, line starts, mid-line for the next number of a running
//! list, and anywhere for the bullet symbols of [`is_bullet_symbol`], see
//! [`super::segment`]).

/// Dash-like bullets, recognised only at a sentence or line start and when
/// followed by whitespace: inside a line `-`, `*` and `–` are dashes, emphasis
/// or ranges (`13 - 14 mm`), and `·` is an interpunct or a decimal point.
const DASH_BULLETS: &[char] = &['-', '*', '·', '–', '—'];

/// Bullet symbols that are never punctuation or emphasis in report text, so
/// they start a list item wherever they stand, with or without a space after
/// them (`No effusion • No edema`, `•No effusion`).
pub(crate) fn is_bullet_symbol(ch: char) -> bool {
    matches!(
        ch,
        '•' | '‣'
            | '⁃'
            | '◦'
            | '▪'
            | '▫'
            | '●'
            | '○'
            | '■'
            | '□'
            | '◆'
            | '◇'
            | '►'
            | '▸'
            | '▹'
            | '➢'
            | '➤'
    )
}

/// An enumerator found at some position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Enumerator {
    /// Index just past the enumerator (not past the whitespace after it).
    pub end: usize,
    /// The list number for numeric enumerators (`1.`, `2)`, `(3)`).
    pub number: Option<u32>,
}

/// True when `ch` may directly follow a numeric enumerator: whitespace, end of
/// text, a bullet symbol (which starts an item of its own), or an upper-case
/// letter (IU X-ray writes `1.Severe ...` without a space).
/// A digit after the dot means a decimal (`1.5 cm`), a lower-case letter means
/// something else (`2.nd`), so neither is an enumerator.
fn may_follow_number(next: Option<&char>) -> bool {
    match next {
        None => true,
        Some(&ch) => ch.is_whitespace() || is_bullet_symbol(ch) || ch.is_uppercase(),
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

/// Roman numerals accepted as list markers (`ii)`, `(IV)`); single letters
/// are accepted anyway.
const ROMAN: &[&str] = &["ii", "iii", "iv", "vi", "vii", "viii", "ix"];

/// A letter or roman-numeral marker word at `i` (`a`, `B`, `iv`, one case);
/// returns the index past it.
fn marker_word(c: &[char], i: usize) -> Option<usize> {
    let i = i.min(c.len());
    // Bounded: the longest marker is `viii`.
    let len = c[i..]
        .iter()
        .take(5)
        .take_while(|ch| ch.is_ascii_alphabetic())
        .count();
    let word: String = c[i..i + len].iter().collect();
    let lower = word.to_ascii_lowercase();
    let one_case = word == lower || word == word.to_ascii_uppercase();
    (len == 1 || (one_case && ROMAN.contains(&lower.as_str()))).then_some(i + len)
}

/// Any enumerator at `i`:
/// - numeric (see [`numeric_at`]);
/// - a letter or roman marker `a)`, `(b)`, `iv)` followed by whitespace, a
///   bullet symbol or the end of the text (a bare `a)` is a marker, not a
///   sentence); never with a period, since `A.` may be content
///   (`hepatitis\nB. ...`, `Dr. J. Smith`, one-letter placeholders), while
///   `A. Heart normal.` only costs an extra one-letter sentence;
/// - a dash-like bullet followed by whitespace, or a bullet symbol.
pub(crate) fn enumerator_at(c: &[char], i: usize) -> Option<Enumerator> {
    if let Some(e) = numeric_at(c, i) {
        return Some(e);
    }
    let ch = *c.get(i)?;
    let space_at = |k: usize| c.get(k).is_some_and(|x| x.is_whitespace());
    let boundary_at = |k: usize| {
        c.get(k)
            .is_none_or(|&x| x.is_whitespace() || is_bullet_symbol(x))
    };
    let end = if is_bullet_symbol(ch) || (DASH_BULLETS.contains(&ch) && space_at(i + 1)) {
        i + 1
    } else {
        let word_end = marker_word(c, if ch == '(' { i + 1 } else { i })?;
        if c.get(word_end) != Some(&')') || !boundary_at(word_end + 1) {
            return None;
        }
        word_end + 1
    };
    Some(Enumerator { end, number: None })
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
            "1.5 cm",
            "2 views",
            "2019. x",
            "2.nd",
            "-5",
            "*bold*",
            "a. b",
            "",
            "(1",
            "XXXX.",
            "-No",
            "C. difficile",
            "No. 2",
            "ab) x",
            "Ii) x",
            "xi. X",
            "(a. X",
            "a)b",
            "A.",
            "A. Heart",
            "iii. Lungs",
        ] {
            assert_eq!(enumerator_at(&chars(s), 0), None, "{s:?}");
        }
    }

    #[test]
    fn bullets_and_letters() {
        for (s, end) in [
            ("- No", 1),
            ("* No", 1),
            ("• No", 1),
            ("•No", 1),
            ("◦", 1),
            ("– No", 1),
            ("a) No", 2),
            ("(b) No", 3),
            ("a)", 2),
            ("(b)", 3),
            ("iv) No", 3),
            ("(II) No", 4),
        ] {
            let e = enumerator_at(&chars(s), 0).unwrap_or_else(|| panic!("{s}"));
            assert_eq!(e.number, None, "{s}");
            assert_eq!(e.end, end, "{s}");
        }
    }
}
