//! Helpers of the `sdr serve` integration tests: start a server on
//! 127.0.0.1:0, send raw HTTP/1.1 requests.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use sdr_cli::commands::serve::{serve, AppState, Limits};
use sdr_reward::{RewardOptions, SentenceEncoder};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::oneshot;

pub const REF: &str = "<think>Heart size is normal. The lungs are clear. No pleural effusion.</think><answer>No acute cardiopulmonary abnormality.</answer>";
pub const GOOD: &str =
    "<think>The heart is normal in size. Lungs are clear.</think><answer>No acute disease.</answer>";
pub const OTHER: &str = "<think>There is a large right pleural effusion. Cardiomegaly.</think><answer>Right effusion and cardiomegaly.</answer>";

/// The real encoder (all-mpnet-base-v2), loaded once per test binary.
pub fn encoder() -> Arc<dyn SentenceEncoder> {
    static ENC: OnceLock<Arc<sdr_embed::Encoder>> = OnceLock::new();
    ENC.get_or_init(|| {
        let dir = sdr_embed::resolve_model_dir(None)
            .expect("model folder: run `bash scripts/fetch-model.sh`");
        let opts = sdr_embed::EncoderOptions {
            cache: false,
            ..Default::default()
        };
        Arc::new(sdr_embed::Encoder::load(&dir, opts).expect("model loads"))
    })
    .clone()
}

pub struct Server {
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    pub task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Server {
    /// Trigger the graceful shutdown; the task then ends.
    pub fn stop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

/// Start a server; `exact` needs no model.
pub async fn start(options: RewardOptions, limits: Limits) -> Server {
    let embedder = (!options.exact).then(encoder);
    let state = AppState::new(options, embedder, limits).expect("state");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        serve(listener, state, "/get_reward", async {
            let _ = rx.await;
        })
        .await
    });
    Server {
        addr,
        stop: Some(tx),
        task,
    }
}

/// Send one request; returns (status, body).
pub async fn request(addr: SocketAddr, method: &str, path: &str, body: &[u8]) -> (u16, String) {
    let (status, _, body) = request_full(addr, method, path, body).await;
    (status, body)
}

/// Send one request; returns (status, head, body).
pub async fn request_full(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: &[u8],
) -> (u16, String, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    // A server refusing an oversized body may close before reading it all.
    let _ = s.write_all(body).await;
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out).await;
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((text.as_str(), ""));
    (status, head.to_string(), body.to_string())
}

pub async fn post_json(
    addr: SocketAddr,
    path: &str,
    v: &serde_json::Value,
) -> (u16, serde_json::Value) {
    let (status, body) = request(addr, "POST", path, v.to_string().as_bytes()).await;
    let json = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body:?}"));
    (status, json)
}

pub fn floats(v: &serde_json::Value) -> Vec<f64> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}
