//! Many pairs of sets at once: the entry point for streams of pairs (the
//! `sdr distances` command, benchmarks), in parallel and in input order.
//!
//! Pairs that are read from memory once each spend as long waiting on DRAM
//! as computing: a pair's rows are a few short streams that the hardware
//! prefetchers pick up too late. Here each pair's cost products also bring
//! the *next* pair's rows into L2 ([`PairCost::between_ahead`]), so on the
//! distance benchmark's 460 MB of pairs the wait overlaps the arithmetic
//! (see bench/README.md). Batches whose rows fit in the caches
//! ([`STREAMED_BYTES`]) skip it: there the prefetch instructions only take
//! issue slots from the multiply-adds.
//!
//! Where sets repeat across the batch (one reference against K completions,
//! pairs drawn from a pool of sets), the squared norms of each distinct set
//! are computed once ([`crate::cost::squared_norms`]) and the tiles compute
//! products only: a fifth of the multiply-adds at report sizes.
//!
//! The values are those of [`evaluate_all`](super::evaluate_all) and
//! [`Metric::distance`], bit for bit.

use std::sync::atomic::AtomicBool;

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::stop::Stop;
use super::{Evaluation, Metric};
use crate::cost::{fused_kernels, squared_norms, Element, PairCost, SetView};
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
    evaluate_pairs_with(metrics, pairs, Stop::NEVER)
}

/// [`evaluate_pairs`] that gives up once `stop` is set, within a pair as
/// [`Metric::evaluate_until`] does: the pairs not finished by then are
/// [`SdrError::Stopped`](crate::SdrError::Stopped).
pub fn evaluate_pairs_until<T: Element>(
    metrics: &[Metric],
    pairs: &[Pair<'_, T>],
    stop: &AtomicBool,
) -> Vec<Result<Vec<Evaluation>>> {
    evaluate_pairs_with(metrics, pairs, Stop::on(stop))
}

fn evaluate_pairs_with<T: Element>(
    metrics: &[Metric],
    pairs: &[Pair<'_, T>],
    stop: Stop<'_>,
) -> Vec<Result<Vec<Evaluation>>> {
    let intra = metrics.iter().any(Metric::needs_intra);
    each_pair(pairs, intra, |cost| {
        metrics
            .iter()
            .map(|m| m.evaluate_with(cost, stop))
            .collect()
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

/// Distinct rows (bytes) above which a batch is taken to stream from memory,
/// and each pair brings the next one's rows into L2. Below it the rows stay
/// in the caches after their first use. On the 2-core Xeon of bench/README.md
/// (2 MB of L2 per core), with the prefetch against without: 576 shared sets
/// (14 MB) ran 8 % slower with it, 3,000 distinct pairs (138 MB) 35 % faster.
pub const STREAMED_BYTES: usize = 32 << 20;

/// `f` on the cost of every pair, on the current Rayon pool. Rayon hands
/// each thread contiguous runs of indices, so the next index is almost
/// always the next pair that thread computes.
fn each_pair<T: Element, R: Send>(
    pairs: &[Pair<'_, T>],
    intra: bool,
    f: impl Fn(&PairCost<'_>) -> Result<R> + Sync,
) -> Vec<Result<R>> {
    let shared = SharedNorms::of(pairs);
    let bytes = match &shared {
        Some(s) => s.bytes,
        None => pairs
            .iter()
            .map(|(a, b)| std::mem::size_of_val(a.data) + std::mem::size_of_val(b.data))
            .sum(),
    };
    each_pair_with(pairs, intra, shared.as_ref(), bytes > STREAMED_BYTES, f)
}

/// [`each_pair`] with the batch's shared norms and its streaming decision
/// given.
fn each_pair_with<T: Element, R: Send>(
    pairs: &[Pair<'_, T>],
    intra: bool,
    shared: Option<&SharedNorms>,
    streamed: bool,
    f: impl Fn(&PairCost<'_>) -> Result<R> + Sync,
) -> Vec<Result<R>> {
    (0..pairs.len())
        .into_par_iter()
        .map(|k| {
            let (a, b) = &pairs[k];
            let next = pairs.get(k + 1).filter(|_| streamed).map(|(x, y)| (x, y));
            let cost = match shared {
                Some(s) => PairCost::between_normed(a, b, s.of_pair(k), intra, next)?,
                None => PairCost::between_ahead(a, b, intra, next)?,
            };
            f(&cost)
        })
        .collect()
}

/// The squared row norms of each distinct set of a batch whose sets repeat.
struct SharedNorms {
    /// Per pair, the indices of its two sets in `norms`.
    sets: Vec<[usize; 2]>,
    norms: Vec<Vec<f64>>,
    /// The distinct sets' rows, in bytes.
    bytes: usize,
}

impl SharedNorms {
    /// `None` when too few sets repeat (every set once costs a pass of its
    /// own over rows the tiles read anyway) or the fused kernels are missing.
    fn of<'a, T: Element>(pairs: &[Pair<'a, T>]) -> Option<SharedNorms> {
        if !fused_kernels() {
            return None;
        }
        // The same rows: same address, row count and dimension.
        let mut index: FxHashMap<(usize, usize, usize), usize> = FxHashMap::default();
        index.reserve(2 * pairs.len());
        let mut distinct = Vec::new();
        let mut sets = Vec::with_capacity(pairs.len());
        for (a, b) in pairs {
            let mut id = |s: &SetView<'a, T>| {
                *index
                    .entry((s.data.as_ptr() as usize, s.n, s.dim))
                    .or_insert_with(|| {
                        distinct.push(*s);
                        distinct.len() - 1
                    })
            };
            sets.push([id(a), id(b)]);
        }
        // At least a quarter of the sets repeated (a GRPO group of 8
        // completions and its reference: 9 distinct sets for 8 pairs).
        if 4 * distinct.len() > 6 * pairs.len() {
            return None;
        }
        let norms = distinct
            .par_iter()
            .map(squared_norms)
            .collect::<Option<Vec<_>>>()?;
        let bytes = distinct.iter().map(|s| std::mem::size_of_val(s.data)).sum();
        Some(SharedNorms { sets, norms, bytes })
    }

    fn of_pair(&self, k: usize) -> (&[f64], &[f64]) {
        let [a, b] = self.sets[k];
        (&self.norms[a], &self.norms[b])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::check_pair;
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
    fn shared_sets_give_the_bits_of_one_pair_at_a_time() {
        let mut seed = 43;
        let dim = 771;
        // A pool of 6 sets, one of them scaled far out of the range where
        // squared norms are used as they are (its pairs take the other path).
        let sizes = [3usize, 5, 1, 12, 7, 4];
        let mut pool: Vec<Vec<f64>> = sizes
            .iter()
            .map(|&n| (0..n * dim).map(|_| lcg(&mut seed) - 0.5).collect())
            .collect();
        pool[4].iter_mut().for_each(|x| *x *= 1e120);
        let views: Vec<SetView<'_, f64>> = pool.iter().map(|s| SetView::new(s, dim)).collect();
        let pairs: Vec<_> = (0..30)
            .map(|k| (views[k % 6], views[(k * 5 + 1) % 6]))
            .collect();
        assert!(SharedNorms::of(&pairs).is_some() || !fused_kernels());
        let metrics = [Metric::Chamfer, Metric::HungNn, Metric::Ot];
        for ((a, b), got) in pairs.iter().zip(evaluate_pairs(&metrics, &pairs)) {
            assert_eq!(got.unwrap(), evaluate_all(&metrics, a, b).unwrap());
        }
        // f32 rows, as the reward holds them.
        let narrow: Vec<Vec<f32>> = pool[..4]
            .iter()
            .map(|s| s.iter().map(|&x| x as f32).collect())
            .collect();
        let views: Vec<SetView<'_, f32>> = narrow.iter().map(|s| SetView::new(s, dim)).collect();
        let pairs: Vec<_> = (0..12)
            .map(|k| (views[k % 4], views[(k + 1) % 4]))
            .collect();
        let want: Vec<f64> = pairs
            .iter()
            .map(|(a, b)| Metric::Hausdorff.distance(a, b).unwrap())
            .collect();
        assert_eq!(Metric::Hausdorff.distances(&pairs).unwrap(), want);
    }

    /// Whether a batch brings the next pair's rows into L2 (large batches) or
    /// not (batches that fit the caches) changes no bit, on distinct sets and
    /// on shared ones.
    #[test]
    fn streaming_or_not_gives_the_same_bits() {
        let (mut seed, dim) = (47, 768);
        let sets: Vec<Vec<f32>> = (0..24)
            .map(|k| {
                (0..(1 + k % 12) * dim)
                    .map(|_| (lcg(&mut seed) - 0.5) as f32)
                    .collect()
            })
            .collect();
        let views: Vec<SetView<'_, f32>> = sets.iter().map(|s| SetView::new(s, dim)).collect();
        let distinct: Vec<_> = (0..12).map(|k| (views[2 * k], views[2 * k + 1])).collect();
        let shared: Vec<_> = (0..40).map(|k| (views[k % 5], views[5 + k % 3])).collect();
        let metric = Metric::HungPen { alpha: 0.5 };
        for pairs in [&distinct, &shared] {
            let norms = SharedNorms::of(pairs);
            let run = |streamed| {
                each_pair_with(pairs, false, norms.as_ref(), streamed, |c| {
                    Ok(metric.evaluate(c)?.value)
                })
                .into_iter()
                .collect::<Result<Vec<f64>>>()
                .unwrap()
            };
            let want: Vec<f64> = pairs
                .iter()
                .map(|(a, b)| metric.distance(a, b).unwrap())
                .collect();
            assert_eq!(run(true), want);
            assert_eq!(run(false), want);
        }
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

    /// Rows borrowed as they are (the Python batch binding) are checked by
    /// the pass that computes their norms: a NaN, infinite or all-zero row
    /// is an error naming it, on every path (fused tiles, shared norms, the
    /// portable path), and valid rows far out of the norms' range still pass.
    #[test]
    fn unchecked_rows_are_checked_on_the_way() {
        fn run<T: Element + From<f32>>() {
            let dim = 40;
            let mut seed = 7;
            let mut sets: Vec<Vec<T>> = [3usize, 4, 2, 5]
                .iter()
                .map(|&n| {
                    (0..n * dim)
                        .map(|_| T::from((lcg(&mut seed) - 0.5) as f32))
                        .collect()
                })
                .collect();
            sets[1][2 * dim + 7] = T::from(f32::NAN);
            sets[2][dim..].iter_mut().for_each(|x| *x = T::from(0.0));
            sets[3][4 * dim] = T::from(f32::NEG_INFINITY);
            let v: Vec<SetView<'_, T>> = sets.iter().map(|s| SetView::new(s, dim)).collect();
            let want = |k: usize, r: &Result<Vec<Evaluation>>| match (k % 4, r) {
                (0, Ok(_)) => {}
                (
                    1,
                    Err(SdrError::NonFiniteVector {
                        set: Side::B,
                        row: 2,
                    }),
                ) => {}
                (
                    2,
                    Err(SdrError::ZeroVector {
                        set: Side::A,
                        row: 1,
                    }),
                ) => {}
                (
                    3,
                    Err(SdrError::NonFiniteVector {
                        set: Side::B,
                        row: 4,
                    }),
                ) => {}
                _ => panic!("pair {k}: {r:?}"),
            };
            let pairs = [(v[0], v[0]), (v[0], v[1]), (v[2], v[0]), (v[0], v[3])];
            let metrics = [Metric::Chamfer, Metric::Gw { eps: 0.1 }];
            // Every set distinct per pair: norms from the tiles.
            for (k, r) in evaluate_pairs(&metrics, &pairs).iter().enumerate() {
                want(k, r);
            }
            // Sets repeated across the batch: shared norms.
            let many: Vec<_> = (0..16).map(|k| pairs[k % 4]).collect();
            for (k, r) in evaluate_pairs(&metrics, &many).iter().enumerate() {
                want(k, r);
            }
            // One pair at a time.
            for (k, (a, b)) in pairs.iter().enumerate() {
                want(k, &evaluate_all(&metrics, a, b));
            }
        }
        run::<f32>();
        run::<f64>();
        // Huge and tiny rows are valid: out of the norms' range, then checked.
        let (a, b) = ([1e200, 1e200, 1e-300, 0.0], [1.0, 1.0]);
        let pairs = vec![(SetView::new(&a[..], 2), SetView::new(&b[..], 2)); 2];
        let d = Metric::Chamfer.distances(&pairs).unwrap();
        // Row 0 has b's direction; row 1 is 45 degrees off it.
        let half = (1.0 - 0.5f64.sqrt()) / 2.0;
        assert!((d[0] - 0.5 * (half / 2.0 + 0.0)).abs() < 1e-15, "{d:?}");
        // A view that claims rows of dimension 0 is empty, not a set.
        let zero = SetView {
            data: &a[..0],
            n: 3,
            dim: 0,
        };
        assert!(matches!(
            check_pair(&zero, &SetView::new(&b[..], 2)),
            Err(SdrError::EmptySet { set: Side::A })
        ));
    }
}
