//! What a period after a given word means: sentence end, never, or maybe.
//!
//! The segmenter asks [`classify`] about the word right before a single `.`
//! followed by whitespace. Units (`cm.`, `mm.`) are *not* abbreviations in
//! radiology text (`measuring 7 mm. Exact etiology ...`): they end sentences.

/// How a period after a word behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PeriodKind {
    /// An ordinary word: the period ends the sentence.
    Terminal,
    /// A title or a Latin/English abbreviation that precedes more text
    /// (`Dr.`, `e.g.`, `vs.`, `approx.`): the period never ends the sentence.
    Never,
    /// An abbreviation that can also close a sentence (`etc.`, `p.m.`, the
    /// vertebral level `T9.`): the period ends the sentence only when a new
    /// sentence follows (capitalised word, enumerator, end of text).
    /// `deid_continues`: a following de-identification token (`XXXX`) does not
    /// count as a new sentence (`at XXXX p.m. XXXX/XXXX.` is one sentence).
    Conditional { deid_continues: bool },
}

/// Never sentence-final (lower-cased, without the final period).
const NEVER: &[&str] = &[
    "dr", "drs", "mr", "mrs", "ms", "prof", "st", "sr", "jr", "vs", "approx", "e.g", "i.e", "eg",
    "ie", "cf", "viz", "fig", "figs", "incl", "ref",
];

/// Sentence-final only before a new sentence (lower-cased).
const CONDITIONAL: &[&str] = &[
    "etc", "pt", "pts", "resp", "esp", "lat", "ant", "post", "inf", "sup", "min", "mins", "hr",
    "hrs", "sec", "wk", "wks", "yr", "yrs", "mo", "mos",
];

/// `No.` / `Nos.` abbreviate "number" only before a digit (`No. 2`); otherwise
/// `No.` is the one-word sentence it usually is in a report.
const NUMBER_ABBREVIATIONS: &[&str] = &["no", "nos"];

/// Vertebral level `T9`, `L1-L2`, `T12-L1`, `C7`, `S1`, `T9-10` (case-sensitive,
/// as written in reports; `t9` is not recognised).
pub(crate) fn is_vertebral_level(token: &str) -> bool {
    fn level(s: &str, letter_optional: bool) -> bool {
        let mut chars = s.chars();
        let rest = match s.chars().next() {
            Some('C' | 'T' | 'L' | 'S') => {
                chars.next();
                chars.as_str()
            }
            Some(_) if letter_optional => s,
            _ => return false,
        };
        !rest.is_empty() && rest.len() <= 2 && rest.chars().all(|c| c.is_ascii_digit())
    }
    match token.split_once('-') {
        Some((a, b)) => level(a, false) && level(b, true),
        None => level(token, false),
    }
}

/// `u.s`, `b.i.d`, `y.o`, `a.m`: single letters joined by periods.
fn is_dotted_letters(token: &str) -> bool {
    let parts: Vec<&str> = token.split('.').collect();
    parts.len() >= 2
        && parts
            .iter()
            .all(|p| p.chars().count() == 1 && p.chars().all(|c| c.is_alphabetic()))
}

/// Classifies the period after `token` (the word before it, leading brackets
/// and quotes already removed). `next` is the first non-space character after
/// the period, if any.
pub(crate) fn classify(token: &str, next: Option<char>) -> PeriodKind {
    if token.is_empty() {
        return PeriodKind::Terminal;
    }
    let lower = token.to_lowercase();
    let lower = lower.as_str();
    if NEVER.contains(&lower) {
        return PeriodKind::Never;
    }
    if NUMBER_ABBREVIATIONS.contains(&lower) {
        return if next.is_some_and(|c| c.is_ascii_digit()) {
            PeriodKind::Never
        } else {
            PeriodKind::Terminal
        };
    }
    if CONDITIONAL.contains(&lower) {
        return PeriodKind::Conditional {
            deid_continues: false,
        };
    }
    if is_dotted_letters(lower) {
        return PeriodKind::Conditional {
            deid_continues: true,
        };
    }
    if is_vertebral_level(token) {
        return PeriodKind::Conditional {
            deid_continues: false,
        };
    }
    PeriodKind::Terminal
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vertebral_levels() {
        for t in ["T9", "L1-L2", "T12-L1", "C7", "S1", "T9-10", "T12"] {
            assert!(is_vertebral_level(t), "{t}");
        }
        for t in [
            "t9", "T", "T123", "X9", "9", "T9-", "-T9", "XXXX", "CT", "L1-L2-L3",
        ] {
            assert!(!is_vertebral_level(t), "{t}");
        }
    }

    #[test]
    fn classes() {
        use PeriodKind::*;
        assert_eq!(classify("Dr", Some('X')), Never);
        assert_eq!(classify("e.g", Some('a')), Never);
        assert_eq!(classify("VS", Some('p')), Never);
        assert_eq!(classify("No", Some('2')), Never);
        assert_eq!(classify("No", Some('E')), Terminal);
        assert_eq!(classify("cm", Some('N')), Terminal);
        assert_eq!(classify("mm", None), Terminal);
        assert_eq!(classify("XXXX", Some('N')), Terminal);
        assert_eq!(
            classify("p.m", Some('X')),
            Conditional {
                deid_continues: true
            }
        );
        assert_eq!(
            classify("T9", Some('v')),
            Conditional {
                deid_continues: false
            }
        );
        assert_eq!(
            classify("etc", None),
            Conditional {
                deid_continues: false
            }
        );
    }
}
