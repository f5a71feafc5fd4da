//! The word tokeniser shared by BLEU and METEOR (and, by construction, ROUGE).
//!
//! Report-generation evaluation (R2Gen and its successors, via `pycocoevalcap`)
//! lower-cases reports and drops punctuation before scoring. SDR fixes one exact
//! rule, the one of Google's `rouge-score` tokenizer (`rouge_score/tokenize.py`,
//! version 0.1.2) without stemming:
//!
//! 1. lower-case the text (Unicode lower-casing, as Python's `str.lower`);
//! 2. every maximal run of ASCII `[a-z0-9]` is a token; everything else
//!    (whitespace, punctuation, non-ASCII letters) separates tokens.
//!
//! Python equivalent: `re.findall(r"[a-z0-9]+", text.lower())`.
//! Consequences worth knowing: `1.5 cm` gives `["1", "5", "cm"]`, `XXXX` gives
//! `["xxxx"]`, and non-ASCII letters vanish (`café` gives `["caf"]`).

/// Tokenises `text` by the rule in the module docs.
///
/// ```
/// use sdr_eval::tokenize::tokenize;
/// assert_eq!(tokenize("No acute disease. Heart size 1.5 cm!"),
///            vec!["no", "acute", "disease", "heart", "size", "1", "5", "cm"]);
/// ```
pub fn tokenize(text: &str) -> Vec<String> {
    let lower = text.to_lowercase();
    let mut tokens = Vec::new();
    let mut current = String::new();
    for c in lower.chars() {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            current.push(c);
        } else if !current.is_empty() {
            tokens.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        tokens.push(current);
    }
    tokens
}

/// Python's `str.split()` with no argument: splits on runs of Unicode
/// whitespace as Python defines it (Rust's `char::is_whitespace` plus the
/// information separators U+001C..U+001F) and drops empty pieces.
pub fn python_split(text: &str) -> Vec<&str> {
    text.split(|c: char| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c))
        .filter(|s| !s.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_punctuation_and_lowercases() {
        assert_eq!(
            tokenize("XXXX-year-old, T9."),
            vec!["xxxx", "year", "old", "t9"]
        );
        assert!(tokenize("...!?").is_empty());
        assert!(tokenize("").is_empty());
        assert_eq!(tokenize("Café naïve"), vec!["caf", "na", "ve"]);
    }

    #[test]
    fn python_split_matches_str_split() {
        assert_eq!(
            python_split("  a\tb\u{1f}c\u{a0}d\n"),
            vec!["a", "b", "c", "d"]
        );
        assert!(python_split(" \n ").is_empty());
    }
}
