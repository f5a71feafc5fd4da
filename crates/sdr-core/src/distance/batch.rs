//! Many pairs of sets at once: the entry point for streams of pairs (the
//! `sdr distances` command, benchmarks), in parallel and in input order.
//!
//! Pairs that are read from memory once each spend as long waiting on DRAM
//! as computing: a pair's rows are a few short streams that the hardware
//! prefetchers pick up too late. Here each pair's cost products also bring
//! the *next* pair's rows into L2 ([`PairCost::between_ahead`]), so on the
//! distance benchmark's 460 MB of pairs the wait overlaps the arithmetic
//! (see bench/README.md). The values are those of [`evaluate_all`] and
//! [`Metric::distance`], bit for bit.

use rayon::prelude::*;

use super::{Evaluation, Metric};
use crate::cost::{Element, PairCost, SetView};
use crate::error::Result;

/// A pair of validated sets (see [`crate::EmbeddingSet`]).
pub type Pair<'a, T> = (SetView<'a, T>, SetView<'a, T>);

/// [`evaluate_all`](super::evaluate_all) for every pair: one result per
/// pair, in input order (an error belongs to its pair; the others are still
/// computed).
pub fn evaluate_pairs<T: Element>(
    metrics: &[Metric],
    pairs: &[Pair<'_, T>],
) -> Vec<Result<Vec<Evaluation>>> {
    let intra = metrics.iter().any(Metric::needs_intra);
    each_pair(pairs, intra, |cost| {
        metrics.iter().map(|m| m.evaluate(cost)).collect()
    })
}

impl Metric {
    /// [`Metric::distance`] for every pair, in input order; the first error
    /// in input order if any pair fails.
    ///
    /// ```
    /// use sdr_core::{Metric, SetView};
    /// let (a, b) = ([1.0, 0.0, 0.0, 1.0], [1.0, 1.0]);
    /// let pairs = vec![(SetView::new(&a, 2), SetView::new(&b, 2)); 3];
    /// let d = Metric::Chamfer.distances(&pairs).unwrap();
    /// assert_eq!(d, vec![Metric::Chamfer.distance(&pairs[0].0, &pairs[0].1).unwrap(); 3]);
    /// ```
    pub fn distances<T: Element>(&self, pairs: &[Pair<'_, T>]) -> Result<Vec<f64>> {
        each_pair(pairs, self.needs_intra(), |cost| {
            Ok(self.evaluate(cost)?.value)
        })
        .into_iter()
        .collect()
    }
}

/// `f` on the cost of every pair, on the current Rayon pool. Rayon hands
/// each thread contiguous runs of indices, so the next index is almost
/// always the next pair that thread computes.
fn each_pair<T: Element, R: Send>(
    pairs: &[Pair<'_, T>],
    intra: bool,
    f: impl Fn(&PairCost<'_>) -> Result<R> + Sync,
) -> Vec<Result<R>> {
    (0..pairs.len())
        .into_par_iter()
        .map(|k| {
            let (a, b) = &pairs[k];
            let next = pairs.get(k + 1).map(|(x, y)| (x, y));
            f(&PairCost::between_ahead(a, b, intra, next)?)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distance::evaluate_all;
    use crate::error::{SdrError, Side};
    use crate::test_support::lcg;

    #[test]
    fn batches_give_the_bits_of_one_pair_at_a_time() {
        let mut seed = 41;
        let dim = 768;
        // Sizes 1-12, f32 rows as encoders give them; pair after pair in one
        // buffer, as a stream of pairs is laid out.
        let sizes: Vec<(usize, usize)> = (0..40).map(|k| (1 + k % 12, 1 + (k * 7) % 12)).collect();
        let total: usize = sizes.iter().map(|(n, m)| n + m).sum();
        let data: Vec<f32> = (0..total * dim)
            .map(|_| (lcg(&mut seed) - 0.5) as f32)
            .collect();
        let mut pairs = Vec::new();
        let mut off = 0;
        for &(n, m) in &sizes {
            let a = SetView::new(&data[off..off + n * dim], dim);
            off += n * dim;
            let b = SetView::new(&data[off..off + m * dim], dim);
            off += m * dim;
            pairs.push((a, b));
        }
        let metrics = [
            Metric::Chamfer,
            Metric::HungPen { alpha: 0.5 },
            Metric::Gw { eps: 0.1 },
        ];
        let batch = evaluate_pairs(&metrics, &pairs);
        for ((a, b), got) in pairs.iter().zip(&batch) {
            assert_eq!(
                got.as_ref().unwrap(),
                &evaluate_all(&metrics, a, b).unwrap()
            );
        }
        let one = Metric::Hausdorff.distances(&pairs).unwrap();
        let want: Vec<f64> = pairs
            .iter()
            .map(|(a, b)| Metric::Hausdorff.distance(a, b).unwrap())
            .collect();
        assert_eq!(one, want);
        // Serial (one-thread pool) and parallel runs agree too.
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        assert_eq!(
            pool.install(|| Metric::Hausdorff.distances(&pairs))
                .unwrap(),
            want
        );
    }

    #[test]
    fn an_error_stays_with_its_pair() {
        let (a, b, c) = ([1.0, 0.0], [0.0, 1.0], [1.0, 2.0, 3.0]);
        let pairs = [
            (SetView::new(&a[..], 2), SetView::new(&b[..], 2)),
            (SetView::new(&a[..], 2), SetView::new(&c[..], 3)),
            (SetView::new(&a[..], 2), SetView::new(&[][..], 2)),
            (SetView::new(&b[..], 2), SetView::new(&a[..], 2)),
        ];
        let out = evaluate_pairs(&[Metric::Chamfer], &pairs);
        assert!(out[0].is_ok() && out[3].is_ok());
        assert!(matches!(out[1], Err(SdrError::DimensionMismatch { .. })));
        assert!(matches!(out[2], Err(SdrError::EmptySet { set: Side::B })));
        assert!(matches!(
            Metric::Chamfer.distances(&pairs),
            Err(SdrError::DimensionMismatch { .. })
        ));
        assert!(Metric::Chamfer.distances::<f64>(&[]).unwrap().is_empty());
    }
}
