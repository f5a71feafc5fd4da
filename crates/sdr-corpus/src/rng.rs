//! Corpus sampling with SplitMix64, the seeded generator that `sdr-embed`'s hash
//! stand-in uses too (written out in [`sdr_embed::rng`] rather than taken from
//! `rand`, so that a sample is fixed by the seed alone, whatever crate versions
//! are in the lock file, and can be reproduced in a few lines of Python).

pub use sdr_embed::rng::{fnv1a, SplitMix64};

/// `k` distinct indices of `0..n`, uniformly, in increasing order: the first
/// `k` positions of a Fisher-Yates shuffle driven by [`SplitMix64`] (swap
/// position `i` with `i + below(n - i)`), then sorted.
pub fn sample_indices(n: usize, k: usize, seed: u64) -> Vec<usize> {
    let k = k.min(n);
    let mut idx: Vec<usize> = (0..n).collect();
    let mut rng = SplitMix64::new(seed);
    for i in 0..k {
        let j = i + rng.below((n - i) as u64) as usize;
        idx.swap(i, j);
    }
    idx.truncate(k);
    idx.sort_unstable();
    idx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_reference_values() {
        // Reference outputs of SplitMix64 seeded with 1234567 (from the
        // original C implementation by Vigna).
        let mut r = SplitMix64::new(1234567);
        assert_eq!(r.next_u64(), 6457827717110365317);
        assert_eq!(r.next_u64(), 3203168211198807973);
    }

    #[test]
    fn sample_is_distinct_sorted_and_seeded() {
        let a = sample_indices(100, 10, 7);
        assert_eq!(a.len(), 10);
        assert!(a.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(a, sample_indices(100, 10, 7));
        assert_ne!(a, sample_indices(100, 10, 8));
        assert_eq!(sample_indices(5, 10, 1), vec![0, 1, 2, 3, 4]);
    }
}
