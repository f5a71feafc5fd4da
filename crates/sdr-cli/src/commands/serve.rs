//! `sdr serve`: the reward server's arguments. The server itself (endpoints,
//! batching, limits, the sentence cache) is the `sdr-serve` crate, whose docs
//! `--help` restates for users.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use sdr_embed::{SentenceCache, SentenceEncoder};
use sdr_reward::RewardOptions;

use crate::common::log_line;

pub use sdr_serve::{router, shutdown_signal, AppState, Limits, MissingSection};

/// `sdr serve -h`: where the rest is.
const AFTER_HELP: &str = "OpenRLHF 0.11: --reward.remote_url http://HOST:PORT/get_reward \
--data.label_key solution, with sdr serve --missing-section score. The reward, the request and \
reply formats and the error replies: sdr serve --help.";

/// `sdr serve --help`: what a client needs besides the options.
const AFTER_LONG_HELP: &str = r#"OpenRLHF 0.11: --reward.remote_url http://HOST:PORT/get_reward --data.label_key solution, with
sdr serve --missing-section score (OpenRLHF trains on with reward None for a sample whose request
failed). verl 0.9: reward_kwargs serve_url: http://HOST:PORT (sdr/verl.py): every reward worker
of the machine shares this server's encoder.

Reward of a completion against its reference (SPEC §4):
  R = λ_fmt·R_fmt + λ_sem·(R_F + R_I)   (+ λ_clin·F1 with --clinical-weight > 0)
  R_fmt      1 when the completion follows <think>FINDINGS</think><answer>IMPRESSION</answer>,
             else 0, and then R = 0
  R_F, R_I   1 - min(D, 1), D the --metric distance between the sentence sets of the completion's
             and the reference's Findings (Impression); with --exact, exact match instead
  λ_fmt, λ_sem, λ_clin are --format-weight, --semantic-weight, --clinical-weight; the defaults
  (1, 1, 0) give R in [0, 3].

Requests (JSON bodies):
  POST /get_reward (--path), OpenRLHF's remote reward protocol:
    {"query": [string], "prompts": [string], "labels": [string]}
    query[i] is prompt + completion: when it starts with prompts[i], the rest is the completion;
    else what follows the longest end of prompts[i] (16 bytes at least) found in it (OpenRLHF cuts
    long prompts from the left); else the whole query ("prompts" may be left out); end-of-sequence tokens at its end
    (<|im_end|>, <|eot_id|>, </s>, <end_of_turn>, ...) and a BOS token that only the query
    starts with are not the completion's. labels[i] is the reference report,
    in the template or with "Findings:" / "Impression:" headers.
    Reply: {"rewards": [R], "scores": [R], "extra_logs": {"format": [R_fmt], "findings": [R_F],
    "impression": [R_I], "unconverged": [n], "failed": [n]}}, one number per sample, and
    "clinical": [F1] with --clinical-weight > 0. unconverged / failed count the sections (0-2)
    whose solver stopped before converging (its last iterate is used) / whose distance was not
    finite (their term is 0).
  POST /v1/rewards, a plain batch:
    {"completions": [completion], "references": [reference], "metric": "ot"}
    a completion is a string, a chat message {"role": "assistant", "content": ...} or an array
    of messages (the last assistant one is scored); a message whose reasoning a parser took
    apart ("reasoning_content", "reasoning" or "thinking", as TRL hands rewards) is scored as
    <think>reasoning</think>content; another shape is a 400 naming it.
    a reference is a report string (as labels above) or {"findings": string, "impression":
    string}; "metric" may be left out (--metric; the weights are the server's); no other key.
    Reply: {"metric": spec, "rewards": [R], "format": [R_fmt], "findings": [R_F],
    "impression": [R_I], "unconverged": [n], "failed": [n]}, and "clinical" as above.
  With --missing-section score, both replies add "missing_sections": [n], the reference's
  sections (0-2) that were empty and scored as 0 (R = λ_fmt·R_fmt + λ_sem·R_present).
  GET /health: {"status": "ok", "metric", "exact", "format_weight", "semantic_weight",
    "clinical_weight", "cost", "model", "batches", "requests", "samples", "missing_section",
    "missing_sections", "cache": {"entries", "bytes",
    "max_bytes", "evictions", "distinct", "hits", "hit_rate", "embedded", "encode_seconds",
    "path", "writable"}}  (writable: false when the file is another encoder's, which is
    never overwritten, or when the last save failed)

Errors are {"error": "message"} with the status:
  400  not JSON, a missing or mistyped field, an unknown field in /v1/rewards (/get_reward
       ignores keys other than its three: OpenRLHF versions add their own), lists of different
       lengths, a completion of an unreadable shape, a reference with an empty section (unless
       --missing-section score) or a broken template (named by its index),
       an unknown metric
  404  no such path
  405  wrong method (POST the two reward paths, GET /health)
  408  the body did not arrive within --timeout-ms (counted from the headers)
       (headers not complete within --header-timeout-ms: the connection is closed, no reply)
  413  over --max-body-bytes (a larger Content-Length at once, before the body),
       --max-request-samples (--max-queued-samples if lower),
       --max-sentences-per-sample (naming the sample) or --max-request-sentences
  500  the encoder failed
  503  over --max-queued-samples, with Retry-After: 1 (retry after 1 s)
  504  not scored within --timeout-ms (waiting for a --max-concurrency slot included); the
       rest of its encoder work is given up"#;

#[derive(clap::Args, Debug, Clone)]
#[command(after_help = AFTER_HELP, after_long_help = AFTER_LONG_HELP)]
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
    /// λ_fmt, the weight of the format term in R = λ_fmt·R_fmt + λ_sem·(R_F + R_I).
    ///
    /// R_fmt is 1 when the completion follows the template, else 0 (see below).
    #[arg(
        allow_negative_numbers = true,
        long,
        default_value_t = 1.0,
        value_name = "WEIGHT"
    )]
    pub format_weight: f64,
    /// λ_sem, the weight of the two section terms R_F + R_I (each 1 - min(D, 1)).
    #[arg(
        allow_negative_numbers = true,
        long,
        default_value_t = 1.0,
        value_name = "WEIGHT"
    )]
    pub semantic_weight: f64,
    /// Exact-match baseline R_exact instead of set distances (no model needed;
    /// --metric and --cost, which it does not use, are refused with it).
    #[arg(long, conflicts_with_all = ["metric", "cost"])]
    pub exact: bool,
    /// λ_clin (beyond the paper): adds λ_clin × the CheXpert-14 example F1 of
    /// rule-based labels between completion and reference, reported as
    /// `clinical`. 0 keeps the paper's reward.
    #[arg(
        allow_negative_numbers = true,
        long,
        default_value_t = 0.0,
        value_name = "WEIGHT"
    )]
    pub clinical_weight: f64,
    /// The sentence cost of the section distances: `cosine` (the paper's, bit for
    /// bit) or, beyond the paper, `clinical` (`clinical:lambda=L` for another
    /// strength): the cosine cost plus a penalty on sentences whose findings the
    /// other section contradicts (present/absent, left/right, size) or lacks
    /// (SPEC §10). Every metric a request names uses it.
    #[arg(long, default_value = "cosine", value_name = "COST",
          value_parser = crate::common::parse_cost)]
    pub cost: sdr_core::cost::CostKind,
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
    #[arg(allow_negative_numbers = true, long, default_value_t = sdr_reward::DEFAULT_CACHE_MIB, value_name = "MIB")]
    pub cache_mib: f64,
    /// Persist the sentence cache in this file: loaded at start (a file of
    /// another encoder or a damaged one is refused with a one-line message and
    /// the server starts empty; a file that is no sentence cache at all stops the
    /// server from starting, and is never overwritten), written atomically every
    /// --cache-save-secs after a batch and at shutdown.
    #[arg(long, value_name = "PATH")]
    pub cache: Option<PathBuf>,
    /// Seconds between saves of --cache.
    #[arg(
        allow_negative_numbers = true,
        long,
        default_value_t = 300.0,
        value_name = "SECONDS"
    )]
    pub cache_save_secs: f64,
    /// Largest micro-batch, in samples.
    #[arg(
        allow_negative_numbers = true,
        long,
        default_value_t = 256,
        value_name = "SAMPLES"
    )]
    pub max_batch: usize,
    /// Longest wait for more requests before a micro-batch is scored, in
    /// milliseconds; below --timeout-ms.
    #[arg(
        allow_negative_numbers = true,
        long,
        default_value_t = 5,
        value_name = "MS"
    )]
    pub max_wait_ms: u64,
    /// Largest request body, in bytes (the default is 8 MiB; at least 1024).
    #[arg(allow_negative_numbers = true, long, default_value_t = 8 << 20, value_name = "BYTES")]
    pub max_body_bytes: usize,
    /// Most samples in one request.
    #[arg(
        allow_negative_numbers = true,
        long,
        default_value_t = 4096,
        value_name = "SAMPLES"
    )]
    pub max_request_samples: usize,
    /// Most sentences in one sample: its completion's (when it follows the
    /// template) and its reference's, after sentence splitting (413 beyond,
    /// naming the sample; at least 4).
    ///
    /// Bounds the distance work of a sample; a 1024-token completion of
    /// two-token sentences still fits the default.
    #[arg(
        allow_negative_numbers = true,
        long,
        default_value_t = 1024,
        value_name = "SENTENCES"
    )]
    pub max_sentences_per_sample: usize,
    /// Most sentences in one request, counted as for --max-sentences-per-sample
    /// (413 beyond; at least 4).
    ///
    /// Bounds the encoder work of a request; the default allows the largest
    /// request (--max-request-samples) 16 sentences per sample.
    #[arg(
        allow_negative_numbers = true,
        long,
        default_value_t = 65_536,
        value_name = "SENTENCES"
    )]
    pub max_request_sentences: usize,
    /// Most reward requests handled at once; further ones wait (within
    /// --timeout-ms). A request takes its slot once its body has arrived.
    #[arg(
        allow_negative_numbers = true,
        long,
        default_value_t = 1024,
        value_name = "REQUESTS"
    )]
    pub max_concurrency: usize,
    /// Per-request timeout, in milliseconds, from the request's headers: a body
    /// not received by then gets 408, a request not scored by then 504
    /// (queueing included).
    ///
    /// The work of a request that timed out, or whose client disconnected, is
    /// given up after the chunk of sentences in progress (one encoder batch per
    /// core) or the sample whose distances are being computed, so the other
    /// clients are served.
    #[arg(
        allow_negative_numbers = true,
        long,
        default_value_t = 120_000,
        value_name = "MS"
    )]
    pub timeout_ms: u64,
    /// Longest wait for a request's headers, in milliseconds, counted from the
    /// connection's opening or the end of its previous reply; the connection is
    /// then closed without a reply.
    ///
    /// A client that stalls while sending its headers, or a keep-alive
    /// connection idle this long, holds no connection beyond it. A client that
    /// keeps idle connections in a pool longer than this (e.g. a
    /// `requests.Session` between slow training steps) may send a request just
    /// as its connection closes: it should retry on a connection error, or
    /// keep its pool's idle time below this.
    #[arg(
        allow_negative_numbers = true,
        long,
        default_value_t = 30_000,
        value_name = "MS"
    )]
    pub header_timeout_ms: u64,
    /// Most samples waiting to be scored; beyond it requests get 503 with
    /// `Retry-After: 1` at once instead of queueing (bounds memory and latency).
    /// A request of more samples than this gets 413: it could never be queued.
    #[arg(
        allow_negative_numbers = true,
        long,
        default_value_t = 65_536,
        value_name = "SAMPLES"
    )]
    pub max_queued_samples: usize,
    /// A reference with an empty Findings or Impression: `error` answers 400
    /// naming it; `score` scores the section that is there, sets the missing
    /// one's term to 0 and counts it (`missing_sections` in the reply, per
    /// sample; the total in /health).
    ///
    /// OpenRLHF 0.11 trains on with reward None for a sample whose reward
    /// request failed, logging it only at INFO level: with OpenRLHF use
    /// `score` (or check the data first with `sdr check-data`).
    #[arg(long, value_enum, default_value_t = MissingSection::Error)]
    pub missing_section: MissingSection,
}

/// Smallest `--max-body-bytes`: less refuses all but the shortest one-sample
/// requests.
const MIN_BODY_BYTES: usize = 1024;

/// Smallest sentence limits: a reference has at least one sentence per
/// section, and so has a well-formed completion.
const MIN_SENTENCES: usize = 4;

impl Args {
    /// Limits and options from the arguments (checked: a value that would make
    /// the server refuse every request, or never answer, is an error).
    pub fn limits(&self) -> Result<Limits> {
        for (name, value) in [
            ("--format-weight", self.format_weight),
            ("--semantic-weight", self.semantic_weight),
            ("--clinical-weight", self.clinical_weight),
        ] {
            let shown = sdr_core::error::shown(value);
            anyhow::ensure!(
                (0.0..=sdr_reward::MAX_WEIGHT).contains(&value),
                "{name} {shown}: must be a finite number >= 0 and <= 1e6"
            );
        }
        anyhow::ensure!(
            self.format_weight + self.semantic_weight + self.clinical_weight > 0.0,
            "--format-weight, --semantic-weight and --clinical-weight are all 0: every reward \
             would be 0"
        );
        anyhow::ensure!(
            self.cache_mib.is_finite() && self.cache_mib >= 0.0,
            "--cache-mib {}: must be a finite number >= 0",
            self.cache_mib
        );
        anyhow::ensure!(self.max_batch >= 1, "--max-batch must be at least 1");
        anyhow::ensure!(
            self.max_body_bytes >= MIN_BODY_BYTES,
            "--max-body-bytes {}: must be at least {MIN_BODY_BYTES} (bytes)",
            self.max_body_bytes
        );
        anyhow::ensure!(
            self.max_request_samples >= 1,
            "--max-request-samples must be at least 1"
        );
        anyhow::ensure!(
            self.max_queued_samples >= 1,
            "--max-queued-samples must be at least 1: with 0 every request would be refused"
        );
        for (name, value) in [
            ("--max-sentences-per-sample", self.max_sentences_per_sample),
            ("--max-request-sentences", self.max_request_sentences),
        ] {
            anyhow::ensure!(
                value >= MIN_SENTENCES,
                "{name} {value}: must be at least {MIN_SENTENCES} (a reference and a \
                 well-formed completion have 2 sentences or more each)"
            );
        }
        // The limit is a semaphore, which panics beyond this.
        let most = tokio::sync::Semaphore::MAX_PERMITS;
        anyhow::ensure!(
            (1..=most).contains(&self.max_concurrency),
            "--max-concurrency must be between 1 and {most}"
        );
        anyhow::ensure!(self.timeout_ms >= 1, "--timeout-ms must be at least 1");
        anyhow::ensure!(
            self.header_timeout_ms >= 1,
            "--header-timeout-ms must be at least 1"
        );
        anyhow::ensure!(
            self.max_wait_ms < self.timeout_ms,
            "--max-wait-ms {} must be below --timeout-ms {}: a lone request would time out \
             waiting for company",
            self.max_wait_ms,
            self.timeout_ms
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
            max_sentences_per_sample: self.max_sentences_per_sample,
            max_request_sentences: self.max_request_sentences,
            encode_chunk: encode_chunk(self.device),
            max_concurrency: self.max_concurrency,
            timeout: Duration::from_millis(self.timeout_ms),
            header_timeout: Duration::from_millis(self.header_timeout_ms),
            max_queued_samples: self.max_queued_samples,
            missing_section: self.missing_section,
        })
    }
}

/// New sentences per encoder call: one batch per core on a CPU (all cores
/// busy for one batch's time, 1-3 s with all-mpnet-base-v2 on 2 loaded cores;
/// as fast overall as one call for the lot, and the same vectors), two
/// batches on a GPU. Between calls an abandoned request is dropped.
fn encode_chunk(device: sdr_embed::EncoderDevice) -> usize {
    let batches = match device {
        sdr_embed::EncoderDevice::Cpu => rayon::current_num_threads(),
        _ => 2,
    };
    device.default_batch_size() * batches.max(1)
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
    .with_context(|| format!("--metric {}", args.metric))?
    .with_cost(args.cost);
    // Duration::from_secs_f64 panics beyond its range.
    let save_interval = Duration::try_from_secs_f64(args.cache_save_secs)
        .map_err(|_| anyhow::anyhow!("--cache-save-secs must be a finite number >= 0"))?;
    // Before the model loads: a file that is no sentence cache (a corpus, say) is
    // refused, never loaded as empty and overwritten at the first save.
    if let (Some(path), false) = (&args.cache, args.exact) {
        SentenceCache::check_path(path).map_err(|e| anyhow::anyhow!("--cache {e}"))?;
        // Saved every --cache-save-secs: a folder that cannot be written would
        // only show as a failed save in the log, after the training started.
        crate::common::check_file_creatable("--cache", path)?;
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
        let loaded = crate::common::encoder::open_model(args.model.as_deref(), opts, "sdr serve")
            .context("loading the encoder")?;
        Some(loaded.encoder)
    };
    let (cache, persist) = match &embedder {
        Some(e) => {
            let file = args.cache.as_deref().map(|p| (p, save_interval));
            let (cache, persist) = sdr_reward::open_cache(e.as_ref(), args.cache_mib, file)
                .map_err(|e| anyhow::anyhow!("--cache {e}"))?;
            let persist = persist.map(|(p, outcome)| {
                if let Some(path) = &args.cache {
                    log_line(format_args!("sdr serve: {}", outcome.message(path)));
                }
                p
            });
            (Some(cache), persist)
        }
        None => {
            if args.cache.is_some() {
                log_line("sdr serve: --cache ignored: exact-match rewards embed nothing");
            }
            (None, None)
        }
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
        let reward = if args.exact {
            "exact match".to_string()
        } else {
            format!("metric {}", options.config.metric)
        };
        log_line(format_args!(
            "sdr serve: listening on http://{} (POST {}, POST /v1/rewards, GET /health; {reward})",
            listener.local_addr()?,
            args.path,
        ));
        Ok(sdr_serve::serve_until_signal(listener, state, &args.path).await?)
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

/// [`sdr_serve::serve`] with the CLI's error type.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    path: &str,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<()> {
    Ok(sdr_serve::serve(listener, state, path, shutdown).await?)
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: super::Args,
    }

    /// The server's flags are the reward's options (`sdr_reward::config`), with
    /// the recorded defaults.
    #[test]
    fn flags_follow_the_reward_options_record() {
        let cmd = Cli::command();
        for option in sdr_reward::REWARD_OPTIONS {
            let Some(flag) = option.flag else { continue };
            let arg = cmd
                .get_arguments()
                .find(|a| a.get_long() == Some(flag))
                .unwrap_or_else(|| panic!("sdr serve has no --{flag} ({})", option.name));
            let shown: Vec<String> = arg
                .get_default_values()
                .iter()
                .map(|v| v.to_string_lossy().into_owned())
                .collect();
            match (option.default, option.kind) {
                (None, _) => assert!(shown.is_empty(), "--{flag} {shown:?}"),
                // A switch: off unless given.
                (Some("false"), sdr_reward::config::Kind::Flag) => assert!(
                    matches!(arg.get_action(), clap::ArgAction::SetTrue),
                    "--{flag}"
                ),
                (Some(d), sdr_reward::config::Kind::Number) => {
                    let got: f64 = shown[0].parse().unwrap();
                    assert_eq!(got, d.parse::<f64>().unwrap(), "--{flag}");
                }
                (Some(d), _) => assert_eq!(shown, [d], "--{flag}"),
            }
        }
    }
}
