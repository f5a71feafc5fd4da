//! Dynamic micro-batching: requests queue to one task that scores them together.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sdr_core::reward::RewardBreakdown;
use sdr_reward::{BatchStats, Reference, RewardError, Scorer};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// Server limits (see the module docs of `serve`).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest micro-batch in samples (a larger single request is scored alone).
    pub max_batch: usize,
    /// Longest wait for more requests once one is waiting.
    pub max_wait: Duration,
    pub max_body_bytes: usize,
    pub max_request_samples: usize,
    /// Most sentences in one sample, completion and reference together, after
    /// segmentation (413 beyond): bounds the distance work of a sample.
    pub max_sentences_per_sample: usize,
    /// Most sentences in one request (413 beyond): bounds its encoder work.
    pub max_request_sentences: usize,
    /// New sentences per encoder call: between two calls the batcher checks
    /// that the batch's clients still wait, so that one that timed out or left
    /// holds the encoder for at most one chunk.
    pub encode_chunk: usize,
    pub max_concurrency: usize,
    pub timeout: Duration,
    /// Longest time for a request's headers to arrive, counted from the
    /// connection's opening or the end of its previous reply: beyond it the
    /// connection is closed (a stalled client, or an idle keep-alive connection).
    pub header_timeout: Duration,
    /// Most samples waiting to be scored; a request that would exceed it is
    /// refused with 503 and `Retry-After` at once (load shedding), so that
    /// overload shows as fast refusals rather than timeouts and memory stays bounded.
    pub max_queued_samples: usize,
    /// What a reference with an empty section gets (`--missing-section`): a
    /// 400, or its present section scored and the missing one counted.
    pub missing_section: sdr_reward::MissingSection,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_batch: 256,
            max_wait: Duration::from_millis(5),
            max_body_bytes: 8 << 20,
            max_request_samples: 4096,
            max_sentences_per_sample: 1024,
            max_request_sentences: 65_536,
            encode_chunk: sdr_reward::DEFAULT_ENCODE_CHUNK,
            max_concurrency: 1024,
            timeout: Duration::from_secs(120),
            header_timeout: Duration::from_secs(30),
            max_queued_samples: 65_536,
            missing_section: sdr_reward::MissingSection::Error,
        }
    }
}

/// A reference owned by a queued request.
pub use sdr_reward::OwnedReference;

/// Why a queued request failed: its own input (4xx) or the server (5xx).
#[derive(Debug, Clone)]
pub enum Failure {
    Input(String),
    Internal(String),
}

impl From<RewardError> for Failure {
    fn from(e: RewardError) -> Self {
        if e.is_input_error() {
            Failure::Input(e.to_string())
        } else {
            Failure::Internal(e.to_string())
        }
    }
}

pub type Reply = Result<Vec<RewardBreakdown>, Failure>;

/// One request's samples waiting for the batcher.
pub struct Job {
    pub scorer: Arc<Scorer>,
    pub completions: Vec<String>,
    pub references: Vec<OwnedReference>,
    pub reply: oneshot::Sender<Reply>,
}

/// Queue capacity; with `max_concurrency` requests in flight it never fills
/// unless that limit is larger.
const QUEUE: usize = 4096;

/// Counters reported by `/health`.
#[derive(Debug, Default)]
pub struct Counters {
    /// Micro-batches scored.
    pub batches: AtomicU64,
    /// Requests they held.
    pub requests: AtomicU64,
    /// Samples they held.
    pub samples: AtomicU64,
    /// Distinct sentences the batches needed (after deduplication within each).
    pub distinct: AtomicU64,
    /// Of those, found in the sentence cache.
    pub cache_hits: AtomicU64,
    /// Sentences sent to the encoder.
    pub embedded: AtomicU64,
    /// Encoder time, microseconds.
    pub encode_micros: AtomicU64,
}

impl Counters {
    fn add(&self, stats: &BatchStats) {
        self.distinct
            .fetch_add(stats.distinct as u64, Ordering::Relaxed);
        self.cache_hits
            .fetch_add(stats.cache_hits as u64, Ordering::Relaxed);
        self.add_encoded(stats.embedded, stats.encode_seconds);
    }

    fn add_encoded(&self, sentences: usize, seconds: f64) {
        self.embedded.fetch_add(sentences as u64, Ordering::Relaxed);
        self.encode_micros
            .fetch_add((seconds * 1e6) as u64, Ordering::Relaxed);
    }
}

/// Start the batcher task; requests go through the returned sender.
pub fn spawn(limits: Limits, counters: Arc<Counters>) -> mpsc::Sender<Job> {
    let (tx, rx) = mpsc::channel(QUEUE);
    tokio::spawn(run(rx, limits, counters));
    tx
}

async fn run(mut rx: mpsc::Receiver<Job>, limits: Limits, counters: Arc<Counters>) {
    let (max_batch, chunk) = (limits.max_batch, limits.encode_chunk);
    while let Some(first) = rx.recv().await {
        let mut samples = first.completions.len();
        let mut jobs = vec![first];
        // A wait too long for an Instant is no wait limit at all.
        let deadline = Instant::now().checked_add(limits.max_wait);
        while samples < max_batch {
            let next = match deadline {
                Some(d) => tokio::time::timeout_at(d, rx.recv()).await,
                None => Ok(rx.recv().await),
            };
            match next {
                Ok(Some(job)) => {
                    samples += job.completions.len();
                    jobs.push(job);
                }
                Ok(None) | Err(_) => break,
            }
        }
        counters.batches.fetch_add(1, Ordering::Relaxed);
        counters
            .requests
            .fetch_add(jobs.len() as u64, Ordering::Relaxed);
        counters
            .samples
            .fetch_add(samples as u64, Ordering::Relaxed);
        // Scoring is CPU-bound: off the async workers. The next batch
        // collects in the channel meanwhile.
        let c = counters.clone();
        let _ = tokio::task::spawn_blocking(move || score_jobs(jobs, chunk, &c)).await;
    }
}

/// Score jobs, one scorer call per distinct scorer, and answer each; new
/// sentences are embedded `chunk` at a time (see [`Limits::encode_chunk`]).
pub fn score_jobs(jobs: Vec<Job>, chunk: usize, counters: &Counters) {
    let mut pending = jobs;
    while let Some(first) = pending.first() {
        let scorer = first.scorer.clone();
        let (group, rest): (Vec<Job>, Vec<Job>) = pending
            .into_iter()
            .partition(|j| Arc::ptr_eq(&j.scorer, &scorer));
        pending = rest;
        score_group(&scorer, group, chunk, counters);
    }
}

/// A request whose client timed out or disconnected: its handler, and with it
/// the receiver, is gone.
fn abandoned(job: &Job) -> bool {
    job.reply.is_closed()
}

fn score_group(scorer: &Scorer, mut group: Vec<Job>, chunk: usize, counters: &Counters) {
    let result = loop {
        group.retain(|j| !abandoned(j));
        if group.is_empty() {
            return;
        }
        let completions: Vec<&str> = group
            .iter()
            .flat_map(|j| j.completions.iter().map(String::as_str))
            .collect();
        let references: Vec<Reference<'_>> = group
            .iter()
            .flat_map(|j| j.references.iter().map(OwnedReference::as_reference))
            .collect();
        let stop = || group.iter().any(abandoned);
        match scorer.score_until(&completions, &references, chunk, &stop) {
            Err(RewardError::Stopped {
                embedded,
                encode_seconds,
            }) => {
                // A client left mid-batch: score the others again without it;
                // what was embedded is cached, so only its own work is lost.
                counters.add_encoded(embedded, encode_seconds);
            }
            other => break other,
        }
    };
    match result {
        Ok((scores, stats)) => {
            counters.add(&stats);
            let mut it = scores.into_iter();
            for job in group {
                let mine: Vec<RewardBreakdown> = it.by_ref().take(job.completions.len()).collect();
                let _ = job.reply.send(Ok(mine));
            }
        }
        Err(_) if group.len() > 1 => {
            // Find whose input it was: score each request alone, so errors
            // carry indices within that request.
            for job in group {
                let reply = score_one(scorer, &job, chunk, counters);
                let _ = job.reply.send(reply);
            }
        }
        Err(e) => {
            let job = group.into_iter().next().expect("group is non-empty");
            let _ = job.reply.send(Err(e.into()));
        }
    }
}

fn score_one(scorer: &Scorer, job: &Job, chunk: usize, counters: &Counters) -> Reply {
    let c: Vec<&str> = job.completions.iter().map(String::as_str).collect();
    let r: Vec<Reference<'_>> = job
        .references
        .iter()
        .map(OwnedReference::as_reference)
        .collect();
    match scorer.score_until(&c, &r, chunk, &|| abandoned(job)) {
        Ok((scores, stats)) => {
            counters.add(&stats);
            Ok(scores)
        }
        Err(e) => {
            if let RewardError::Stopped {
                embedded,
                encode_seconds,
            } = e
            {
                counters.add_encoded(embedded, encode_seconds);
            }
            Err(e.into())
        }
    }
}
