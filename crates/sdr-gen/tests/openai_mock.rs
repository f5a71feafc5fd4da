//! The OpenAI back-end against an in-process mock server on 127.0.0.1 that
//! serves scripted SSE streams.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use sdr_gen::openai::{OpenAiBackend, OpenAiConfig};
use sdr_gen::{Backend, Candidates, End, GenError, Image, Piece, Prompt, Request};
use serde_json::{json, Value};

/// One step of a scripted SSE body.
#[derive(Clone)]
enum Step {
    /// `data: <payload>` and a blank line.
    Data(String),
    /// A pause before the next step.
    Sleep(Duration),
}

/// The mock's answer to one request.
enum Reply {
    Status(u16, Vec<(&'static str, String)>, String),
    Sse(Vec<Step>),
    /// No answer (not even headers) for this long.
    Stall(Duration),
}

/// What the mock saw of one request.
#[derive(Clone, Debug)]
struct Seen {
    auth: Option<String>,
    body: Value,
}

/// What happened to one SSE body: steps sent, and whether it was dropped
/// (at its end, or when the client went away).
#[derive(Default)]
struct BodyLog {
    seed: Option<u64>,
    sent: AtomicUsize,
    total: usize,
    dropped: AtomicBool,
}

type Script = dyn Fn(usize, &Value) -> Reply + Send + Sync;

struct MockState {
    script: Box<Script>,
    seen: Mutex<Vec<Seen>>,
    bodies: Mutex<Vec<Arc<BodyLog>>>,
}

struct Mock {
    base: String,
    state: Arc<MockState>,
    _rt: tokio::runtime::Runtime,
}

impl Mock {
    fn start(script: impl Fn(usize, &Value) -> Reply + Send + Sync + 'static) -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let state = Arc::new(MockState {
            script: Box::new(script),
            seen: Mutex::new(Vec::new()),
            bodies: Mutex::new(Vec::new()),
        });
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let app = Router::new()
            .route("/v1/chat/completions", post(handle))
            .with_state(Arc::clone(&state));
        rt.spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self {
            base: format!("http://{addr}/v1"),
            state,
            _rt: rt,
        }
    }

    fn url(&self) -> String {
        format!("{}/chat/completions", self.base)
    }

    fn seen(&self) -> Vec<Seen> {
        self.state.seen.lock().unwrap().clone()
    }

    fn body_for_seed(&self, seed: u64) -> Arc<BodyLog> {
        let bodies = self.state.bodies.lock().unwrap();
        let b = bodies.iter().find(|b| b.seed == Some(seed));
        Arc::clone(b.expect("no SSE body for this seed"))
    }
}

/// Marks its body dropped.
struct DropGuard(Arc<BodyLog>);

impl Drop for DropGuard {
    fn drop(&mut self) {
        self.0.dropped.store(true, Ordering::SeqCst);
    }
}

async fn handle(State(st): State<Arc<MockState>>, headers: HeaderMap, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let n = {
        let mut seen = st.seen.lock().unwrap();
        seen.push(Seen {
            auth: headers
                .get("authorization")
                .map(|v| v.to_str().unwrap().to_string()),
            body: body.clone(),
        });
        seen.len() - 1
    };
    match (st.script)(n, &body) {
        Reply::Stall(d) => {
            tokio::time::sleep(d).await;
            Response::new(Body::empty())
        }
        Reply::Status(code, hdrs, text) => {
            let mut r = Response::builder().status(StatusCode::from_u16(code).unwrap());
            for (k, v) in hdrs {
                r = r.header(k, v);
            }
            r.body(Body::from(text)).unwrap()
        }
        Reply::Sse(steps) => {
            let log = Arc::new(BodyLog {
                seed: body["seed"].as_u64(),
                total: steps.len(),
                ..BodyLog::default()
            });
            st.bodies.lock().unwrap().push(Arc::clone(&log));
            let guard = DropGuard(log);
            let stream = futures_util::stream::unfold(
                (steps.into_iter(), guard),
                |(mut it, guard)| async move {
                    loop {
                        let step = it.next()?;
                        guard.0.sent.fetch_add(1, Ordering::SeqCst);
                        match step {
                            Step::Sleep(d) => tokio::time::sleep(d).await,
                            Step::Data(d) => {
                                let bytes = Bytes::from(format!("data: {d}\n\n"));
                                return Some((Ok::<_, Infallible>(bytes), (it, guard)));
                            }
                        }
                    }
                },
            );
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from_stream(stream))
                .unwrap()
        }
    }
}

fn content(text: &str) -> Step {
    Step::Data(
        json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
            .to_string(),
    )
}

fn role() -> Step {
    Step::Data(
        json!({"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": null}]})
            .to_string(),
    )
}

fn finish(reason: &str, text: Option<&str>) -> Step {
    let delta = text.map_or(json!({}), |t| json!({"content": t}));
    Step::Data(
        json!({"choices": [{"index": 0, "delta": delta, "finish_reason": reason}]}).to_string(),
    )
}

fn usage(completion: usize) -> Step {
    Step::Data(
        json!({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": completion}})
            .to_string(),
    )
}

fn done() -> Step {
    Step::Data("[DONE]".into())
}

/// A complete stream of `texts`, one chunk each, ending with `stop`.
fn stream_of(texts: &[&str]) -> Reply {
    let mut steps = vec![role()];
    steps.extend(texts.iter().map(|t| content(t)));
    steps.extend([finish("stop", None), usage(texts.len()), done()]);
    Reply::Sse(steps)
}

fn config(base: &str) -> OpenAiConfig {
    OpenAiConfig {
        api_key_env: "SDR_MOCK_TEST_KEY_NEVER_SET".into(),
        connect_timeout: Duration::from_secs(1),
        idle_timeout: Duration::from_secs(3),
        request_timeout: Duration::from_secs(10),
        max_retries: 2,
        backoff_base: Duration::from_millis(10),
        ..OpenAiConfig::new(base, "mock-model")
    }
}

fn request(k: usize) -> Request {
    Request {
        prompt: Prompt {
            system: None,
            user: "Write a report.".into(),
            images: vec![],
        },
        k,
        temperature: 0.7,
        top_p: 0.95,
        max_tokens: 32,
        seed: 7,
        repetition_penalty: 1.0,
        prefill: None,
    }
}

/// One candidate read to its end: text, tokens, end.
fn drain(c: &mut dyn Candidates, id: usize) -> (String, usize, End) {
    let (mut text, mut tokens) = (String::new(), 0);
    for _ in 0..10_000 {
        let Piece {
            text: t,
            tokens: n,
            end,
        } = c.next(&[id]).unwrap().remove(0);
        text.push_str(&t);
        tokens += n;
        if let Some(end) = end {
            return (text, tokens, end);
        }
    }
    panic!("candidate {id} did not end");
}

fn wait_for(what: &str, limit: Duration, cond: impl Fn() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn streams_k3_with_distinct_seeds() {
    let mock = Mock::start(|_, body| {
        let seed = body["seed"].as_u64().unwrap().to_string();
        stream_of(&["seed ", &seed])
    });
    let mut backend = OpenAiBackend::new(config(&mock.base)).unwrap();
    assert_eq!(
        backend.describe(),
        format!("openai:mock-model@{}", mock.base)
    );
    let mut c = backend.start(&request(3)).unwrap();
    assert_eq!(c.k(), 3);
    // Round-robin, as the lock-step does.
    let first = c.next(&[0, 1, 2]).unwrap();
    assert!(first
        .iter()
        .all(|p| p.text == "seed " && p.tokens == 1 && p.end.is_none()));
    for id in 0..3 {
        let (text, tokens, end) = drain(c.as_mut(), id);
        assert_eq!(text, (7 + id).to_string());
        assert_eq!((tokens + 1, end), (2, End::Stop));
        assert_eq!(c.produced(id), 2);
    }
    let mut seeds: Vec<u64> = mock
        .seen()
        .iter()
        .map(|s| s.body["seed"].as_u64().unwrap())
        .collect();
    seeds.sort();
    assert_eq!(seeds, [7, 8, 9]);
    // An ended candidate is not live any more.
    assert!(matches!(c.next(&[0]), Err(GenError::Protocol(_))));
    assert!(matches!(c.next(&[3]), Err(GenError::Protocol(_))));
}

#[test]
fn request_body_and_authorization() {
    let mock = Mock::start(|_, _| stream_of(&["ok"]));
    std::env::set_var("SDR_MOCK_TEST_KEY_SET", "sk-mock-123");
    let cfg = OpenAiConfig {
        api_key_env: "SDR_MOCK_TEST_KEY_SET".into(),
        ..config(&mock.base)
    };
    let mut backend = OpenAiBackend::new(cfg).unwrap();
    assert!(!format!("{backend:?}").contains("sk-mock-123"));
    assert!(!backend.describe().contains("sk-mock-123"));
    let image = Image {
        mime: "image/png".into(),
        bytes: vec![0x89, b'P', b'N', b'G'],
    };
    let mut req = request(1);
    req.prompt.system = Some("You are a radiologist.".into());
    req.prompt.images = vec![image];
    let mut c = backend.start(&req).unwrap();
    assert_eq!(drain(c.as_mut(), 0).0, "ok");
    drop(c);

    let seen = mock.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].auth.as_deref(), Some("Bearer sk-mock-123"));
    let b = &seen[0].body;
    assert_eq!(b["model"], "mock-model");
    assert_eq!(b["stream"], true);
    assert_eq!(b["stream_options"], json!({"include_usage": true}));
    assert_eq!(b["seed"], 7);
    assert_eq!(b["max_tokens"], 32);
    assert_eq!(b["temperature"], 0.7);
    assert_eq!(b["top_p"], 0.95);
    assert!(b.get("n").is_none_or(|n| n == 1));
    assert_eq!(
        b["messages"],
        json!([
            {"role": "system", "content": "You are a radiologist."},
            {"role": "user", "content": [
                {"type": "text", "text": "Write a report."},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw=="}},
            ]},
        ])
    );

    // No key: no header, and text-only content is a plain string.
    let mut backend = OpenAiBackend::new(config(&mock.base)).unwrap();
    let mut c = backend.start(&request(1)).unwrap();
    drain(c.as_mut(), 0);
    let seen = mock.seen();
    assert_eq!(seen[1].auth, None);
    assert_eq!(
        seen[1].body["messages"],
        json!([{"role": "user", "content": "Write a report."}])
    );
}

#[test]
fn retries_429_honouring_retry_after() {
    let mock = Mock::start(|n, _| match n {
        0 => Reply::Status(
            429,
            vec![("retry-after", "1".into())],
            r#"{"error":{"message":"slow down"}}"#.into(),
        ),
        _ => stream_of(&["fine"]),
    });
    let mut backend = OpenAiBackend::new(config(&mock.base)).unwrap();
    let t0 = Instant::now();
    let mut c = backend.start(&request(1)).unwrap();
    let (text, _, end) = drain(c.as_mut(), 0);
    let took = t0.elapsed();
    assert_eq!((text.as_str(), end), ("fine", End::Stop));
    assert_eq!(mock.seen().len(), 2);
    // The backoff base is 10 ms: only Retry-After explains a wait of a second.
    assert!(took >= Duration::from_millis(950), "{took:?}");
    assert!(took < Duration::from_secs(3), "{took:?}");
}

#[test]
fn retries_5xx_then_streams() {
    let mock = Mock::start(|n, _| match n {
        0 | 1 => Reply::Status(503, vec![], "busy".into()),
        _ => stream_of(&["up"]),
    });
    let mut backend = OpenAiBackend::new(config(&mock.base)).unwrap();
    let mut c = backend.start(&request(1)).unwrap();
    assert_eq!(drain(c.as_mut(), 0).0, "up");
    assert_eq!(mock.seen().len(), 3);
}

#[test]
fn persistent_500_is_an_error_naming_the_url() {
    let mock = Mock::start(|_, _| {
        Reply::Status(
            500,
            vec![],
            r#"{"error":{"message":"model\ncrashed","type":"server_error"}}"#.into(),
        )
    });
    let mut backend = OpenAiBackend::new(config(&mock.base)).unwrap();
    let mut c = backend.start(&request(1)).unwrap();
    let err = c.next(&[0]).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, GenError::Server { .. }), "{err:?}");
    assert!(msg.contains(&mock.url()), "{msg}");
    assert!(msg.contains("candidate 0"), "{msg}");
    assert!(msg.contains("500"), "{msg}");
    assert!(msg.contains("model crashed"), "{msg}");
    assert!(msg.contains("3 attempts"), "{msg}");
    assert!(!msg.contains('\n'), "{msg}");
    assert_eq!(mock.seen().len(), 3, "1 try + 2 retries");
}

#[test]
fn unauthorized_is_not_retried() {
    let mock = Mock::start(|_, _| {
        Reply::Status(
            401,
            vec![],
            r#"{"error":{"message":"Incorrect API key provided"}}"#.into(),
        )
    });
    let mut backend = OpenAiBackend::new(config(&mock.base)).unwrap();
    let mut c = backend.start(&request(2)).unwrap();
    let msg = c.next(&[1]).unwrap_err().to_string();
    assert!(msg.contains("401"), "{msg}");
    assert!(msg.contains("Incorrect API key provided"), "{msg}");
    assert!(msg.contains("candidate 1"), "{msg}");
    assert!(!msg.contains("attempts"), "{msg}");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(mock.seen().len(), 2, "one request per candidate, no retry");
}

#[test]
fn malformed_json_mid_stream_keeps_the_text() {
    let mock = Mock::start(|_, _| {
        Reply::Sse(vec![
            content("Heart"),
            content(" normal."),
            Step::Data("{\"choices\": [ not json".into()),
            content(" never seen"),
            done(),
        ])
    });
    let mut backend = OpenAiBackend::new(config(&mock.base)).unwrap();
    let mut c = backend.start(&request(1)).unwrap();
    let (text, tokens, end) = drain(c.as_mut(), 0);
    assert_eq!((text.as_str(), tokens), ("Heart normal.", 2));
    assert!(
        matches!(&end, End::Error(m) if m.contains("malformed")),
        "{end:?}"
    );
}

#[test]
fn error_object_mid_stream() {
    let mock = Mock::start(|_, _| {
        Reply::Sse(vec![
            content("No"),
            Step::Data(r#"{"error": {"message": "boom: out of memory", "code": 500}}"#.into()),
            done(),
        ])
    });
    let mut backend = OpenAiBackend::new(config(&mock.base)).unwrap();
    let mut c = backend.start(&request(1)).unwrap();
    let (text, _, end) = drain(c.as_mut(), 0);
    assert_eq!(text, "No");
    assert!(
        matches!(&end, End::Error(m) if m.contains("boom: out of memory")),
        "{end:?}"
    );
}

#[test]
fn idle_timeout_ends_the_candidate() {
    let mock = Mock::start(|_, _| {
        Reply::Sse(vec![
            content("Lungs"),
            Step::Sleep(Duration::from_secs(20)),
            content(" clear."),
        ])
    });
    let cfg = OpenAiConfig {
        idle_timeout: Duration::from_millis(300),
        ..config(&mock.base)
    };
    let mut backend = OpenAiBackend::new(cfg).unwrap();
    let t0 = Instant::now();
    let mut c = backend.start(&request(1)).unwrap();
    let (text, _, end) = drain(c.as_mut(), 0);
    assert_eq!(text, "Lungs");
    assert!(
        matches!(&end, End::Error(m) if m.contains("idle")),
        "{end:?}"
    );
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
}

/// An endless-looking stream: a chunk every 20 ms, 500 of them.
fn slow_stream() -> Reply {
    let mut steps = Vec::new();
    for _ in 0..500 {
        steps.push(content("x"));
        steps.push(Step::Sleep(Duration::from_millis(20)));
    }
    steps.extend([finish("stop", None), done()]);
    Reply::Sse(steps)
}

#[test]
fn cancel_drops_the_connection() {
    let mock = Mock::start(|_, body| match body["seed"].as_u64() {
        Some(7) => slow_stream(),
        _ => stream_of(&["short", " one."]),
    });
    let mut backend = OpenAiBackend::new(config(&mock.base)).unwrap();
    let mut c = backend.start(&request(2)).unwrap();
    for _ in 0..3 {
        assert_eq!(c.next(&[0]).unwrap()[0].text, "x");
    }
    c.cancel(0);
    let body = mock.body_for_seed(7);
    wait_for(
        "the server to see the disconnect",
        Duration::from_secs(2),
        || body.dropped.load(Ordering::SeqCst),
    );
    let sent = body.sent.load(Ordering::SeqCst);
    assert!(sent < body.total / 2, "sent {sent} of {}", body.total);
    let produced = c.produced(0);
    assert!((3..50).contains(&produced), "{produced}");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(c.produced(0), produced, "no tokens after cancel");
    assert!(matches!(c.next(&[0]), Err(GenError::Protocol(_))));
    // The other candidate is unaffected.
    assert_eq!(drain(c.as_mut(), 1), ("short one.".into(), 2, End::Stop));
}

#[test]
fn dropping_the_candidates_cancels_all_streams() {
    let mock = Mock::start(|_, _| slow_stream());
    let mut backend = OpenAiBackend::new(config(&mock.base)).unwrap();
    let mut c = backend.start(&request(2)).unwrap();
    c.next(&[0, 1]).unwrap();
    drop(c);
    for seed in [7, 8] {
        let body = mock.body_for_seed(seed);
        wait_for(
            "the server to see the disconnect",
            Duration::from_secs(2),
            || body.dropped.load(Ordering::SeqCst),
        );
        assert!(body.sent.load(Ordering::SeqCst) < body.total / 2);
    }
}

#[test]
fn usage_adjusts_the_last_piece() {
    let mock = Mock::start(|_, body| {
        match body["seed"].as_u64() {
        // Three chunks, but the server counted seven tokens.
        Some(7) => Reply::Sse(vec![
            role(),
            content("a"),
            content("b"),
            content("c"),
            finish("stop", None),
            usage(7),
            done(),
        ]),
        // Text and usage in the finish chunk, cut at max_tokens.
        _ => Reply::Sse(vec![
            content("a"),
            Step::Data(
                json!({"choices": [{"index": 0, "delta": {"content": "b"}, "finish_reason": "length"}],
                       "usage": {"completion_tokens": 3}})
                .to_string(),
            ),
            done(),
        ]),
    }
    });
    let mut backend = OpenAiBackend::new(config(&mock.base)).unwrap();
    let mut c = backend.start(&request(2)).unwrap();
    let pieces: Vec<Piece> = (0..4).map(|_| c.next(&[0]).unwrap().remove(0)).collect();
    let tokens: Vec<usize> = pieces.iter().map(|p| p.tokens).collect();
    assert_eq!(tokens, [1, 1, 1, 4]);
    assert_eq!(pieces[3].end, Some(End::Stop));
    assert_eq!(pieces[3].text, "");
    assert_eq!(c.produced(0), 7);

    let (text, tokens, end) = drain(c.as_mut(), 1);
    assert_eq!((text.as_str(), tokens, end), ("ab", 3, End::Length));
    assert_eq!(c.produced(1), 3);
}

#[test]
fn done_without_finish_reason_is_an_error() {
    // llama-cpp-python's interrupt_requests ends a stream this way.
    let mock = Mock::start(|_, _| Reply::Sse(vec![content("Find"), done()]));
    let mut backend = OpenAiBackend::new(config(&mock.base)).unwrap();
    let mut c = backend.start(&request(1)).unwrap();
    let (text, _, end) = drain(c.as_mut(), 0);
    assert_eq!(text, "Find");
    assert!(
        matches!(&end, End::Error(m) if m.contains("finish_reason")),
        "{end:?}"
    );
}

/// The batch error of candidate 0, whose request gets `reply`.
fn start_error(reply: impl Fn() -> Reply + Send + Sync + 'static) -> String {
    let mock = Mock::start(move |_, _| reply());
    let cfg = OpenAiConfig {
        idle_timeout: Duration::from_millis(300),
        ..config(&mock.base)
    };
    let mut backend = OpenAiBackend::new(cfg).unwrap();
    let mut c = backend.start(&request(1)).unwrap();
    let err = c.next(&[0]).unwrap_err();
    assert!(matches!(err, GenError::Server { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("candidate 0") && !msg.contains('\n'), "{msg}");
    msg
}

#[test]
fn a_200_that_is_not_a_stream_fails_the_request() {
    let html = || {
        Reply::Status(
            200,
            vec![("content-type", "text/html; charset=utf-8".into())],
            "<html>\n<body>Please log in</body></html>".into(),
        )
    };
    let msg = start_error(html);
    assert!(
        msg.contains("response is not an event stream (Content-Type text/html)"),
        "{msg}"
    );
    assert!(msg.contains("<body>Please log in"), "{msg}");
    let json = |body: &'static str| {
        move || {
            Reply::Status(
                200,
                vec![("content-type", "application/json".into())],
                body.into(),
            )
        }
    };
    let msg = start_error(json(r#"{"object": "chat.completion", "choices": []}"#));
    assert!(msg.contains("no choices"), "{msg}");
    let msg = start_error(json(r#"{"error": {"message": "quota exceeded"}}"#));
    assert!(msg.contains("server error: quota exceeded"), "{msg}");
    let msg = start_error(json("<html>not json</html>"));
    assert!(
        msg.contains("neither an event stream nor a chat completion"),
        "{msg}"
    );
    // Accepted, then silent: no headers within the idle timeout.
    let t0 = Instant::now();
    let msg = start_error(|| Reply::Stall(Duration::from_secs(20)));
    assert!(msg.contains("idle timeout: no response for 0.3 s"), "{msg}");
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
}

#[test]
fn a_whole_json_answer_is_taken_as_the_candidate() {
    let mock = Mock::start(|_, body| {
        let answer = json!({
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant",
                "content": format!("Lungs clear, seed {}.", body["seed"])},
                "finish_reason": "length"}],
            "usage": {"completion_tokens": 9},
        });
        Reply::Status(
            200,
            vec![("content-type", "application/json".into())],
            answer.to_string(),
        )
    });
    let mut backend = OpenAiBackend::new(config(&mock.base)).unwrap();
    let mut c = backend.start(&request(2)).unwrap();
    let first = c.next(&[0]).unwrap().remove(0);
    assert_eq!((first.text.as_str(), first.tokens), ("Lungs", 1));
    let (text, tokens, end) = drain(c.as_mut(), 0);
    assert_eq!(format!("{}{text}", first.text), "Lungs clear, seed 7.");
    // Six pseudo-tokens; the server counted nine.
    assert_eq!((tokens + 1, end), (9, End::Length));
    assert_eq!(c.produced(0), 9);
    assert_eq!(drain(c.as_mut(), 1).0, "Lungs clear, seed 8.");
}

#[test]
fn a_stream_without_choices_names_what_was_missing() {
    let mock = Mock::start(|n, _| match n {
        0 => Reply::Sse(vec![Step::Data(json!({"choices": []}).to_string()), done()]),
        _ => Reply::Sse(vec![]),
    });
    let mut backend = OpenAiBackend::new(config(&mock.base)).unwrap();
    let mut c = backend.start(&request(1)).unwrap();
    let (text, _, end) = drain(c.as_mut(), 0);
    assert_eq!(text, "");
    assert!(
        matches!(&end, End::Error(m) if m.contains("none of its 1 chunks had a choice")),
        "{end:?}"
    );
    drop(c);
    let mut c = backend.start(&request(1)).unwrap();
    let (_, _, end) = drain(c.as_mut(), 0);
    assert!(
        matches!(&end, End::Error(m) if m.contains("closed without a single chunk")),
        "{end:?}"
    );
}

#[test]
fn connection_refused_is_an_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let base = format!("http://127.0.0.1:{port}/v1");
    let mut backend = OpenAiBackend::new(config(&base)).unwrap();
    let t0 = Instant::now();
    let mut c = backend.start(&request(2)).unwrap();
    let msg = c.next(&[0, 1]).unwrap_err().to_string();
    assert!(msg.contains(&format!("{base}/chat/completions")), "{msg}");
    assert!(msg.contains("candidate 0"), "{msg}");
    assert!(msg.contains("cannot connect"), "{msg}");
    assert!(msg.contains("3 attempts"), "{msg}");
    assert!(t0.elapsed() < Duration::from_secs(3));
}

#[test]
fn bad_requests_and_configs() {
    let mut backend = OpenAiBackend::new(config("http://127.0.0.1:9/v1")).unwrap();
    let mut req = request(0);
    assert!(matches!(backend.start(&req), Err(GenError::Request(_))));
    req.k = 1;
    req.top_p = 0.0;
    assert!(matches!(backend.start(&req), Err(GenError::Request(_))));
    for base in ["", "127.0.0.1:8080/v1", "ftp://host/v1"] {
        let e = OpenAiBackend::new(config(base)).unwrap_err().to_string();
        assert!(e.contains("not an http(s) URL"), "{e}");
    }
    let cfg = OpenAiConfig {
        idle_timeout: Duration::ZERO,
        ..config("http://127.0.0.1:9/v1")
    };
    assert!(OpenAiBackend::new(cfg).is_err());
}
