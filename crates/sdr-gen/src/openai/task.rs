//! One candidate's request: connect with retries, then read its SSE stream.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use reqwest::{header, Response, StatusCode};
use serde_json::Value;

use super::wire::{body_message, end_of, error_message, one_line, Chunk, Completion};
use super::OpenAiConfig;
use crate::replay::pseudo_token_ends;
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
    let cfg = &shared.config;
    let response = match open(&shared, &body).await {
        Ok(r) => r,
        Err(cause) => {
            let _ = tx.send(Msg::Failed(cause));
            return;
        }
    };
    let last = match content_type(&response) {
        // Without a Content-Type the events themselves tell.
        None => read(cfg, response, &tx, &produced).await,
        Some(ct) if ct == "text/event-stream" => read(cfg, response, &tx, &produced).await,
        Some(ct) if ct == "application/json" || ct.ends_with("+json") => {
            match complete(cfg, response, &tx, &produced).await {
                Ok(last) => last,
                Err(cause) => {
                    let _ = tx.send(Msg::Failed(cause));
                    return;
                }
            }
        }
        // An HTML page from a proxy or a login wall, say: not an answer at all.
        Some(ct) => {
            let head = first_bytes(cfg, response).await;
            let _ = tx.send(Msg::Failed(format!(
                "response is not an event stream (Content-Type {ct}){head}"
            )));
            return;
        }
    };
    if let Some(last) = last {
        let _ = tx.send(Msg::Piece(last));
    }
}

/// The media type of a response, lower case, without parameters.
fn content_type(resp: &Response) -> Option<String> {
    let v = resp.headers().get(header::CONTENT_TYPE)?;
    let v = String::from_utf8_lossy(v.as_bytes());
    let mime = v.split(';').next().unwrap_or_default().trim();
    (!mime.is_empty()).then(|| mime.to_ascii_lowercase())
}

/// `": "` and the start of the body on one line, to show what came instead
/// of a stream; empty when nothing arrives within the idle timeout.
async fn first_bytes(cfg: &OpenAiConfig, mut resp: Response) -> String {
    match tokio::time::timeout(cfg.idle_timeout, resp.chunk()).await {
        Ok(Ok(Some(bytes))) => {
            let text = one_line(&String::from_utf8_lossy(&bytes[..bytes.len().min(400)]));
            match text.char_indices().nth(100) {
                Some((at, _)) => format!(": {}...", &text[..at]),
                None if text.is_empty() => String::new(),
                None => format!(": {text}"),
            }
        }
        _ => String::new(),
    }
}

/// A whole JSON answer (a server that ignores `"stream": true`), forwarded as
/// pseudo-token pieces so that the lock-step and replay still see tokens;
/// the last piece is returned. `Err` when the body is not a usable answer.
async fn complete(
    cfg: &OpenAiConfig,
    response: Response,
    tx: &Sender<Msg>,
    produced: &AtomicUsize,
) -> Result<Option<Piece>, String> {
    let body = match tokio::time::timeout(cfg.idle_timeout, response.bytes()).await {
        Err(_) => {
            return Err(format!(
                "idle timeout: the JSON answer did not arrive within {:.1} s",
                cfg.idle_timeout.as_secs_f64()
            ))
        }
        Ok(Err(e)) => {
            return Err(format!(
                "reading the JSON answer: {}",
                one_line(&e.to_string())
            ))
        }
        Ok(Ok(b)) => b,
    };
    let text = String::from_utf8_lossy(&body);
    let answer: Completion = serde_json::from_str(&text).map_err(|e| {
        format!(
            "response is neither an event stream nor a chat completion ({e}): {}",
            one_line(&text)
        )
    })?;
    if let Some(err) = &answer.error {
        let msg = error_message(err).unwrap_or_else(|| "no message".into());
        return Err(format!("server error: {msg}"));
    }
    let Some(choice) = answer.choices.into_iter().next() else {
        return Err("the JSON answer has no choices (\"choices\": [])".into());
    };
    let Some(reason) = choice.finish_reason else {
        return Err("the JSON answer's choice has no finish_reason".into());
    };
    let content = choice.message.and_then(|m| m.content).unwrap_or_default();
    let ends = pseudo_token_ends(&content);
    let mut start = 0;
    for &end in &ends {
        produced.fetch_add(1, Ordering::Relaxed);
        let piece = Piece {
            text: content[start..end].to_string(),
            tokens: 1,
            end: None,
        };
        start = end;
        if tx.send(Msg::Piece(piece)).is_err() {
            return Ok(None);
        }
    }
    // As for a stream: the server's count wins when it is larger.
    let extra = answer
        .usage
        .and_then(|u| u.completion_tokens)
        .map_or(0, |n| n.saturating_sub(ends.len()));
    produced.fetch_add(extra, Ordering::Relaxed);
    Ok(Some(Piece {
        text: String::new(),
        tokens: extra,
        end: Some(end_of(&reason)),
    }))
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
        // A server that accepts the connection but never answers is idle too.
        let sent = tokio::time::timeout(cfg.idle_timeout, req.send()).await;
        let (retry, wait, cause) = match sent {
            Err(_) => (
                false,
                None,
                format!(
                    "idle timeout: no response for {:.1} s",
                    cfg.idle_timeout.as_secs_f64()
                ),
            ),
            Ok(Ok(resp)) if resp.status().is_success() => return Ok(resp),
            Ok(Ok(resp)) => {
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
            Ok(Err(e)) => (
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
    // What arrived, to say what was missing when no finish_reason came.
    let (mut chunks, mut with_choice) = (0usize, 0usize);
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
        chunks += 1;
        let Some(choice) = chunk.choices.into_iter().next() else {
            continue;
        };
        with_choice += 1;
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
        let how = if done {
            "stream ended ([DONE])"
        } else {
            "stream closed"
        };
        return failed(if chunks == 0 {
            format!("{how} without a single chunk")
        } else if with_choice == 0 {
            format!("{how} without a finish_reason: none of its {chunks} chunks had a choice (\"choices\": [])")
        } else if done {
            format!("{how} without a finish_reason; the server interrupted it")
        } else {
            format!("{how} before a finish_reason")
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
