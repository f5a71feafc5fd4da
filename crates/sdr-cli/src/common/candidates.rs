//! What several commands check or record about the lines of a candidates
//! file (`{"id", "candidates", "tokens"?, ...}`, as `sdr generate` writes).

use anyhow::{anyhow, Result};
use sha2::{Digest, Sha256};

/// A token count: anything but a non-negative integer is an error naming
/// the line and the field ([`sdr_gen::replay::token_count`]), never a count
/// silently ignored.
pub fn non_negative_count(t: &serde_json::Value, field: &str, at: &str) -> Result<usize> {
    sdr_gen::replay::token_count(t, field).map_err(|e| anyhow!("{at}: {e}"))
}

/// A line's `"tokens"`: one count per candidate (of `k`)
/// ([`sdr_gen::replay::candidate_tokens`]); `at` is the line's `file:line`.
pub fn candidate_tokens(tokens: &[serde_json::Value], k: usize, at: &str) -> Result<Vec<usize>> {
    sdr_gen::replay::candidate_tokens(tokens, k).map_err(|e| anyhow!("{at}: {e}"))
}

/// A study's candidate texts, in order, as 16 hex digits: the start of the
/// SHA-256 over the texts, each preceded by its length in bytes (8 bytes,
/// little-endian). `sdr select` writes it so that `sdr select-eval` can tell
/// whether a candidates file holds the texts that were selected from.
pub fn candidates_hash<S: AsRef<str>>(texts: &[S]) -> String {
    let mut h = Sha256::new();
    for t in texts {
        let t = t.as_ref().as_bytes();
        h.update((t.len() as u64).to_le_bytes());
        h.update(t);
    }
    h.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hash_depends_on_texts_and_order() {
        let h = candidates_hash(&["a", "bc"]);
        assert_eq!(h.len(), 16);
        assert!(h.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(h, candidates_hash(&[String::from("a"), "bc".into()]));
        assert_ne!(h, candidates_hash(&["bc", "a"]));
        assert_ne!(h, candidates_hash(&["ab", "c"]));
        assert_ne!(h, candidates_hash(&["a"]));
    }

    #[test]
    fn tokens_are_counts_one_per_candidate() {
        assert_eq!(
            candidate_tokens(&[json!(3), json!(0)], 2, "f:1").unwrap(),
            [3, 0]
        );
        for (t, want) in [
            (
                vec![json!(3)],
                "f:1: \"tokens\" has 1 counts for 2 candidates",
            ),
            (vec![json!(3), json!(-1)], "\"tokens[1]\" must be"),
            (vec![json!(1.5), json!(1)], "\"tokens[0]\" must be"),
            (vec![json!(1e30), json!(1)], "\"tokens[0]\" must be"),
            (vec![json!("3"), json!(1)], "\"tokens[0]\" must be"),
        ] {
            let e = candidate_tokens(&t, 2, "f:1").unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
    }
}
