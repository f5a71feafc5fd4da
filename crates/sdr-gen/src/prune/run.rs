//! Pruning over many studies: replayed from stored candidates (with standard
//! best-of-K alongside) or live against a back-end, one [`PruneRecord`] per
//! study, with the totals of the run; a stopped live run resumed from the
//! records it kept.

use std::time::Instant;

use serde::Deserialize;

use super::{prune, Distances, Generation, KeptCounts, PruneConfig, PruneOutcome, PruneRecord};
use crate::replay::{ReplayRecord, StudyId};
use crate::{Backend, GenError, KeptError, LockStep, Partial, Request, Resume, RunSettings};

/// What the runs need of the corpus: pruning's partial score and standard
/// best-of-K, under one policy, each with the corpus distances it computed.
/// sdr-corpus's `CorpusScorer` computes both; the caller adapts it.
pub trait StudyScorer {
    type Error: std::error::Error + Send + Sync + 'static;
    /// One score per partial output, lower is better ([`super::PartialScorer`]).
    fn partial_scores(&mut self, parts: &[Partial]) -> Result<(Vec<f64>, Distances), Self::Error>;
    /// The index of the best of the full candidate `texts`.
    fn best_of_k(&mut self, texts: &[&str]) -> Result<(usize, Distances), Self::Error>;
}

/// One line of a candidates file to replay.
pub struct ReplayStudy {
    /// `file:line`, the prefix of the line's errors.
    pub at: String,
    /// The study id as text.
    pub id: String,
    pub record: ReplayRecord,
}

/// One study to generate and prune live.
pub struct LiveStudy {
    /// The study's place in the input.
    pub index: usize,
    pub id: String,
    pub request: Request,
    /// What the record says generated it.
    pub generation: Generation,
    /// The full candidates' tokens (`sdr generate`'s output), for the saving.
    pub tokens_full: Option<usize>,
}

/// A run's totals, for its summary line.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Totals {
    /// Studies pruned (kept ones included).
    pub studies: usize,
    /// Tokens decoded.
    pub used: usize,
    /// Tokens of the full candidates, where known.
    pub full: usize,
    /// Studies where pruning chose what standard best-of-K chose, of `compared`.
    pub agree: usize,
    pub compared: usize,
}

/// Prunes study after study under one scorer and configuration, counting
/// tokens and corpus distances across the run.
pub struct Pruner<S> {
    scorer: S,
    policy: String,
    config: PruneConfig,
    corpus_sha256: String,
    totals: Totals,
    distances: Distances,
    /// `distances` when the last record was made: a record's distances are
    /// the difference.
    written: Distances,
}

/// One study's result, before it becomes a [`PruneRecord`].
struct Study<'a> {
    id: String,
    mode: &'static str,
    outcome: PruneOutcome,
    full: Option<usize>,
    estimated: bool,
    standard: Option<(usize, &'a str)>,
    generation: Option<Generation>,
    seconds: f64,
}

impl<S: StudyScorer> Pruner<S> {
    /// `policy` is the key records carry; `corpus_sha256` the corpus file's `meta_sha256`.
    pub fn new(scorer: S, policy: String, config: PruneConfig, corpus_sha256: String) -> Self {
        Pruner {
            scorer,
            policy,
            config,
            corpus_sha256,
            totals: Totals::default(),
            distances: Distances::default(),
            written: Distances::default(),
        }
    }

    /// The policy key records carry.
    pub fn policy(&self) -> &str {
        &self.policy
    }

    pub fn totals(&self) -> Totals {
        self.totals
    }

    /// Corpus distances computed so far, kept records included.
    pub fn distances(&self) -> Distances {
        self.distances
    }

    /// Counts a record kept from a stopped run as if pruned now.
    pub fn keep(&mut self, k: &KeptCounts) {
        self.count(k.chosen, k.tokens_used, k.tokens_full, k.standard_chosen);
        self.distances += k.distances;
        self.written = self.distances;
    }

    /// Resumes a stopped live run from the records it kept (`(at, record)`,
    /// in file order; `at` prefixes each error): each is matched to its
    /// study among `ids` (this run's, in input order) and checked against
    /// `expected(index)`, the settings this run gives that study
    /// ([`Resume::check`]), so that one file never mixes two configurations,
    /// then counted as kept ([`Pruner::keep`]). Returns the kept studies'
    /// input indices, in file order.
    pub fn resume<'a, E>(
        &mut self,
        ids: impl IntoIterator<Item = &'a str>,
        kept: impl IntoIterator<Item = Result<(String, serde_json::Value), E>>,
        expected: impl Fn(usize) -> RunSettings,
    ) -> Result<Vec<usize>, E>
    where
        E: From<GenError>,
    {
        let mut resume = Resume::new(ids);
        let mut done = Vec::new();
        for k in kept {
            let (at, rec) = k?;
            let bad = |m: String| GenError::Input(format!("{at}: {m}"));
            let id = rec
                .get("id")
                .map(|v| StudyId::from_value(v.clone()).text())
                .ok_or_else(|| bad("no \"id\"".into()))?;
            if rec.get("distances").is_none() {
                return Err(bad(format!(
                    "study {id} lacks the fields that --resume checks (written by an older \
                     sdr); run without --resume"
                ))
                .into());
            }
            let was = RunSettings::deserialize(&rec).map_err(|e| bad(e.to_string()))?;
            let index = resume.check(&id, &was, &expected).map_err(|e| match e {
                KeptError::Differs { id, diff } => bad(format!(
                    "study {id} was pruned with {diff}; resume with the same settings"
                )),
                other => bad(other.to_string()),
            })?;
            let counts: KeptCounts = serde_json::from_value(rec).map_err(|e| bad(e.to_string()))?;
            self.keep(&counts);
            done.push(index);
        }
        Ok(done)
    }

    /// Replays stored candidates: per study standard best-of-K on the full
    /// candidates, then pruning; `emit(index, record)` gets each record with
    /// the study's place in `studies`. Errors name the line.
    pub fn replay<E>(
        &mut self,
        studies: impl IntoIterator<Item = Result<ReplayStudy, E>>,
        mut emit: impl FnMut(usize, &PruneRecord<'_>) -> Result<(), E>,
    ) -> Result<(), E>
    where
        E: From<GenError> + From<S::Error>,
    {
        for (index, study) in studies.into_iter().enumerate() {
            let ReplayStudy { at, id, record } = study?;
            let t = Instant::now();
            record.check_tokens().map_err(|e| at_(&at, e))?;
            let replay = record.replay(&at)?;
            let estimated = replay.estimated();
            let full: usize = (0..record.candidates.len())
                .map(|i| replay.full_tokens(i))
                .sum();
            let texts: Vec<&str> = record.candidates.iter().map(String::as_str).collect();
            let (standard, d) = self.scorer.best_of_k(&texts)?;
            self.distances += d;
            let outcome = self
                .prune(LockStep::new(Box::new(replay)))
                .map_err(|e| at_(&at, e))?;
            let study = Study {
                id,
                mode: "replay",
                outcome,
                full: Some(full),
                estimated,
                standard: Some((standard, &record.candidates[standard])),
                generation: None,
                seconds: t.elapsed().as_secs_f64(),
            };
            let distances = self.account(&study);
            emit(index, &self.record(&study, distances))?;
        }
        Ok(())
    }

    /// Generates each study's candidates on `backend` in lock-step and
    /// prunes them; `emit(index, record)` gets each record with
    /// [`LiveStudy::index`]. Errors name the study.
    pub fn live<E>(
        &mut self,
        backend: &mut dyn Backend,
        studies: impl IntoIterator<Item = Result<LiveStudy, E>>,
        mut emit: impl FnMut(usize, &PruneRecord<'_>) -> Result<(), E>,
    ) -> Result<(), E>
    where
        E: From<GenError>,
    {
        for study in studies {
            let s = study?;
            let at = format!("study {}", s.id);
            let t = Instant::now();
            let batch = backend.start(&s.request).map_err(|e| at_(&at, e))?;
            let outcome = self.prune(LockStep::new(batch)).map_err(|e| at_(&at, e))?;
            let study = Study {
                id: s.id,
                mode: "live",
                outcome,
                full: s.tokens_full,
                estimated: false,
                standard: None,
                generation: Some(s.generation),
                seconds: t.elapsed().as_secs_f64(),
            };
            let distances = self.account(&study);
            emit(s.index, &self.record(&study, distances))?;
        }
        Ok(())
    }

    fn prune(&mut self, run: LockStep<'_>) -> Result<PruneOutcome, GenError> {
        let (scorer, distances) = (&mut self.scorer, &mut self.distances);
        let mut score = |parts: &[Partial]| {
            let (scores, d) = scorer
                .partial_scores(parts)
                .map_err(|e| GenError::Score(Box::new(e)))?;
            *distances += d;
            Ok(scores)
        };
        prune(run, &mut score, self.config, |_| {})
    }

    /// Adds a study to the totals; returns the distances it computed.
    fn account(&mut self, s: &Study<'_>) -> Distances {
        let o = &s.outcome;
        self.count(o.chosen, o.tokens_used, s.full, s.standard.map(|x| x.0));
        let was = std::mem::replace(&mut self.written, self.distances);
        self.distances - was
    }

    fn record<'a>(&'a self, s: &'a Study<'a>, distances: Distances) -> PruneRecord<'a> {
        let o = &s.outcome;
        PruneRecord {
            id: s.id.clone(),
            mode: s.mode,
            policy: self.policy.clone(),
            warmup: self.config.warmup,
            fraction: self.config.fraction,
            chosen: o.chosen,
            text: &o.candidates[o.chosen].text,
            tokens_used: o.tokens_used,
            tokens_produced: o.tokens_produced,
            tokens_full: s.full,
            saving: s.full.map(|f| 1.0 - o.tokens_used as f64 / f as f64),
            estimated_tokens: s.estimated,
            standard_chosen: s.standard.map(|x| x.0),
            standard_text: s.standard.map(|x| x.1),
            rounds: &o.rounds,
            candidate_tokens: o.candidates.iter().map(|c| c.tokens).collect(),
            seconds: s.seconds,
            survivors: self.config.survivors,
            corpus_sha256: &self.corpus_sha256,
            generation: s.generation.clone(),
            distances,
        }
    }

    fn count(&mut self, chosen: usize, used: usize, full: Option<usize>, standard: Option<usize>) {
        let t = &mut self.totals;
        t.studies += 1;
        t.used += used;
        if let Some(f) = full {
            t.full += f;
        }
        if let Some(c) = standard {
            t.compared += 1;
            t.agree += usize::from(c == chosen);
        }
    }
}

/// `e` with the line or study it happened at.
fn at_(at: &str, e: GenError) -> GenError {
    GenError::Study {
        at: at.to_string(),
        error: Box::new(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Scores a partial output by its findings: 10 per sentence naming an
    /// effusion, 1 per sentence naming an enlarged heart.
    struct Stub;

    impl StudyScorer for Stub {
        type Error = GenError;

        fn partial_scores(&mut self, parts: &[Partial]) -> Result<(Vec<f64>, Distances), GenError> {
            let bad = |s: &String| {
                10 * usize::from(s.contains("effusion")) + usize::from(s.contains("enlarged"))
            };
            let scores = parts
                .iter()
                .map(|p| {
                    p.findings
                        .iter()
                        .chain(&p.impression)
                        .map(bad)
                        .sum::<usize>() as f64
                })
                .collect();
            let d = Distances {
                evaluated: parts.len(),
                ..Distances::default()
            };
            Ok((scores, d))
        }

        fn best_of_k(&mut self, texts: &[&str]) -> Result<(usize, Distances), GenError> {
            let d = Distances {
                evaluated: texts.len(),
                unconverged: 1,
                failed: 0,
            };
            Ok((2, d))
        }
    }

    #[test]
    fn resume_checks_and_counts_the_kept_records() {
        let settings = |i: usize| RunSettings {
            mode: Some("live".into()),
            seed: Some(i as u64),
            tokens_full: Some(30),
            ..RunSettings::default()
        };
        let rec = |id: serde_json::Value, seed: u64| {
            serde_json::json!({"id": id, "mode": "live", "seed": seed, "chosen": 1,
                "tokens_used": 10, "tokens_full": 30, "distances": {"evaluated": 4, "unconverged": 1, "failed": 0}})
        };
        let run = |kept: Vec<serde_json::Value>| {
            let mut pruner =
                Pruner::new(Stub, "stub@min".into(), PruneConfig::default(), "h".into());
            let kept = kept
                .into_iter()
                .enumerate()
                .map(|(i, r)| Ok::<_, GenError>((format!("f:{}", i + 1), r)));
            let done = pruner.resume(["a", "7", "c"], kept, settings);
            (
                done.map_err(|e| e.to_string()),
                pruner.totals(),
                pruner.distances(),
            )
        };
        // A numeric id is its study's text; kept in file order, counted.
        let (done, t, d) = run(vec![rec(serde_json::json!("c"), 2), rec(7.into(), 1)]);
        assert_eq!(done, Ok(vec![2, 1]));
        assert_eq!((t.studies, t.used, t.full), (2, 20, 60));
        assert_eq!((d.evaluated, d.unconverged), (8, 2));
        for (kept, want) in [
            (vec![serde_json::json!({"mode": "live"})], "f:1: no \"id\""),
            (
                vec![serde_json::json!({"id": "a"})],
                "f:1: study a lacks the fields that --resume checks (written by an older sdr); \
                 run without --resume",
            ),
            (
                vec![rec("a".into(), 0), rec("c".into(), 5)],
                "f:2: study c was pruned with seed 5, this run has 2; resume with the same settings",
            ),
            (
                vec![rec("b".into(), 0)],
                "f:1: study b is not among this run's studies",
            ),
            (
                vec![rec("a".into(), 0), rec("a".into(), 0)],
                "f:2: study a appears twice",
            ),
        ] {
            assert_eq!(run(kept).0.unwrap_err(), want);
        }
    }

    #[test]
    fn replay_drops_the_worst_and_counts_tokens_and_distances() {
        let record: ReplayRecord = serde_json::from_value(serde_json::json!({
            "id": 7,
            "candidates": [
                "Findings: Heart normal. Lungs clear.\nImpression: Normal.",
                "Findings: Left effusion. Lungs hazy.\nImpression: Effusion.",
                "Findings: Heart enlarged. Lungs clear.\nImpression: Cardiomegaly.",
            ],
        }))
        .unwrap();
        let study = ReplayStudy {
            at: "c.jsonl:1".into(),
            id: "7".into(),
            record,
        };
        let mut pruner = Pruner::new(Stub, "stub@min".into(), PruneConfig::default(), "h".into());
        let mut lines = Vec::new();
        pruner
            .replay([Ok::<_, GenError>(study)], |index, rec| {
                lines.push((index, serde_json::to_value(rec).unwrap()));
                Ok(())
            })
            .unwrap();
        let [(0, rec)] = &lines[..] else {
            panic!("{lines:?}")
        };
        // One round after the first sentence: scores 0, 10, 1; ⌈0.5·3⌉ = 2
        // dropped, worst first.
        let round = &rec["rounds"][0];
        assert_eq!(round["sentences"], 1);
        assert_eq!(round["scores"], serde_json::json!([0.0, 10.0, 1.0]));
        assert_eq!(round["dropped"], serde_json::json!([1, 2]));
        assert_eq!(rec["chosen"], 0);
        assert_eq!(rec["standard_chosen"], 2);
        assert_eq!(rec["estimated_tokens"], true);
        // Pseudo-tokens: the survivor decodes all of its 12; the dropped
        // ones stop one token into their second sentence ("Findings", ":",
        // two words, ".", the next word).
        assert_eq!(rec["candidate_tokens"], serde_json::json!([12, 6, 6]));
        assert_eq!(rec["tokens_used"], 24);
        assert_eq!(rec["tokens_full"], 36);
        assert_eq!(
            rec["distances"],
            serde_json::json!({"evaluated": 6, "unconverged": 1, "failed": 0})
        );
        let t = pruner.totals();
        assert_eq!(
            (t.studies, t.used, t.full, t.agree, t.compared),
            (1, 24, 36, 0, 1)
        );
    }
}
