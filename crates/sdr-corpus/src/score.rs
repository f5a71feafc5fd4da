//! Batched distances of candidates to a corpus, aggregated per policy
//! (paper §3.3, SPEC §5).
//!
//! For candidates `y^(1..K)` and corpus reports `r_t`, per section `S`:
//!
//! $$\mathcal D_{S,t}(\hat y) = \mathcal D\bigl(\mathcal E^S(\hat y), \mathcal E^S(r_t)\bigr),
//! \qquad \mathcal D(\hat y) = \mathcal D^{agg}_F(\hat y) + \mathcal D^{agg}_I(\hat y)$$
//!
//! How: all candidate sentences are stacked and multiplied against every
//! distinct corpus sentence in one GEMM ([`crate::gram::gram`]); each
//! report's cost block is gathered from that product and handed to
//! `sdr_core`'s [`Metric::evaluate`] (GW also gets intra-set costs from the
//! same dot products), in parallel over the distinct corpus sets. Several
//! metrics and aggregations share one pass. With pruning on, `min`/`knn`-only
//! metrics that have a lower bound ([`crate::bounds`]) evaluate reports in
//! increasing bound order and stop when no remaining report can enter the
//! `k` smallest.
//!
//! Under the clinical cost ([`CorpusIndex::score_with`], SPEC §10) each
//! gathered block is penalised by the conflicts of the candidate's sentences
//! with the corpus set's ([`crate::clinical`]); the bounds stay those of the
//! cosine block, valid for the metrics monotone in the cost
//! ([`bounds::kind_under`]), and the rest are computed in full.

use std::ops::Range;

use rayon::prelude::*;
use sdr_core::cost::PairCost;
use sdr_core::{CostMatrix, Metric};

use crate::agg::{mean_of_smallest, Aggregation, Policy};
use crate::bounds::{self, BoundKind};
use crate::clinical::{candidate_notes, CandidateSentences, CorpusCost, SectionNotes};
use crate::convergence::{Convergence, Tally};
use crate::error::{CorpusError, Result};
use crate::gram::{cost, gram, intra_cost, inverse_norms};
use crate::index::{CorpusIndex, SectionSets};
use crate::store::Section;

/// Embeddings of one well-formed candidate: both sections, `n_S x dim` each
/// (`n_S >= 1`), row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct CandidateEmbedding {
    pub findings: Vec<f32>,
    pub impression: Vec<f32>,
}

impl CandidateEmbedding {
    pub fn section(&self, s: Section) -> &[f32] {
        match s {
            Section::Findings => &self.findings,
            Section::Impression => &self.impression,
        }
    }
}

/// Scoring options.
#[derive(Debug, Clone, Copy)]
pub struct ScoreOptions {
    /// Skip reports by lower bounds for `min`/`knn` (exact; see [`crate::bounds`]).
    pub prune: bool,
}

impl Default for ScoreOptions {
    fn default() -> Self {
        ScoreOptions { prune: true }
    }
}

/// Scores of every candidate under every policy.
#[derive(Debug, Clone, PartialEq)]
pub struct Scores {
    pub policies: Vec<Policy>,
    /// `total[p][c] = D_F + D_I`, `+inf` for a malformed candidate.
    pub total: Vec<Vec<f64>>,
    /// `sections[p][c] = [D_F, D_I]` (`+inf` when malformed).
    pub sections: Vec<Vec<[f64; 2]>>,
    /// Corpus reports whose exact distance was computed, per section, summed
    /// over candidates and metrics (distinct sets count once): what pruning saved.
    pub evaluated: usize,
    /// How many of those `evaluated` distances did not converge or failed.
    pub convergence: Convergence,
}

/// All candidate sentences stacked, with where each candidate's sections lie.
struct Stack {
    dim: usize,
    rows: Vec<f32>,
    inv: Vec<f64>,
    /// Per candidate: `[findings rows, impression rows]` in `rows`.
    ranges: Vec<Option<[Range<usize>; 2]>>,
}

impl Stack {
    fn new(cands: &[Option<CandidateEmbedding>], dim: usize) -> Result<Stack> {
        let mut rows = Vec::new();
        let mut ranges = Vec::with_capacity(cands.len());
        for (ci, c) in cands.iter().enumerate() {
            let Some(c) = c else {
                ranges.push(None);
                continue;
            };
            let mut rr = [0..0, 0..0];
            for (k, sec) in Section::BOTH.into_iter().enumerate() {
                let e = c.section(sec);
                if e.is_empty() || e.len() % dim != 0 {
                    return Err(if e.is_empty() {
                        CorpusError::BadVector {
                            what: format!("candidate {ci} {sec}"),
                            index: 0,
                            fault: "missing (empty section)",
                        }
                    } else {
                        CorpusError::Dimension {
                            expected: dim,
                            got: e.len(),
                        }
                    });
                }
                let start = rows.len() / dim;
                rows.extend_from_slice(e);
                rr[k] = start..rows.len() / dim;
            }
            ranges.push(Some(rr));
        }
        let inv = inverse_norms(&rows, dim, "the candidates")?;
        Ok(Stack {
            dim,
            rows,
            inv,
            ranges,
        })
    }
    fn q(&self) -> usize {
        self.rows.len() / self.dim
    }
}

/// The GEMM result, `S x q`: `dots[s * q + r]` = corpus sentence `s` . candidate row `r`.
struct Cross<'a> {
    dots: Vec<f32>,
    q: usize,
    inv_e: &'a [f64],
    inv_q: &'a [f64],
}

impl Cross<'_> {
    #[inline(always)]
    fn cost(&self, s: u32, r: usize) -> f64 {
        cost(
            self.dots[s as usize * self.q + r],
            self.inv_e[s as usize],
            self.inv_q[r],
        )
    }

    /// Cost block of candidate rows `rows` against corpus set `set`.
    fn block(&self, rows: &Range<usize>, set: &[u32]) -> CostMatrix {
        let (n, m) = (rows.len(), set.len());
        let mut data = vec![0.0; n * m];
        for (j, &s) in set.iter().enumerate() {
            for (i, r) in rows.clone().enumerate() {
                data[i * m + j] = self.cost(s, r);
            }
        }
        CostMatrix::new(n, m, data)
    }
}

fn intra_of_rows(stack: &Stack, rows: &Range<usize>) -> CostMatrix {
    let d = stack.dim;
    let sub = &stack.rows[rows.start * d..rows.end * d];
    let g = gram(sub, sub, d);
    let n = rows.len();
    intra_cost(n, &stack.inv[rows.clone()], |i, j| g[i * n + j])
}

/// Aggregate a full distance vector over the sets of a section.
fn aggregate_full(values: &[f64], sets: &SectionSets, agg: &Aggregation) -> f64 {
    match agg {
        Aggregation::Avg => {
            let mut s = 0.0;
            for (v, &m) in values.iter().zip(&sets.mult) {
                s += v * m as f64;
            }
            s / sets.n_reports as f64
        }
        Aggregation::Min | Aggregation::Knn { .. } => {
            let k = agg.needs_smallest().unwrap_or(1);
            let mut pairs: Vec<(f64, u32)> = values
                .iter()
                .zip(&sets.mult)
                .map(|(&v, &m)| (v, m))
                .collect();
            pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
            mean_of_smallest(&pairs, k)
        }
    }
}

/// The `k` smallest values (with multiplicity) seen so far.
struct TopK {
    k: usize,
    items: Vec<(f64, u32)>,
}

impl TopK {
    fn new(k: usize) -> Self {
        TopK {
            k,
            items: Vec::new(),
        }
    }
    /// The current k-th smallest value (`+inf` until k elements were seen).
    fn threshold(&self) -> f64 {
        let mut left = self.k;
        for &(v, c) in &self.items {
            if c as usize >= left {
                return v;
            }
            left -= c as usize;
        }
        f64::INFINITY
    }
    fn push(&mut self, v: f64, c: u32) {
        let pos = self.items.partition_point(|x| x.0.total_cmp(&v).is_le());
        self.items.insert(pos, (v, c));
        // Drop entries entirely beyond the first k units.
        let mut left = self.k;
        let mut keep = 0;
        for &(_, c) in &self.items {
            keep += 1;
            if c as usize >= left {
                break;
            }
            left -= c as usize;
        }
        self.items.truncate(keep);
    }
}

/// Sets evaluated exactly per parallel round in the pruned search.
const ROUND: usize = 256;

/// The sentence cost of one scoring pass: the corpus side prepared once,
/// and per live candidate its sentences' annotations, per section.
struct Clin<'x, 'c> {
    corpus: &'x CorpusCost<'c>,
    notes: Vec<Option<SectionNotes>>,
}

impl Clin<'_, '_> {
    /// Candidate `c`'s annotations of section `si`.
    fn of(&self, c: usize, si: usize) -> &[sdr_core::Annotation] {
        self.notes[c].as_ref().map_or(&[], |f| &f[si])
    }
}

impl<'a> CorpusIndex<'a> {
    /// Scores `cands` (`None` = malformed, scores `+inf`) under `policies`
    /// with the paper's cosine cost.
    pub fn score(
        &self,
        cands: &[Option<CandidateEmbedding>],
        policies: &[Policy],
        opts: ScoreOptions,
    ) -> Result<Scores> {
        self.score_with(cands, policies, opts, None)
    }

    /// [`CorpusIndex::score`], under the clinical cost (SPEC §10) when
    /// `clinical` gives it, prepared for this index, with the candidates'
    /// sentences (`sentences[c]` beside `cands[c]`, one per embedded row).
    /// `None` is the cosine cost, bit for bit.
    ///
    /// # Errors
    /// Those of [`CorpusIndex::score`], and [`CorpusError::SentenceCount`]
    /// when a well-formed candidate's sentences do not match its rows.
    pub fn score_with(
        &self,
        cands: &[Option<CandidateEmbedding>],
        policies: &[Policy],
        opts: ScoreOptions,
        clinical: Option<(&CorpusCost<'_>, &[Option<CandidateSentences>])>,
    ) -> Result<Scores> {
        let dim = self.view.dim;
        let stack = Stack::new(cands, dim)?;
        let clin = match clinical {
            None => None,
            Some((corpus, sentences)) => {
                let rows: Vec<Option<[usize; 2]>> = stack
                    .ranges
                    .iter()
                    .map(|r| r.as_ref().map(|r| [r[0].len(), r[1].len()]))
                    .collect();
                Some(Clin {
                    corpus,
                    notes: candidate_notes(corpus.cost(), sentences, &rows)?,
                })
            }
        };
        let cost = clin.as_ref().map(|x| x.corpus.cost());
        let q = stack.q();
        let np = policies.len();
        let nc = cands.len();
        let mut sections = vec![vec![[f64::INFINITY; 2]; nc]; np];
        let mut evaluated = 0usize;
        let tally = Tally::default();
        if q > 0 {
            let cross = Cross {
                dots: gram(self.view.embeddings, &stack.rows, dim),
                q,
                inv_e: &self.inv_norm,
                inv_q: &stack.inv,
            };
            // Distinct metrics, and whether each needs every distance.
            let mut metrics: Vec<(Metric, bool, usize)> = Vec::new();
            for p in policies {
                let full = !opts.prune
                    || p.agg == Aggregation::Avg
                    || bounds::kind_for(&p.metric, cost) == BoundKind::None;
                let k = p.agg.needs_smallest().unwrap_or(1);
                match metrics.iter_mut().find(|(m, _, _)| *m == p.metric) {
                    Some(e) => {
                        e.1 |= full;
                        e.2 = e.2.max(k);
                    }
                    None => metrics.push((p.metric, full, k)),
                }
            }
            let full: Vec<Metric> = metrics.iter().filter(|x| x.1).map(|x| x.0).collect();
            let pruned: Vec<(Metric, usize)> = metrics
                .iter()
                .filter(|x| !x.1)
                .map(|x| (x.0, x.2))
                .collect();
            let live: Vec<usize> = (0..nc).filter(|&c| stack.ranges[c].is_some()).collect();
            for (si, sec) in Section::BOTH.into_iter().enumerate() {
                let sets = self.section(sec);
                // Full distance vectors: [metric][live cand][set].
                let full_values = self.full_pass(
                    sec,
                    &stack,
                    &cross,
                    (&live, clin.as_ref()),
                    &full,
                    si,
                    &tally,
                );
                evaluated += full.len() * live.len() * sets.len();
                for (pi, p) in policies.iter().enumerate() {
                    if let Some(mi) = full.iter().position(|m| *m == p.metric) {
                        for (li, &c) in live.iter().enumerate() {
                            sections[pi][c][si] =
                                aggregate_full(&full_values[mi][li], sets, &p.agg);
                        }
                    }
                }
                for &(metric, k) in &pruned {
                    let results: Vec<(Vec<(f64, u32)>, usize)> = live
                        .iter()
                        .map(|&c| {
                            let rows = stack.ranges[c]
                                .as_ref()
                                .map(|r| r[si].clone())
                                .unwrap_or(0..0);
                            let facts = clin.as_ref().map(|x| (x.corpus, x.of(c, si)));
                            self.pruned_search(sec, &cross, &rows, facts, &metric, k, &tally)
                        })
                        .collect();
                    for (li, &c) in live.iter().enumerate() {
                        evaluated += results[li].1;
                        for (pi, p) in policies.iter().enumerate() {
                            if p.metric == metric && full.iter().all(|m| *m != metric) {
                                let kk = p.agg.needs_smallest().unwrap_or(1);
                                sections[pi][c][si] = mean_of_smallest(&results[li].0, kk);
                            }
                        }
                    }
                }
            }
        }
        let total = sections
            .iter()
            .map(|row| row.iter().map(|s| s[0] + s[1]).collect())
            .collect();
        Ok(Scores {
            policies: policies.to_vec(),
            total,
            sections,
            evaluated,
            convergence: tally.counts(),
        })
    }

    /// Every distance of the `live` candidates to every set of `sec`, for
    /// `metrics`: `[metric][live index][set]`.
    #[allow(clippy::too_many_arguments)]
    fn full_pass(
        &self,
        sec: Section,
        stack: &Stack,
        cross: &Cross<'_>,
        (live, clin): (&[usize], Option<&Clin<'_, '_>>),
        metrics: &[Metric],
        si: usize,
        tally: &Tally,
    ) -> Vec<Vec<Vec<f64>>> {
        let sets = self.section(sec);
        if metrics.is_empty() {
            return Vec::new();
        }
        let needs_intra = metrics.iter().any(Metric::needs_intra);
        let cand_intra: Vec<Option<CostMatrix>> = live
            .iter()
            .map(|&c| {
                let rows = &stack.ranges[c].as_ref().expect("live")[si];
                needs_intra.then(|| intra_of_rows(stack, rows))
            })
            .collect();
        let nl = live.len();
        let nm = metrics.len();
        let per_set: Vec<Vec<f64>> = (0..sets.len())
            .into_par_iter()
            .with_min_len(8)
            .map(|s| {
                let set = sets.set(s);
                let set_intra = needs_intra.then(|| self.intra(sec, s));
                let mut out = Vec::with_capacity(nl * nm);
                for (li, &c) in live.iter().enumerate() {
                    let rows = &stack.ranges[c].as_ref().expect("live")[si];
                    let block = cross.block(rows, set);
                    let intra = match (&cand_intra[li], set_intra) {
                        (Some(a), Some(b)) => Some((a, b)),
                        _ => None,
                    };
                    let pair = PairCost::borrowed(&block, intra);
                    let pair = match clin {
                        None => Some(pair),
                        Some(x) => {
                            let b = x.corpus.set_notes(self, sec, s);
                            x.corpus.penalize(pair, x.of(c, si), b).ok()
                        }
                    };
                    for m in metrics {
                        out.push(match &pair {
                            Some(p) => tally.value(m, p),
                            None => tally.failed(),
                        });
                    }
                }
                out
            })
            .collect();
        (0..nm)
            .map(|mi| {
                (0..nl)
                    .map(|li| per_set.iter().map(|v| v[li * nm + mi]).collect())
                    .collect()
            })
            .collect()
    }

    /// The `k` smallest distances (sorted, with multiplicities) of candidate
    /// rows `rows` to the sets of `sec`, skipping sets by lower bounds; also
    /// returns how many sets were evaluated exactly. Under the clinical cost
    /// (`clinical`: the corpus side and the candidate's facts of `sec`) the
    /// exact distances read the penalised blocks, the bounds the cosine ones.
    #[allow(clippy::too_many_arguments)]
    fn pruned_search(
        &self,
        sec: Section,
        cross: &Cross<'_>,
        rows: &Range<usize>,
        clinical: Option<(&CorpusCost<'_>, &[sdr_core::Annotation])>,
        metric: &Metric,
        k: usize,
        tally: &Tally,
    ) -> (Vec<(f64, u32)>, usize) {
        let sets = self.section(sec);
        let ns = sets.len();
        // Lower bound of every set.
        let lb: Vec<f64> = match bounds::kind_for(metric, clinical.map(|(c, _)| c.cost())) {
            BoundKind::Sentence => {
                // Column minima per distinct corpus sentence of this section,
                // and each candidate row's minimum over the section's sentences.
                let mut col_min = vec![f64::INFINITY; self.view.n_sentences()];
                let mut g = vec![f64::INFINITY; rows.len()];
                for &s in &sets.universe {
                    let mut c = f64::INFINITY;
                    for (i, r) in rows.clone().enumerate() {
                        let x = cross.cost(s, r);
                        c = c.min(x);
                        g[i] = g[i].min(x);
                    }
                    col_min[s as usize] = c;
                }
                (0..ns)
                    .into_par_iter()
                    .with_min_len(1024)
                    .map(|s| {
                        bounds::sentence_bound(
                            metric,
                            &g,
                            sets.set(s).iter().map(|&x| col_min[x as usize]),
                        )
                    })
                    .collect()
            }
            BoundKind::Block => (0..ns)
                .into_par_iter()
                .with_min_len(256)
                .map(|s| bounds::block_bound(metric, &cross.block(rows, sets.set(s))))
                .collect(),
            BoundKind::None => vec![f64::NEG_INFINITY; ns],
        };
        let exact = |s: usize| -> f64 {
            let block = cross.block(rows, sets.set(s));
            let pair = PairCost::borrowed(&block, None);
            match clinical {
                None => tally.value(metric, &pair),
                Some((corpus, a)) => match corpus.penalize(pair, a, corpus.set_notes(self, sec, s))
                {
                    Ok(p) => tally.value(metric, &p),
                    Err(_) => tally.failed(),
                },
            }
        };
        let mut top = TopK::new(k);
        let mut evaluated = 0usize;
        // First round: the ROUND sets of smallest bound, found without a full sort.
        let mut order: Vec<u32> = (0..ns as u32).collect();
        let first = ROUND.max(4 * k).min(ns);
        if first < ns {
            order.select_nth_unstable_by(first, |&a, &b| lb[a as usize].total_cmp(&lb[b as usize]));
        }
        let head: Vec<u32> = order[..first].to_vec();
        let vals: Vec<f64> = head.par_iter().map(|&s| exact(s as usize)).collect();
        evaluated += head.len();
        for (&s, v) in head.iter().zip(vals) {
            top.push(v, sets.mult[s as usize]);
        }
        // The rest: only sets whose bound is below the threshold, in bound order.
        let t = top.threshold();
        let mut rest: Vec<u32> = order[first..]
            .iter()
            .copied()
            .filter(|&s| lb[s as usize] < t)
            .collect();
        rest.sort_by(|&a, &b| lb[a as usize].total_cmp(&lb[b as usize]));
        let mut pos = 0;
        while pos < rest.len() {
            let t = top.threshold();
            if lb[rest[pos] as usize] >= t {
                break;
            }
            let end = (pos + ROUND).min(rest.len());
            let chunk: Vec<u32> = rest[pos..end]
                .iter()
                .copied()
                .filter(|&s| lb[s as usize] < t)
                .collect();
            let vals: Vec<f64> = chunk.par_iter().map(|&s| exact(s as usize)).collect();
            evaluated += chunk.len();
            for (&s, v) in chunk.iter().zip(vals) {
                top.push(v, sets.mult[s as usize]);
            }
            pos = end;
        }
        (top.items, evaluated)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topk_threshold_counts_units() {
        let mut t = TopK::new(3);
        assert_eq!(t.threshold(), f64::INFINITY);
        t.push(0.5, 2);
        assert_eq!(t.threshold(), f64::INFINITY);
        t.push(0.7, 1);
        assert_eq!(t.threshold(), 0.7);
        t.push(0.1, 1);
        assert_eq!(t.threshold(), 0.5);
        assert_eq!(t.items, vec![(0.1, 1), (0.5, 2)]);
    }
}
