//! Helpers shared by the unit tests of this crate: one deterministic
//! generator (a 64-bit LCG, so no test depends on a random crate's stream)
//! and the plan checks the transport tests use.

use crate::cost::CostMatrix;

/// Next value in `[0, 1)` of the LCG with state `seed`.
pub(crate) fn lcg(seed: &mut u64) -> f64 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (*seed >> 11) as f64 / (1u64 << 53) as f64
}

/// An `n x m` matrix of LCG values, advancing `seed`.
pub(crate) fn random(n: usize, m: usize, seed: &mut u64) -> CostMatrix {
    CostMatrix::new(n, m, (0..n * m).map(|_| lcg(seed)).collect())
}

/// An `n x m` matrix of LCG values from a fresh `seed`.
pub(crate) fn lcg_matrix(n: usize, m: usize, seed: u64) -> CostMatrix {
    let mut s = seed;
    random(n, m, &mut s)
}

/// Uniform masses `1/n`.
pub(crate) fn unif(n: usize) -> Vec<f64> {
    vec![1.0 / n as f64; n]
}

/// Row and column sums of a row-major `n x m` plan.
pub(crate) fn marginals(plan: &[f64], n: usize, m: usize) -> (Vec<f64>, Vec<f64>) {
    let mut r = vec![0.0; n];
    let mut c = vec![0.0; m];
    for i in 0..n {
        for j in 0..m {
            r[i] += plan[i * m + j];
            c[j] += plan[i * m + j];
        }
    }
    (r, c)
}
