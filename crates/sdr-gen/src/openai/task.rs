//! One candidate's request: connect with retries, then read its SSE stream.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use reqwest::{header, Response, StatusCode};
use serde_json::Value;

use super::wire::{body_message, end_of, error_message, one_line, Chunk};
use super::OpenAiConfig;
use crate::{End, Piece};

/// What a candidate's task sends to [`super::OpenAiCandidates`].
pub(super) enum Msg {
    /// The next piece; the last one has `end` set.
    Piece(Piece),
    /// The request failed before streaming began, after all retries.
    Failed(String),
}

/// What every task of a backend shares.
pub(super) struct Shared {
    pub client: reqwest::Client,
    pub url: String,
    pub api_key: Option<String>,
    pub config: OpenAiConfig,
}

/// Runs one candidate: its pieces go to `tx`, its streamed tokens to `produced`.
pub(super) async fn run(
    shared: Arc<Shared>,
    body: Value,
    tx: Sender<Msg>,
    produced: Arc<AtomicUsize>,
) {
    let response = match open(&shared, &body).await {
        Ok(r) => r,
        Err(cause) => {
            let _ = tx.send(Msg::Failed(cause));
            return;
        }
    };
    if let Some(last) = read(&shared.config, response, &tx, &produced).await {
        let _ = tx.send(Msg::Piece(last));
    }
}

/// Sends the request until the server answers 2xx. Connect errors, 429 and
/// 5xx are retried; the error names the cause of the last attempt.
async fn open(shared: &Shared, body: &Value) -> Result<Response, String> {
    let cfg = &shared.config;
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        let mut req = shared
            .client
            .post(&shared.url)
            .timeout(cfg.request_timeout)
            .json(body);
        if let Some(key) = &shared.api_key {
            req = req.bearer_auth(key);
        }
        let (retry, wait, cause) = match req.send().await {
            Ok(resp) if resp.status().is_success() => return Ok(resp),
            Ok(resp) => {
                let status = resp.status();
                let wait = retry_after(&resp).map(|w| w.min(cfg.request_timeout));
                let text = resp.text().await.unwrap_or_default();
                let cause = match body_message(&text) {
                    Some(m) => format!("HTTP {status}: {m}"),
                    None => format!("HTTP {status}"),
                };
                let retry = status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error();
                (retry, wait, cause)
            }
            Err(e) => (
                e.is_connect() || e.is_request() && !e.is_timeout(),
                None,
                cause_of(&e, cfg),
            ),
        };
        if !retry || attempt > cfg.max_retries {
            return Err(if attempt > 1 {
                format!("{cause} (after {attempt} attempts)")
            } else {
                cause
            });
        }
        tokio::time::sleep(wait.unwrap_or_else(|| backoff(cfg.backoff_base, attempt))).await;
    }
}

/// `Retry-After` in seconds (the HTTP-date form is not used by these servers).
fn retry_after(resp: &Response) -> Option<Duration> {
    let v = resp.headers().get(header::RETRY_AFTER)?.to_str().ok()?;
    v.trim()
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64)
}

/// `base * 2^(attempt - 1)`, scaled by a random factor in [0.5, 1) so that
/// K candidates retrying together spread out.
fn backoff(base: Duration, attempt: u32) -> Duration {
    let exp = base.saturating_mul(1u32 << (attempt - 1).min(16));
    exp.mul_f64(0.5 + 0.5 * fastrand::f64())
}

/// The innermost cause of a request error, e.g. `Connection refused (os error 111)`.
fn cause_of(e: &reqwest::Error, cfg: &OpenAiConfig) -> String {
    if e.is_timeout() {
        let limit = if e.is_connect() {
            cfg.connect_timeout
        } else {
            cfg.request_timeout
        };
        return format!("timed out after {:.1} s", limit.as_secs_f64());
    }
    let mut inner: &dyn std::error::Error = e;
    while let Some(src) = inner.source() {
        inner = src;
    }
    let what = if e.is_connect() {
        "cannot connect"
    } else {
        "request failed"
    };
    format!("{what}: {}", one_line(&inner.to_string()))
}

/// Forwards one piece per content-bearing chunk and returns the last piece,
/// or `None` when the receiver is gone (the candidates were dropped).
async fn read(
    cfg: &OpenAiConfig,
    response: Response,
    tx: &Sender<Msg>,
    produced: &AtomicUsize,
) -> Option<Piece> {
    let failed = |msg: String| {
        Some(Piece {
            text: String::new(),
            tokens: 0,
            end: Some(End::Error(msg)),
        })
    };
    let mut events = response.bytes_stream().eventsource();
    let mut counted = 0usize;
    let mut usage: Option<usize> = None;
    let mut finish: Option<End> = None;
    // Text that came with or after the finish_reason, sent with the last piece.
    let mut tail = String::new();
    let mut tail_tokens = 0usize;
    let mut done = false;
    loop {
        let event = match tokio::time::timeout(cfg.idle_timeout, events.next()).await {
            Err(_) if finish.is_none() => {
                return failed(format!(
                    "idle timeout: no data for {:.1} s",
                    cfg.idle_timeout.as_secs_f64()
                ))
            }
            Ok(Some(Err(e))) if finish.is_none() => {
                return failed(format!("stream failed: {}", one_line(&e.to_string())))
            }
            // The candidate is complete; a missing [DONE] or usage chunk does not matter.
            Err(_) | Ok(Some(Err(_))) | Ok(None) => break,
            Ok(Some(Ok(event))) => event,
        };
        let data = event.data.trim();
        if data.is_empty() {
            continue;
        }
        if data == "[DONE]" {
            done = true;
            break;
        }
        let chunk: Chunk = match serde_json::from_str(data) {
            Ok(c) => c,
            Err(e) => {
                return failed(format!("malformed chunk ({e}): {}", one_line(data)));
            }
        };
        if let Some(err) = &chunk.error {
            let msg = error_message(err).unwrap_or_else(|| "no message".into());
            return failed(format!("server error mid-stream: {msg}"));
        }
        if let Some(n) = chunk.usage.and_then(|u| u.completion_tokens) {
            usage = Some(n);
        }
        let Some(choice) = chunk.choices.into_iter().next() else {
            continue;
        };
        let content = choice.delta.and_then(|d| d.content).unwrap_or_default();
        if !content.is_empty() {
            counted += 1;
            produced.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(reason) = &choice.finish_reason {
            finish = Some(end_of(reason));
        }
        if finish.is_some() {
            tail_tokens += usize::from(!content.is_empty());
            tail.push_str(&content);
        } else if !content.is_empty() {
            let piece = Piece {
                text: content,
                tokens: 1,
                end: None,
            };
            tx.send(Msg::Piece(piece)).ok()?;
        }
    }
    let Some(end) = finish else {
        return failed(if done {
            "stream ended ([DONE]) without a finish_reason; the server interrupted it".into()
        } else {
            "stream closed before a finish_reason".into()
        });
    };
    // Chunks are not always tokens; the server's count wins when it is larger.
    let extra = usage.map_or(0, |n| n.saturating_sub(counted));
    produced.fetch_add(extra, Ordering::Relaxed);
    Some(Piece {
        text: tail,
        tokens: tail_tokens + extra,
        end: Some(end),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_with_jitter() {
        let base = Duration::from_millis(100);
        for attempt in 1..5 {
            let d = backoff(base, attempt);
            let full = base * (1 << (attempt - 1));
            assert!(d >= full / 2 && d <= full, "{attempt}: {d:?}");
        }
        assert!(backoff(base, 60) <= base * (1 << 16));
    }
}
