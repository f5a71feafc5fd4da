//! A fake OpenAI-compatible streaming server for the generation tests: a
//! thread on 127.0.0.1 that answers each request with canned bytes chosen by
//! the request's seed (`1000 * study + candidate`).

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What the server does with one request.
pub enum Answer {
    /// These bytes after `HTTP/1.1 200 OK` headers with this Content-Type.
    Body(&'static str, String),
    /// Event-stream headers, then nothing for 10 s.
    Quiet,
}

/// A server on 127.0.0.1; `answer(seed)` decides each request (the seed
/// names study and candidate: `1000 * study + candidate`). Its thread ends
/// with the test process.
pub struct Server {
    pub base: String,
    pub requests: Arc<AtomicUsize>,
}

impl Server {
    pub fn start(answer: impl Fn(u64) -> Answer + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}/v1", listener.local_addr().unwrap());
        let requests = Arc::new(AtomicUsize::new(0));
        let (answer, count) = (Arc::new(answer), Arc::clone(&requests));
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let (answer, count) = (Arc::clone(&answer), Arc::clone(&count));
                std::thread::spawn(move || serve(conn, &*answer, &count));
            }
        });
        Server { base, requests }
    }
}

impl Server {
    /// `sdr SUBCOMMAND --backend openai --base-url` this server.
    pub fn sdr(&self, subcommand: &str) -> std::process::Command {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_sdr"));
        c.args([subcommand, "--backend", "openai", "--base-url", &self.base]);
        c
    }
}

/// Reads one request and answers it, then closes the connection.
fn serve(mut conn: TcpStream, answer: &dyn Fn(u64) -> Answer, count: &AtomicUsize) {
    let mut data = Vec::new();
    let mut buf = [0u8; 8192];
    let (head_end, len) = loop {
        let Ok(n) = conn.read(&mut buf) else { return };
        if n == 0 {
            return;
        }
        data.extend_from_slice(&buf[..n]);
        if let Some(at) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&data[..at]).to_ascii_lowercase();
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            break (at + 4, len);
        }
    };
    while data.len() < head_end + len {
        let Ok(n) = conn.read(&mut buf) else { return };
        if n == 0 {
            return;
        }
        data.extend_from_slice(&buf[..n]);
    }
    let body: serde_json::Value = serde_json::from_slice(&data[head_end..]).unwrap();
    count.fetch_add(1, Ordering::SeqCst);
    match answer(body["seed"].as_u64().unwrap()) {
        Answer::Body(content_type, body) => {
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{body}",
                body.len()
            );
        }
        Answer::Quiet => {
            let _ = conn.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n",
            );
            std::thread::sleep(Duration::from_secs(10));
        }
    }
}

/// A stream of `text`, one word per chunk, the last with `finish_reason: stop`.
pub fn word_stream(text: &str) -> Answer {
    let words: Vec<&str> = text.split(' ').collect();
    let mut stream = String::new();
    for (i, w) in words.iter().enumerate() {
        let content = if i == 0 {
            w.to_string()
        } else {
            format!(" {w}")
        };
        let finish = (i + 1 == words.len()).then_some("stop");
        let c = serde_json::json!({"choices": [{"index": 0, "delta": {"content": content},
                                                "finish_reason": finish}]});
        stream += &format!("data: {c}\n\n");
    }
    stream += "data: [DONE]\n\n";
    Answer::Body("text/event-stream", stream)
}

/// Waits until `partial` holds a record, then sends `signal` (`TERM`, `INT`)
/// to `child` and returns its output: a run stopped after its first study.
pub fn stop_after_first_record(
    child: std::process::Child,
    partial: &std::path::Path,
    signal: &str,
) -> std::process::Output {
    let t0 = std::time::Instant::now();
    while std::fs::read_to_string(partial).map_or(0, |t| t.lines().count()) < 1 {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "no record reached {}",
            partial.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let killed = std::process::Command::new("kill")
        .args([format!("-{signal}"), child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    child.wait_with_output().unwrap()
}
