//! Distance-guided pruning (paper Alg. 1, SPEC §6).
//!
//! With `A` the active candidates, `wu` the warm-up and `p` the fraction:
//!
//! 1. every candidate decodes `wu` sentences in lock-step;
//! 2. while `|A| > 1`: score each `a ∈ A` by `D(ŷ_a) = mean_{S : E^S(ŷ_a) ≠ ∅} D_S(ŷ_a)`
//!    (the aggregated corpus distance over the sections that already hold a
//!    complete sentence; `+∞` when none does), cancel the `⌈p·|A|⌉`
//!    highest-scoring (ties: the higher index goes), and let the survivors
//!    decode one more sentence;
//! 3. decode the last survivor to its end.
//!
//! With `survivors = s > 1` (beyond the paper, whose Alg. 1 is `s = 1`) the
//! rounds stop at `s` candidates, which all decode to their end; the best of
//! them as complete reports is chosen. A small model's survivor often ends
//! malformed (no Impression before the token limit), which a second finished
//! survivor covers at the cost of its tokens.
//!
//! A candidate that has ended stays in the pool with its final text, scored
//! as a complete report: `+∞` unless both sections hold a sentence. One whose
//! stream failed ([`End::Error`]) scores `+∞`: its text is cut, not a report;
//! if it is chosen all the same (every survivor failed), [`prune()`] fails.
//! Token saving `= 1 − tokens(pruning) / tokens(K full candidates)`.

use serde::Serialize;

use crate::{CandidateState, End, GenError, LockStep, Partial};

/// Scores partial outputs against the training corpus; lower is better.
pub trait PartialScorer {
    /// One score per partial output: the mean over the sections that hold at
    /// least one sentence of that section's aggregated corpus distance, and
    /// `f64::INFINITY` when neither section holds one.
    fn score(&mut self, partials: &[Partial]) -> Result<Vec<f64>, GenError>;
}

impl<F: FnMut(&[Partial]) -> Result<Vec<f64>, GenError>> PartialScorer for F {
    fn score(&mut self, partials: &[Partial]) -> Result<Vec<f64>, GenError> {
        self(partials)
    }
}

/// Pruning settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PruneConfig {
    /// Sentences every candidate decodes before the first round (the paper's `wu`).
    pub warmup: usize,
    /// Fraction of the active candidates dropped per round, in (0, 1).
    pub fraction: f64,
    /// Candidates decoded to their end once the rounds stop (the paper: 1).
    pub survivors: usize,
}

impl Default for PruneConfig {
    fn default() -> Self {
        Self {
            warmup: 1,
            fraction: 0.5,
            survivors: 1,
        }
    }
}

impl PruneConfig {
    /// Checks the ranges.
    pub fn validate(&self) -> Result<(), GenError> {
        if self.warmup == 0 {
            return Err(GenError::Request(
                "warmup must be at least 1 sentence".into(),
            ));
        }
        if self.survivors == 0 {
            return Err(GenError::Request(
                "survivors must be at least 1 candidate".into(),
            ));
        }
        if !(self.fraction > 0.0 && self.fraction < 1.0) {
            return Err(GenError::Request(format!(
                "pruning fraction must be in (0, 1), got {}",
                self.fraction
            )));
        }
        Ok(())
    }

    /// How many of `active` candidates a round drops: `⌈p·active⌉`, at least
    /// one and leaving at least `survivors`.
    pub fn drops(&self, active: usize) -> usize {
        let keep = self.survivors.max(1);
        if active <= keep {
            return 0;
        }
        // Guard against 0.5 * 8 = 4.000000000000001 style rounding.
        let d = (self.fraction * active as f64 - 1e-9).ceil() as usize;
        d.clamp(1, active - keep)
    }
}

/// One scoring round.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Round {
    /// Sentences the active candidates were asked to hold.
    pub sentences: usize,
    /// Active candidates before the round.
    pub active: Vec<usize>,
    /// Their scores, in the order of `active` (`null` in JSON for `+inf`).
    #[serde(serialize_with = "finite_or_null")]
    pub scores: Vec<f64>,
    /// Candidates dropped, worst first.
    pub dropped: Vec<usize>,
}

fn finite_or_null<S: serde::Serializer>(v: &[f64], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = s.serialize_seq(Some(v.len()))?;
    for x in v {
        seq.serialize_element(&x.is_finite().then_some(*x))?;
    }
    seq.end()
}

/// What pruning did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PruneOutcome {
    /// The surviving candidate.
    pub chosen: usize,
    /// Every candidate's final state (pruned ones end `cancelled`).
    pub candidates: Vec<CandidateState>,
    /// The rounds, in order.
    pub rounds: Vec<Round>,
    /// Tokens decoded over all candidates.
    pub tokens_used: usize,
    /// Tokens the back-end reports having produced (a server's streams can
    /// run ahead of the lock-step before a cancellation lands).
    pub tokens_produced: usize,
}

/// The scores of the active candidates' outputs so far. An ended candidate
/// is complete: like full best-of-K (SPEC §5), it needs both sections, else
/// it scores +inf; so do a NaN and a failed candidate.
fn round_scores(
    run: &LockStep<'_>,
    scorer: &mut dyn PartialScorer,
    active: &[usize],
) -> Result<Vec<f64>, GenError> {
    let partials: Vec<Partial> = active.iter().map(|&i| run.states()[i].partial()).collect();
    let scores = scorer.score(&partials)?;
    if scores.len() != active.len() {
        return Err(GenError::Score(
            format!(
                "scorer returned {} scores for {} candidates",
                scores.len(),
                active.len()
            )
            .into(),
        ));
    }
    Ok(scores
        .into_iter()
        .zip(active)
        .zip(&partials)
        .map(|((s, &i), p)| {
            let state = &run.states()[i];
            let ended = !state.is_live();
            let failed = matches!(state.end, Some(End::Error(_)));
            if s.is_nan() || failed || (ended && (p.findings.is_empty() || p.impression.is_empty()))
            {
                f64::INFINITY
            } else {
                s
            }
        })
        .collect())
}

/// Runs Alg. 1 over started candidates. `progress(tokens_used)` is called
/// after each decoded piece.
pub fn prune(
    mut run: LockStep<'_>,
    scorer: &mut dyn PartialScorer,
    config: PruneConfig,
    mut progress: impl FnMut(usize),
) -> Result<PruneOutcome, GenError> {
    config.validate()?;
    let k = run.k();
    let mut active: Vec<usize> = (0..k).collect();
    let mut used = 0usize;
    let mut tick = |_: usize, _: &CandidateState| {
        used += 1;
        progress(used);
    };
    let mut target = config.warmup;
    let mut rounds = Vec::new();
    run.decode_until(&active, Some(target), &mut tick)?;
    while active.len() > config.survivors {
        let scores = round_scores(&run, scorer, &active)?;
        let clean = &scores;
        let mut order: Vec<usize> = (0..active.len()).collect();
        // Worst first: highest score, then the higher index.
        order.sort_by(|&a, &b| {
            clean[b]
                .total_cmp(&clean[a])
                .then(active[b].cmp(&active[a]))
        });
        let n_drop = config.drops(active.len());
        let dropped: Vec<usize> = order[..n_drop].iter().map(|&j| active[j]).collect();
        rounds.push(Round {
            sentences: target,
            active: active.clone(),
            scores,
            dropped: dropped.clone(),
        });
        for &d in &dropped {
            run.cancel(d);
        }
        active.retain(|a| !dropped.contains(a));
        if active.len() > config.survivors {
            target += 1;
            run.decode_until(&active, Some(target), &mut tick)?;
        }
    }
    run.decode_to_end(&active, &mut tick)?;
    let chosen = if active.len() == 1 {
        active[0]
    } else {
        // The finished survivors as complete reports: the lowest score, the
        // lower index on ties; the others are recorded as dropped.
        let scores = round_scores(&run, scorer, &active)?;
        let best = (0..active.len())
            .min_by(|&a, &b| scores[a].total_cmp(&scores[b]).then(a.cmp(&b)))
            .expect("at least one survivor");
        rounds.push(Round {
            sentences: target,
            active: active.clone(),
            scores,
            dropped: (0..active.len())
                .filter(|&j| j != best)
                .map(|j| active[j])
                .collect(),
        });
        active[best]
    };
    if let Some(End::Error(cause)) = &run.states()[chosen].end {
        return Err(GenError::Candidate {
            candidate: chosen,
            cause: cause.clone(),
        });
    }
    let tokens_produced = (0..k).map(|i| run.produced(i)).sum();
    let candidates = run.into_states();
    let tokens_used = candidates.iter().map(|c| c.tokens).sum();
    Ok(PruneOutcome {
        chosen,
        candidates,
        rounds,
        tokens_used,
        tokens_produced,
    })
}
