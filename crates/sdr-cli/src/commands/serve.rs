//! `sdr serve`: an HTTP reward server for RL trainers (OpenRLHF's remote
//! reward protocol, a plain JSON batch endpoint, a health check).
//!
//! # Endpoints
//! - `POST <path>` (default `/get_reward`), OpenRLHF's protocol. Request
//!   `{"query": [...], "prompts": [...], "labels": [...]}`; reply
//!   `{"rewards": [...], "scores": [...], "extra_logs": {"format": [...],
//!   "findings": [...], "impression": [...]}}`. OpenRLHF's `query` is prompt +
//!   completion: when `query[i]` starts with `prompts[i]` that prefix is
//!   stripped, otherwise the whole query is parsed as the completion (so a
//!   prompt outside the template tags makes it malformed: reward 0). `prompts`
//!   may be omitted (whole queries are parsed). `labels` are the reference
//!   reports (template or `Findings:` / `Impression:` text).
//! - `POST /v1/rewards`: `{"completions": [...], "references": [...],
//!   "metric": "chamfer"?}`, references being report strings or
//!   `{"findings": "...", "impression": "..."}` objects; reply `{"metric":
//!   spec, "rewards": [...], "format": [...], "findings": [...],
//!   "impression": [...]}`.
//! - `GET /health`: `{"status": "ok", "metric": spec, "model": name|null,
//!   "batches", "requests", "samples", "cache": {...}}`; `cache` holds the
//!   sentence cache's entries, bytes, bound and evictions, and over all batches
//!   the distinct sentences needed, the cache hits among them, `hit_rate`, the
//!   sentences embedded and the encoder's seconds.
//!
//! # Sentence cache
//! One bounded cache (`--cache-mib`) serves every client and metric: each
//! sentence is embedded once and keeps its vector, so the same request sent
//! twice gets the same rewards, bit for bit, and the second needs no encoder
//! time. `--cache PATH` persists it across restarts.
//!
//! # Batching
//! OpenRLHF sends one sample per request, many requests at once. Requests
//! are queued to one batcher task, which takes the first waiting request,
//! then keeps collecting for at most `--max-wait-ms` or until `--max-batch`
//! samples, and scores the lot in one call (one encoder call over the
//! distinct sentences). Each request then gets its own slice of the results.
//!
//! # Limits
//! Body size (`--max-body-bytes`, 413), samples per request
//! (`--max-request-samples`, 413), concurrent requests in flight
//! (`--max-concurrency`, further ones wait), a per-request timeout
//! (`--timeout-ms`, 504), samples waiting to be scored (`--max-queued-samples`:
//! beyond it, 503 with `Retry-After: 1` at once, so overload is shed quickly and
//! memory stays bounded; clients should retry after the delay). Bad input is a 4xx with `{"error": "..."}`: malformed
//! JSON, length mismatches, a reference with an empty section (named by its
//! index in the request), an unknown metric. SIGINT / SIGTERM stop accepting
//! connections and let requests in flight finish.

mod api;
mod batcher;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use sdr_reward::{PersistentCache, RewardOptions, SentenceCache, SentenceEncoder};

use crate::common::log_line;

pub use api::{router, AppState};
pub use batcher::Limits;

#[derive(clap::Args, Debug, Clone)]
#[command(after_help = "OpenRLHF: --remote_rm_url http://HOST:PORT/get_reward \
(OpenRLHF 0.10.2+: --reward.remote_url). See `sdr serve --help` and the module docs \
for the request and reply formats.")]
pub struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port (0 picks a free one; the bound address is printed on stderr).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// Path of the OpenRLHF endpoint.
    #[arg(long, default_value = "/get_reward")]
    pub path: String,
    /// Metric spec of the reward (SPEC §3), e.g. chamfer, ot, sinkhorn:eps=0.1.
    #[arg(long, default_value = "chamfer")]
    pub metric: String,
    /// lambda_fmt.
    #[arg(long, default_value_t = 1.0)]
    pub format_weight: f64,
    /// lambda_sem.
    #[arg(long, default_value_t = 1.0)]
    pub semantic_weight: f64,
    /// Exact-match baseline R_exact instead of set distances (no model needed).
    #[arg(long)]
    pub exact: bool,
    /// lambda_clin (beyond the paper): adds lambda_clin x the CheXpert-14
    /// example F1 of rule-based labels between completion and reference,
    /// reported as `clinical`. 0 keeps the paper's reward.
    #[arg(long, default_value_t = 0.0)]
    pub clinical_weight: f64,
    /// Model folder (default: $SDR_MODEL, then ~/.cache/sdr/models/all-mpnet-base-v2).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Where the encoder runs: `cpu`, or `cuda` / `cuda:N` (a build made with
    /// `bash scripts/build-sdr.sh --cuda`; batches of 256 sentences).
    #[arg(long, default_value = "cpu", value_name = "DEVICE",
          value_parser = crate::common::encoder::parse_device)]
    pub device: sdr_embed::EncoderDevice,
    /// Numeric precision of the encoder. `bf16`: bfloat16 GEMMs (f32 activations) on
    /// CPUs with AVX-512 BF16 or AMX-BF16, about 2x faster there, cosine >= 0.999 to
    /// f32; f32 on other CPUs, with a notice on stderr; on a GPU, bf16 weights and
    /// activations. Part of the sentence cache's identity: a --cache file of the
    /// other precision is refused.
    #[arg(long, value_enum, default_value_t = crate::common::encoder::PrecisionArg::F32)]
    pub precision: crate::common::encoder::PrecisionArg,
    /// Memory bound of the sentence cache, in MiB. Every sentence the server
    /// embeds (completions and references, for every client and metric) is
    /// kept, least recently used evicted first; 0 turns caching off.
    #[arg(long, default_value_t = sdr_reward::DEFAULT_CACHE_MIB)]
    pub cache_mib: f64,
    /// Persist the sentence cache in this file: loaded at start (a file of
    /// another encoder or a damaged one is refused with a one-line message and
    /// the server starts empty; a file that is no sentence cache at all stops the
    /// server from starting, and is never overwritten), written atomically every
    /// --cache-save-secs after a batch and at shutdown.
    #[arg(long, value_name = "PATH")]
    pub cache: Option<PathBuf>,
    /// Seconds between saves of --cache.
    #[arg(long, default_value_t = 300.0)]
    pub cache_save_secs: f64,
    /// Largest micro-batch, in samples.
    #[arg(long, default_value_t = 256)]
    pub max_batch: usize,
    /// Longest wait for more requests before a micro-batch is scored.
    #[arg(long, default_value_t = 5)]
    pub max_wait_ms: u64,
    /// Largest request body.
    #[arg(long, default_value_t = 8 << 20)]
    pub max_body_bytes: usize,
    /// Most samples in one request.
    #[arg(long, default_value_t = 4096)]
    pub max_request_samples: usize,
    /// Most requests handled at once; further ones wait.
    #[arg(long, default_value_t = 1024)]
    pub max_concurrency: usize,
    /// Per-request timeout.
    #[arg(long, default_value_t = 120_000)]
    pub timeout_ms: u64,
    /// Most samples waiting to be scored; beyond it requests get 503 with
    /// `Retry-After: 1` at once instead of queueing (bounds memory and latency).
    #[arg(long, default_value_t = 65_536)]
    pub max_queued_samples: usize,
}

impl Args {
    /// Limits and options from the arguments (checked).
    pub fn limits(&self) -> Result<Limits> {
        anyhow::ensure!(self.max_batch >= 1, "--max-batch must be at least 1");
        anyhow::ensure!(
            self.max_request_samples >= 1,
            "--max-request-samples must be at least 1"
        );
        anyhow::ensure!(
            self.max_concurrency >= 1,
            "--max-concurrency must be at least 1"
        );
        anyhow::ensure!(self.timeout_ms >= 1, "--timeout-ms must be at least 1");
        anyhow::ensure!(
            self.max_queued_samples >= 1,
            "--max-queued-samples must be at least 1"
        );
        anyhow::ensure!(
            self.path.starts_with('/') && !matches!(self.path.as_str(), "/health" | "/v1/rewards"),
            "--path must start with / and differ from /health and /v1/rewards"
        );
        Ok(Limits {
            max_batch: self.max_batch,
            max_wait: Duration::from_millis(self.max_wait_ms),
            max_body_bytes: self.max_body_bytes,
            max_request_samples: self.max_request_samples,
            max_concurrency: self.max_concurrency,
            timeout: Duration::from_millis(self.timeout_ms),
            max_queued_samples: self.max_queued_samples,
        })
    }
}

pub fn run(args: Args) -> Result<()> {
    let limits = args.limits()?;
    let options = RewardOptions::new(
        &args.metric,
        args.format_weight,
        args.semantic_weight,
        args.exact,
    )
    .and_then(|o| o.with_clinical_weight(args.clinical_weight))
    .with_context(|| format!("--metric {} / weights", args.metric))?;
    anyhow::ensure!(
        args.cache_save_secs.is_finite() && args.cache_save_secs >= 0.0,
        "--cache-save-secs must be a finite number >= 0"
    );
    // Before the model loads: a file that is no sentence cache (a corpus, say) is
    // refused, never loaded as empty and overwritten at the first save.
    if let (Some(path), false) = (&args.cache, args.exact) {
        SentenceCache::check_path(path).map_err(|e| anyhow::anyhow!("--cache {e}"))?;
    }
    let embedder: Option<Arc<dyn SentenceEncoder>> = if args.exact {
        None
    } else {
        // The server's bounded sentence cache holds every sentence; the encoder keeps none.
        let opts = sdr_embed::EncoderOptions {
            cache: false,
            device: args.device,
            precision: args.precision.into(),
            batch_size: args.device.default_batch_size(),
            ..Default::default()
        };
        let enc = crate::common::encoder::load_model(args.model.as_deref(), opts, "sdr serve")
            .context("loading the encoder")?;
        Some(Arc::new(sdr_corpus::ModelEncoder(enc)))
    };
    let cache = match &embedder {
        Some(e) => Some(Arc::new(SentenceCache::with_mib(
            e.identity()?,
            e.dim(),
            args.cache_mib,
        )?)),
        None => None,
    };
    let persist = match (&args.cache, &cache) {
        (Some(path), Some(cache)) => {
            let interval = Duration::from_secs_f64(args.cache_save_secs);
            let (p, outcome) = PersistentCache::open(cache.clone(), path, interval);
            log_line(format_args!("sdr serve: {}", outcome.message(path)));
            Some(Arc::new(p))
        }
        (Some(_), None) => {
            log_line("sdr serve: --cache ignored: exact-match rewards embed nothing");
            None
        }
        _ => None,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(async move {
        let addrs = resolve_host(&args.host, args.port).await?;
        let listener = tokio::net::TcpListener::bind(addrs.as_slice())
            .await
            .with_context(|| format!("--host {} --port {}: cannot listen", args.host, args.port))?;
        let state = AppState::with_cache(options, embedder, limits, cache, persist)?;
        log_line(format_args!(
            "sdr serve: listening on http://{} (POST {}, POST /v1/rewards, GET /health; metric {})",
            listener.local_addr()?,
            args.path,
            options.config.metric
        ));
        let result = serve(listener, state.clone(), &args.path, shutdown_signal()).await;
        match state.save_cache() {
            Some(Ok(n)) if n > 0 => log_line(format_args!("sdr serve: saved {n} cached sentences")),
            Some(Err(e)) => log_line(format_args!(
                "sdr serve: could not save the sentence cache: {e}"
            )),
            _ => {}
        }
        result
    })
}

/// The addresses of `--host` (an IP address, `[v6]` too, or a name that resolves,
/// such as `localhost`) at `port`.
pub async fn resolve_host(host: &str, port: u16) -> Result<Vec<SocketAddr>> {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if let Ok(ip) = bare.parse::<std::net::IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let bad = || {
        anyhow::anyhow!(
            "--host {host}: not an IP address (such as 127.0.0.1 or ::1) nor a host name \
             that resolves"
        )
    };
    // A name with a port or a path would otherwise resolve to something unintended.
    if bare.is_empty() || bare.contains([':', '/', ' ']) {
        return Err(bad());
    }
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((bare, port))
        .await
        .map_err(|_| bad())?
        .collect();
    if addrs.is_empty() {
        return Err(bad());
    }
    Ok(addrs)
}

/// Serve until `shutdown` resolves, then finish the requests in flight.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    path: &str,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let app = router(state, path);
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
        .context("server failed")
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    log_line("sdr serve: shutting down (finishing requests in flight)");
}
