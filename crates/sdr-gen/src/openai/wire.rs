//! What goes over the wire: the request body and the streamed chunks.

use serde::Deserialize;
use serde_json::{json, Value};

use crate::{End, Request};

/// The body of candidate 0; [`for_candidate`] sets the seed of the others.
pub(super) fn request_body(model: &str, request: &Request) -> Value {
    let prompt = &request.prompt;
    let mut messages = Vec::new();
    if let Some(system) = &prompt.system {
        messages.push(json!({"role": "system", "content": system}));
    }
    let content = if prompt.images.is_empty() {
        Value::String(prompt.user.clone())
    } else {
        let mut parts = vec![json!({"type": "text", "text": prompt.user})];
        parts.extend(
            prompt
                .images
                .iter()
                .map(|img| json!({"type": "image_url", "image_url": {"url": img.data_url()}})),
        );
        Value::Array(parts)
    };
    messages.push(json!({"role": "user", "content": content}));
    let mut body = json!({
        "model": model,
        "messages": messages,
        "stream": true,
        "stream_options": {"include_usage": true},
        "temperature": request.temperature,
        "top_p": request.top_p,
        "max_tokens": request.max_tokens,
        "seed": request.seed,
    });
    // Not part of the OpenAI API: sent only when asked for, under the names
    // vLLM and llama.cpp read.
    if request.repetition_penalty != 1.0 {
        body["repetition_penalty"] = json!(request.repetition_penalty);
        body["repeat_penalty"] = json!(request.repetition_penalty);
    }
    body
}

/// `body` with the seed of candidate `i` (`seed + i`).
pub(super) fn for_candidate(body: &Value, seed: u64, i: usize) -> Value {
    let mut body = body.clone();
    body["seed"] = json!(seed.wrapping_add(i as u64));
    body
}

/// One `data:` payload of a chat-completions stream.
#[derive(Debug, Deserialize)]
pub(super) struct Chunk {
    #[serde(default)]
    pub choices: Vec<Choice>,
    #[serde(default)]
    pub usage: Option<Usage>,
    #[serde(default)]
    pub error: Option<Value>,
}

#[derive(Debug, Deserialize)]
pub(super) struct Choice {
    #[serde(default)]
    pub delta: Option<Delta>,
    #[serde(default)]
    pub finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(super) struct Delta {
    #[serde(default)]
    pub content: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(super) struct Usage {
    #[serde(default)]
    pub completion_tokens: Option<usize>,
}

/// A whole (non-streamed) chat completion: what a server that ignores
/// `"stream": true` answers with.
#[derive(Debug, Deserialize)]
pub(super) struct Completion {
    #[serde(default)]
    pub choices: Vec<FullChoice>,
    #[serde(default)]
    pub usage: Option<Usage>,
    #[serde(default)]
    pub error: Option<Value>,
}

#[derive(Debug, Deserialize)]
pub(super) struct FullChoice {
    #[serde(default)]
    pub message: Option<Delta>,
    #[serde(default)]
    pub finish_reason: Option<String>,
}

/// How a `finish_reason` ends the candidate.
pub(super) fn end_of(reason: &str) -> End {
    match reason {
        "stop" | "eos" => End::Stop,
        "length" => End::Length,
        other => End::Error(format!(
            "server ended the stream with finish_reason {other:?}"
        )),
    }
}

/// The message of an error object (`{"error": {"message": ...}}`, `{"error": "..."}`,
/// `{"message": ...}`, FastAPI's `{"detail": ...}`), on one line.
pub(super) fn error_message(v: &Value) -> Option<String> {
    let m = match v {
        Value::String(s) => s.clone(),
        Value::Object(o) => {
            if let Some(e) = o.get("error") {
                return error_message(e);
            }
            match ["message", "detail", "msg"].iter().find_map(|k| o.get(*k)) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Array(items)) => items
                    .iter()
                    .filter_map(error_message)
                    .collect::<Vec<_>>()
                    .join("; "),
                Some(other) => other.to_string(),
                None => v.to_string(),
            }
        }
        Value::Array(items) => items
            .iter()
            .filter_map(error_message)
            .collect::<Vec<_>>()
            .join("; "),
        other => other.to_string(),
    };
    let m = one_line(&m);
    (!m.is_empty()).then_some(m)
}

/// The server's error message in an HTTP error body, when it is JSON.
pub(super) fn body_message(body: &str) -> Option<String> {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| error_message(&v))
}

/// Whitespace runs (newlines included) folded to one space, cut at 300 characters.
pub(super) fn one_line(s: &str) -> String {
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    match s.char_indices().nth(300) {
        Some((at, _)) => format!("{}...", &s[..at]),
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Image, Prompt};

    fn request(images: Vec<Image>, system: Option<&str>) -> Request {
        Request {
            prompt: Prompt {
                system: system.map(String::from),
                user: "Describe.".into(),
                images,
            },
            k: 2,
            temperature: 0.7,
            top_p: 0.9,
            max_tokens: 64,
            seed: 10,
            repetition_penalty: 1.0,
            prefill: None,
        }
    }

    #[test]
    fn repetition_penalty_only_when_asked_for() {
        let mut r = request(vec![], None);
        let b = request_body("m", &r);
        assert!(b.get("repetition_penalty").is_none() && b.get("repeat_penalty").is_none());
        r.repetition_penalty = 1.2;
        let b = request_body("m", &r);
        assert_eq!(b["repetition_penalty"], 1.2);
        assert_eq!(b["repeat_penalty"], 1.2);
    }

    #[test]
    fn text_only_content_is_a_string() {
        let b = request_body("m", &request(vec![], None));
        assert_eq!(b["messages"].as_array().unwrap().len(), 1);
        assert_eq!(b["messages"][0]["content"], "Describe.");
        assert_eq!(b["stream_options"]["include_usage"], true);
        assert!(b.get("n").is_none());
        assert_eq!(for_candidate(&b, 10, 3)["seed"], 13);
        assert_eq!(for_candidate(&b, u64::MAX, 1)["seed"], 0);
    }

    #[test]
    fn images_become_parts() {
        let img = Image {
            mime: "image/png".into(),
            bytes: vec![1, 2, 3],
        };
        let b = request_body("m", &request(vec![img.clone()], Some("sys")));
        assert_eq!(b["messages"][0]["role"], "system");
        let parts = b["messages"][1]["content"].as_array().unwrap();
        assert_eq!(parts[0]["text"], "Describe.");
        assert_eq!(parts[1]["image_url"]["url"], img.data_url());
    }

    #[test]
    fn error_messages() {
        assert_eq!(
            body_message(r#"{"error":{"message":"bad\nkey","type":"x"}}"#).as_deref(),
            Some("bad key")
        );
        assert_eq!(body_message(r#"{"error":"nope"}"#).as_deref(), Some("nope"));
        assert_eq!(
            body_message(r#"{"detail":[{"msg":"field required"}]}"#).as_deref(),
            Some("field required")
        );
        assert_eq!(body_message("<html>bad gateway</html>"), None);
        assert_eq!(one_line(&"x".repeat(400)).len(), 303);
    }

    #[test]
    fn finish_reasons() {
        assert_eq!(end_of("stop"), End::Stop);
        assert_eq!(end_of("length"), End::Length);
        assert!(matches!(end_of("content_filter"), End::Error(m) if m.contains("content_filter")));
    }
}
