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
    pub max_concurrency: usize,
    pub timeout: Duration,
    /// Most samples waiting to be scored; a request that would exceed it is
    /// refused with 503 and `Retry-After` at once (load shedding), so that
    /// overload shows as fast refusals rather than timeouts and memory stays bounded.
    pub max_queued_samples: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_batch: 256,
            max_wait: Duration::from_millis(5),
            max_body_bytes: 8 << 20,
            max_request_samples: 4096,
            max_concurrency: 1024,
            timeout: Duration::from_secs(120),
            max_queued_samples: 65_536,
        }
    }
}

/// A reference owned by a queued request.
#[derive(Debug, Clone)]
pub enum OwnedReference {
    Report(String),
    Sections {
        findings: String,
        impression: String,
    },
}

impl OwnedReference {
    pub fn as_reference(&self) -> Reference<'_> {
        match self {
            OwnedReference::Report(t) => Reference::Report(t),
            OwnedReference::Sections {
                findings,
                impression,
            } => Reference::Sections {
                findings,
                impression,
            },
        }
    }
}

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
        self.embedded
            .fetch_add(stats.embedded as u64, Ordering::Relaxed);
        self.encode_micros
            .fetch_add((stats.encode_seconds * 1e6) as u64, Ordering::Relaxed);
    }
}

/// Start the batcher task; requests go through the returned sender.
pub fn spawn(limits: Limits, counters: Arc<Counters>) -> mpsc::Sender<Job> {
    let (tx, rx) = mpsc::channel(QUEUE);
    tokio::spawn(run(rx, limits.max_batch, limits.max_wait, counters));
    tx
}

async fn run(
    mut rx: mpsc::Receiver<Job>,
    max_batch: usize,
    max_wait: Duration,
    counters: Arc<Counters>,
) {
    while let Some(first) = rx.recv().await {
        let mut samples = first.completions.len();
        let mut jobs = vec![first];
        let deadline = Instant::now() + max_wait;
        while samples < max_batch {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
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
        let _ = tokio::task::spawn_blocking(move || score_jobs(jobs, &c)).await;
    }
}

/// Score jobs, one scorer call per distinct scorer, and answer each.
pub fn score_jobs(jobs: Vec<Job>, counters: &Counters) {
    // Clients that timed out have dropped their receiver: skip their work.
    let mut pending: Vec<Job> = jobs.into_iter().filter(|j| !j.reply.is_closed()).collect();
    while let Some(first) = pending.first() {
        let scorer = first.scorer.clone();
        let (group, rest): (Vec<Job>, Vec<Job>) = pending
            .into_iter()
            .partition(|j| Arc::ptr_eq(&j.scorer, &scorer));
        pending = rest;
        score_group(&scorer, group, counters);
    }
}

fn score_group(scorer: &Scorer, group: Vec<Job>, counters: &Counters) {
    let completions: Vec<&str> = group
        .iter()
        .flat_map(|j| j.completions.iter().map(String::as_str))
        .collect();
    let references: Vec<Reference<'_>> = group
        .iter()
        .flat_map(|j| j.references.iter().map(OwnedReference::as_reference))
        .collect();
    match scorer.score(&completions, &references) {
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
                let reply = score_one(scorer, &job);
                let _ = job.reply.send(reply);
            }
        }
        Err(e) => {
            let job = group.into_iter().next().expect("group is non-empty");
            let _ = job.reply.send(Err(e.into()));
        }
    }
}

fn score_one(scorer: &Scorer, job: &Job) -> Reply {
    let c: Vec<&str> = job.completions.iter().map(String::as_str).collect();
    let r: Vec<Reference<'_>> = job
        .references
        .iter()
        .map(OwnedReference::as_reference)
        .collect();
    scorer.score(&c, &r).map(|(s, _)| s).map_err(Failure::from)
}
