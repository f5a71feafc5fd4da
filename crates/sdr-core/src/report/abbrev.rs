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
    "dr", "drs", "mr", "mrs", "ms", "prof", "st", "sr", "jr", "vs", "e.g", "i.e", "eg", "ie", "cf",
    "viz", "fig", "figs", "incl", "ref",
];

/// Titles before a name: a single capital after them is an initial
/// (`Dr. J. Smith`), see [`is_title`].
const TITLES: &[&str] = &["dr", "drs", "mr", "mrs", "ms", "prof"];

/// Sentence-final only before a new sentence (lower-cased). Besides the
/// general ones: radiology shorthand (`Rt.`, `Lt.`, `bilat.`, `prox.`, `hx.`),
/// month names (`Dec. 12`) and `approx.` (`2 cm approx. The lungs ...` ends
/// a sentence, `approx. 2 cm` does not).
const CONDITIONAL: &[&str] = &[
    "etc", "pt", "pts", "resp", "esp", "lat", "ant", "post", "inf", "sup", "min", "mins", "hr",
    "hrs", "sec", "wk", "wks", "yr", "yrs", "mo", "mos", "approx", "rt", "lt", "bilat", "bil",
    "prox", "dist", "med", "mod", "sm", "lg", "abd", "ext", "hx", "dx", "sx", "tx", "fx", "jan",
    "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
];

/// `No.` / `Nos.` abbreviate "number" only before a digit (`No. 2`); otherwise
/// `No.` is the one-word sentence it usually is in a report.
const NUMBER_ABBREVIATIONS: &[&str] = &["no", "nos"];

/// A title (`Dr`, `Mrs`, any case, without its period).
pub(crate) fn is_title(token: &str) -> bool {
    TITLES.contains(&token.to_lowercase().as_str())
}

/// Vertebral level `T9`, `L1-L2`, `T12-L1`, `C7`, `S1`, `T9-10`, `T9/T10`,
/// also in lower case (`t9`), as a hard-wrapped or dictated report writes it.
pub(crate) fn is_vertebral_level(token: &str) -> bool {
    fn level(s: &str, letter_optional: bool) -> bool {
        let mut chars = s.chars();
        let rest = match s.chars().next() {
            Some('C' | 'T' | 'L' | 'S' | 'c' | 't' | 'l' | 's') => {
                chars.next();
                chars.as_str()
            }
            Some(_) if letter_optional => s,
            _ => return false,
        };
        !rest.is_empty() && rest.len() <= 2 && rest.chars().all(|c| c.is_ascii_digit())
    }
    match token.split_once(['-', '/']) {
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
    // A single capital before a lower-case word is an initial or a genus
    // (`E. coli`, `C. difficile`); otherwise it is a word (`hepatitis B. ---`).
    let mut chars = token.chars();
    if chars.next().is_some_and(|c| c.is_uppercase()) && chars.next().is_none() {
        return if next.is_some_and(|c| c.is_lowercase()) {
            PeriodKind::Never
        } else {
            PeriodKind::Terminal
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
        for t in [
            "T9", "L1-L2", "T12-L1", "C7", "S1", "T9-10", "T12", "t9", "T9/T10", "l4-l5",
        ] {
            assert!(is_vertebral_level(t), "{t}");
        }
        for t in [
            "T", "T123", "X9", "9", "T9-", "-T9", "XXXX", "CT", "L1-L2-L3", "T9/", "1/2", "x9",
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
        let conditional = Conditional {
            deid_continues: false,
        };
        for t in ["Rt", "Lt", "bilat", "Dec", "approx", "Hx"] {
            assert_eq!(classify(t, Some('1')), conditional, "{t}");
        }
        assert!(is_title("DR") && is_title("Mrs") && !is_title("St"));
        assert_eq!(classify("E", Some('c')), Never);
        assert_eq!(classify("B", Some('-')), Terminal);
        assert_eq!(classify("B", None), Terminal);
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
