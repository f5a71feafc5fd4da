//! Batch scoring: completions against references, one encoder call per batch.
//!
//! For a batch of `B` (completion, reference) pairs:
//!
//! $$R_b = \lambda_{\mathrm{fmt}} R_{\mathrm{fmt}}(\hat y_b)
//!       + \lambda_{\mathrm{sem}} \sum_{S \in \{F, I\}} \bigl(1 - \min(\mathcal D(E^S(\hat y_b), E^S(y_b)), 1)\bigr)$$
//!
//! where the semantic terms are 0 when `R_fmt = 0` (SPEC §4). Beyond the
//! paper, an optional clinical term `lambda_clin F1_CheXpert(ŷ_b, y_b)` adds
//! the example-level F1 between the rule-based CheXpert-14 labels of the
//! completion's and the reference's sections (`sdr-clinical`); it is 0 for a
//! malformed completion and off (`lambda_clin = 0`) by default.
//!
//! The sentences of the batch are deduplicated first (by normalised text) and
//! looked up in one bounded sentence cache ([`SentenceCache`]) that holds every
//! sentence the scorer has embedded, completions and references alike: a policy
//! repeats "The lungs are clear." within a group and across steps, so the
//! encoder sees each distinct sentence once per run, and a sentence keeps the
//! same vector (the same bits) for as long as it is cached. A server can have
//! the new sentences embedded in chunks and give the call up between two
//! or two samples' distances ([`Scorer::score_until`]), so that a departed
//! client's batch does not hold the encoder or the cores. With `exact` set, the section terms are the exact-match
//! baseline `R_exact` instead and no encoder is needed.

use std::sync::Arc;

use sdr_clinical::{example_f1, Labeler, UncertainPolicy};
use sdr_core::cost::{CostKind, PairCost};
use sdr_core::report::Section;
use sdr_core::report::{exact_match_reward, parse_template, ParsedReport};
use sdr_core::reward::{reward, reward_with, EmbeddedSections, RewardBreakdown, RewardConfig};
use sdr_core::{Annotation, Metric, SentenceCost};
use sdr_embed::{
    CacheStats, EmbedControl, SectionBatch, SectionEmbedder, SentenceCache, SentenceEncoder,
};

use crate::error::{Result, RewardError};
use crate::parallel;
use crate::persist::PersistentCache;
use crate::reference::{parse_reference, Reference, ReferenceSections};

/// The largest reward weight: with every weight at most this, no reward
/// overflows (a reply of `null` for `inf` would break a trainer).
pub const MAX_WEIGHT: f64 = 1e6;

/// What to compute: the metric, the weights, and semantic or exact-match terms.
/// The default is the paper's: Chamfer, `lambda_fmt = lambda_sem = 1`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RewardOptions {
    /// Metric and weights `lambda_fmt`, `lambda_sem`.
    pub config: RewardConfig,
    /// Score sections by exact match (`R_exact`) instead of set distance.
    pub exact: bool,
    /// Drop repeated sentences within a section before the distance (true set
    /// semantics). Off by default: SPEC §2 keeps repeats (multiset). Each
    /// verbatim copy of a close sentence lowers Chamfer's generated-to-reference
    /// mean, a gain a policy can learn; this removes it (paraphrases still count).
    pub distinct_sentences: bool,
    /// Beyond the paper: `lambda_clin`, the weight of the CheXpert-14
    /// example F1 between completion and reference labels (rule-based
    /// labeler, uncertain counted as present). 0 (the default) leaves the
    /// paper's reward unchanged, bit for bit.
    pub clinical_weight: f64,
    /// The sentence cost the section distances read: the paper's cosine
    /// (default) or, beyond the paper, the clinically aware cost (SPEC §10),
    /// which adds a penalty to the rows and columns of sentences whose
    /// findings the other section contradicts (polarity, side, size) or
    /// lacks. Ignored by exact-match rewards.
    pub cost: CostKind,
}

impl RewardOptions {
    /// Parse and check: a known metric spec, finite non-negative weights.
    ///
    /// ```
    /// use sdr_reward::RewardOptions;
    /// let o = RewardOptions::new("sinkhorn", 1.0, 0.5, false).unwrap();
    /// assert_eq!(o.config.metric.to_string(), "sinkhorn:eps=0.1");
    /// assert!(RewardOptions::new("chamfer", -1.0, 1.0, false).is_err());
    /// ```
    pub fn new(
        metric: &str,
        format_weight: f64,
        semantic_weight: f64,
        exact: bool,
    ) -> Result<Self> {
        let metric: Metric = metric.parse()?;
        for (name, value) in [
            ("format_weight", format_weight),
            ("semantic_weight", semantic_weight),
        ] {
            if !(0.0..=MAX_WEIGHT).contains(&value) {
                return Err(RewardError::BadWeight { name, value });
            }
        }
        Ok(RewardOptions {
            config: RewardConfig {
                metric,
                format_weight,
                semantic_weight,
            },
            exact,
            distinct_sentences: false,
            clinical_weight: 0.0,
            cost: CostKind::Cosine,
        })
    }

    /// The same options with the section distances read through `cost`.
    ///
    /// ```
    /// use sdr_reward::RewardOptions;
    /// let o = RewardOptions::default().with_cost("clinical:lambda=1".parse().unwrap());
    /// assert_eq!(o.cost.to_string(), "clinical:lambda=1");
    /// ```
    pub fn with_cost(mut self, cost: CostKind) -> Self {
        self.cost = cost;
        self
    }

    /// The same options with the clinical term weighted by `weight`.
    ///
    /// # Errors
    /// [`RewardError::BadWeight`] for a negative, NaN or infinite weight.
    ///
    /// ```
    /// use sdr_reward::RewardOptions;
    /// let o = RewardOptions::default().with_clinical_weight(0.5).unwrap();
    /// assert_eq!(o.clinical_weight, 0.5);
    /// assert!(RewardOptions::default().with_clinical_weight(-1.0).is_err());
    /// ```
    pub fn with_clinical_weight(mut self, weight: f64) -> Result<Self> {
        if !(0.0..=MAX_WEIGHT).contains(&weight) {
            return Err(RewardError::BadWeight {
                name: "clinical_weight",
                value: weight,
            });
        }
        self.clinical_weight = weight;
        Ok(self)
    }

    /// The same options with repeated sentences dropped within each section.
    pub fn with_distinct_sentences(mut self, distinct: bool) -> Self {
        self.distinct_sentences = distinct;
        self
    }
}

/// Counters of one [`Scorer::score`] call.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct BatchStats {
    /// Pairs scored.
    pub samples: usize,
    /// Sentence occurrences that needed a vector (references and well-formed completions).
    pub sentences: usize,
    /// Distinct sentences among them.
    pub distinct: usize,
    /// Distinct sentences sent to the encoder (in one call).
    pub embedded: usize,
    /// Distinct sentences found in the sentence cache.
    pub cache_hits: usize,
    /// Seconds spent in the encoder.
    pub encode_seconds: f64,
    /// Sections scored with a distance whose solver did not converge (its
    /// last iterate was used; SPEC §4).
    pub unconverged: usize,
    /// Sections whose distance was not finite (term 0; SPEC §4).
    pub failed: usize,
    /// With the clinical cost: sections of well-formed completions in which
    /// the sentence facts found a conflict with the reference (0 otherwise).
    pub conflicts: usize,
}

impl BatchStats {
    /// Share of the batch's distinct sentences that came from the cache
    /// (1 when the batch needed no vector).
    pub fn hit_rate(&self) -> f64 {
        if self.distinct == 0 {
            1.0
        } else {
            self.cache_hits as f64 / self.distinct as f64
        }
    }
}

/// Default memory bound of a scorer's sentence cache: 1 GiB, about 335,000
/// sentences of dimension 768 (the 3,331 complete IU reports hold about 9,000
/// distinct sentences).
pub const DEFAULT_CACHE_MIB: f64 = 1024.0;

/// New sentences per encoder call in [`Scorer::score_until`] for callers that
/// stop between calls (the Python reward under Ctrl-C; the default of
/// `sdr serve`'s limits, whose command sizes it to the device): large enough
/// to fill the encoder's batches, small enough to stop within seconds on a
/// CPU.
pub const DEFAULT_ENCODE_CHUNK: usize = 256;

/// Scores batches of completions against references; thread-safe.
pub struct Scorer {
    options: RewardOptions,
    /// The encoder and its sentence cache (semantic rewards).
    embedder: Option<SectionEmbedder<'static>>,
    persist: Option<Arc<PersistentCache>>,
    /// Present only when the clinical term is on.
    labeler: Option<Labeler>,
    /// Present only with a sentence cost beyond cosine (the clinical cost
    /// caches its facts across batches).
    sentence_cost: Option<Arc<dyn SentenceCost>>,
}

impl Scorer {
    /// A scorer with its own sentence cache of [`DEFAULT_CACHE_MIB`]; `embedder`
    /// may be `None` only for exact-match rewards.
    pub fn new(options: RewardOptions, embedder: Option<Arc<dyn SentenceEncoder>>) -> Result<Self> {
        Self::with_cache(options, embedder, None)
    }

    /// A scorer that uses `cache` (shared with other scorers of the same encoder,
    /// e.g. every metric of one `sdr serve`); `None` makes one of
    /// [`DEFAULT_CACHE_MIB`].
    ///
    /// # Errors
    /// [`RewardError::NoEncoder`] without an encoder for a semantic reward;
    /// [`RewardError::CacheMismatch`] for a cache of another encoder or dimension.
    pub fn with_cache(
        options: RewardOptions,
        embedder: Option<Arc<dyn SentenceEncoder>>,
        cache: Option<Arc<SentenceCache>>,
    ) -> Result<Self> {
        let embedder = match (embedder, cache) {
            (Some(e), Some(cache)) => SectionEmbedder::new(e, cache),
            (Some(e), None) => SectionEmbedder::bounded(e, DEFAULT_CACHE_MIB),
            (None, _) => return Self::with_embedder(options, None),
        }
        .map_err(RewardError::from_stage)?;
        Self::with_embedder(options, Some(embedder))
    }

    /// A scorer that embeds through `embedder` (absent only for exact-match
    /// rewards).
    ///
    /// # Errors
    /// [`RewardError::NoEncoder`] without an embedder for a semantic reward.
    pub fn with_embedder(
        options: RewardOptions,
        embedder: Option<SectionEmbedder<'static>>,
    ) -> Result<Self> {
        if !options.exact && embedder.is_none() {
            return Err(RewardError::NoEncoder {
                metric: options.config.metric.to_string(),
            });
        }
        let sentence_cost = if options.exact {
            None
        } else {
            sdr_clinical::open_cost(&options.cost)?
        };
        Ok(Scorer {
            options,
            embedder,
            persist: None,
            labeler: (options.clinical_weight > 0.0).then(Labeler::default),
            sentence_cost,
        })
    }

    /// Save the cache through `persist` at its interval, after a batch.
    pub fn with_persistence(mut self, persist: Arc<PersistentCache>) -> Self {
        self.persist = Some(persist);
        self
    }

    pub fn options(&self) -> &RewardOptions {
        &self.options
    }

    /// The sentence cache (absent for exact-match rewards).
    pub fn cache(&self) -> Option<&Arc<SentenceCache>> {
        self.embedder.as_ref().map(SectionEmbedder::cache)
    }

    /// The embedding stage (absent for exact-match rewards).
    pub fn embedder(&self) -> Option<&SectionEmbedder<'static>> {
        self.embedder.as_ref()
    }

    /// Counters of the sentence cache (all zero for exact-match rewards).
    pub fn cache_stats(&self) -> CacheStats {
        self.cache().map(|c| c.stats()).unwrap_or_default()
    }

    /// Sentences currently cached.
    pub fn cached_sentences(&self) -> usize {
        self.cache_stats().entries
    }

    /// The persistence attached with [`Scorer::with_persistence`].
    pub fn persistence(&self) -> Option<&Arc<PersistentCache>> {
        self.persist.as_ref()
    }

    /// Score `completions[b]` against `references[b]`.
    ///
    /// Completions are judged by the template rules: one that breaks them
    /// scores `R_fmt = 0` and reward 0, never an error.
    ///
    /// # Errors
    /// Length mismatch; a reference with an empty section or a broken layout
    /// (the lowest such index is reported); encoder failures.
    pub fn score(
        &self,
        completions: &[&str],
        references: &[Reference<'_>],
    ) -> Result<(Vec<RewardBreakdown>, BatchStats)> {
        self.score_until(completions, references, usize::MAX, &|| false)
    }

    /// [`Scorer::score`] that can be given up part-way, for a server whose
    /// client may leave: the new sentences are embedded `chunk` at a time, each
    /// chunk cached as soon as it is done, and `stop` is asked before every
    /// chunk and before each sample's distances. The rewards are those of `score` (a
    /// sentence's vector does not depend on its chunk beyond the encoder's own
    /// batching). `chunk = usize::MAX` is one encoder call, as `score` makes.
    ///
    /// # Errors
    /// Those of `score`, and [`RewardError::Stopped`] when `stop` said so;
    /// what was embedded until then stays cached, so a retry without the
    /// departed client's samples does not embed it again.
    pub fn score_until(
        &self,
        completions: &[&str],
        references: &[Reference<'_>],
        chunk: usize,
        stop: &(dyn Fn() -> bool + Sync),
    ) -> Result<(Vec<RewardBreakdown>, BatchStats)> {
        if completions.len() != references.len() {
            return Err(RewardError::LengthMismatch {
                what: "references",
                expected: completions.len(),
                got: references.len(),
            });
        }
        let refs: Vec<ReferenceSections> = parallel::map(references, |i, r| parse_reference(r, i))
            .into_iter()
            .collect::<Result<_>>()?;
        let gens: Vec<ParsedReport> = parallel::map(completions, |_, c| parse_template(c));
        let (mut out, stats) = if self.options.exact {
            self.score_exact(&gens, &refs)?
        } else {
            self.score_semantic(&gens, &refs, chunk.max(1), stop)?
        };
        if let Some(labeler) = &self.labeler {
            self.add_clinical(labeler, &gens, &refs, &mut out);
        }
        if let Some(p) = &self.persist {
            p.save_if_due();
        }
        Ok((out, stats))
    }

    /// Adds `lambda_clin * F1` to each well-formed completion's reward; the
    /// labels are those of the Findings and Impression sentences together.
    fn add_clinical(
        &self,
        labeler: &Labeler,
        gens: &[ParsedReport],
        refs: &[ReferenceSections],
        out: &mut [RewardBreakdown],
    ) {
        let weight = self.options.clinical_weight;
        let label = |f: &[String], i: &[String]| {
            let text: Vec<&str> = f.iter().chain(i).map(String::as_str).collect();
            labeler.label(&text.join(" "))
        };
        let f1 = parallel::map(gens, |b, g| {
            g.format_valid.then(|| {
                let r = &refs[b];
                example_f1(
                    &label(&g.findings, &g.impression),
                    &label(&r.findings, &r.impression),
                    UncertainPolicy::Positive,
                )
            })
        });
        for (o, f1) in out.iter_mut().zip(f1) {
            if let Some(f1) = f1 {
                o.add_clinical(weight, f1);
            }
        }
    }

    fn combine(&self, format: f64, findings: f64, impression: f64) -> RewardBreakdown {
        let c = &self.options.config;
        RewardBreakdown {
            format,
            findings,
            impression,
            clinical: 0.0,
            reward: c.combine(format, findings, impression),
            ..RewardBreakdown::default()
        }
    }

    fn score_exact(
        &self,
        gens: &[ParsedReport],
        refs: &[ReferenceSections],
    ) -> Result<(Vec<RewardBreakdown>, BatchStats)> {
        let out = gens
            .iter()
            .zip(refs)
            .enumerate()
            .map(|(i, (g, r))| {
                let e = exact_match_reward(g, &r.findings.join(" "), &r.impression.join(" "), i)?;
                Ok(self.combine(e.format, e.findings, e.impression))
            })
            .collect::<Result<Vec<_>>>()?;
        let stats = BatchStats {
            samples: gens.len(),
            ..BatchStats::default()
        };
        Ok((out, stats))
    }

    fn score_semantic(
        &self,
        gens: &[ParsedReport],
        refs: &[ReferenceSections],
        chunk: usize,
        stop: &(dyn Fn() -> bool + Sync),
    ) -> Result<(Vec<RewardBreakdown>, BatchStats)> {
        let Some(embedder) = self.embedder.as_ref() else {
            return Err(RewardError::NoEncoder {
                metric: self.options.config.metric.to_string(),
            });
        };
        // Sample `b`'s reference is report `2b`, its completion `2b + 1` (no
        // sentence when malformed); references first, so that a batch's new
        // sentences reach the encoder in the order they always have.
        let mut batch = SectionBatch::new().distinct_sentences(self.options.distinct_sentences);
        for (g, r) in gens.iter().zip(refs) {
            batch.push(&r.findings, &r.impression);
            if g.format_valid {
                batch.push(&g.findings, &g.impression);
            } else {
                batch.push_empty();
            }
        }
        let control = EmbedControl {
            chunk,
            stop: Some(stop),
            progress: None,
        };
        // Under a sentence cost each distinct sentence carries its
        // annotation (the clinical cost: its facts, cached across batches),
        // computed once per batch, so that a pair's cost reads them beside
        // its rows with no lookup.
        let sets = match &self.sentence_cost {
            None => embedder.embed_annotated(&batch, |_| None, &control),
            Some(c) => embedder.embed_annotated(&batch, |t| Some(c.annotate(t)), &control),
        }
        .map_err(RewardError::from_stage)?;
        let s = sets.stats();
        let mut stats = BatchStats {
            samples: gens.len(),
            sentences: s.sentences,
            distinct: s.distinct,
            embedded: s.embedded,
            cache_hits: s.cache_hits,
            encode_seconds: s.encode_seconds,
            ..BatchStats::default()
        };

        // Sets stay f32, as the encoder gave them: the cost kernel widens in
        // registers (exact products), so no f64 copy is made.
        let config = &self.options.config;
        let sections = |report: usize| EmbeddedSections {
            findings: sets.view(report, Section::Findings),
            impression: sets.view(report, Section::Impression),
        };
        let metric = &config.metric;
        let results = parallel::map(gens, |i, g| {
            // A sample's distances can take seconds (GW on long sets).
            if stop() {
                return Err(RewardError::Stopped {
                    embedded: stats.embedded,
                    encode_seconds: stats.encode_seconds,
                });
            }
            let generated = sections(2 * i + 1);
            let generated = g.format_valid.then_some(&generated);
            let Some(cost) = &self.sentence_cost else {
                return Ok((reward(config, generated, &sections(2 * i), i)?, 0));
            };
            // The cost reads each set's annotations beside its rows.
            let conflicts = std::sync::atomic::AtomicUsize::new(0);
            let r = reward_with(config, generated, &sections(2 * i), i, |section, gv, rv| {
                let notes = |report: usize| -> Vec<Annotation> {
                    sets.set_of(report, section)
                        .notes()
                        // Every sentence was annotated: `None` cannot occur, and
                        // would be refused by `apply`, not read as a fact-free one.
                        .map(|a| a.clone().unwrap_or_else(|| Arc::new(())))
                        .collect()
                };
                let (pc, changed) = cost.apply(
                    PairCost::between(gv, rv, metric.needs_intra())?,
                    &notes(2 * i + 1),
                    &notes(2 * i),
                )?;
                if changed {
                    conflicts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                metric.evaluate(&pc)
            })?;
            Ok((r, conflicts.into_inner()))
        });
        let out = results
            .into_iter()
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let out: Vec<RewardBreakdown> = out
            .into_iter()
            .map(|(r, c)| {
                stats.unconverged += usize::from(r.unconverged);
                stats.failed += usize::from(r.failed);
                stats.conflicts += c;
                r
            })
            .collect();
        Ok((out, stats))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A deterministic stand-in: one axis per distinct word; counts calls.
    struct Words {
        vocab: Vec<&'static str>,
        calls: AtomicUsize,
        texts: AtomicUsize,
    }

    impl SentenceEncoder for Words {
        fn name(&self) -> String {
            "words".into()
        }
        fn weights_sha256(&self) -> sdr_embed::Result<String> {
            Ok("none".into())
        }
        fn dim(&self) -> usize {
            self.vocab.len() + 1
        }
        fn embed(&self, texts: &[&str]) -> sdr_embed::Result<Vec<f32>> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            self.texts.fetch_add(texts.len(), Ordering::SeqCst);
            let mut out = Vec::new();
            for t in texts {
                let mut v = vec![0f32; self.dim()];
                v[self.vocab.len()] = 0.1;
                for w in t.to_lowercase().split(|c: char| !c.is_alphanumeric()) {
                    if let Some(k) = self.vocab.iter().position(|x| *x == w) {
                        v[k] += 1.0;
                    }
                }
                out.extend(v);
            }
            Ok(out)
        }
    }

    fn words() -> Arc<Words> {
        Arc::new(Words {
            vocab: vec![
                "heart", "normal", "lungs", "clear", "effusion", "no", "acute",
            ],
            calls: AtomicUsize::new(0),
            texts: AtomicUsize::new(0),
        })
    }

    /// [`Words`] with its vectors changed by `alter(texts, vectors, dim)`.
    struct Altered<F>(&'static str, Arc<Words>, F);

    impl<F: Fn(&[&str], &mut [f32], usize) + Send + Sync> SentenceEncoder for Altered<F> {
        fn name(&self) -> String {
            self.0.into()
        }
        fn weights_sha256(&self) -> sdr_embed::Result<String> {
            Ok("none".into())
        }
        fn dim(&self) -> usize {
            self.1.dim()
        }
        fn embed(&self, texts: &[&str]) -> sdr_embed::Result<Vec<f32>> {
            let mut v = self.1.embed(texts)?;
            (self.2)(texts, &mut v, self.dim());
            Ok(v)
        }
    }

    const REF: &str = "<think>Heart normal. Lungs clear.</think><answer>No acute disease.</answer>";

    #[test]
    fn identical_completion_scores_three_and_malformed_zero() {
        let w = words();
        let s = Scorer::new(RewardOptions::default(), Some(w.clone())).unwrap();
        let comps = [REF, "Heart normal.", "<think>Heart normal.</think>"];
        let refs = [Reference::Report(REF); 3];
        let (r, stats) = s.score(&comps, &refs).unwrap();
        assert!((r[0].reward - 3.0).abs() < 1e-12, "{:?}", r[0]);
        assert_eq!(r[1], RewardBreakdown::default());
        assert_eq!(r[2], RewardBreakdown::default());
        // Three distinct sentences, embedded in one call.
        assert_eq!((stats.distinct, stats.embedded), (3, 3));
        assert_eq!(w.calls.load(Ordering::SeqCst), 1);
        // Second call: every reference sentence is cached; the completion's
        // sentences are the same texts, so nothing is embedded.
        let (_, stats) = s.score(&comps, &refs).unwrap();
        assert_eq!((stats.embedded, stats.cache_hits), (0, 3));
        assert_eq!(w.calls.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn completion_sentences_are_cached_too() {
        let w = words();
        let s = Scorer::new(RewardOptions::default(), Some(w.clone())).unwrap();
        let c = "<think>No effusion.</think><answer>Lungs clear.</answer>";
        let (first, stats) = s.score(&[c], &[Reference::Report(REF)]).unwrap();
        assert_eq!(
            (stats.distinct, stats.embedded, stats.cache_hits),
            (4, 4, 0)
        );
        assert_eq!(s.cached_sentences(), 4);
        assert!(stats.hit_rate() == 0.0);
        // Same request again: nothing to embed, the same reward.
        let (again, stats) = s.score(&[c], &[Reference::Report(REF)]).unwrap();
        assert_eq!((stats.embedded, stats.cache_hits), (0, 4));
        assert_eq!(stats.hit_rate(), 1.0);
        assert_eq!(again, first);
        assert_eq!(w.calls.load(Ordering::SeqCst), 1);
        // Spacing does not make a new sentence.
        let spaced = "<think>No   effusion.</think><answer>Lungs\tclear.</answer>";
        let (r, stats) = s.score(&[spaced], &[Reference::Report(REF)]).unwrap();
        assert_eq!(stats.embedded, 0);
        assert_eq!(r, first);
    }

    #[test]
    fn unusable_vectors_are_an_error_naming_the_sentence_and_are_not_cached() {
        // A stand-in that gives one sentence the zero vector (or a NaN) until
        // it is fixed: the batch fails naming the sentence, nothing of it is
        // cached, and once fixed the same batch scores as if nothing happened.
        let mode = Arc::new(std::sync::atomic::AtomicU8::new(1));
        let m = mode.clone();
        let enc = Arc::new(Altered(
            "broken",
            words(),
            move |texts: &[&str], v: &mut [f32], d| {
                let fill = match m.load(Ordering::SeqCst) {
                    0 => return,
                    1 => 0.0,
                    _ => f32::NAN,
                };
                for (k, t) in texts.iter().enumerate() {
                    if t.contains("Zzz") {
                        v[k * d..(k + 1) * d].fill(fill);
                    }
                }
            },
        ));
        let s = Scorer::new(RewardOptions::default(), Some(enc.clone())).unwrap();
        let c = "<think>Heart normal. Zzz.</think><answer>No acute disease.</answer>";
        let refs = [Reference::Report(REF)];
        for (m, problem) in [(1, "the zero vector"), (2, "a non-finite value")] {
            mode.store(m, Ordering::SeqCst);
            let err = s.score(&[c], &refs).unwrap_err().to_string();
            assert!(
                err.contains("encoder broken gave sentence \"Zzz.\" ") && err.contains(problem),
                "{err}"
            );
            assert_eq!(s.cached_sentences(), 0, "{err}");
        }
        mode.store(0, Ordering::SeqCst);
        let (r, stats) = s.score(&[c], &refs).unwrap();
        assert_eq!(stats.embedded, 4);
        let fresh = Scorer::new(RewardOptions::default(), Some(words())).unwrap();
        assert_eq!(r, fresh.score(&[c], &refs).unwrap().0);
    }

    #[test]
    fn a_reward_does_not_depend_on_the_rest_of_its_batch() {
        // A stand-in whose vectors depend on the batch (like padding does in a
        // real encoder): the cache makes the reward of a sample the same bits
        // whatever else is scored with it, once its sentences are known.
        let noisy = Altered("noisy", words(), |texts: &[&str], v: &mut [f32], _| {
            let eps = 1e-6 * texts.len() as f32;
            v.iter_mut().for_each(|x| *x += eps);
        });
        let s = Scorer::new(RewardOptions::default(), Some(Arc::new(noisy))).unwrap();
        let c = "<think>Heart normal. No effusion.</think><answer>No acute disease.</answer>";
        let other = "<think>Lungs clear. Effusion.</think><answer>Heart normal.</answer>";
        let (alone, _) = s.score(&[c], &[Reference::Report(REF)]).unwrap();
        let (mixed, _) = s
            .score(&[other, c, other], &[Reference::Report(REF); 3])
            .unwrap();
        assert_eq!(mixed[1], alone[0]);
    }

    #[test]
    fn a_shared_cache_must_belong_to_the_encoder() {
        let w = words();
        let right = Arc::new(SentenceCache::new("words@none", w.dim(), 1 << 20));
        let s = Scorer::with_cache(
            RewardOptions::default(),
            Some(w.clone()),
            Some(right.clone()),
        )
        .unwrap();
        s.score(&[REF], &[Reference::Report(REF)]).unwrap();
        // Another scorer on the same cache starts warm.
        let t = Scorer::with_cache(
            RewardOptions::new("hausdorff", 1.0, 1.0, false).unwrap(),
            Some(w.clone()),
            Some(right),
        )
        .unwrap();
        let (_, stats) = t.score(&[REF], &[Reference::Report(REF)]).unwrap();
        assert_eq!(stats.embedded, 0);
        let wrong = Arc::new(SentenceCache::new("other@none", w.dim(), 1 << 20));
        let e = Scorer::with_cache(RewardOptions::default(), Some(w), Some(wrong))
            .err()
            .unwrap();
        assert!(matches!(e, RewardError::CacheMismatch { .. }), "{e}");
    }

    #[test]
    fn repeats_raise_chamfer_unless_sentences_are_distinct() {
        // One good sentence repeated, plus one poor one: repeats pull the
        // generated-to-reference mean towards the good sentence's cost.
        let once = "<think>Heart normal. No effusion.</think><answer>No acute disease.</answer>";
        let many = "<think>Heart normal. Heart normal. Heart normal. No effusion.</think><answer>No acute disease.</answer>";
        let refs = [Reference::Report(REF); 2];
        let multiset = Scorer::new(RewardOptions::default(), Some(words())).unwrap();
        let (r, _) = multiset.score(&[once, many], &refs).unwrap();
        assert!(r[1].findings > r[0].findings + 1e-3, "{r:?}");
        let set = Scorer::new(
            RewardOptions::default().with_distinct_sentences(true),
            Some(words()),
        )
        .unwrap();
        let (d, _) = set.score(&[once, many], &refs).unwrap();
        assert_eq!(d[0], d[1]);
        assert_eq!(d[0], r[0]);
    }

    #[test]
    fn clinical_term_is_off_by_default_and_adds_lambda_f1() {
        let contradicting =
            "<think>Heart normal. Large right pleural effusion.</think><answer>Pleural effusion.</answer>";
        let comps = [REF, contradicting, "Heart normal."];
        let refs = [Reference::Report(REF); 3];
        let base = Scorer::new(RewardOptions::default(), Some(words())).unwrap();
        let (r0, _) = base.score(&comps, &refs).unwrap();
        // lambda = 0 (explicit): bit-identical to the paper's reward.
        let zero = RewardOptions::default().with_clinical_weight(0.0).unwrap();
        let (z, _) = Scorer::new(zero, Some(words()))
            .unwrap()
            .score(&comps, &refs)
            .unwrap();
        assert_eq!(z, r0);
        assert!(r0.iter().all(|b| b.clinical == 0.0));

        let lambda = 0.5;
        let on = RewardOptions::default()
            .with_clinical_weight(lambda)
            .unwrap();
        let (r, _) = Scorer::new(on, Some(words()))
            .unwrap()
            .score(&comps, &refs)
            .unwrap();
        // Same labels as the reference: +lambda exactly.
        assert_eq!(r[0].clinical, 1.0);
        assert_eq!(r[0].reward, r0[0].reward + lambda);
        // A contradicting completion gets less than +lambda; components unchanged.
        assert!(r[1].clinical < 1.0, "{:?}", r[1]);
        assert!(r[1].reward < r0[1].reward + lambda);
        assert_eq!(r[1].reward, r0[1].reward + lambda * r[1].clinical);
        assert_eq!(
            (r[1].format, r[1].findings, r[1].impression),
            (r0[1].format, r0[1].findings, r0[1].impression)
        );
        // Malformed: the clinical term is 0, like the semantic terms.
        assert_eq!(r[2], RewardBreakdown::default());
        // Exact mode gets it too.
        let exact = RewardOptions::new("chamfer", 1.0, 1.0, true)
            .unwrap()
            .with_clinical_weight(lambda)
            .unwrap();
        let (e, _) = Scorer::new(exact, None)
            .unwrap()
            .score(&comps, &refs)
            .unwrap();
        assert_eq!(e[0].reward, 3.0 + lambda);
        for bad in [-0.1, f64::NAN, f64::INFINITY] {
            let e = RewardOptions::default()
                .with_clinical_weight(bad)
                .unwrap_err();
            assert!(e.to_string().starts_with("clinical_weight must be"), "{e}");
        }
    }

    #[test]
    fn the_clinical_cost_sees_a_reversed_finding_the_cosine_barely_sees() {
        // "no effusion" against "effusion": one word apart for the stand-in
        // encoder, opposite facts for the clinical cost.
        let reference =
            "<think>Heart normal. No effusion.</think><answer>No acute disease.</answer>";
        let same = reference;
        let reversed = "<think>Heart normal. Effusion.</think><answer>No acute disease.</answer>";
        let comps = [same, reversed, "Heart normal."];
        let refs = [Reference::Report(reference); 3];
        let cosine = Scorer::new(RewardOptions::default(), Some(words())).unwrap();
        let (c, cs) = cosine.score(&comps, &refs).unwrap();
        assert_eq!(cs.conflicts, 0);
        let clinical = Scorer::new(
            RewardOptions::default().with_cost(CostKind::clinical()),
            Some(words()),
        )
        .unwrap();
        let (k, ks) = clinical.score(&comps, &refs).unwrap();
        // Identical sections: no conflict, the cosine reward exactly.
        assert_eq!(k[0], c[0]);
        // The reversed finding: Chamfer rises by at least lambda / 2.
        let lambda = sdr_core::cost::clinical::DEFAULT_LAMBDA;
        assert!(
            k[1].findings <= c[1].findings - lambda / 2.0 + 1e-12,
            "{k:?} {c:?}"
        );
        assert_eq!(k[1].impression, c[1].impression);
        assert_eq!(ks.conflicts, 1);
        // Malformed: 0 under either cost.
        assert_eq!(k[2], RewardBreakdown::default());
        // Exact-match rewards ignore the cost.
        let exact = RewardOptions::new("chamfer", 1.0, 1.0, true)
            .unwrap()
            .with_cost(CostKind::clinical());
        let (e, _) = Scorer::new(exact, None)
            .unwrap()
            .score(&comps, &refs)
            .unwrap();
        let (e0, _) = Scorer::new(RewardOptions::new("chamfer", 1.0, 1.0, true).unwrap(), None)
            .unwrap()
            .score(&comps, &refs)
            .unwrap();
        assert_eq!(e, e0);
        // GW reads intra-set costs only (SPEC §10): unchanged.
        let gw = RewardOptions::new("gw", 1.0, 1.0, false).unwrap();
        let (g0, _) = Scorer::new(gw, Some(words()))
            .unwrap()
            .score(&comps, &refs)
            .unwrap();
        let (g1, _) = Scorer::new(gw.with_cost(CostKind::clinical()), Some(words()))
            .unwrap()
            .score(&comps, &refs)
            .unwrap();
        assert_eq!(g0, g1);
    }

    #[test]
    fn weights_and_exact_mode() {
        let o = RewardOptions::new("chamfer", 0.5, 2.0, true).unwrap();
        let s = Scorer::new(o, None).unwrap();
        let c = "<think>heart normal.  lungs clear</think><answer>Something else.</answer>";
        let (r, _) = s.score(&[c], &[Reference::Report(REF)]).unwrap();
        assert_eq!(
            (r[0].format, r[0].findings, r[0].impression),
            (1.0, 1.0, 0.0)
        );
        assert_eq!(r[0].reward, 0.5 + 2.0);
        assert!(matches!(
            Scorer::new(RewardOptions::default(), None),
            Err(RewardError::NoEncoder { .. })
        ));
    }

    #[test]
    fn input_errors() {
        let s = Scorer::new(RewardOptions::default(), Some(words())).unwrap();
        let e = s.score(&[REF, REF], &[Reference::Report(REF)]).unwrap_err();
        assert!(matches!(
            e,
            RewardError::LengthMismatch {
                expected: 2,
                got: 1,
                ..
            }
        ));
        let bad = Reference::Sections {
            findings: "Heart normal.",
            impression: "",
        };
        let e = s
            .score(&[REF, REF], &[Reference::Report(REF), bad])
            .unwrap_err();
        assert_eq!(e.to_string(), "reference 1: section `impression` is empty");
        assert!(RewardOptions::new("chamfre", 1.0, 1.0, false).is_err());
        assert!(RewardOptions::new("chamfer", 1.0, f64::NAN, false).is_err());
    }

    /// Completions of `n` distinct sentences each (two sections).
    fn long_completions(n: usize, k: usize) -> Vec<String> {
        (0..k)
            .map(|c| {
                let f: String = (0..n).map(|i| format!("Heart normal {c} {i}. ")).collect();
                format!("<think>{f}</think><answer>No acute disease {c}.</answer>")
            })
            .collect()
    }

    #[test]
    fn chunked_embedding_gives_the_same_rewards() {
        let comps = long_completions(7, 3);
        let comps: Vec<&str> = comps.iter().map(String::as_str).collect();
        let refs = vec![Reference::Report(REF); comps.len()];
        let whole = words();
        let s = Scorer::new(RewardOptions::default(), Some(whole.clone())).unwrap();
        let (a, sa) = s.score(&comps, &refs).unwrap();
        assert_eq!(whole.calls.load(Ordering::SeqCst), 1);
        let chunked = words();
        let t = Scorer::new(RewardOptions::default(), Some(chunked.clone())).unwrap();
        let (b, sb) = t.score_until(&comps, &refs, 4, &|| false).unwrap();
        assert_eq!(a, b);
        assert_eq!((sa.distinct, sa.embedded), (sb.distinct, sb.embedded));
        // 3 x 8 completion sentences + 3 of the reference, 4 per call.
        assert_eq!(sb.embedded, 27);
        assert_eq!(chunked.calls.load(Ordering::SeqCst), 7);
    }

    #[test]
    fn a_stopped_call_keeps_what_it_embedded() {
        let comps = long_completions(9, 2);
        let comps: Vec<&str> = comps.iter().map(String::as_str).collect();
        let refs = vec![Reference::Report(REF); comps.len()];
        let w = words();
        let s = Scorer::new(RewardOptions::default(), Some(w.clone())).unwrap();
        // Stop before the third chunk: two calls of 5 sentences were made.
        let e = s
            .score_until(&comps, &refs, 5, &|| w.calls.load(Ordering::SeqCst) >= 2)
            .unwrap_err();
        assert!(
            matches!(e, RewardError::Stopped { embedded: 10, .. }),
            "{e}"
        );
        assert!(!e.is_input_error());
        assert_eq!(w.texts.load(Ordering::SeqCst), 10);
        assert_eq!(s.cached_sentences(), 10);
        // A retry embeds only the rest, and scores as a fresh scorer does.
        let (r, stats) = s.score(&comps, &refs).unwrap();
        assert_eq!((stats.embedded, stats.cache_hits), (13, 10));
        let fresh = Scorer::new(RewardOptions::default(), Some(words())).unwrap();
        assert_eq!(r, fresh.score(&comps, &refs).unwrap().0);
        // Asked to stop at once: nothing is embedded.
        let u = Scorer::new(RewardOptions::default(), Some(words())).unwrap();
        let e = u.score_until(&comps, &refs, 5, &|| true).unwrap_err();
        assert!(matches!(e, RewardError::Stopped { embedded: 0, .. }), "{e}");
        assert_eq!(u.cached_sentences(), 0);
    }

    #[test]
    fn a_call_stopped_among_the_distances_keeps_every_vector() {
        let comps = long_completions(9, 2);
        let comps: Vec<&str> = comps.iter().map(String::as_str).collect();
        let refs = vec![Reference::Report(REF); comps.len()];
        let w = words();
        let s = Scorer::new(RewardOptions::default(), Some(w.clone())).unwrap();
        // Asked before the one chunk, after it, then before each sample's
        // distances: the fourth answer stops the call among the samples.
        let asked = AtomicUsize::new(0);
        let e = s
            .score_until(&comps, &refs, usize::MAX, &|| {
                asked.fetch_add(1, Ordering::SeqCst) >= 3
            })
            .unwrap_err();
        assert!(
            matches!(e, RewardError::Stopped { embedded: 23, .. }),
            "{e}"
        );
        assert!(asked.load(Ordering::SeqCst) >= 4);
        // Nothing to embed on a retry, and the rewards of a fresh scorer.
        let (r, stats) = s.score(&comps, &refs).unwrap();
        assert_eq!((stats.embedded, stats.cache_hits), (0, 23));
        let fresh = Scorer::new(RewardOptions::default(), Some(words())).unwrap();
        assert_eq!(r, fresh.score(&comps, &refs).unwrap().0);
    }

    #[test]
    fn serial_and_parallel_agree() {
        let s = Scorer::new(
            RewardOptions::new("ot", 1.0, 1.0, false).unwrap(),
            Some(words()),
        )
        .unwrap();
        let comps: Vec<String> = (0..20)
            .map(|k| {
                format!(
                    "<think>Heart normal. {}</think><answer>No acute {}.</answer>",
                    if k % 2 == 0 {
                        "No effusion."
                    } else {
                        "Lungs clear."
                    },
                    if k % 3 == 0 { "effusion" } else { "disease" }
                )
            })
            .collect();
        let comps: Vec<&str> = comps.iter().map(String::as_str).collect();
        let refs = vec![Reference::Report(REF); comps.len()];
        let (a, _) = s.score(&comps, &refs).unwrap();
        parallel::set_parallelism(false);
        let (b, _) = s.score(&comps, &refs).unwrap();
        parallel::set_parallelism(true);
        assert_eq!(a, b);
        assert!(a.iter().any(|r| r.reward < 3.0 - 1e-6));
    }
}
