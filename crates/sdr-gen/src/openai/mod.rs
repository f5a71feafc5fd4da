//! An OpenAI-compatible chat-completions server over SSE: vLLM, llama.cpp's
//! server, llama-cpp-python, OpenAI, and the OpenAI-compatible endpoints of
//! Gemini and Mistral.
//!
//! Protocol choices:
//! - One streaming request per candidate (`n` = 1, seed `seed + i`), not one
//!   request with `n = K`: a pruned candidate is cancelled on its own by
//!   dropping its connection (llama.cpp and vLLM stop generating on
//!   disconnect), and a candidate's text does not depend on K.
//! - Tokens are counted as content-bearing chunks: servers stream one token
//!   per chunk, no tokenizer is needed, and pruning sees counts as they
//!   arrive. When the final chunk reports `usage.completion_tokens`
//!   (`stream_options.include_usage`), the last piece carries the difference,
//!   so a finished candidate's total matches the server's.
//! - Connect errors, 429 and 5xx are retried with exponential backoff and
//!   jitter (honouring `Retry-After`) only before streaming began; a retry
//!   afterwards would duplicate text. A candidate that cannot be started is
//!   an `Err` of the batch; one whose stream breaks ends with [`End::Error`]
//!   and keeps its text.
//! - A 2xx answer must be an event stream (or carry no Content-Type): a
//!   whole JSON completion (a server that ignores `"stream": true`) is taken
//!   as the complete answer, cut into pseudo-tokens; anything else (an HTML
//!   page from a proxy) fails the candidate naming its Content-Type.
//!
//! The backend owns a tokio runtime; each candidate is a task that forwards
//! pieces over a channel, and [`Candidates::next`] blocks on that channel.
//!
//! Servers that serve one request at a time (llama-cpp-python) answer the
//! K requests in turn, so the idle timeout must cover the other candidates'
//! generations; llama-cpp-python also needs `--interrupt_requests False`, or
//! each new request ends the running stream.

mod task;
mod wire;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::Runtime;
use tokio::task::JoinHandle;

use crate::{Backend, Candidates, End, GenError, Piece, Request};
use task::{Msg, Shared};

/// Where and how to reach the server.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenAiConfig {
    /// Base URL up to the API version, e.g. `http://127.0.0.1:8080/v1`;
    /// requests go to `{base_url}/chat/completions`.
    pub base_url: String,
    /// Model name sent in each request.
    pub model: String,
    /// Environment variable holding the API key, sent as `Authorization:
    /// Bearer`; an unset or empty variable sends no header.
    pub api_key_env: String,
    /// Time to establish a connection.
    pub connect_timeout: Duration,
    /// Longest wait for the response headers and for each stream chunk.
    pub idle_timeout: Duration,
    /// Longest time for one whole request, stream included.
    pub request_timeout: Duration,
    /// Retries of a request that failed before streaming began.
    pub max_retries: u32,
    /// Delay before the first retry; it doubles with each retry.
    pub backoff_base: Duration,
}

impl OpenAiConfig {
    /// Defaults: key in `OPENAI_API_KEY`, connect 10 s, idle 120 s, request
    /// 600 s, 3 retries from 500 ms.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            model: model.into(),
            api_key_env: "OPENAI_API_KEY".into(),
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
            request_timeout: Duration::from_secs(600),
            max_retries: 3,
            backoff_base: Duration::from_millis(500),
        }
    }
}

/// Streams K candidates from an OpenAI-compatible server, one request each.
pub struct OpenAiBackend {
    shared: Arc<Shared>,
    runtime: Option<Runtime>,
}

impl std::fmt::Debug for OpenAiBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiBackend")
            .field("url", &self.shared.url)
            .field("model", &self.shared.config.model)
            .field("api_key", &self.shared.api_key.as_ref().map(|_| "<set>"))
            .finish()
    }
}

impl OpenAiBackend {
    /// Checks the configuration and reads the API key from its variable.
    pub fn new(config: OpenAiConfig) -> Result<Self, GenError> {
        let base = config.base_url.trim_end_matches('/');
        let url = format!("{base}/chat/completions");
        match reqwest::Url::parse(&url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") => {}
            _ => {
                return Err(GenError::Request(format!(
                    "base URL {:?} is not an http(s) URL",
                    config.base_url
                )))
            }
        }
        if config.model.trim().is_empty() {
            return Err(GenError::Request("the model name is empty".into()));
        }
        for (name, d) in [
            ("connect timeout", config.connect_timeout),
            ("idle timeout", config.idle_timeout),
            ("request timeout", config.request_timeout),
        ] {
            if d.is_zero() {
                return Err(GenError::Request(format!("the {name} must be positive")));
            }
        }
        let api_key = std::env::var(&config.api_key_env)
            .ok()
            .filter(|k| !k.trim().is_empty());
        let client = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .build()
            .map_err(|source| GenError::Http {
                url: url.clone(),
                source,
            })?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("sdr-openai")
            .enable_all()
            .build()
            .map_err(|source| GenError::Runtime {
                url: url.clone(),
                source,
            })?;
        Ok(Self {
            shared: Arc::new(Shared {
                client,
                url,
                api_key,
                config,
            }),
            runtime: Some(runtime),
        })
    }

    /// The URL requests are posted to.
    pub fn url(&self) -> &str {
        &self.shared.url
    }
}

impl Drop for OpenAiBackend {
    fn drop(&mut self) {
        // Does not block, so the backend may be dropped inside async code too.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl Backend for OpenAiBackend {
    fn describe(&self) -> String {
        format!(
            "openai:{}@{}",
            self.shared.config.model, self.shared.config.base_url
        )
    }

    fn start<'a>(&'a mut self, request: &Request) -> Result<Box<dyn Candidates + 'a>, GenError> {
        request.validate()?;
        if request.prefill.is_some() {
            return Err(GenError::Request(
                "a prefill is supported by the local back-end only (chat servers start the \
                 assistant turn themselves)"
                    .into(),
            ));
        }
        let runtime = self
            .runtime
            .as_ref()
            .ok_or_else(|| GenError::Protocol("the back-end's runtime is shut down".into()))?;
        let body = wire::request_body(&self.shared.config.model, request);
        let streams = (0..request.k)
            .map(|i| {
                let (tx, rx) = mpsc::channel();
                let produced = Arc::new(AtomicUsize::new(0));
                let task = runtime.spawn(task::run(
                    Arc::clone(&self.shared),
                    wire::for_candidate(&body, request.seed, i),
                    tx,
                    Arc::clone(&produced),
                ));
                Stream {
                    rx,
                    task,
                    produced,
                    live: true,
                }
            })
            .collect();
        Ok(Box::new(OpenAiCandidates {
            url: self.shared.url.clone(),
            streams,
        }))
    }
}

struct Stream {
    rx: Receiver<Msg>,
    task: JoinHandle<()>,
    produced: Arc<AtomicUsize>,
    live: bool,
}

/// K running requests; dropping it cancels the live ones.
struct OpenAiCandidates {
    /// The endpoint, named in errors.
    url: String,
    streams: Vec<Stream>,
}

impl Candidates for OpenAiCandidates {
    fn k(&self) -> usize {
        self.streams.len()
    }

    fn next(&mut self, ids: &[usize]) -> Result<Vec<Piece>, GenError> {
        if let Some(&bad) = ids
            .iter()
            .find(|&&i| self.streams.get(i).is_none_or(|s| !s.live))
        {
            return Err(GenError::Protocol(format!(
                "candidate {bad} is not live (k = {})",
                self.streams.len()
            )));
        }
        let mut out = Vec::with_capacity(ids.len());
        for &id in ids {
            let s = &mut self.streams[id];
            let piece = match s.rx.recv() {
                Ok(Msg::Piece(p)) => p,
                Ok(Msg::Failed(cause)) => {
                    s.live = false;
                    return Err(GenError::Server {
                        url: self.url.clone(),
                        candidate: id,
                        cause,
                    });
                }
                // The task ended without a last piece (it panicked, or the runtime stopped).
                Err(_) => Piece {
                    end: Some(End::Error("the stream's task ended unexpectedly".into())),
                    ..Piece::default()
                },
            };
            if piece.end.is_some() {
                s.live = false;
            }
            out.push(piece);
        }
        Ok(out)
    }

    fn cancel(&mut self, id: usize) {
        if let Some(s) = self.streams.get_mut(id) {
            // Dropping the task drops its response, which closes the connection.
            s.task.abort();
            s.live = false;
        }
    }

    fn produced(&self, id: usize) -> usize {
        self.streams
            .get(id)
            .map_or(0, |s| s.produced.load(Ordering::Relaxed))
    }
}

impl Drop for OpenAiCandidates {
    fn drop(&mut self) {
        for s in &self.streams {
            s.task.abort();
        }
    }
}
