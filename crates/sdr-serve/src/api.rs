//! HTTP handlers, request and reply shapes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use sdr_core::report::parse_template;
use sdr_core::reward::RewardBreakdown;
use sdr_embed::{SentenceCache, SentenceEncoder};
use sdr_reward::{completion_of, parse_reference, PersistentCache, RewardOptions, Scorer};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::{mpsc, oneshot, Semaphore, SemaphorePermit};
use tokio::time::Instant;

use crate::batcher::{self, Counters, Failure, Job, Limits, OwnedReference};
use sdr_reward::{json_completion_text as completion_text, Gaps};

/// Most distinct metrics `/v1/rewards` keeps a scorer for.
const MAX_METRICS: usize = 32;

/// Shared server state (cheap to clone).
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

struct Inner {
    options: RewardOptions,
    default: Arc<Scorer>,
    embedder: Option<Arc<dyn SentenceEncoder>>,
    /// One sentence cache for every scorer (metric) and every client.
    cache: Option<Arc<SentenceCache>>,
    persist: Option<Arc<PersistentCache>>,
    model: Option<String>,
    scorers: Mutex<HashMap<String, Arc<Scorer>>>,
    tx: mpsc::Sender<Job>,
    limits: Limits,
    counters: Arc<Counters>,
    /// Samples accepted and not yet answered.
    queued: AtomicUsize,
    /// Reference sections found missing and scored as 0 (`--missing-section score`).
    missing_sections: AtomicUsize,
    /// `--max-concurrency`: one permit per reward request being handled,
    /// taken once its body is read (a client still uploading holds none).
    slots: Semaphore,
}

/// Releases a request's share of the queue bound when it is answered or dropped.
struct QueueSlot<'a> {
    queued: &'a AtomicUsize,
    n: usize,
}

impl Drop for QueueSlot<'_> {
    fn drop(&mut self) {
        self.queued.fetch_sub(self.n, Ordering::SeqCst);
    }
}

impl AppState {
    /// The limits the server was built with.
    pub fn limits(&self) -> Limits {
        self.inner.limits
    }

    /// Build the state with a sentence cache of the default size, not persisted,
    /// and start the batcher; call inside a Tokio runtime.
    pub fn new(
        options: RewardOptions,
        embedder: Option<Arc<dyn SentenceEncoder>>,
        limits: Limits,
    ) -> sdr_reward::Result<AppState> {
        let cache = match &embedder {
            Some(e) => {
                Some(sdr_reward::open_cache(e.as_ref(), sdr_reward::DEFAULT_CACHE_MIB, None)?.0)
            }
            None => None,
        };
        Self::with_cache(options, embedder, limits, cache, None)
    }

    /// Build the state around `cache` (shared by every scorer), saved through
    /// `persist` after batches at its interval, and start the batcher.
    pub fn with_cache(
        options: RewardOptions,
        embedder: Option<Arc<dyn SentenceEncoder>>,
        limits: Limits,
        cache: Option<Arc<SentenceCache>>,
        persist: Option<Arc<PersistentCache>>,
    ) -> sdr_reward::Result<AppState> {
        let mut default = Scorer::with_cache(options, embedder.clone(), cache.clone())?;
        if let Some(p) = &persist {
            default = default.with_persistence(p.clone());
        }
        let default = Arc::new(default);
        let counters = Arc::new(Counters::default());
        Ok(AppState {
            inner: Arc::new(Inner {
                options,
                default,
                model: embedder.as_ref().map(|e| e.name()),
                embedder,
                cache,
                persist,
                scorers: Mutex::new(HashMap::new()),
                tx: batcher::spawn(limits, counters.clone()),
                limits,
                counters,
                queued: AtomicUsize::new(0),
                missing_sections: AtomicUsize::new(0),
                // Semaphore::new panics beyond MAX_PERMITS (`Args::limits` refuses it).
                slots: Semaphore::new(limits.max_concurrency.min(Semaphore::MAX_PERMITS)),
            }),
        })
    }

    fn scorer_for(&self, metric: Option<&str>) -> Result<Arc<Scorer>, ApiError> {
        let Some(spec) = metric else {
            return Ok(self.inner.default.clone());
        };
        let o = &self.inner.options;
        let options = RewardOptions::new(
            spec,
            o.config.format_weight,
            o.config.semantic_weight,
            o.exact,
        )
        .and_then(|n| n.with_clinical_weight(o.clinical_weight))
        .map(|n| n.with_cost(o.cost))
        .map_err(|e| ApiError::bad(format!("metric: {e}")))?;
        let key = options.config.metric.to_string();
        // Exact match (--exact) has no metric: the spec is checked, not used.
        if options == *o || o.exact {
            return Ok(self.inner.default.clone());
        }
        let mut map = self.inner.scorers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = map.get(&key) {
            return Ok(s.clone());
        }
        if map.len() >= MAX_METRICS {
            return Err(ApiError::bad(format!(
                "metric {key}: this server already serves {MAX_METRICS} other metrics"
            )));
        }
        let mut s = Scorer::with_cache(
            options,
            self.inner.embedder.clone(),
            self.inner.cache.clone(),
        )
        .map_err(|e| ApiError::internal(e.to_string()))?;
        if let Some(p) = &self.inner.persist {
            s = s.with_persistence(p.clone());
        }
        let s = Arc::new(s);
        map.insert(key, s.clone());
        Ok(s)
    }

    /// The body of a reward request, read by `deadline` (408 beyond; a
    /// declared Content-Length over `--max-body-bytes` is a 413 before any of
    /// it is read), then a `--max-concurrency` slot, waited for until
    /// `deadline` (504 beyond). A client that stalls mid-upload thus holds no
    /// slot, and the connection only until `deadline`. After a 408 or 413 here
    /// the rest of the body is not read: the connection is closed.
    async fn receive(
        &self,
        req: Request,
        deadline: Instant,
    ) -> Result<(Bytes, SemaphorePermit<'_>), ApiError> {
        let limits = &self.inner.limits;
        let too_large_body = || {
            too_large(format!(
                "request body too large: the limit is {} bytes (--max-body-bytes)",
                limits.max_body_bytes
            ))
        };
        // hyper has checked the header (a malformed one is a 400 before this).
        let declared = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > limits.max_body_bytes as u64) {
            return Err(too_large_body());
        }
        // Bytes applies DefaultBodyLimit (413) to bodies sent without a length.
        let body = match tokio::time::timeout_at(deadline, Bytes::from_request(req, &())).await {
            Err(_) => {
                return Err(ApiError(
                    StatusCode::REQUEST_TIMEOUT,
                    format!(
                        "request body not received within {} ms (--timeout-ms)",
                        limits.timeout.as_millis()
                    ),
                ))
            }
            Ok(Err(r)) if r.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                return Err(too_large_body())
            }
            Ok(Err(r)) => return Err(ApiError(r.status(), r.body_text())),
            Ok(Ok(body)) => body,
        };
        let slot = tokio::time::timeout_at(deadline, self.inner.slots.acquire())
            .await
            .map_err(|_| {
                ApiError(
                    StatusCode::GATEWAY_TIMEOUT,
                    format!(
                        "not started within {} ms (--timeout-ms): {} requests in progress \
                         (--max-concurrency)",
                        limits.timeout.as_millis(),
                        limits.max_concurrency
                    ),
                )
            })?
            .map_err(|_| ApiError::internal("the concurrency limit is closed"))?;
        Ok((body, slot))
    }

    /// Check the references, queue the samples, wait for the scores until
    /// `deadline`.
    async fn submit(
        &self,
        scorer: Arc<Scorer>,
        completions: Vec<String>,
        references: Vec<OwnedReference>,
        deadline: Instant,
    ) -> Result<Vec<RewardBreakdown>, ApiError> {
        let limits = &self.inner.limits;
        // More than the queue holds would get 503 forever: it is too large.
        let (most, option) = if limits.max_request_samples <= limits.max_queued_samples {
            (limits.max_request_samples, "--max-request-samples")
        } else {
            (limits.max_queued_samples, "--max-queued-samples")
        };
        if completions.len() > most {
            return Err(too_large(format!(
                "{} samples in one request; the limit is {most} ({option})",
                completions.len(),
            )));
        }
        // Input errors are found here, with indices within this request, so
        // that a batch never fails because of another client's request. The
        // work grows with sentences, not bytes: they are bounded here too.
        let mut total = 0usize;
        for (i, (c, r)) in completions.iter().zip(&references).enumerate() {
            let reference =
                parse_reference(&r.as_reference(), i).map_err(|e| ApiError::bad(e.to_string()))?;
            let reference = reference.findings.len() + reference.impression.len();
            // A malformed completion scores 0 and is never embedded.
            let g = parse_template(c);
            let completion = if g.format_valid {
                g.findings.len() + g.impression.len()
            } else {
                0
            };
            let n = completion + reference;
            if n > limits.max_sentences_per_sample {
                return Err(too_large(format!(
                    "sample {i} has {n} sentences (completion {completion}, reference \
                     {reference}); the limit is {} per sample (--max-sentences-per-sample)",
                    limits.max_sentences_per_sample
                )));
            }
            total += n;
            if total > limits.max_request_sentences {
                return Err(too_large(format!(
                    "samples 0 to {i} have {total} sentences; the limit is {} per request \
                     (--max-request-sentences): send fewer samples per request",
                    limits.max_request_sentences
                )));
            }
        }
        if completions.is_empty() {
            return Ok(Vec::new());
        }
        let n = completions.len();
        let before = self.inner.queued.fetch_add(n, Ordering::SeqCst);
        let _slot = QueueSlot {
            queued: &self.inner.queued,
            n,
        };
        if before + n > limits.max_queued_samples {
            return Err(ApiError::unavailable(format!(
                "overloaded: {before} samples already waiting (--max-queued-samples {}); retry later",
                limits.max_queued_samples
            )));
        }
        let (reply, rx) = oneshot::channel();
        let job = Job {
            scorer,
            completions,
            references,
            reply,
        };
        let wait = async {
            self.inner
                .tx
                .send(job)
                .await
                .map_err(|_| ApiError::unavailable("the scoring queue is closed"))?;
            rx.await
                .map_err(|_| ApiError::internal("the scoring task dropped the request"))
        };
        match tokio::time::timeout_at(deadline, wait).await {
            Err(_) => Err(ApiError(
                StatusCode::GATEWAY_TIMEOUT,
                format!(
                    "not scored within {} ms (--timeout-ms)",
                    limits.timeout.as_millis()
                ),
            )),
            Ok(Err(e)) => Err(e),
            Ok(Ok(Err(Failure::Input(m)))) => Err(ApiError::bad(m)),
            Ok(Ok(Err(Failure::Internal(m)))) => Err(ApiError::internal(m)),
            Ok(Ok(Ok(scores))) => Ok(scores),
        }
    }
}

impl AppState {
    /// The references as `--missing-section` scores them ([`sdr_reward::missing`]).
    fn fill_missing(&self, references: Vec<OwnedReference>) -> (Vec<OwnedReference>, Gaps) {
        self.inner.limits.missing_section.fill(references)
    }

    /// The missing sections' terms set to 0 ([`Gaps::apply`]); the per-sample
    /// counts for the reply, and the total for `/health`.
    fn apply_missing(
        &self,
        scorer: &Scorer,
        scores: &mut [RewardBreakdown],
        gaps: Gaps,
    ) -> Option<Vec<u8>> {
        let counts = gaps.apply(scores, scorer.options())?;
        let total: usize = counts.iter().map(|&c| usize::from(c)).sum();
        self.inner
            .missing_sections
            .fetch_add(total, Ordering::Relaxed);
        Some(counts)
    }
}

/// A 413 reply.
fn too_large(m: String) -> ApiError {
    ApiError(StatusCode::PAYLOAD_TOO_LARGE, m)
}

/// A failed request: status and message, sent as `{"error": message}`.
#[derive(Debug)]
pub struct ApiError(pub StatusCode, pub String);

impl ApiError {
    fn bad(m: impl Into<String>) -> Self {
        ApiError(StatusCode::BAD_REQUEST, m.into())
    }
    fn internal(m: impl Into<String>) -> Self {
        ApiError(StatusCode::INTERNAL_SERVER_ERROR, m.into())
    }
    fn unavailable(m: impl Into<String>) -> Self {
        ApiError(StatusCode::SERVICE_UNAVAILABLE, m.into())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Json(json!({ "error": self.1 }));
        if self.0 == StatusCode::REQUEST_TIMEOUT {
            // The rest of the body may still come: the connection is done.
            return (self.0, [(header::CONNECTION, "close")], body).into_response();
        }
        if self.0 == StatusCode::SERVICE_UNAVAILABLE {
            // Shed load: tell well-behaved clients when to come back.
            return (self.0, [(axum::http::header::RETRY_AFTER, "1")], body).into_response();
        }
        (self.0, body).into_response()
    }
}

/// The body as JSON of type `T`, or a 400 naming the problem; `shape` is the
/// object expected, for the message.
fn read_json<T: for<'de> Deserialize<'de>>(body: &[u8], shape: &str) -> Result<T, ApiError> {
    let value: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad(format!("invalid JSON body: {e}")))?;
    // serde would describe any other shape in its own terms ("struct X with 3 elements").
    if !value.is_object() {
        return Err(ApiError::bad(format!(
            "the body must be a JSON object {shape}, not {}",
            json_kind(&value)
        )));
    }
    serde_json::from_value(value)
        .map_err(|e| ApiError::bad(format!("invalid request: {e}; expected {shape}")))
}

/// "an array", "a string", ... for messages.
fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

const OPENRLHF_SHAPE: &str = r#"{"query": [...], "prompts": [...], "labels": [...]}"#;
const BATCH_SHAPE: &str = r#"{"completions": [...], "references": [...], "metric": "..."}"#;

/// OpenRLHF's remote reward request.
#[derive(Deserialize)]
struct OpenRlhfRequest {
    query: Vec<String>,
    #[serde(default)]
    prompts: Option<Vec<String>>,
    labels: Vec<String>,
}

#[derive(Serialize)]
struct ExtraLogs {
    format: Vec<f64>,
    findings: Vec<f64>,
    impression: Vec<f64>,
    /// Only with `--clinical-weight` > 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    clinical: Option<Vec<f64>>,
    /// Per sample, sections scored with an unconverged solver's last iterate.
    unconverged: Vec<u8>,
    /// Per sample, sections whose distance was not finite (term 0; SPEC §4).
    failed: Vec<u8>,
    /// Per sample, the reference's missing sections (0-2), scored as 0; only
    /// with `--missing-section score`.
    #[serde(skip_serializing_if = "Option::is_none")]
    missing_sections: Option<Vec<u8>>,
}

impl ExtraLogs {
    /// The components of `scores` (the clinical ones when `scorer`'s clinical
    /// term is on), and the missing sections' counts when counted.
    fn of(scorer: &Scorer, scores: &[RewardBreakdown], missing_sections: Option<Vec<u8>>) -> Self {
        ExtraLogs {
            format: scores.iter().map(|r| r.format).collect(),
            findings: scores.iter().map(|r| r.findings).collect(),
            impression: scores.iter().map(|r| r.impression).collect(),
            clinical: (scorer.options().clinical_weight > 0.0)
                .then(|| scores.iter().map(|r| r.clinical).collect()),
            unconverged: scores.iter().map(|r| r.unconverged).collect(),
            failed: scores.iter().map(|r| r.failed).collect(),
            missing_sections,
        }
    }
}

#[derive(Serialize)]
struct OpenRlhfReply {
    rewards: Vec<f64>,
    scores: Vec<f64>,
    extra_logs: ExtraLogs,
}

fn check_len(what: &str, got: usize, expected: usize) -> Result<(), ApiError> {
    if got != expected {
        return Err(ApiError::bad(format!(
            "{what} has {got} items but query/completions has {expected}"
        )));
    }
    Ok(())
}

async fn openrlhf(State(s): State<AppState>, req: Request) -> Response {
    // --timeout-ms counts from the headers: reading the body included.
    let deadline = Instant::now() + s.inner.limits.timeout;
    let run = async {
        let (body, _slot) = s.receive(req, deadline).await?;
        let req: OpenRlhfRequest = read_json(&body, OPENRLHF_SHAPE)?;
        let n = req.query.len();
        check_len("labels", req.labels.len(), n)?;
        if let Some(p) = &req.prompts {
            check_len("prompts", p.len(), n)?;
        }
        let completions: Vec<String> = req
            .query
            .iter()
            .enumerate()
            .map(|(i, q)| {
                let p = req.prompts.as_ref().map(|p| p[i].as_str());
                completion_of(q, p).to_string()
            })
            .collect();
        let references = req.labels.into_iter().map(OwnedReference::Report).collect();
        let (references, missing) = s.fill_missing(references);
        let mut scores = s
            .submit(s.inner.default.clone(), completions, references, deadline)
            .await?;
        let missing_sections = s.apply_missing(&s.inner.default, &mut scores, missing);
        let rewards: Vec<f64> = scores.iter().map(|r| r.reward).collect();
        Ok::<_, ApiError>(Json(OpenRlhfReply {
            scores: rewards.clone(),
            rewards,
            extra_logs: ExtraLogs::of(&s.inner.default, &scores, missing_sections),
        }))
    };
    run.await.into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchRequest {
    /// Read by [`completion_text`]: strings, chat messages, or parsed
    /// messages with their reasoning apart.
    completions: Vec<serde_json::Value>,
    /// Read by [`reference_in`], whose messages name the index and the field
    /// (serde's untagged enums only say that no variant matched).
    references: Vec<serde_json::Value>,
    #[serde(default)]
    metric: Option<String>,
}

/// A reference of `/v1/rewards`: a report string, or an object with its two
/// sections and no other key (a misspelt one would otherwise go unnoticed).
fn reference_in(i: usize, v: serde_json::Value) -> Result<OwnedReference, ApiError> {
    const SHAPE: &str = r#"a report string or {"findings": "...", "impression": "..."}"#;
    let section = |o: &serde_json::Map<String, serde_json::Value>, key: &str| match o.get(key) {
        Some(serde_json::Value::String(t)) => Ok(t.clone()),
        Some(other) => Err(ApiError::bad(format!(
            "references[{i}].{key} must be a string, not {}",
            json_kind(other)
        ))),
        None => Err(ApiError::bad(format!(
            "references[{i}] has no \"{key}\" (a reference is {SHAPE})"
        ))),
    };
    match v {
        serde_json::Value::String(t) => Ok(OwnedReference::Report(t)),
        serde_json::Value::Object(o) if o.keys().any(|k| k != "findings" && k != "impression") => {
            let k = o.keys().find(|k| *k != "findings" && *k != "impression");
            Err(ApiError::bad(format!(
                "references[{i}] has an unknown key {:?} (a reference is {SHAPE})",
                k.map(String::as_str).unwrap_or_default()
            )))
        }
        serde_json::Value::Object(o) => Ok(OwnedReference::Sections {
            findings: section(&o, "findings")?,
            impression: section(&o, "impression")?,
        }),
        other => Err(ApiError::bad(format!(
            "references[{i}] must be {SHAPE}, not {}",
            json_kind(&other)
        ))),
    }
}

/// The components as OpenRLHF's `extra_logs` has them, beside the rewards.
#[derive(Serialize)]
struct BatchReply {
    metric: String,
    rewards: Vec<f64>,
    #[serde(flatten)]
    components: ExtraLogs,
}

async fn batch(State(s): State<AppState>, req: Request) -> Response {
    let deadline = Instant::now() + s.inner.limits.timeout;
    let run = async {
        let (body, _slot) = s.receive(req, deadline).await?;
        let req: BatchRequest = read_json(&body, BATCH_SHAPE)?;
        check_len("references", req.references.len(), req.completions.len())?;
        let scorer = s.scorer_for(req.metric.as_deref())?;
        let metric = if scorer.options().exact {
            "exact".to_string()
        } else {
            scorer.options().config.metric.to_string()
        };
        let references = req
            .references
            .into_iter()
            .enumerate()
            .map(|(i, r)| reference_in(i, r))
            .collect::<Result<Vec<_>, _>>()?;
        let completions = req
            .completions
            .iter()
            .enumerate()
            .map(|(i, c)| {
                completion_text(c).map_err(|e| ApiError::bad(format!("completions[{i}]: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let (references, missing) = s.fill_missing(references);
        let mut scores = s
            .submit(scorer.clone(), completions, references, deadline)
            .await?;
        let missing_sections = s.apply_missing(&scorer, &mut scores, missing);
        Ok::<_, ApiError>(Json(BatchReply {
            metric,
            rewards: scores.iter().map(|r| r.reward).collect(),
            components: ExtraLogs::of(&scorer, &scores, missing_sections),
        }))
    };
    run.await.into_response()
}

async fn health(State(s): State<AppState>) -> Response {
    let o = &s.inner.options;
    let c = &s.inner.counters;
    Json(json!({
        "status": "ok",
        "metric": o.config.metric.to_string(),
        "exact": o.exact,
        "format_weight": o.config.format_weight,
        "semantic_weight": o.config.semantic_weight,
        "clinical_weight": o.clinical_weight,
        "cost": o.cost.to_string(),
        "model": s.inner.model,
        "batches": c.batches.load(Ordering::Relaxed),
        "requests": c.requests.load(Ordering::Relaxed),
        "samples": c.samples.load(Ordering::Relaxed),
        "missing_section": s.inner.limits.missing_section.name(),
        "missing_sections": s.inner.missing_sections.load(Ordering::Relaxed),
        "cache": cache_health(&s),
    }))
    .into_response()
}

/// The sentence cache in `/health`: its counters, and what the batches needed
/// of it (distinct sentences, hits, sentences embedded, encoder seconds).
fn cache_health(s: &AppState) -> serde_json::Value {
    let Some(cache) = &s.inner.cache else {
        return serde_json::Value::Null;
    };
    let c = &s.inner.counters;
    let st = cache.stats();
    let distinct = c.distinct.load(Ordering::Relaxed);
    let hits = c.cache_hits.load(Ordering::Relaxed);
    json!({
        "identity": cache.identity(),
        "entries": st.entries,
        "bytes": st.bytes,
        "max_bytes": st.max_bytes,
        "evictions": st.evictions,
        "distinct": distinct,
        "hits": hits,
        "hit_rate": if distinct == 0 { serde_json::Value::Null } else { json!(hits as f64 / distinct as f64) },
        "embedded": c.embedded.load(Ordering::Relaxed),
        "encode_seconds": c.encode_micros.load(Ordering::Relaxed) as f64 / 1e6,
        "path": s.inner.persist.as_ref().map(|p| p.path().display().to_string()),
        "writable": s.inner.persist.as_ref().map(|p| p.is_writable()),
    })
}

impl AppState {
    /// Save the sentence cache now (when persisted and changed); for shutdown.
    pub fn save_cache(&self) -> Option<Result<usize, sdr_embed::EmbedError>> {
        self.inner.persist.as_ref().map(|p| p.save())
    }
}

async fn not_found() -> Response {
    ApiError(
        StatusCode::NOT_FOUND,
        "no such endpoint (POST the OpenRLHF path, POST /v1/rewards, GET /health)".into(),
    )
    .into_response()
}

async fn method_not_allowed() -> Response {
    ApiError(
        StatusCode::METHOD_NOT_ALLOWED,
        "method not allowed (POST the OpenRLHF path and /v1/rewards, GET /health)".into(),
    )
    .into_response()
}

/// The routes with their limits; `path` is the OpenRLHF endpoint. The two
/// reward routes share `--max-concurrency` (`AppState::receive`); `/health`
/// is not counted.
pub fn router(state: AppState, path: &str) -> Router {
    let limits = state.inner.limits;
    Router::new()
        .route(path, post(openrlhf))
        .route("/v1/rewards", post(batch))
        .route("/health", get(health))
        // After the routes: it applies to those already added.
        .method_not_allowed_fallback(method_not_allowed)
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(limits.max_body_bytes))
        .with_state(state)
}
