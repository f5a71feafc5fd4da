//! A deterministic stand-in for the sentence encoder, for tests and for machines
//! without the model (`--encoder hash-DIM`, `encoder="hash-DIM"`).
//!
//! [`HashEncoder`] is *not* a sentence encoder in any semantic sense; a corpus built
//! with it records its name, so it can never be mixed with real embeddings.

use crate::error::Result;
use crate::rng::{fnv1a, SplitMix64};
use crate::sentence_encoder::SentenceEncoder;

/// Deterministic bag-of-words stand-in: each lower-cased word maps to a fixed
/// pseudo-random Gaussian-like vector (seeded by its FNV-1a hash); a sentence
/// is the normalised sum of its words' vectors. Sentences sharing words are
/// close, which is enough for tests and benchmarks of the machinery.
#[derive(Debug, Clone)]
pub struct HashEncoder {
    pub dim: usize,
}

impl HashEncoder {
    pub const NAME: &'static str = "sdr-hash-bow";
    /// Largest dimension [`crate::open_encoder`] accepts: a stand-in needs no more,
    /// and a huge one would abort on allocating each sentence's vector.
    pub const MAX_DIM: usize = 65_536;

    pub fn new(dim: usize) -> Self {
        HashEncoder { dim }
    }

    fn word_vector(&self, word: &str, out: &mut [f32]) {
        let mut rng = SplitMix64::new(fnv1a(word.as_bytes()));
        for x in out.iter_mut() {
            // Sum of four uniforms: a cheap bell shape, centred on 0.
            let s: f64 = (0..4).map(|_| rng.unit()).sum::<f64>() - 2.0;
            *x += s as f32;
        }
    }
}

/// The identity is the trait's default, `sdr-hash-bow-DIM@none`.
impl SentenceEncoder for HashEncoder {
    fn name(&self) -> String {
        format!("{}-{}", Self::NAME, self.dim)
    }
    fn weights_sha256(&self) -> Result<String> {
        Ok("none".to_string())
    }
    fn dim(&self) -> usize {
        self.dim
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<f32>> {
        let d = self.dim;
        let mut out = vec![0f32; texts.len() * d];
        for (t, row) in texts.iter().zip(out.chunks_exact_mut(d)) {
            let lower = t.to_lowercase();
            let mut any = false;
            for w in lower
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
            {
                self.word_vector(w, row);
                any = true;
            }
            if !any {
                self.word_vector("<empty>", row);
            }
            let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
            if norm > 0.0 {
                row.iter_mut().for_each(|x| *x /= norm);
            } else {
                row[0] = 1.0;
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_encoder_is_deterministic_unit_and_lexical() {
        let e = HashEncoder::new(64);
        let v = e
            .embed(&[
                "No pleural effusion.",
                "no pleural effusion",
                "Heart is enlarged.",
            ])
            .unwrap();
        let row = |i: usize| &v[i * 64..(i + 1) * 64];
        let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
        assert!((dot(row(0), row(0)) - 1.0).abs() < 1e-5);
        assert!((dot(row(0), row(1)) - 1.0).abs() < 1e-5);
        assert!(dot(row(0), row(2)) < 0.9);
        assert_eq!(
            v,
            e.embed(&[
                "No pleural effusion.",
                "no pleural effusion",
                "Heart is enlarged."
            ])
            .unwrap()
        );
        assert_eq!(e.identity().unwrap(), "sdr-hash-bow-64@none");
    }
}
