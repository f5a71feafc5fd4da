//! The SDR reward server behind `sdr serve`: an HTTP reward server for RL trainers (OpenRLHF's remote
//! reward protocol, a plain JSON batch endpoint, a health check).
//!
//! # Endpoints
//! - `POST <path>` (default `/get_reward`), OpenRLHF's protocol. Request
//!   `{"query": [...], "prompts": [...], "labels": [...]}`; reply
//!   `{"rewards": [...], "scores": [...], "extra_logs": {"format": [...],
//!   "findings": [...], "impression": [...]}}`. OpenRLHF's `query` is prompt +
//!   completion: when `query[i]` starts with `prompts[i]` that prefix is
//!   stripped; else what follows the longest end of the prompt found in the
//!   query (at least `sdr_reward::MIN_PROMPT_END` bytes: OpenRLHF cuts long
//!   prompts from the left); else the whole query is parsed as the completion
//!   (so a prompt outside the template tags makes it malformed: reward 0); the
//!   special tokens OpenRLHF decodes with it (a BOS token the prompt lacks,
//!   EOS tokens at the end) are set aside (`sdr_reward::completion_of`). `prompts`
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
//! samples, and scores the lot in one call (its distinct new sentences go to
//! the encoder in chunks of `Limits::encode_chunk`). Each request then gets its
//! own slice of the results.
//!
//! # Limits
//! Body size (`--max-body-bytes`, 413; a larger declared `Content-Length` is
//! refused before the body is read), samples per request
//! (`--max-request-samples`, 413), sentences per sample and per request
//! (`--max-sentences-per-sample`, `--max-request-sentences`, 413 naming the
//! sample: the work grows with sentences, and 8 MiB hold hundreds of
//! thousands), concurrent reward requests (`--max-concurrency`, further ones
//! wait; a request takes its slot once its body is read, so a client that
//! stalls mid-upload blocks no one), a per-request timeout (`--timeout-ms`,
//! counted from the request's headers: 408 while the body is still arriving,
//! then 504 while it waits for a slot or its scores), the wait for a request's
//! headers (`--header-timeout-ms`, also an idle keep-alive connection's: the
//! connection is closed without a reply), samples waiting to be
//! scored (`--max-queued-samples`: beyond it, 503 with `Retry-After: 1` at
//! once, so overload is shed quickly and memory stays bounded; clients should
//! retry after the delay). A request that timed out or whose client left is
//! dropped from its batch at the next encoder chunk ([`Limits::encode_chunk`])
//! or the next sample's distances, so it does not hold the encoder or the
//! cores while the other clients time out too. Bad
//! input is a 4xx with `{"error": "..."}`: malformed JSON, length mismatches, a
//! reference with an empty section (named by its index in the request), an
//! unknown metric, a wrong method (405). `sdr serve --help` has the same for
//! users. SIGINT / SIGTERM stop accepting connections and let requests in
//! flight finish.

mod api;
mod batcher;
mod log;
mod server;

pub use api::{router, ApiError, AppState};
pub use batcher::Limits;
pub use sdr_reward::MissingSection;
pub use server::{serve, serve_until_signal, shutdown_signal};
