//! Dot products of many sentence embeddings at once (one f32 GEMM), and the
//! cosine cost read from them: `sdr_core::cost::gram`, with the corpus's
//! error for a bad row.

pub use sdr_core::cost::gram::{cost, gram, intra_cost};

use crate::error::{CorpusError, Result};

/// Inverse L2 norms of the rows; an error names a zero or non-finite row of
/// `what` (the check is `sdr_core`'s, shared with every set of vectors).
pub fn inverse_norms(data: &[f32], dim: usize, what: &str) -> Result<Vec<f64>> {
    sdr_core::cost::gram::inverse_norms(data, dim).map_err(|b| CorpusError::BadVector {
        what: what.to_string(),
        index: b.row,
        fault: match b.fault {
            sdr_core::cost::RowFault::NotFinite => "not finite",
            sdr_core::cost::RowFault::Zero => "the zero vector",
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_rows_name_the_input() {
        let err = inverse_norms(&[1.0, 0.0, 0.0, 0.0], 2, "the corpus").unwrap_err();
        assert_eq!(
            err.to_string(),
            "sentence 1 of the corpus: embedding is the zero vector"
        );
        assert!(inverse_norms(&[f32::NAN, 1.0], 2, "x").is_err());
    }
}
