//! The one embedding stage: the sentences of many reports' sections in,
//! embedded sets out (SPEC §2).
//!
//! Every consumer of sentence embeddings (the reward and `sdr serve`, both
//! explain paths, best-of-K selection, pruning's partial scores, the corpus
//! build, [`crate::Encoder::embed_matrix`]) goes through
//! [`SectionEmbedder`], which does, once:
//!
//! 1. deduplication by normalised text ([`crate::normalise`]): a sentence
//!    repeated within or across reports is embedded once;
//! 2. sentence-cache lookups ([`SentenceCache`], keyed by [`text_key`]) and,
//!    for the rest, one encoder call per chunk of `chunk` new sentences, in
//!    order of first appearance, asking the caller's `stop` before each chunk
//!    and once after the last (a server gives a departed client's batch up);
//! 3. one shape check per encoder call (`texts x dim` values) and one row
//!    check per new vector ([`sdr_core::cost::row_fault`]: finite, non-zero),
//!    before anything of the call is cached, so a vector no cosine can use
//!    is never served from the cache later;
//! 4. cache writes as soon as a chunk is checked, so the next batch, a later
//!    occurrence or a retry after a stop reuses these exact bits;
//! 5. views: set `(report, section)` as a [`SentenceSet`], its rows
//!    contiguous (a [`SetView<f32>`]), next to its sentence texts and a
//!    per-sentence annotation that the caller computes once per distinct
//!    sentence from its text ([`SectionEmbedder::embed_annotated`]).
//!
//! A caller that compares sets by something other than the cosine of their
//! vectors (a clinically aware cost reading the annotations) implements
//! `sdr_core::SentenceCost`, which the registry opens by name
//! (`sdr_clinical::costs`).

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use sdr_core::cost::{row_fault, PairCost};
use sdr_core::report::Section;
use sdr_core::SetView;

use crate::cache::{normalise, text_key, SentenceCache, TextKey};
use crate::error::{EmbedError, Result};
use crate::sentence_encoder::SentenceEncoder;

/// Its path of 0.1 (`sdr_embed::sections::fault_text`).
pub use crate::error::fault_text;

/// How an embedding call is run: its chunk size, and the caller's stop flag
/// and progress callback.
#[derive(Clone, Copy)]
pub struct EmbedControl<'c> {
    /// New sentences per encoder call; `usize::MAX` is one call.
    pub chunk: usize,
    /// Asked before each encoder call and once after the last; `true` gives
    /// the call up with [`EmbedError::Stopped`].
    pub stop: Option<&'c (dyn Fn() -> bool + Sync)>,
    /// Told the number of new sentences each encoder call embedded.
    pub progress: Option<&'c (dyn Fn(usize) + Sync)>,
}

impl Default for EmbedControl<'_> {
    fn default() -> Self {
        EmbedControl {
            chunk: usize::MAX,
            stop: None,
            progress: None,
        }
    }
}

impl<'c> EmbedControl<'c> {
    /// One encoder call per `chunk` new sentences.
    pub fn chunked(chunk: usize) -> Self {
        EmbedControl {
            chunk,
            ..Self::default()
        }
    }

    fn stopped(&self) -> bool {
        self.stop.is_some_and(|s| s())
    }
}

/// Counters of one embedding call.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct EmbedStats {
    /// Sentence occurrences that needed a vector.
    pub sentences: usize,
    /// Distinct sentences among them (by normalised text).
    pub distinct: usize,
    /// Distinct sentences sent to the encoder.
    pub embedded: usize,
    /// Distinct sentences found in the sentence cache.
    pub cache_hits: usize,
    /// Seconds spent in the encoder.
    pub encode_seconds: f64,
}

/// The sentences of many reports' sections: the input of
/// [`SectionEmbedder::embed`]. Report `r`'s sections are sets
/// `(r, Findings)` and `(r, Impression)`; a section may be empty (a
/// malformed candidate, a partial output without that section yet).
#[derive(Debug, Clone, Default)]
pub struct SectionBatch<'t> {
    /// Per report, its two sections' sentences.
    reports: Vec<[Vec<&'t str>; 2]>,
    distinct_sentences: bool,
}

impl<'t> SectionBatch<'t> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Keep only the first occurrence of each sentence within a set (true set
    /// semantics; SPEC §2 keeps repeats by default).
    pub fn distinct_sentences(mut self, distinct: bool) -> Self {
        self.distinct_sentences = distinct;
        self
    }

    /// Adds a report's Findings and Impression sentences; returns its index.
    pub fn push<S: AsRef<str>>(&mut self, findings: &'t [S], impression: &'t [S]) -> usize {
        let take = |s: &'t [S]| s.iter().map(AsRef::as_ref).collect();
        self.reports.push([take(findings), take(impression)]);
        self.reports.len() - 1
    }

    /// Adds a report with no sentence in either section (a malformed one).
    pub fn push_empty(&mut self) -> usize {
        self.reports.push([Vec::new(), Vec::new()]);
        self.reports.len() - 1
    }

    /// Reports added so far.
    pub fn len(&self) -> usize {
        self.reports.len()
    }

    pub fn is_empty(&self) -> bool {
        self.reports.is_empty()
    }
}

/// One embedded set: its rows (contiguous, one per sentence, in order), the
/// sentences' texts and their annotations.
#[derive(Debug, Clone, Copy)]
pub struct SentenceSet<'s, A = ()> {
    /// `n x dim` rows, unit-norm as the encoder gave them.
    pub vectors: SetView<'s, f32>,
    /// The sentences, as the caller gave them.
    pub texts: &'s [&'s str],
    /// Per sentence, the index of its distinct sentence in the batch.
    slots: &'s [u32],
    notes: &'s [A],
}

impl<'s, A> SentenceSet<'s, A> {
    /// Number of sentences.
    pub fn len(&self) -> usize {
        self.texts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.texts.is_empty()
    }

    /// The annotation of sentence `i` (computed once per distinct sentence).
    pub fn note(&self, i: usize) -> &'s A {
        &self.notes[self.slots[i] as usize]
    }

    /// The annotations of the sentences, in order.
    pub fn notes(&self) -> impl ExactSizeIterator<Item = &'s A> + '_ {
        self.slots.iter().map(|&s| &self.notes[s as usize])
    }
}

/// The cost matrices of a pair of embedded sets (cross costs, plus the two
/// intra-set matrices when `with_intra`, for GW). [`Cosine`] is SPEC §3's.
#[deprecated(
    since = "0.2.0",
    note = "nothing reads a SetCost: implement sdr_core::SentenceCost (opened by name through \
            sdr_clinical::register_cost) or call PairCost::between; removed in 0.3.0"
)]
pub trait SetCost<A = ()>: Send + Sync {
    fn pair_cost(
        &self,
        a: &SentenceSet<'_, A>,
        b: &SentenceSet<'_, A>,
        with_intra: bool,
    ) -> sdr_core::Result<PairCost<'static>>;
}

/// `(1 - cos) / 2` of the vectors (SPEC §3).
#[deprecated(
    since = "0.2.0",
    note = "use PairCost::between(&a.vectors, &b.vectors, with_intra); removed in 0.3.0"
)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Cosine;

#[allow(deprecated)]
impl<A> SetCost<A> for Cosine {
    fn pair_cost(
        &self,
        a: &SentenceSet<'_, A>,
        b: &SentenceSet<'_, A>,
        with_intra: bool,
    ) -> sdr_core::Result<PairCost<'static>> {
        PairCost::between(&a.vectors, &b.vectors, with_intra)
    }
}

/// The sets of a [`SectionBatch`], embedded: views `(report, section)`.
#[derive(Debug, Clone)]
pub struct EmbeddedSets<'t, A = ()> {
    dim: usize,
    /// Every set's rows, gathered in set order.
    rows: Vec<f32>,
    texts: Vec<&'t str>,
    slots: Vec<u32>,
    /// Per set (`2 * report + section`), its range in `texts`, `slots`, rows.
    bounds: Vec<usize>,
    /// Per distinct sentence, its annotation.
    notes: Vec<A>,
    /// Distinct sentence by key, for [`EmbeddedSets::vector_of`].
    index: HashMap<TextKey, u32>,
    /// Per distinct sentence, its first row in `rows`.
    first_row: Vec<usize>,
    stats: EmbedStats,
}

impl<'t, A> EmbeddedSets<'t, A> {
    fn set(&self, report: usize, section: Section) -> std::ops::Range<usize> {
        let k = 2 * report + usize::from(section == Section::Impression);
        self.bounds[k]..self.bounds[k + 1]
    }

    /// Reports in the batch.
    pub fn reports(&self) -> usize {
        self.bounds.len().saturating_sub(1) / 2
    }

    /// Embedding dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The rows of `(report, section)`.
    pub fn view(&self, report: usize, section: Section) -> SetView<'_, f32> {
        let r = self.set(report, section);
        SetView::new(&self.rows[r.start * self.dim..r.end * self.dim], self.dim)
    }

    /// The set `(report, section)`: rows, texts and annotations.
    pub fn set_of(&self, report: usize, section: Section) -> SentenceSet<'_, A> {
        let r = self.set(report, section);
        SentenceSet {
            vectors: self.view(report, section),
            texts: &self.texts[r.clone()],
            slots: &self.slots[r],
            notes: &self.notes,
        }
    }

    /// The vector of a sentence of the batch, looked up by its text (any
    /// spacing); `None` for a sentence the batch does not hold.
    pub fn vector_of(&self, text: &str) -> Option<&[f32]> {
        let slot = *self.index.get(&text_key(text))? as usize;
        let row = self.first_row[slot];
        Some(&self.rows[row * self.dim..(row + 1) * self.dim])
    }

    /// Counters of the call that made these sets.
    pub fn stats(&self) -> &EmbedStats {
        &self.stats
    }
}

/// Where a distinct sentence's vector comes from.
enum Slot {
    Cached(Arc<[f32]>),
    /// Row of the call's new vectors.
    Fresh(usize),
}

/// The distinct sentences of a call.
struct Distinct<'t> {
    index: HashMap<TextKey, u32>,
    slots: Vec<Slot>,
    /// Normalised sentences to embed, in order of first appearance, with their keys.
    fresh: Vec<(TextKey, Cow<'t, str>)>,
    stats: EmbedStats,
}

impl<'t> Distinct<'t> {
    fn new() -> Self {
        Distinct {
            index: HashMap::new(),
            slots: Vec::new(),
            fresh: Vec::new(),
            stats: EmbedStats::default(),
        }
    }

    /// The slot of `text`, looked up in `cache` on its first appearance.
    fn slot_of(&mut self, text: &'t str, cache: &SentenceCache) -> u32 {
        self.stats.sentences += 1;
        let key = text_key(text);
        if let Some(&k) = self.index.get(&key) {
            return k;
        }
        let slot = match cache.get(&key) {
            Some(v) if v.len() == cache.dim() => {
                self.stats.cache_hits += 1;
                Slot::Cached(v)
            }
            _ => {
                self.fresh.push((key, normalise(text)));
                Slot::Fresh(self.fresh.len() - 1)
            }
        };
        self.slots.push(slot);
        let k = (self.slots.len() - 1) as u32;
        self.index.insert(key, k);
        k
    }
}

/// The encoder and its sentence cache: the one path from sentences to vectors.
///
/// Cheap to clone (two `Arc`s, or a borrow and an `Arc`).
#[derive(Clone)]
pub struct SectionEmbedder<'e> {
    encoder: EncoderRef<'e>,
    cache: Arc<SentenceCache>,
}

#[derive(Clone)]
enum EncoderRef<'e> {
    Shared(Arc<dyn SentenceEncoder>),
    Borrowed(&'e dyn SentenceEncoder),
}

impl std::fmt::Debug for SectionEmbedder<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SectionEmbedder")
            .field("encoder", &self.encoder().name())
            .field("cache", &self.cache)
            .finish()
    }
}

/// Refuses a cache whose vectors come from another encoder or dimension.
fn check_cache(encoder: &dyn SentenceEncoder, cache: &SentenceCache) -> Result<()> {
    check_keyed(encoder, cache, &encoder.identity()?)
}

/// Refuses a cache not keyed by `identity`, or of another dimension than `encoder`'s.
fn check_keyed(encoder: &dyn SentenceEncoder, cache: &SentenceCache, identity: &str) -> Result<()> {
    if cache.identity() != identity || cache.dim() != encoder.dim() {
        return Err(EmbedError::CacheMismatch {
            cache: format!("{} (dim {})", cache.identity(), cache.dim()),
            encoder: format!("{identity} (dim {})", encoder.dim()),
        });
    }
    Ok(())
}

impl SectionEmbedder<'static> {
    /// `encoder` with `cache` (which must be of its identity and dimension:
    /// [`SentenceCache::for_encoder`] makes one).
    ///
    /// # Errors
    /// [`EmbedError::CacheMismatch`] for a cache of another encoder.
    pub fn new(encoder: Arc<dyn SentenceEncoder>, cache: Arc<SentenceCache>) -> Result<Self> {
        check_cache(encoder.as_ref(), &cache)?;
        Ok(SectionEmbedder {
            encoder: EncoderRef::Shared(encoder),
            cache,
        })
    }

    /// `encoder` with an unbounded cache of its own (a command's lifetime).
    pub fn unbounded(encoder: Arc<dyn SentenceEncoder>) -> Result<Self> {
        Self::with_own_cache(encoder, None)
    }

    /// `encoder` with a cache of its own bounded at `mib` MiB (the unit of
    /// `--cache-mib` and `cache_mib=`), for a caller that does not share the cache.
    ///
    /// # Errors
    /// A bound that is not a finite number >= 0; the encoder's identity error.
    pub fn bounded(encoder: Arc<dyn SentenceEncoder>, mib: f64) -> Result<Self> {
        Self::with_own_cache(encoder, Some(mib))
    }

    fn with_own_cache(encoder: Arc<dyn SentenceEncoder>, mib: Option<f64>) -> Result<Self> {
        let cache = Arc::new(SentenceCache::for_encoder(encoder.as_ref(), mib)?);
        Self::new(encoder, cache)
    }
}

impl<'e> SectionEmbedder<'e> {
    /// A borrowed `encoder` with an unbounded cache of its own, for one call
    /// (nothing outside sees its cache, so it needs no identity check).
    pub fn transient(encoder: &'e dyn SentenceEncoder) -> Self {
        let cache =
            SentenceCache::unbounded(format!("transient:{}", encoder.name()), encoder.dim());
        SectionEmbedder {
            encoder: EncoderRef::Borrowed(encoder),
            cache: Arc::new(cache),
        }
    }

    /// A borrowed `encoder` with `cache`.
    ///
    /// # Errors
    /// [`EmbedError::CacheMismatch`] for a cache of another encoder.
    pub fn borrowing(encoder: &'e dyn SentenceEncoder, cache: Arc<SentenceCache>) -> Result<Self> {
        check_cache(encoder, &cache)?;
        Ok(SectionEmbedder {
            encoder: EncoderRef::Borrowed(encoder),
            cache,
        })
    }

    /// A borrowed `encoder` with `cache`, which is keyed by `identity` rather than
    /// by the encoder's [`SentenceEncoder::identity`]: [`crate::Encoder`]'s own cache,
    /// keyed by its cache key ([`crate::EncoderIdentity::cache_key`]).
    ///
    /// # Errors
    /// [`EmbedError::CacheMismatch`] for a cache of another key or dimension.
    pub(crate) fn keyed(
        encoder: &'e dyn SentenceEncoder,
        cache: Arc<SentenceCache>,
        identity: &str,
    ) -> Result<Self> {
        check_keyed(encoder, &cache, identity)?;
        Ok(SectionEmbedder {
            encoder: EncoderRef::Borrowed(encoder),
            cache,
        })
    }

    /// The encoder.
    pub fn encoder(&self) -> &dyn SentenceEncoder {
        match &self.encoder {
            EncoderRef::Shared(e) => e.as_ref(),
            EncoderRef::Borrowed(e) => *e,
        }
    }

    /// The sentence cache.
    pub fn cache(&self) -> &Arc<SentenceCache> {
        &self.cache
    }

    /// Embedding dimension.
    pub fn dim(&self) -> usize {
        self.encoder().dim()
    }

    /// Vectors of `texts` as one `texts.len() x dim` matrix, in input order.
    pub fn embed_texts<S: AsRef<str>>(
        &self,
        texts: &[S],
        control: &EmbedControl<'_>,
    ) -> Result<(Vec<f32>, EmbedStats)> {
        let mut distinct = Distinct::new();
        let slots: Vec<u32> = texts
            .iter()
            .map(|t| distinct.slot_of(t.as_ref(), &self.cache))
            .collect();
        let (sources, fresh, stats) = self.run(distinct, control)?;
        let dim = self.dim();
        let mut out = Vec::with_capacity(texts.len() * dim);
        for &s in &slots {
            out.extend_from_slice(row(&sources, &fresh, s, dim));
        }
        Ok((out, stats))
    }

    /// The sets of `batch`, embedded.
    pub fn embed<'t>(
        &self,
        batch: &SectionBatch<'t>,
        control: &EmbedControl<'_>,
    ) -> Result<EmbeddedSets<'t>> {
        self.embed_annotated(batch, |_| (), control)
    }

    /// [`SectionEmbedder::embed`] with `annotate(text)` computed once per
    /// distinct sentence of the batch, readable next to each set's rows
    /// ([`SentenceSet::note`]).
    pub fn embed_annotated<'t, A>(
        &self,
        batch: &SectionBatch<'t>,
        annotate: impl Fn(&str) -> A,
        control: &EmbedControl<'_>,
    ) -> Result<EmbeddedSets<'t, A>> {
        let mut distinct = Distinct::new();
        let mut texts = Vec::new();
        let mut slots: Vec<u32> = Vec::new();
        let mut bounds = vec![0usize];
        for report in &batch.reports {
            for section in report {
                let start = slots.len();
                for &t in section {
                    let s = distinct.slot_of(t, &self.cache);
                    if batch.distinct_sentences && slots[start..].contains(&s) {
                        continue;
                    }
                    slots.push(s);
                    texts.push(t);
                }
                bounds.push(slots.len());
            }
        }
        let index = std::mem::take(&mut distinct.index);
        let (sources, fresh, stats) = self.run(distinct, control)?;
        let dim = self.dim();
        // Texts of the distinct sentences, for their annotations.
        let mut first_row = vec![usize::MAX; sources.len()];
        let mut rows = Vec::with_capacity(slots.len() * dim);
        for (r, &s) in slots.iter().enumerate() {
            if first_row[s as usize] == usize::MAX {
                first_row[s as usize] = r;
            }
            rows.extend_from_slice(row(&sources, &fresh, s, dim));
        }
        let notes = first_row.iter().map(|&r| annotate(texts[r])).collect();
        Ok(EmbeddedSets {
            dim,
            rows,
            texts,
            slots,
            bounds,
            notes,
            index,
            first_row,
            stats,
        })
    }

    /// Embeds the new sentences of `distinct` chunk by chunk, checking and
    /// caching each chunk; returns the slots, the new vectors and the counters.
    fn run(
        &self,
        distinct: Distinct<'_>,
        control: &EmbedControl<'_>,
    ) -> Result<(Vec<Slot>, Vec<f32>, EmbedStats)> {
        let Distinct {
            slots,
            fresh,
            mut stats,
            ..
        } = distinct;
        let encoder = self.encoder();
        let dim = encoder.dim();
        stats.distinct = slots.len();
        stats.embedded = fresh.len();
        let chunk = control.chunk.max(1);
        let mut vectors: Vec<f32> = Vec::with_capacity(fresh.len() * dim);
        let stopped = |embedded: usize, encode_seconds: f64| EmbedError::Stopped {
            embedded,
            encode_seconds,
        };
        for (k, part) in fresh.chunks(chunk).enumerate() {
            if control.stopped() {
                return Err(stopped(k * chunk, stats.encode_seconds));
            }
            let texts: Vec<&str> = part.iter().map(|(_, t)| t.as_ref()).collect();
            let t0 = Instant::now();
            let data = encoder.embed(&texts)?;
            stats.encode_seconds += t0.elapsed().as_secs_f64();
            if data.len() != part.len() * dim {
                return Err(EmbedError::EncoderShape {
                    encoder: encoder.name(),
                    texts: part.len(),
                    dim,
                    got: data.len(),
                });
            }
            for (v, (_, text)) in data.chunks_exact(dim).zip(part) {
                if let Some(fault) = row_fault(v) {
                    return Err(EmbedError::EncoderRow {
                        encoder: encoder.name(),
                        text: text.to_string(),
                        fault,
                    });
                }
            }
            for (v, (key, _)) in data.chunks_exact(dim).zip(part) {
                self.cache.insert(*key, v.into());
            }
            vectors.extend_from_slice(&data);
            if let Some(progress) = control.progress {
                progress(part.len());
            }
        }
        if control.stopped() {
            return Err(stopped(fresh.len(), stats.encode_seconds));
        }
        Ok((slots, vectors, stats))
    }
}

fn row<'a>(slots: &'a [Slot], fresh: &'a [f32], slot: u32, dim: usize) -> &'a [f32] {
    match &slots[slot as usize] {
        Slot::Cached(v) => v,
        Slot::Fresh(j) => &fresh[j * dim..(j + 1) * dim],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// One axis per known word plus a constant; counts calls and texts.
    struct Words {
        calls: AtomicUsize,
        texts: AtomicUsize,
    }

    const VOCAB: [&str; 5] = ["heart", "normal", "lungs", "clear", "effusion"];

    impl SentenceEncoder for Words {
        fn name(&self) -> String {
            "words".into()
        }
        fn weights_sha256(&self) -> Result<String> {
            Ok("none".into())
        }
        fn dim(&self) -> usize {
            VOCAB.len() + 1
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<f32>> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            self.texts.fetch_add(texts.len(), Ordering::SeqCst);
            let mut out = Vec::new();
            for t in texts {
                let mut v = vec![0f32; self.dim()];
                v[VOCAB.len()] = if t.contains("Zero") { 0.0 } else { 0.1 };
                for w in t.to_lowercase().split(|c: char| !c.is_alphanumeric()) {
                    if let Some(k) = VOCAB.iter().position(|x| *x == w) {
                        v[k] += 1.0;
                    }
                }
                out.extend(v);
            }
            Ok(out)
        }
    }

    fn embedder() -> (Arc<Words>, SectionEmbedder<'static>) {
        let w = Arc::new(Words {
            calls: AtomicUsize::new(0),
            texts: AtomicUsize::new(0),
        });
        let e = SectionEmbedder::unbounded(w.clone()).unwrap();
        (w, e)
    }

    #[test]
    fn sets_hold_every_occurrence_and_each_distinct_sentence_is_embedded_once() {
        let (w, e) = embedder();
        let a = ["Heart normal.", "Lungs clear."];
        let b = ["Lungs   clear.", "Heart normal."];
        let c = ["Effusion."];
        let mut batch = SectionBatch::new();
        batch.push(&a[..], &c[..]);
        batch.push_empty();
        batch.push(&b[..], &b[..]);
        let sets = e.embed(&batch, &EmbedControl::default()).unwrap();
        let s = sets.stats();
        assert_eq!((s.sentences, s.distinct, s.embedded), (7, 3, 3));
        assert_eq!(w.calls.load(Ordering::SeqCst), 1);
        assert_eq!(sets.reports(), 3);
        assert_eq!(sets.view(0, Section::Findings).n, 2);
        assert_eq!(sets.view(1, Section::Impression).n, 0);
        // Spacing does not make another sentence: same rows, swapped.
        let (x, y) = (
            sets.view(0, Section::Findings),
            sets.view(2, Section::Impression),
        );
        assert_eq!(x.row(0), y.row(1));
        assert_eq!(x.row(1), y.row(0));
        assert_eq!(sets.set_of(2, Section::Findings).texts, b);
        assert_eq!(sets.vector_of("Lungs clear."), Some(x.row(1)));
        assert_eq!(sets.vector_of("Pneumothorax."), None);
        // A second call finds everything in the cache.
        let again = e.embed(&batch, &EmbedControl::default()).unwrap();
        assert_eq!((again.stats().embedded, again.stats().cache_hits), (0, 3));
        assert_eq!(
            again.view(2, Section::Findings).data,
            sets.view(2, Section::Findings).data
        );
        // embed_texts agrees, in input order.
        let (m, _) = e
            .embed_texts(&["Effusion.", "Heart normal."], &EmbedControl::default())
            .unwrap();
        assert_eq!(&m[..6], sets.view(0, Section::Impression).data);
        assert_eq!(&m[6..], x.row(0));
    }

    #[test]
    fn annotations_are_computed_once_per_distinct_sentence() {
        let (_, e) = embedder();
        let f = ["Heart normal.", "Heart  normal.", "Effusion."];
        let mut batch = SectionBatch::new();
        batch.push(&f[..], &f[..2]);
        let calls = AtomicUsize::new(0);
        let sets = e
            .embed_annotated(
                &batch,
                |t| {
                    calls.fetch_add(1, Ordering::SeqCst);
                    t.contains("Effusion")
                },
                &EmbedControl::default(),
            )
            .unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        let s = sets.set_of(0, Section::Findings);
        assert_eq!(s.notes().copied().collect::<Vec<_>>(), [false, false, true]);
        assert!(*s.note(2));
        // A cost built from two views: the cosine one is PairCost::between's.
        let t = sets.set_of(0, Section::Impression);
        #[allow(deprecated)]
        let c = Cosine.pair_cost(&s, &t, true).unwrap();
        let d = PairCost::between(&s.vectors, &t.vectors, true).unwrap();
        assert_eq!(c.cross.data(), d.cross.data());
        assert!(c.intra.is_some());
    }

    #[test]
    fn distinct_sentences_keep_first_occurrences_within_a_set() {
        let (_, e) = embedder();
        let f = ["Heart normal.", "Effusion.", "Heart  normal."];
        let mut batch = SectionBatch::new().distinct_sentences(true);
        batch.push(&f[..], &f[..1]);
        let sets = e.embed(&batch, &EmbedControl::default()).unwrap();
        assert_eq!(sets.set_of(0, Section::Findings).texts, &f[..2]);
        assert_eq!(sets.view(0, Section::Impression).n, 1);
    }

    #[test]
    fn chunks_stop_and_keep_what_they_embedded() {
        let (w, e) = embedder();
        let texts: Vec<String> = (0..10).map(|i| format!("Heart {i}.")).collect();
        let stop = || w.calls.load(Ordering::SeqCst) >= 2;
        let seen = AtomicUsize::new(0);
        let progress = |n: usize| {
            seen.fetch_add(n, Ordering::SeqCst);
        };
        let control = EmbedControl {
            chunk: 3,
            stop: Some(&stop),
            progress: Some(&progress),
        };
        let err = e.embed_texts(&texts, &control).unwrap_err();
        assert!(
            matches!(err, EmbedError::Stopped { embedded: 6, .. }),
            "{err}"
        );
        assert_eq!(seen.load(Ordering::SeqCst), 6);
        assert_eq!(e.cache().stats().entries, 6);
        let (_, stats) = e.embed_texts(&texts, &EmbedControl::chunked(3)).unwrap();
        assert_eq!((stats.embedded, stats.cache_hits), (4, 6));
    }

    #[test]
    fn bad_vectors_and_shapes_are_refused_before_caching() {
        let (_, e) = embedder();
        let err = e
            .embed_texts(&["Heart.", "Zero."], &EmbedControl::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("\"Zero.\"") && err.contains("the zero vector"),
            "{err}"
        );
        assert_eq!(e.cache().stats().entries, 0);

        struct Short;
        impl SentenceEncoder for Short {
            fn name(&self) -> String {
                "short".into()
            }
            fn weights_sha256(&self) -> Result<String> {
                Ok("none".into())
            }
            fn dim(&self) -> usize {
                3
            }
            fn embed(&self, texts: &[&str]) -> Result<Vec<f32>> {
                Ok(vec![1.0; texts.len() * 3 - 1])
            }
        }
        let e = SectionEmbedder::unbounded(Arc::new(Short)).unwrap();
        let err = e
            .embed_texts(&["a", "b"], &EmbedControl::default())
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "encoder short returned 5 values for 2 sentences of dimension 3"
        );
    }

    #[test]
    fn a_cache_of_another_encoder_is_refused() {
        let (w, _) = embedder();
        let other = Arc::new(SentenceCache::new("other@none", w.dim(), 1 << 20));
        let err = SectionEmbedder::new(w, other).unwrap_err();
        assert!(matches!(err, EmbedError::CacheMismatch { .. }), "{err}");
    }
}
