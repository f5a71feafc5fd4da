//! The integration tier: the OpenAI back-end against llama-cpp-python's
//! OpenAI-compatible server running SmolLM2-135M-Instruct (GGUF) on
//! 127.0.0.1. Every test is `#[ignore]`; `scripts/test-integration.sh` installs
//! the server and runs them. `SDR_LLAMA_PYTHON` is the Python with
//! `llama_cpp.server`, `SDR_SMOLLM2_GGUF` the model file.
//!
//! llama-cpp-python serves one request at a time, so the K streams of a
//! candidate set are generated in turn; it runs with `--interrupt_requests
//! False`, without which each waiting request ends the running stream.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sdr_gen::openai::{OpenAiBackend, OpenAiConfig};
use sdr_gen::{Backend, Candidates, End, Prompt, PromptTemplate, Request};

/// The tests share the two cores: one server at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A running server, killed on drop (also when a test panics).
struct Server {
    child: Child,
    base: String,
    log: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn python() -> String {
    std::env::var("SDR_LLAMA_PYTHON").unwrap_or_else(|_| "/work/main/.venv-llama/bin/python".into())
}

fn gguf() -> PathBuf {
    match std::env::var_os("SDR_SMOLLM2_GGUF") {
        Some(p) => p.into(),
        None => {
            let home = std::env::var_os("HOME").expect("HOME is not set");
            PathBuf::from(home)
                .join(".cache/sdr/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf")
        }
    }
}

/// `GET /v1/models` answers 200.
fn models_ok(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let req =
        format!("GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    if s.write_all(req.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    s.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.1 200")
}

impl Server {
    fn start() -> Self {
        let model = gguf();
        assert!(
            model.is_file(),
            "{}: no such GGUF (run scripts/install-llama-server.sh or set SDR_SMOLLM2_GGUF)",
            model.display()
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = std::env::temp_dir().join(format!("sdr-llama-server-{port}.log"));
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(python())
            .args(["-m", "llama_cpp.server", "--model"])
            .arg(&model)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--n_ctx", "2048", "--interrupt_requests", "False"])
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "{}: cannot start llama_cpp.server ({e}); set SDR_LLAMA_PYTHON",
                    python()
                )
            });
        let mut server = Self {
            child,
            base: format!("http://127.0.0.1:{port}/v1"),
            log,
        };
        let t0 = Instant::now();
        while !models_ok(port) {
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!(
                    "llama_cpp.server exited ({status}); see {}",
                    server.log.display()
                );
            }
            assert!(
                t0.elapsed() < Duration::from_secs(120),
                "llama_cpp.server not ready after 120 s; see {}",
                server.log.display()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
        eprintln!(
            "llama_cpp.server ready at {} in {:.1} s",
            server.base,
            t0.elapsed().as_secs_f64()
        );
        server
    }

    fn backend(&self) -> OpenAiBackend {
        OpenAiBackend::new(OpenAiConfig {
            api_key_env: "SDR_LLAMA_SERVER_KEY_UNUSED".into(),
            // The server answers the K requests in turn: a waiting stream is idle
            // for as long as the others take.
            idle_timeout: Duration::from_secs(300),
            max_retries: 1,
            ..OpenAiConfig::new(&self.base, "smollm2")
        })
        .unwrap()
    }
}

fn p2_request(k: usize, max_tokens: usize) -> Request {
    Request {
        prompt: PromptTemplate::P2.render(None, vec![]).unwrap(),
        k,
        temperature: 0.8,
        top_p: 0.95,
        max_tokens,
        seed: 42,
        repetition_penalty: 1.0,
        prefill: None,
    }
}

/// Every candidate's text, tokens and end, reading the live ones round-robin.
fn run_all(c: &mut dyn Candidates) -> Vec<(String, usize, End)> {
    let k = c.k();
    let mut out = vec![(String::new(), 0, End::Stop); k];
    let mut live: Vec<usize> = (0..k).collect();
    while !live.is_empty() {
        let pieces = c.next(&live).unwrap();
        let mut still = Vec::new();
        for (&id, p) in live.iter().zip(pieces) {
            out[id].0.push_str(&p.text);
            out[id].1 += p.tokens;
            match p.end {
                Some(end) => out[id].2 = end,
                None => still.push(id),
            }
        }
        live = still;
    }
    out
}

fn lock() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
#[ignore = "integration: needs llama-cpp-python and the SmolLM2 GGUF"]
fn k4_streams_with_prompt_p2() {
    let _one = lock();
    let server = Server::start();
    let mut backend = server.backend();
    let max_tokens = 96;
    let mut c = backend.start(&p2_request(4, max_tokens)).unwrap();
    let out = run_all(c.as_mut());
    for (id, (text, tokens, end)) in out.iter().enumerate() {
        eprintln!("candidate {id}: {tokens} tokens, {end:?}: {text:?}");
        assert!(!text.trim().is_empty(), "candidate {id} is empty");
        assert!(
            (1..=max_tokens).contains(tokens),
            "candidate {id}: {tokens}"
        );
        assert!(matches!(end, End::Stop | End::Length), "{id}: {end:?}");
        assert_eq!(c.produced(id), *tokens);
    }
    // Seeds 42..45 sample differently.
    assert!(
        out.iter().any(|o| o.0 != out[0].0),
        "all four texts are equal"
    );
}

#[test]
#[ignore = "integration: needs llama-cpp-python and the SmolLM2 GGUF"]
fn cancel_one_stream_while_others_finish() {
    let _one = lock();
    let server = Server::start();
    let mut backend = server.backend();
    let max_tokens = 128;
    let mut req = p2_request(3, max_tokens);
    // Greedy decoding to max_tokens would be ideal, but a stop is fine too:
    // the point is what the cancelled stream produces.
    req.temperature = 0.9;
    let mut c = backend.start(&req).unwrap();
    for _ in 0..3 {
        let p = c.next(&[0]).unwrap().remove(0);
        assert!(p.end.is_none(), "candidate 0 ended after a few tokens");
    }
    c.cancel(0);
    std::thread::sleep(Duration::from_millis(300));
    let at_cancel = c.produced(0);
    let mut others = Vec::new();
    for id in 1..3 {
        let mut tokens = 0;
        loop {
            let p = c.next(&[id]).unwrap().remove(0);
            tokens += p.tokens;
            if let Some(end) = p.end {
                assert!(matches!(end, End::Stop | End::Length), "{id}: {end:?}");
                break;
            }
        }
        others.push(tokens);
    }
    eprintln!(
        "cancelled candidate: {} tokens produced; others: {others:?}",
        c.produced(0)
    );
    assert_eq!(c.produced(0), at_cancel, "tokens arrived after cancel");
    // The server was still generating candidate 0 when it was cancelled
    // (it serves one request at a time), so it stopped early.
    assert!(at_cancel < max_tokens / 2, "{at_cancel}");
    assert!(others.iter().all(|&t| t > 0));
    drop(c);
    // The server is healthy and serves the next request.
    let mut c = backend.start(&p2_request(1, 8)).unwrap();
    assert!(run_all(c.as_mut())[0].1 > 0);
}

#[test]
#[ignore = "integration: needs llama-cpp-python and the SmolLM2 GGUF"]
fn beyond_the_context() {
    let _one = lock();
    let server = Server::start();
    let mut backend = server.backend();

    // max_tokens far beyond n_ctx = 2048: the server stops at EOS or when
    // the context is full, never beyond it.
    let mut c = backend.start(&p2_request(1, 100_000)).unwrap();
    let (text, tokens, end) = run_all(c.as_mut()).remove(0);
    eprintln!("max_tokens 100000: {tokens} tokens, {end:?}");
    assert!(matches!(end, End::Stop | End::Length), "{end:?}");
    assert!(!text.is_empty() && tokens < 2048, "{tokens}");
    drop(c);

    // A prompt longer than the context: llama-cpp-python fails after sending
    // 200 and closes the stream, which ends the candidate with an error
    // (a server that answers 4xx gives an Err naming the URL instead).
    let p2 = PromptTemplate::P2.text().unwrap();
    let req = Request {
        prompt: Prompt {
            system: None,
            user: [p2.as_str(); 6].join("\n\n"),
            images: vec![],
        },
        ..p2_request(1, 16)
    };
    let url = backend.url().to_string();
    let mut c = backend.start(&req).unwrap();
    match c.next(&[0]) {
        Ok(mut p) => {
            let p = p.remove(0);
            eprintln!("prompt beyond the context: {:?}", p.end);
            assert_eq!(p.text, "");
            assert!(matches!(p.end, Some(End::Error(_))), "{:?}", p.end);
        }
        Err(e) => {
            eprintln!("prompt beyond the context: {e}");
            assert!(e.to_string().contains(&url), "{e}");
        }
    }
}

#[test]
#[ignore = "integration: needs llama-cpp-python and the SmolLM2 GGUF"]
fn tokens_per_second() {
    let _one = lock();
    let server = Server::start();
    let mut backend = server.backend();
    // Warm-up: the first request pays for loading and the prompt cache.
    let mut c = backend.start(&p2_request(1, 8)).unwrap();
    run_all(c.as_mut());
    drop(c);

    let mut rate = |k: usize| {
        let t0 = Instant::now();
        let mut c = backend.start(&p2_request(k, 128)).unwrap();
        let out = run_all(c.as_mut());
        let secs = t0.elapsed().as_secs_f64();
        let tokens: usize = out.iter().map(|o| o.1).sum();
        assert!(tokens > 0);
        eprintln!(
            "K={k}: {tokens} tokens in {secs:.2} s = {:.1} tokens/s aggregate",
            tokens as f64 / secs
        );
        tokens as f64 / secs
    };
    let single = rate(1);
    let four = rate(4);
    eprintln!("aggregate K=4 / single: {:.2}", four / single);
}
