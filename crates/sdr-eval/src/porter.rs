//! An exact port of NLTK's `PorterStemmer` in its default `NLTK_EXTENSIONS`
//! mode (nltk 3.10.4, `nltk/stem/porter.py`).
//!
//! METEOR (nltk `meteor_score`) uses it for its stem stage, and Google's
//! `rouge-score` for `use_stemmer=True`. The `rust-stemmers` crate implements
//! Snowball's Porter2, which stems differently (`generously`, `dying`, ...),
//! hence this port. It works on Unicode scalar values as Python works on code
//! points.
//!
//! Reference: M. F. Porter, "An algorithm for suffix stripping", *Program*
//! 14(3), 130-137, 1980, with NLTK's documented deviations.

/// NLTK's Porter stemmer (`PorterStemmer(mode=NLTK_EXTENSIONS)`).
///
/// ```
/// use sdr_eval::porter::stem;
/// assert_eq!(stem("opacities"), "opac");
/// assert_eq!(stem("dying"), "die");
/// assert_eq!(stem("generously"), "gener");
/// ```
pub fn stem(word: &str) -> String {
    let lower = word.to_lowercase();
    if let Some(irregular) = irregular_form(&lower) {
        return irregular.to_string();
    }
    // NLTK compares the length of the word before lower-casing.
    if word.chars().count() <= 2 {
        return lower;
    }
    let mut w: Vec<char> = lower.chars().collect();
    w = step1a(w);
    w = step1b(w);
    w = step1c(w);
    w = step2(w);
    w = step3(w);
    w = step4(w);
    w = step5a(w);
    w = step5b(w);
    w.into_iter().collect()
}

fn irregular_form(word: &str) -> Option<&'static str> {
    Some(match word {
        "sky" | "skies" => "sky",
        "dying" => "die",
        "lying" => "lie",
        "tying" => "tie",
        "news" => "news",
        "innings" | "inning" => "inning",
        "outings" | "outing" => "outing",
        "cannings" | "canning" => "canning",
        "howe" => "howe",
        "proceed" => "proceed",
        "exceed" => "exceed",
        "succeed" => "succeed",
        _ => return None,
    })
}

fn is_vowel(c: char) -> bool {
    matches!(c, 'a' | 'e' | 'i' | 'o' | 'u')
}

/// `_consonant_flags`: `y` is a consonant at the start or after a vowel.
fn consonant_flags(word: &[char]) -> Vec<bool> {
    let mut flags: Vec<bool> = Vec::with_capacity(word.len());
    for (i, &c) in word.iter().enumerate() {
        let f = if is_vowel(c) {
            false
        } else if c == 'y' {
            i == 0 || !flags[i - 1]
        } else {
            true
        };
        flags.push(f);
    }
    flags
}

fn is_consonant(word: &[char], i: usize) -> bool {
    consonant_flags(&word[..=i])[i]
}

/// Number of `vc` sequences in the consonant/vowel pattern.
fn measure(stem: &[char]) -> usize {
    let flags = consonant_flags(stem);
    flags.windows(2).filter(|w| !w[0] && w[1]).count()
}

fn contains_vowel(stem: &[char]) -> bool {
    consonant_flags(stem).iter().any(|&c| !c)
}

fn ends_double_consonant(word: &[char]) -> bool {
    let n = word.len();
    n >= 2 && word[n - 1] == word[n - 2] && is_consonant(word, n - 1)
}

fn ends_cvc(word: &[char]) -> bool {
    let n = word.len();
    (n >= 3
        && is_consonant(word, n - 3)
        && !is_consonant(word, n - 2)
        && is_consonant(word, n - 1)
        && !matches!(word[n - 1], 'w' | 'x' | 'y'))
        || (n == 2 && !is_consonant(word, 0) && is_consonant(word, 1))
}

fn ends_with(word: &[char], suffix: &str) -> bool {
    let s: Vec<char> = suffix.chars().collect();
    word.len() >= s.len() && word[word.len() - s.len()..] == s[..]
}

fn strip(word: &[char], suffix: &str) -> Vec<char> {
    word[..word.len() - suffix.chars().count()].to_vec()
}

fn with(mut stem: Vec<char>, replacement: &str) -> Vec<char> {
    stem.extend(replacement.chars());
    stem
}

type Cond<'a> = &'a dyn Fn(&[char]) -> bool;

/// `_apply_rule_list`: the first rule whose suffix matches decides; it
/// applies when its condition holds on the stem, otherwise the word is kept.
fn apply_rules(word: Vec<char>, rules: &[(&str, &str, Option<Cond>)]) -> Vec<char> {
    for (suffix, replacement, condition) in rules {
        if ends_with(&word, suffix) {
            let stem = strip(&word, suffix);
            return match condition {
                Some(c) if !c(&stem) => word,
                _ => with(stem, replacement),
            };
        }
    }
    word
}

fn positive_measure(stem: &[char]) -> bool {
    measure(stem) > 0
}

fn step1a(word: Vec<char>) -> Vec<char> {
    if ends_with(&word, "ies") && word.len() == 4 {
        return with(strip(&word, "ies"), "ie");
    }
    apply_rules(
        word,
        &[
            ("sses", "ss", None),
            ("ies", "i", None),
            ("ss", "ss", None),
            ("s", "", None),
        ],
    )
}

fn step1b(word: Vec<char>) -> Vec<char> {
    if ends_with(&word, "ied") {
        return if word.len() == 4 {
            with(strip(&word, "ied"), "ie")
        } else {
            with(strip(&word, "ied"), "i")
        };
    }
    if ends_with(&word, "eed") {
        let stem = strip(&word, "eed");
        return if measure(&stem) > 0 {
            with(stem, "ee")
        } else {
            word
        };
    }
    let mut intermediate = None;
    for suffix in ["ed", "ing"] {
        if ends_with(&word, suffix) {
            let stem = strip(&word, suffix);
            if contains_vowel(&stem) {
                intermediate = Some(stem);
                break;
            }
        }
    }
    let Some(stem) = intermediate else {
        return word;
    };
    for (suffix, replacement) in [("at", "ate"), ("bl", "ble"), ("iz", "ize")] {
        if ends_with(&stem, suffix) {
            return with(strip(&stem, suffix), replacement);
        }
    }
    // ("*d", last letter, last not in l/s/z): undouble a final double consonant.
    if ends_double_consonant(&stem) {
        let last = stem[stem.len() - 1];
        return if !matches!(last, 'l' | 's' | 'z') {
            let mut s = stem[..stem.len() - 2].to_vec();
            s.push(last);
            s
        } else {
            stem
        };
    }
    // ("", "e", m == 1 and cvc): the empty suffix always matches.
    if measure(&stem) == 1 && ends_cvc(&stem) {
        return with(stem, "e");
    }
    stem
}

fn step1c(word: Vec<char>) -> Vec<char> {
    let cond = |stem: &[char]| stem.len() > 1 && is_consonant(stem, stem.len() - 1);
    apply_rules(word, &[("y", "i", Some(&cond))])
}

fn step2(word: Vec<char>) -> Vec<char> {
    if ends_with(&word, "alli") && positive_measure(&strip(&word, "alli")) {
        return step2(with(strip(&word, "alli"), "al"));
    }
    let pm: Cond = &positive_measure;
    let w3 = word.clone();
    let logi = move |_: &[char]| positive_measure(&w3[..w3.len() - 3]);
    apply_rules(
        word,
        &[
            ("ational", "ate", Some(pm)),
            ("tional", "tion", Some(pm)),
            ("enci", "ence", Some(pm)),
            ("anci", "ance", Some(pm)),
            ("izer", "ize", Some(pm)),
            ("bli", "ble", Some(pm)),
            ("alli", "al", Some(pm)),
            ("entli", "ent", Some(pm)),
            ("eli", "e", Some(pm)),
            ("ousli", "ous", Some(pm)),
            ("ization", "ize", Some(pm)),
            ("ation", "ate", Some(pm)),
            ("ator", "ate", Some(pm)),
            ("alism", "al", Some(pm)),
            ("iveness", "ive", Some(pm)),
            ("fulness", "ful", Some(pm)),
            ("ousness", "ous", Some(pm)),
            ("aliti", "al", Some(pm)),
            ("iviti", "ive", Some(pm)),
            ("biliti", "ble", Some(pm)),
            ("fulli", "ful", Some(pm)),
            ("logi", "log", Some(&logi)),
        ],
    )
}

fn step3(word: Vec<char>) -> Vec<char> {
    let pm: Cond = &positive_measure;
    apply_rules(
        word,
        &[
            ("icate", "ic", Some(pm)),
            ("ative", "", Some(pm)),
            ("alize", "al", Some(pm)),
            ("iciti", "ic", Some(pm)),
            ("ical", "ic", Some(pm)),
            ("ful", "", Some(pm)),
            ("ness", "", Some(pm)),
        ],
    )
}

fn step4(word: Vec<char>) -> Vec<char> {
    let gt1 = |stem: &[char]| measure(stem) > 1;
    let ion = |stem: &[char]| measure(stem) > 1 && matches!(stem.last(), Some('s' | 't'));
    let g: Cond = &gt1;
    apply_rules(
        word,
        &[
            ("al", "", Some(g)),
            ("ance", "", Some(g)),
            ("ence", "", Some(g)),
            ("er", "", Some(g)),
            ("ic", "", Some(g)),
            ("able", "", Some(g)),
            ("ible", "", Some(g)),
            ("ant", "", Some(g)),
            ("ement", "", Some(g)),
            ("ment", "", Some(g)),
            ("ent", "", Some(g)),
            ("ion", "", Some(&ion)),
            ("ou", "", Some(g)),
            ("ism", "", Some(g)),
            ("ate", "", Some(g)),
            ("iti", "", Some(g)),
            ("ous", "", Some(g)),
            ("ive", "", Some(g)),
            ("ize", "", Some(g)),
        ],
    )
}

fn step5a(word: Vec<char>) -> Vec<char> {
    if ends_with(&word, "e") {
        let stem = strip(&word, "e");
        let m = measure(&stem);
        if m > 1 || (m == 1 && !ends_cvc(&stem)) {
            return stem;
        }
    }
    word
}

fn step5b(word: Vec<char>) -> Vec<char> {
    let w = word.clone();
    let cond = move |_: &[char]| measure(&w[..w.len() - 1]) > 1;
    apply_rules(word, &[("ll", "l", Some(&cond))])
}

#[cfg(test)]
mod tests {
    use super::*;

    // Values printed by nltk 3.10.4 `PorterStemmer().stem(w)`; the full
    // comparison over the fixture vocabulary is in tests/metrics.rs.
    #[test]
    fn known_stems() {
        for (w, s) in [
            ("caresses", "caress"),
            ("ponies", "poni"),
            ("ties", "tie"),
            ("cats", "cat"),
            ("agreed", "agre"),
            ("plastered", "plaster"),
            ("motoring", "motor"),
            ("hopping", "hop"),
            ("filing", "file"),
            ("happy", "happi"),
            ("relational", "relat"),
            ("electrical", "electr"),
            ("adjustment", "adjust"),
            ("controlling", "control"),
            ("radiographs", "radiograph"),
            ("is", "is"),
            ("lying", "lie"),
        ] {
            assert_eq!(stem(w), s, "{w}");
        }
    }
}
