//! `sdr serve` end to end: a real server on 127.0.0.1:0, raw HTTP requests.

mod common;

use std::time::Duration;

use common::*;
use sdr_cli::commands::serve::Limits;
use sdr_reward::{Reference, RewardOptions, Scorer};
use serde_json::json;

fn exact() -> RewardOptions {
    RewardOptions::new("chamfer", 1.0, 1.0, true).unwrap()
}

/// Rewards computed directly, without the server.
fn direct(metric: &str, completions: &[&str], reference: &str) -> Vec<f64> {
    let s = Scorer::new(
        RewardOptions::new(metric, 1.0, 1.0, false).unwrap(),
        Some(encoder()),
    )
    .unwrap();
    let refs = vec![Reference::Report(reference); completions.len()];
    s.score(completions, &refs)
        .unwrap()
        .0
        .iter()
        .map(|r| r.reward)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openrlhf_protocol_scores_and_strips_prompts() {
    let mut srv = start(RewardOptions::default(), Limits::default()).await;
    let prompt = "<|im_start|>user\nIndication: cough.<|im_end|>\n<|im_start|>assistant\n";
    let body = json!({
        // OpenRLHF decodes queries with their special tokens: the last two end
        // with EOS tokens, one also starts with a BOS token the prompt lacks.
        "query": [format!("{prompt}{GOOD}"), format!("{prompt}Heart normal."), REF,
                  format!("<s>{prompt}{OTHER}</s>"), format!("{prompt}{GOOD}<|im_end|>\n<|endoftext|>")],
        "prompts": [prompt, prompt, "a prompt the query does not start with", prompt, prompt],
        "labels": [REF, REF, REF, REF, REF],
    });
    let (status, out) = post_json(srv.addr, "/get_reward", &body).await;
    assert_eq!(status, 200, "{out}");
    let rewards = floats(&out["rewards"]);
    let expected = direct("chamfer", &[GOOD, "Heart normal.", REF, OTHER, GOOD], REF);
    for (g, e) in rewards.iter().zip(&expected) {
        assert!((g - e).abs() < 1e-5, "{rewards:?} vs {expected:?}");
    }
    assert!((rewards[2] - 3.0).abs() < 1e-6);
    assert_eq!(rewards[1], 0.0);
    assert_eq!(floats(&out["scores"]), rewards);
    assert_eq!(
        floats(&out["extra_logs"]["format"]),
        [1.0, 0.0, 1.0, 1.0, 1.0]
    );
    assert_eq!(floats(&out["extra_logs"]["findings"]).len(), 5);
    srv.stop();
    srv.task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_single_sample_requests_are_batched() {
    let limits = Limits {
        max_wait: Duration::from_millis(300),
        max_batch: 1024,
        ..Limits::default()
    };
    let srv = start(RewardOptions::default(), limits).await;
    let comps = [GOOD, OTHER, REF, "no template"];
    let n = 48;
    let mut tasks = Vec::new();
    for k in 0..n {
        let addr = srv.addr;
        let c = comps[k % comps.len()];
        tasks.push(tokio::spawn(async move {
            let body = json!({"query": [c], "prompts": [""], "labels": [REF]});
            post_json(addr, "/get_reward", &body).await
        }));
    }
    let expected = direct("chamfer", &comps, REF);
    for (k, t) in tasks.into_iter().enumerate() {
        let (status, out) = t.await.unwrap();
        assert_eq!(status, 200, "{out}");
        let r = floats(&out["rewards"]);
        assert!(
            (r[0] - expected[k % comps.len()]).abs() < 1e-5,
            "{k}: {r:?}"
        );
    }
    let (status, h) = request(srv.addr, "GET", "/health", b"").await;
    assert_eq!(status, 200);
    let h: serde_json::Value = serde_json::from_str(&h).unwrap();
    assert_eq!(h["requests"], n as u64);
    let batches = h["batches"].as_u64().unwrap();
    assert!(
        batches < (n as u64) / 2,
        "{n} requests in {batches} batches"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_endpoint_metrics_and_sections() {
    let srv = start(RewardOptions::default(), Limits::default()).await;
    let body = json!({
        "completions": [GOOD, OTHER],
        "references": [REF, {"findings": "Heart size is normal. The lungs are clear. No pleural effusion.",
                             "impression": "No acute cardiopulmonary abnormality."}],
        "metric": "ot",
    });
    let (status, out) = post_json(srv.addr, "/v1/rewards", &body).await;
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["metric"], "ot");
    let expected = direct("ot", &[GOOD, OTHER], REF);
    for (g, e) in floats(&out["rewards"]).iter().zip(&expected) {
        assert!((g - e).abs() < 1e-5);
    }
    let (status, out) = post_json(
        srv.addr,
        "/v1/rewards",
        &json!({"completions": [GOOD], "references": [REF]}),
    )
    .await;
    assert_eq!((status, out["metric"].as_str()), (200, Some("chamfer")));
    let (status, out) = post_json(
        srv.addr,
        "/v1/rewards",
        &json!({"completions": [GOOD], "references": [REF], "metric": "chamfre"}),
    )
    .await;
    assert_eq!(status, 400);
    assert!(
        out["error"]
            .as_str()
            .unwrap()
            .contains("unknown metric `chamfre`"),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_a_4xx_with_a_message() {
    let srv = start(exact(), Limits::default()).await;
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        ("/get_reward", b"{not json".to_vec(), 400, "invalid JSON"),
        (
            "/v1/rewards",
            json!({"completions": [GOOD], "references": [{"findings": "A.", "impression": "B.", "findngs": "C."}]})
                .to_string()
                .into_bytes(),
            400,
            "references[0] has an unknown key \"findngs\"",
        ),
        ("/get_reward", br#"{"query": ["a"]}"#.to_vec(), 400, "labels"),
        ("/get_reward", br#"{"query": [1], "labels": ["x"]}"#.to_vec(), 400, "invalid type"),
        (
            "/get_reward",
            json!({"query": ["a", "b"], "labels": [REF]}).to_string().into_bytes(),
            400,
            "labels has 1 items but query/completions has 2",
        ),
        (
            "/get_reward",
            json!({"query": ["a"], "prompts": ["p", "q"], "labels": [REF]}).to_string().into_bytes(),
            400,
            "prompts has 2 items",
        ),
        (
            "/get_reward",
            json!({"query": [GOOD, GOOD], "labels": [REF, "<think>Heart normal.</think><answer></answer>"]})
                .to_string()
                .into_bytes(),
            400,
            "reference 1: section `impression` is empty",
        ),
        (
            "/v1/rewards",
            json!({"completions": [GOOD], "references": [REF], "extra": 1}).to_string().into_bytes(),
            400,
            "unknown field `extra`",
        ),
        ("/nowhere", b"{}".to_vec(), 404, "no such endpoint"),
    ];
    for (path, body, status, needle) in cases {
        let (got, text) = request(srv.addr, "POST", path, &body).await;
        assert_eq!(got, status, "{path} {text}");
        let v: serde_json::Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
        let msg = v["error"]
            .as_str()
            .unwrap_or_else(|| panic!("no error field: {text}"));
        assert!(msg.contains(needle), "{msg:?} lacks {needle:?}");
    }
    // The server still answers after all that.
    let (status, out) = post_json(
        srv.addr,
        "/get_reward",
        &json!({"query": [REF], "labels": [REF]}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(floats(&out["rewards"]), [3.0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_requests_are_refused() {
    let limits = Limits {
        max_body_bytes: 1024,
        max_request_samples: 2,
        ..Limits::default()
    };
    let srv = start(exact(), limits).await;
    let big = json!({"query": ["x".repeat(4096)], "labels": [REF]}).to_string();
    let (status, text) = request(srv.addr, "POST", "/get_reward", big.as_bytes()).await;
    assert_eq!(status, 413, "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("too large"),
        "{v}"
    );
    let many = json!({"completions": [GOOD, GOOD, GOOD], "references": [REF, REF, REF]});
    let (status, out) = post_json(srv.addr, "/v1/rewards", &many).await;
    assert_eq!(status, 413);
    assert!(out["error"]
        .as_str()
        .unwrap()
        .contains("--max-request-samples"));
}

/// Connect with a plain blocking socket and send `head` (and `body`, which
/// may be shorter than the Content-Length `head` declares: a stalled upload).
fn raw_send(addr: std::net::SocketAddr, head: &str, body: &[u8]) -> std::net::TcpStream {
    use std::io::Write;
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    s
}

/// The reply on `s` (status, whole text) and how long it took, reading until
/// the server closes the connection or `limit` passes (status `None` when no
/// reply came).
async fn raw_reply(mut s: std::net::TcpStream, limit: Duration) -> (Option<u16>, String, Duration) {
    tokio::task::spawn_blocking(move || {
        use std::io::Read;
        let t0 = std::time::Instant::now();
        s.set_read_timeout(Some(limit)).unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        let text = String::from_utf8_lossy(&out).into_owned();
        let status = text.split(' ').nth(1).and_then(|c| c.parse().ok());
        (status, text, t0.elapsed())
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_upload_gets_408_and_does_not_hold_up_other_requests() {
    // The review's case: --max-concurrency 1, a client declares 100 bytes,
    // sends 2 and stalls. It used to hold the only slot, with no time limit.
    let limits = Limits {
        max_concurrency: 1,
        timeout: Duration::from_secs(2),
        ..Limits::default()
    };
    let srv = start(exact(), limits).await;
    let head = format!(
        "POST /get_reward HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Content-Length: 100\r\n\r\n",
        srv.addr
    );
    let sent = std::time::Instant::now();
    let stalled = raw_send(srv.addr, &head, b"{}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    // A valid request is scored at once, not after the stalled one's 2 s.
    let t0 = std::time::Instant::now();
    let valid = json!({"query": [REF], "labels": [REF]});
    let (status, out) = tokio::time::timeout(
        Duration::from_secs(5),
        post_json(srv.addr, "/get_reward", &valid),
    )
    .await
    .expect("a valid request is answered while another client stalls");
    assert_eq!((status, floats(&out["rewards"])), (200, vec![3.0]), "{out}");
    assert!(
        t0.elapsed() < Duration::from_millis(1500),
        "{:?}",
        t0.elapsed()
    );
    // The stalled one gets 408 within the --timeout-ms budget, and is closed.
    let (status, text, _) = raw_reply(stalled, Duration::from_secs(6)).await;
    let took = sent.elapsed();
    assert_eq!(status, Some(408), "after {took:?}: {text:?}");
    assert!(
        took >= Duration::from_millis(1900) && took < Duration::from_secs(5),
        "{took:?}"
    );
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let v: serde_json::Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert!(v["error"].as_str().unwrap().contains("--timeout-ms"), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_without_complete_headers_are_closed_after_the_header_timeout() {
    // A client stalled mid-headers, and one connected that sends nothing:
    // with axum's own `serve` (no timer in hyper) both stayed open for ever.
    let limits = Limits {
        header_timeout: Duration::from_millis(600),
        ..Limits::default()
    };
    let srv = start(exact(), limits).await;
    let sent = std::time::Instant::now();
    let stalled = raw_send(srv.addr, "POST /get_reward HTTP/1.1\r\nHost: x\r\n", b"");
    let silent = raw_send(srv.addr, "", b"");
    // Requests that arrive in time are served.
    let valid = json!({"query": [REF], "labels": [REF]});
    for _ in 0..2 {
        let (status, out) = post_json(srv.addr, "/get_reward", &valid).await;
        assert_eq!((status, floats(&out["rewards"])), (200, vec![3.0]), "{out}");
    }
    for s in [stalled, silent] {
        let (status, text, _) = raw_reply(s, Duration::from_secs(8)).await;
        let took = sent.elapsed();
        assert!(
            took >= Duration::from_millis(550) && took < Duration::from_secs(4),
            "closed after {took:?}: {text:?}"
        );
        assert_eq!(status, None, "{text:?}");
    }
}

/// One reply read off a kept-alive connection: (status, body).
fn read_reply(s: &mut std::net::TcpStream) -> (u16, String) {
    use std::io::Read;
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        assert_eq!(s.read(&mut byte).unwrap(), 1, "closed mid-reply: {buf:?}");
        buf.push(byte[0]);
    }
    let head = String::from_utf8(buf).unwrap();
    let length: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse().unwrap())
        })
        .expect("content-length");
    let mut body = vec![0u8; length];
    s.read_exact(&mut body).unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, String::from_utf8(body).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_header_timeout_spares_slow_requests_and_kept_alive_connections() {
    // Each request waits --max-wait-ms (600 ms) for company, past the 300 ms
    // header timeout: the timer runs only while the headers are awaited.
    let limits = Limits {
        header_timeout: Duration::from_millis(300),
        max_wait: Duration::from_millis(600),
        ..Limits::default()
    };
    let srv = start(exact(), limits).await;
    let addr = srv.addr;
    tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let body = json!({"query": [REF], "labels": [REF]}).to_string();
        let request = format!(
            "POST /get_reward HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        );
        for _ in 0..2 {
            let t0 = std::time::Instant::now();
            s.write_all(request.as_bytes()).unwrap();
            let (status, reply) = read_reply(&mut s);
            assert_eq!(status, 200, "{reply}");
            assert!(
                t0.elapsed() >= Duration::from_millis(550),
                "{:?}",
                t0.elapsed()
            );
        }
        // Then idle past the timeout: closed.
        let t0 = std::time::Instant::now();
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
        let idle = t0.elapsed();
        assert!(rest.is_empty(), "{rest:?}");
        assert!(
            idle >= Duration::from_millis(250) && idle < Duration::from_secs(3),
            "{idle:?}"
        );
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_content_length_over_the_limit_gets_413_at_once() {
    let limits = Limits {
        max_body_bytes: 1024,
        ..Limits::default()
    };
    let srv = start(exact(), limits).await;
    for (path, length) in [
        ("/get_reward", "999999999999"),
        ("/get_reward", "1025"),
        ("/v1/rewards", "20000000"),
    ] {
        // The headers only: the body is never sent.
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Content-Length: {length}\r\n\r\n",
            srv.addr
        );
        let s = raw_send(srv.addr, &head, b"");
        let (status, text, took) = raw_reply(s, Duration::from_secs(5)).await;
        assert_eq!(
            status,
            Some(413),
            "{path} {length} after {took:?}: {text:?}"
        );
        assert!(took < Duration::from_secs(2), "{path} {length}: {took:?}");
        let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        let v: serde_json::Value =
            serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {text}"));
        let msg = v["error"].as_str().unwrap();
        assert!(
            msg.contains("too large") && msg.contains("--max-body-bytes"),
            "{msg}"
        );
    }
    // A body within the limit is still read and scored.
    let (status, out) = post_json(
        srv.addr,
        "/get_reward",
        &json!({"query": [REF], "labels": [REF]}),
    )
    .await;
    assert_eq!((status, floats(&out["rewards"])), (200, vec![3.0]), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overload_is_shed_with_503_and_retry_after() {
    // One queued sample at most, and batches held for 400 ms: while the first
    // request waits, the second is refused at once; later ones succeed.
    let limits = Limits {
        max_wait: Duration::from_millis(400),
        max_queued_samples: 1,
        ..Limits::default()
    };
    let srv = start(exact(), limits).await;
    let addr = srv.addr;
    let body = json!({"query": [REF], "labels": [REF]});
    let b = body.clone();
    let first = tokio::spawn(async move { post_json(addr, "/get_reward", &b).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (status, head, text) =
        request_full(addr, "POST", "/get_reward", body.to_string().as_bytes()).await;
    assert_eq!(status, 503, "{text}");
    assert!(head.to_lowercase().contains("retry-after: 1"), "{head}");
    assert!(text.contains("--max-queued-samples"), "{text}");
    let (status, out) = first.await.unwrap();
    assert_eq!((status, floats(&out["rewards"])), (200, vec![3.0]));
    // The slot is released: the next request is scored.
    let (status, _) = post_json(addr, "/get_reward", &body).await;
    assert_eq!(status, 200);
    // A request larger than the queue could never be queued: 413, not 503.
    let two = json!({"query": [REF, REF], "labels": [REF, REF]});
    let (status, out) = post_json(addr, "/get_reward", &two).await;
    assert_eq!(status, 413, "{out}");
    assert!(
        out["error"]
            .as_str()
            .unwrap()
            .contains("2 samples in one request; the limit is 1 (--max-queued-samples)"),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_sentences_are_refused_naming_the_sample() {
    let limits = Limits {
        max_sentences_per_sample: 10,
        max_request_sentences: 25,
        ..Limits::default()
    };
    let srv = start(exact(), limits).await;
    // REF has 4 sentences; GOOD 3.
    let long = |n: usize| {
        let f: String = (0..n).map(|i| format!("Finding {i}. ")).collect();
        format!("<think>{f}</think><answer>Normal.</answer>")
    };
    let body = json!({"completions": [GOOD, long(6)], "references": [REF, REF]});
    let (status, out) = post_json(srv.addr, "/v1/rewards", &body).await;
    assert_eq!(status, 413, "{out}");
    let msg = out["error"].as_str().unwrap();
    assert!(
        msg.contains("sample 1 has 11 sentences (completion 7, reference 4)")
            && msg.contains("--max-sentences-per-sample"),
        "{msg}"
    );
    // 7 + 7 + 7 + 7 > 25: the request, at its fourth sample.
    let body = json!({"query": [GOOD, GOOD, GOOD, GOOD], "labels": [REF, REF, REF, REF]});
    let (status, out) = post_json(srv.addr, "/get_reward", &body).await;
    assert_eq!(status, 413, "{out}");
    let msg = out["error"].as_str().unwrap();
    assert!(
        msg.contains("samples 0 to 3 have 28 sentences") && msg.contains("--max-request-sentences"),
        "{msg}"
    );
    // A malformed completion is never embedded: its sentences do not count.
    let malformed = "Finding. ".repeat(50);
    let body = json!({"completions": [malformed, GOOD], "references": [REF, REF]});
    let (status, out) = post_json(srv.addr, "/v1/rewards", &body).await;
    assert_eq!((status, floats(&out["rewards"])[0]), (200, 0.0), "{out}");

    // The defaults refuse the 3,000-sentence completion of the review.
    let srv = start(exact(), Limits::default()).await;
    let body = json!({"completions": [long(3000)], "references": [REF]});
    let (status, out) = post_json(srv.addr, "/v1/rewards", &body).await;
    assert_eq!(status, 413, "{out}");
    assert!(out["error"].as_str().unwrap().contains("sample 0"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exact_match_server_says_so_whatever_metric_is_asked() {
    let srv = start(exact(), Limits::default()).await;
    for metric in [None, Some("ot"), Some("hung-pen:alpha=0.1")] {
        let mut body = json!({"completions": [REF, GOOD], "references": [REF, REF]});
        if let Some(m) = metric {
            body["metric"] = json!(m);
        }
        let (status, out) = post_json(srv.addr, "/v1/rewards", &body).await;
        assert_eq!(
            (status, out["metric"].as_str()),
            (200, Some("exact")),
            "{out}"
        );
        assert_eq!(floats(&out["rewards"])[0], 3.0, "{out}");
    }
    // A spec that is not one is still refused.
    let body = json!({"completions": [REF], "references": [REF], "metric": "chamfre"});
    let (status, out) = post_json(srv.addr, "/v1/rewards", &body).await;
    assert_eq!(status, 400, "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_method_is_a_405_with_a_message() {
    let srv = start(exact(), Limits::default()).await;
    for (method, path) in [
        ("GET", "/v1/rewards"),
        ("GET", "/get_reward"),
        ("POST", "/health"),
    ] {
        let (status, head, text) = request_full(srv.addr, method, path, b"").await;
        assert_eq!(status, 405, "{method} {path}: {text}");
        let v: serde_json::Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text:?}"));
        assert!(
            v["error"].as_str().unwrap().contains("method not allowed"),
            "{v}"
        );
        assert!(head.to_lowercase().contains("allow: "), "{head}");
    }
}

/// A stand-in encoder that takes `per_sentence` of wall time per sentence (and
/// no CPU, so timings hold on a loaded machine), with `sdr-hash-bow` vectors.
struct Slow {
    inner: sdr_corpus::HashEncoder,
    per_sentence: Duration,
}

impl sdr_reward::SentenceEncoder for Slow {
    fn name(&self) -> String {
        "slow-hash".into()
    }
    fn weights_sha256(&self) -> sdr_embed::Result<String> {
        Ok("none".into())
    }
    fn dim(&self) -> usize {
        self.inner.dim
    }
    fn embed(&self, texts: &[&str]) -> sdr_embed::Result<Vec<f32>> {
        std::thread::sleep(self.per_sentence * texts.len() as u32);
        self.inner.embed(texts)
    }
}

/// Limits of the `Slow` servers: chunks of 8 sentences (80 ms), room for
/// 2,000-sentence samples.
fn slow_limits(timeout: Duration) -> Limits {
    Limits {
        timeout,
        encode_chunk: 8,
        max_sentences_per_sample: 10_000,
        ..Limits::default()
    }
}

/// A server on `Slow` (10 ms a sentence); stops when the sender is dropped.
async fn start_slow(limits: Limits) -> (std::net::SocketAddr, tokio::sync::oneshot::Sender<()>) {
    use sdr_cli::commands::serve::{serve, AppState};
    let enc = std::sync::Arc::new(Slow {
        inner: sdr_corpus::HashEncoder::new(16),
        per_sentence: Duration::from_millis(10),
    });
    let state = AppState::new(RewardOptions::default(), Some(enc), limits).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        serve(listener, state, "/get_reward", async {
            let _ = rx.await;
        })
        .await
    });
    (addr, tx)
}

/// Send `body` to `/v1/rewards` without waiting for the reply; dropping the
/// stream is a client that leaves.
async fn send_and_leave_open(
    addr: std::net::SocketAddr,
    body: &serde_json::Value,
) -> tokio::net::TcpStream {
    use tokio::io::AsyncWriteExt;
    let body = body.to_string();
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /v1/rewards HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(body.as_bytes()).await.unwrap();
    s
}

/// One sample whose completion has `n` distinct sentences (`n` x 10 ms of
/// `Slow`'s time), all sentences prefixed with `tag`.
fn sample_of(tag: &str, n: usize) -> serde_json::Value {
    let f: String = (0..n).map(|i| format!("{tag} finding {i}. ")).collect();
    let c = format!("<think>{f}</think><answer>{tag} impression.</answer>");
    json!({"completions": [c], "references": [REF]})
}

/// `/health`'s count of sentences embedded.
async fn embedded(addr: std::net::SocketAddr) -> u64 {
    let (_, h) = request(addr, "GET", "/health", b"").await;
    let h: serde_json::Value = serde_json::from_str(&h).unwrap();
    h["cache"]["embedded"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_timed_out_no_longer_holds_the_encoder() {
    // The review's case: one request needs 10 s of encoder time (1,000
    // sentences), and times out after 2 s. Its work must stop there, so that
    // the next client is served at once instead of timing out too.
    let (addr, _stop) = start_slow(slow_limits(Duration::from_secs(2))).await;
    let (status, out) = post_json(addr, "/v1/rewards", &sample_of("huge", 1000)).await;
    assert_eq!(status, 504, "{out}");
    let t0 = std::time::Instant::now();
    let (status, out) = post_json(addr, "/v1/rewards", &sample_of("small", 3)).await;
    assert_eq!(status, 200, "after {:?}: {out}", t0.elapsed());
    assert!(floats(&out["rewards"])[0] > 1.0, "{out}");
    // Within its own timeout (2 s), far below the 8 s the huge request had left.
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    // The huge request's chunks stopped (8 sentences a chunk): far from 1,000.
    let n = embedded(addr).await;
    assert!(n < 600, "{n} sentences embedded");
    // And the encoder stays free.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(embedded(addr).await, n);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_whose_client_left_no_longer_holds_the_encoder() {
    let (addr, _stop) = start_slow(slow_limits(Duration::from_secs(120))).await;
    let s = send_and_leave_open(addr, &sample_of("gone", 2000)).await;
    // Encoding has started; the client gives up.
    tokio::time::sleep(Duration::from_millis(500)).await;
    drop(s);
    let t0 = std::time::Instant::now();
    let (status, out) = post_json(addr, "/v1/rewards", &sample_of("next", 3)).await;
    assert_eq!(status, 200, "{out}");
    // Without the stop it would wait for the ~19 s left of the first request.
    assert!(t0.elapsed() < Duration::from_secs(8), "{:?}", t0.elapsed());
    let n = embedded(addr).await;
    assert!(n < 1000, "{n} sentences embedded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_batched_with_one_that_left_are_still_scored() {
    // What a lone request gets.
    let (addr, _stop) = start_slow(slow_limits(Duration::from_secs(120))).await;
    let (status, alone) = post_json(addr, "/v1/rewards", &sample_of("same", 5)).await;
    assert_eq!(status, 200, "{alone}");
    // A small request in the batch of a huge one (a 1 s --max-wait-ms puts
    // them together) whose client leaves: the small one is scored without it.
    let limits = Limits {
        max_wait: Duration::from_secs(1),
        ..slow_limits(Duration::from_secs(120))
    };
    let (addr, _stop) = start_slow(limits).await;
    let huge = send_and_leave_open(addr, &sample_of("huge", 2000)).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let small = tokio::spawn(async move {
        let t0 = std::time::Instant::now();
        let reply = post_json(addr, "/v1/rewards", &sample_of("same", 5)).await;
        (reply, t0.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    drop(huge);
    let ((status, out), took) = small.await.unwrap();
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["rewards"], alone["rewards"]);
    assert_eq!(out["findings"], alone["findings"]);
    // 20 s of work were left in the huge request when it left.
    assert!(took < Duration::from_secs(8), "{took:?}");
    let (_, h) = request(addr, "GET", "/health", b"").await;
    let h: serde_json::Value = serde_json::from_str(&h).unwrap();
    assert_eq!(
        (h["batches"].as_u64(), h["requests"].as_u64()),
        (Some(1), Some(2)),
        "{h}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_requests_time_out() {
    let limits = Limits {
        max_wait: Duration::from_millis(500),
        timeout: Duration::from_millis(30),
        ..Limits::default()
    };
    let srv = start(exact(), limits).await;
    let (status, out) = post_json(
        srv.addr,
        "/get_reward",
        &json!({"query": [REF], "labels": [REF]}),
    )
    .await;
    assert_eq!(status, 504, "{out}");
    assert!(out["error"].as_str().unwrap().contains("--timeout-ms"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_finishes_requests_in_flight() {
    let limits = Limits {
        max_wait: Duration::from_millis(300),
        ..Limits::default()
    };
    let mut srv = start(exact(), limits).await;
    let addr = srv.addr;
    let inflight = tokio::spawn(async move {
        post_json(
            addr,
            "/get_reward",
            &json!({"query": [REF], "labels": [REF]}),
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    srv.stop();
    let (status, out) = inflight.await.unwrap();
    assert_eq!((status, floats(&out["rewards"])), (200, vec![3.0]));
    tokio::time::timeout(Duration::from_secs(10), srv.task)
        .await
        .expect("server stops")
        .unwrap()
        .unwrap();
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clinical_weight_adds_and_reports_the_clinical_term() {
    let off = start(exact(), Limits::default()).await;
    let on = start(
        exact().with_clinical_weight(0.5).unwrap(),
        Limits::default(),
    )
    .await;
    let body = json!({"completions": [REF], "references": [REF]});
    let (_, a) = post_json(off.addr, "/v1/rewards", &body).await;
    let (status, b) = post_json(on.addr, "/v1/rewards", &body).await;
    assert_eq!(status, 200, "{b}");
    // Off: no `clinical` key, the paper's reply unchanged.
    assert!(a.get("clinical").is_none(), "{a}");
    assert_eq!(floats(&b["clinical"]), [1.0]);
    assert_eq!(floats(&b["rewards"])[0], floats(&a["rewards"])[0] + 0.5);
    let (_, h) = request(on.addr, "GET", "/health", b"").await;
    assert!(h.contains("\"clinical_weight\":0.5"), "{h}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clinical_cost_scores_every_metric_a_request_names() {
    let cost: sdr_core::cost::CostKind = "clinical".parse().unwrap();
    let srv = start(RewardOptions::default().with_cost(cost), Limits::default()).await;
    // "No pleural effusion." reversed: the clinical cost's reward, per metric, is the
    // scorer's with that cost, and below the cosine reward.
    let reversed = REF.replace("No pleural effusion.", "There is a pleural effusion.");
    for metric in ["chamfer", "hausdorff"] {
        let body = json!({"completions": [reversed], "references": [REF], "metric": metric});
        let (status, got) = post_json(srv.addr, "/v1/rewards", &body).await;
        assert_eq!(status, 200, "{got}");
        let options = RewardOptions::new(metric, 1.0, 1.0, false).unwrap();
        let score = |o: RewardOptions| {
            Scorer::new(o, Some(encoder()))
                .unwrap()
                .score(&[reversed.as_str()], &[Reference::Report(REF)])
                .unwrap()
                .0[0]
                .reward
        };
        assert_eq!(
            floats(&got["rewards"]),
            [score(options.with_cost(cost))],
            "{metric}"
        );
        assert!(
            score(options.with_cost(cost)) < score(options) - 0.1,
            "{metric}"
        );
    }
    let (_, h) = request(srv.addr, "GET", "/health", b"").await;
    assert!(h.contains(&format!("\"cost\":\"{cost}\"")), "{h}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_request_twice_is_served_from_the_cache_with_the_same_rewards() {
    let srv = start(RewardOptions::default(), Limits::default()).await;
    let body = json!({
        "query": [GOOD, OTHER, REF, GOOD],
        "labels": [REF, REF, OTHER, OTHER],
    });
    let (status, first) = post_json(srv.addr, "/get_reward", &body).await;
    assert_eq!(status, 200, "{first}");
    let (_, h) = request(srv.addr, "GET", "/health", b"").await;
    let h1: serde_json::Value = serde_json::from_str(&h).unwrap();
    let embedded = h1["cache"]["embedded"].as_u64().unwrap();
    assert!(embedded > 0, "{h1}");
    assert_eq!(h1["cache"]["hits"], 0, "{h1}");

    let (status, second) = post_json(srv.addr, "/get_reward", &body).await;
    assert_eq!(status, 200, "{second}");
    // Bit for bit: every sentence comes from the cache.
    assert_eq!(first["rewards"], second["rewards"]);
    assert_eq!(first["extra_logs"], second["extra_logs"]);
    let (_, h) = request(srv.addr, "GET", "/health", b"").await;
    let h2: serde_json::Value = serde_json::from_str(&h).unwrap();
    assert_eq!(h2["cache"]["embedded"].as_u64().unwrap(), embedded, "{h2}");
    assert!(h2["cache"]["hit_rate"].as_f64().unwrap() > 0.49, "{h2}");
    assert_eq!(h2["cache"]["entries"].as_u64().unwrap(), embedded, "{h2}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persisted_cache_survives_a_restart() {
    use sdr_cli::commands::serve::{serve, AppState};
    use sdr_reward::{LoadOutcome, PersistentCache, SentenceCache};
    use std::sync::Arc;

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("serve-cache.bin");
    let enc = encoder();
    let open = || {
        let cache =
            Arc::new(SentenceCache::with_mib(enc.identity().unwrap(), enc.dim(), 64.0).unwrap());
        let (p, outcome) = PersistentCache::open(cache.clone(), &path, Duration::from_secs(3600));
        (cache, Arc::new(p), outcome)
    };
    let body = json!({"query": [GOOD, OTHER], "labels": [REF, REF]});
    let mut rewards = Vec::new();
    for round in 0..2 {
        let (cache, persist, outcome) = open();
        if round == 0 {
            assert_eq!(outcome, LoadOutcome::Missing);
        } else {
            assert!(
                matches!(outcome, LoadOutcome::Loaded(n) if n > 0),
                "{outcome:?}"
            );
        }
        let state = AppState::with_cache(
            RewardOptions::default(),
            Some(enc.clone()),
            Limits::default(),
            Some(cache),
            Some(persist),
        )
        .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let st = state.clone();
        let task = tokio::spawn(async move {
            serve(listener, st, "/get_reward", async {
                let _ = rx.await;
            })
            .await
        });
        let (status, out) = post_json(addr, "/get_reward", &body).await;
        assert_eq!(status, 200, "{out}");
        rewards.push(out["rewards"].clone());
        let (_, h) = request(addr, "GET", "/health", b"").await;
        let h: serde_json::Value = serde_json::from_str(&h).unwrap();
        if round == 1 {
            // Warm from the file: nothing embedded after the restart.
            assert_eq!(h["cache"]["embedded"], 0, "{h}");
        }
        let _ = tx.send(());
        task.await.unwrap().unwrap();
        assert!(state.save_cache().unwrap().is_ok());
    }
    assert_eq!(rewards[0], rewards[1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_of_the_wrong_shape_is_told_what_is_expected() {
    let srv = start(exact(), Limits::default()).await;
    let cases: Vec<(&str, serde_json::Value, &str)> = vec![
        (
            "/v1/rewards",
            json!({"completions": [GOOD], "references": [{"findings": "Heart normal."}]}),
            r#"references[0] has no "impression""#,
        ),
        (
            "/v1/rewards",
            json!({"completions": [GOOD, GOOD], "references": [REF, {"impression": "x"}]}),
            r#"references[1] has no "findings""#,
        ),
        (
            "/v1/rewards",
            json!({"completions": [GOOD], "references": [{"findings": 1, "impression": "x"}]}),
            "references[0].findings must be a string, not a number",
        ),
        (
            "/v1/rewards",
            json!({"completions": [GOOD], "references": [7]}),
            "references[0] must be a report string or",
        ),
        (
            "/v1/rewards",
            json!([]),
            r#"the body must be a JSON object {"completions": [...], "references": [...]"#,
        ),
        (
            "/v1/rewards",
            json!({"references": [REF]}),
            "missing field `completions`",
        ),
        (
            "/get_reward",
            json!(["a"]),
            r#"the body must be a JSON object {"query": [...]"#,
        ),
    ];
    for (path, body, needle) in cases {
        let (status, out) = post_json(srv.addr, path, &body).await;
        assert_eq!(status, 400, "{body}: {out}");
        let msg = out["error"].as_str().unwrap();
        assert!(msg.contains(needle), "{body}: {msg:?} lacks {needle:?}");
        for serde_jargon in ["untagged enum", "BatchRequest", "ReferenceIn", "elements"] {
            assert!(!msg.contains(serde_jargon), "{msg}");
        }
    }
}

#[tokio::test]
async fn host_names_that_resolve_are_accepted() {
    use sdr_cli::commands::serve::resolve_host;
    let local = resolve_host("localhost", 8000).await.unwrap();
    assert!(
        local
            .iter()
            .all(|a| a.ip().is_loopback() && a.port() == 8000),
        "{local:?}"
    );
    for ip in ["127.0.0.1", "::1", "[::1]"] {
        assert_eq!(resolve_host(ip, 1).await.unwrap().len(), 1, "{ip}");
    }
    for bad in [
        "no-such-host.invalid",
        "localhost:80",
        "",
        "http://localhost",
    ] {
        let msg = resolve_host(bad, 1).await.unwrap_err().to_string();
        assert!(
            msg.contains("--host") && msg.contains("IP address"),
            "{msg}"
        );
    }
}

/// `sdr serve` with `args` until it says where it listens (then it is stopped
/// with SIGTERM, the way a trainer stops it, after `then` ran), or until it exits.
/// Returns its stderr and exit status.
fn run_server(
    args: &[&std::ffi::OsStr],
    then: impl FnOnce(std::net::SocketAddr),
) -> (String, std::process::ExitStatus) {
    use std::io::BufRead;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_sdr"))
        .arg("serve")
        .args(["--host", "localhost", "--port", "0"])
        .args(args)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let mut err = String::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        err.push_str(&line);
        err.push('\n');
        if let Some(rest) = line.split("listening on http://").nth(1) {
            let addr = rest.split(' ').next().unwrap().parse().unwrap();
            // Stopped even when `then` fails, so that no server outlives the test.
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| then(addr)));
            let pid = child.id().to_string();
            std::process::Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap();
            if let Err(panic) = outcome {
                let _ = child.wait();
                std::panic::resume_unwind(panic);
            }
            break;
        }
    }
    for line in lines {
        err.push_str(&line.unwrap());
        err.push('\n');
    }
    (err, child.wait().unwrap())
}

#[test]
fn a_cache_path_holding_another_kind_of_file_stops_the_server_and_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus.safetensors");
    let precious = b"\x10\x00\x00\x00\x00\x00\x00\x00{\"__metadata__\":{}}".repeat(8);
    std::fs::write(&corpus, &precious).unwrap();
    let started = std::cell::Cell::new(false);
    let (err, status) = run_server(&["--cache".as_ref(), corpus.as_os_str()], |_| {
        started.set(true)
    });
    assert!(!started.get() && !status.success(), "started: {err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains("corpus.safetensors")
            && lines[0].contains("not an SDR sentence-cache file"),
        "{err}"
    );
    assert_eq!(std::fs::read(&corpus).unwrap(), precious);
}

#[test]
fn a_damaged_sentence_cache_is_still_rebuilt() {
    let _ = encoder(); // fails with the fetch instruction when the model is missing
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache.sdrc");
    std::fs::write(&cache, b"SDRC2 truncated").unwrap();
    let (err, status) = run_server(&["--cache".as_ref(), cache.as_os_str()], |addr| {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let (status, out) = rt.block_on(post_json(
            addr,
            "/get_reward",
            &json!({"query": [GOOD], "labels": [REF]}),
        ));
        assert_eq!(status, 200, "{out}");
    });
    assert!(status.success(), "{err}");
    assert!(err.contains("starting with an empty cache"), "{err}");
    let rebuilt =
        sdr_reward::SentenceCache::new(encoder().identity().unwrap(), encoder().dim(), 1 << 30);
    assert!(rebuilt.load(&cache).unwrap() > 0, "{err}");
}

#[test]
fn options_that_would_make_the_server_useless_are_refused_at_start() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--max-body-bytes", "0"],
            "--max-body-bytes 0: must be at least 1024",
        ),
        (
            &["--max-sentences-per-sample", "1"],
            "--max-sentences-per-sample 1: must be at least 4",
        ),
        (
            &["--max-request-sentences", "0"],
            "--max-request-sentences 0: must be at least 4",
        ),
        (
            &["--max-wait-ms", "500", "--timeout-ms", "500"],
            "--max-wait-ms 500 must be below --timeout-ms 500",
        ),
        (
            &["--max-concurrency", "0"],
            "--max-concurrency must be between 1 and",
        ),
        (
            &["--format-weight", "NaN"],
            "--format-weight NaN: must be a finite number >= 0",
        ),
        (
            &["--format-weight", "1e308", "--semantic-weight", "1e308"],
            "--format-weight 1e308: must be a finite number >= 0 and <= 1e6",
        ),
        (
            &["--max-queued-samples", "0"],
            "--max-queued-samples must be at least 1",
        ),
        (
            &["--format-weight", "0", "--semantic-weight", "0"],
            "every reward would be 0",
        ),
        (&["--cache-save-secs", "1e30"], "--cache-save-secs must be"),
        (&["--cache-mib=-1"], "--cache-mib -1: must be"),
    ];
    for (args, needle) in cases {
        let mut all: Vec<&std::ffi::OsStr> = vec!["--exact".as_ref()];
        all.extend(args.iter().map(std::ffi::OsStr::new));
        let started = std::cell::Cell::new(false);
        let (err, status) = run_server(&all, |_| started.set(true));
        assert!(
            !started.get() && !status.success(),
            "{args:?} started: {err}"
        );
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?}: {err}");
        assert!(lines[0].contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn help_documents_the_formats_and_the_errors() {
    let help = |flag: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_sdr"))
            .args(["serve", flag])
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    };
    let long = help("--help");
    for needle in [
        r#"{"query": [string], "prompts": [string], "labels": [string]}"#,
        r#"{"completions": [completion], "references": [reference], "metric": "ot"}"#,
        "<think>reasoning</think>content",
        r#"{"findings": string, "impression":"#,
        r#"{"rewards": [R], "scores": [R], "extra_logs": {"format": [R_fmt]"#,
        r#"Errors are {"error": "message"}"#,
        "R = λ_fmt·R_fmt + λ_sem·(R_F + R_I)",
        "λ_fmt, the weight of the format term",
        "Largest request body, in bytes",
        "--max-sentences-per-sample",
        "--max-request-sentences",
    ] {
        assert!(long.contains(needle), "--help lacks {needle:?}:\n{long}");
    }
    for status in ["400", "404", "405", "408", "413", "503", "504"] {
        assert!(
            long.contains(&format!("\n  {status}  ")),
            "--help lacks {status}"
        );
    }
    // -h points to --help, --help to nothing.
    assert!(help("-h").contains("sdr serve --help"));
    assert!(!long.contains("sdr serve --help"), "{long}");
}
