//! The report in a `/v1/rewards` completion, whatever shape the client sends.
//!
//! Trainers hand rewards their completions as plain text, as chat messages,
//! or as messages a response parser has taken apart: TRL 1.x, with a
//! tokenizer that has a response schema (the qwen3 family, glm4moe, lfm2_5,
//! ...), sends `{"role": "assistant", "reasoning_content": F, "content":
//! "<answer>I</answer>"}`, the `<think>` tags cut away. Scored as is, the
//! content breaks the template and every reward is 0. The report is rebuilt
//! as the model wrote it:
//!
//! `"<think>" + reasoning + "</think>" + content`
//!
//! with the reasoning from `reasoning_content` (Qwen, DeepSeek, GLM),
//! `reasoning` (vLLM, OpenAI-compatible servers) or `thinking` (LFM2.5), or
//! from content parts of type `thinking` / `reasoning`. A shape that is none
//! of these is a 400 naming it, never a silent 0. The same rules as Python's
//! `sdr_rewards.completion_text` (`bindings/python/py_src/sdr_rewards/completion.py`).

use serde_json::{Map, Value};

/// Fields under which response parsers put the text between `<think>` and `</think>`.
const REASONING_KEYS: [&str; 3] = ["reasoning_content", "reasoning", "thinking"];
/// Content-part types that hold reasoning.
const REASONING_PARTS: [&str; 3] = ["thinking", "reasoning", "reasoning_content"];

/// A short description of a JSON value's shape, for messages.
fn shape(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(_) => "a boolean".into(),
        Value::Number(_) => "a number".into(),
        Value::String(_) => "a string".into(),
        Value::Array(a) if a.is_empty() => "an empty array".into(),
        Value::Array(_) => "an array".into(),
        Value::Object(o) => {
            let keys: Vec<&str> = o.keys().map(String::as_str).take(8).collect();
            format!("an object with keys {keys:?}")
        }
    }
}

fn string_at<'a>(v: &'a Value, what: &str) -> Result<&'a str, String> {
    v.as_str()
        .ok_or_else(|| format!("{what} must be a string, not {}", shape(v)))
}

/// (reasoning, text) of a content-parts array.
fn parts(content: &[Value]) -> Result<(String, String), String> {
    let (mut reasoning, mut text) = (String::new(), String::new());
    for (k, part) in content.iter().enumerate() {
        match part {
            Value::String(s) => text.push_str(s),
            Value::Object(o) => {
                let kind = match o.get("type") {
                    None => "text",
                    Some(t) => string_at(t, &format!("content part {k} \"type\""))?,
                };
                if REASONING_PARTS.contains(&kind) {
                    let key = ["thinking", "reasoning", "reasoning_content", "text"]
                        .into_iter()
                        .find(|key| o.contains_key(*key))
                        .ok_or_else(|| {
                            format!(
                                "content part {k} of type {kind:?} has no text ({})",
                                shape(part)
                            )
                        })?;
                    reasoning.push_str(string_at(&o[key], &format!("content part {k} {key:?}"))?);
                } else if kind == "text" && o.contains_key("text") {
                    text.push_str(string_at(
                        &o["text"],
                        &format!("content part {k} \"text\""),
                    )?);
                } else {
                    return Err(format!(
                        "content part {k} is not text or reasoning ({}, type {kind:?}); a report \
                         completion has only text",
                        shape(part)
                    ));
                }
            }
            other => {
                return Err(format!(
                    "content part {k} must be a string or an object, not {}",
                    shape(other)
                ))
            }
        }
    }
    Ok((reasoning, text))
}

/// The report in one chat message.
fn message_text(m: &Map<String, Value>) -> Result<String, String> {
    let present: Vec<&str> = REASONING_KEYS
        .into_iter()
        .filter(|k| m.get(*k).is_some_and(|v| !v.is_null()))
        .collect();
    if !m.contains_key("content") && present.is_empty() {
        return Err(format!(
            "a chat message must have \"content\" (or a reasoning field: {}), not {}",
            REASONING_KEYS.join(", "),
            shape(&Value::Object(m.clone()))
        ));
    }
    if present.len() > 1 && present.iter().any(|k| m[*k] != m[present[0]]) {
        return Err(format!(
            "a chat message has different reasoning in {present:?}: cannot tell which to score"
        ));
    }
    let mut reasoning = match present.first() {
        Some(k) => Some(string_at(&m[*k], &format!("message {k:?}"))?.to_string()),
        None => None,
    };
    let body = match m.get("content") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(a)) => {
            let (r, t) = parts(a)?;
            if !r.is_empty() || a.iter().any(is_reasoning_part) {
                if reasoning.is_some() {
                    return Err(
                        "a chat message has reasoning both in a field and in its content parts"
                            .into(),
                    );
                }
                reasoning = Some(r);
            }
            t
        }
        Some(other) => {
            return Err(format!(
                "message content must be a string or an array of parts, not {}",
                shape(other)
            ))
        }
    };
    Ok(match reasoning {
        Some(r) => format!("<think>{r}</think>{body}"),
        None => body,
    })
}

fn is_reasoning_part(p: &Value) -> bool {
    p.get("type")
        .and_then(Value::as_str)
        .is_some_and(|t| REASONING_PARTS.contains(&t))
}

/// The report a completion holds: a string as is; a message object, or an
/// array of messages (the last `"role": "assistant"` one, else the last),
/// rebuilt as the module doc says. `Err` names the shape.
pub fn completion_text(v: &Value) -> Result<String, String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Object(m) => message_text(m),
        Value::Array(messages) if !messages.is_empty() => {
            let objects: Vec<&Map<String, Value>> =
                messages.iter().filter_map(Value::as_object).collect();
            if objects.len() != messages.len() {
                return Err(format!(
                    "an array completion must hold chat message objects, not {}",
                    messages
                        .iter()
                        .find(|m| !m.is_object())
                        .map(shape)
                        .unwrap_or_default()
                ));
            }
            let message = objects
                .iter()
                .rev()
                .find(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
                .or(objects.last())
                .expect("non-empty");
            message_text(message)
        }
        other => Err(format!(
            "a completion must be a string, a chat message object or a non-empty array of them, \
             not {}",
            shape(other)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const F: &str = "Heart size is normal. The lungs are clear.";
    const I: &str = "No acute disease.";

    fn report() -> String {
        format!("<think>{F}</think><answer>{I}</answer>")
    }

    #[test]
    fn strings_and_plain_messages_are_their_content() {
        assert_eq!(completion_text(&json!(report())).unwrap(), report());
        let m = json!({"role": "assistant", "content": report()});
        assert_eq!(completion_text(&m).unwrap(), report());
        let chat = json!([{"role": "user", "content": "x"}, m, {"role": "user", "content": "y"}]);
        assert_eq!(completion_text(&chat).unwrap(), report());
        let parts = json!([{"role": "assistant", "content": [{"type": "text", "text": report()}]}]);
        assert_eq!(completion_text(&parts).unwrap(), report());
    }

    #[test]
    fn parsed_reasoning_is_put_back_between_think_tags() {
        for key in REASONING_KEYS {
            let m =
                json!([{"role": "assistant", key: F, "content": format!("<answer>{I}</answer>")}]);
            assert_eq!(completion_text(&m).unwrap(), report(), "{key}");
        }
        let blocks = json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": F},
            {"type": "text", "text": format!("<answer>{I}</answer>")}
        ]});
        assert_eq!(completion_text(&blocks).unwrap(), report());
        // A null reasoning field is no reasoning (the model wrote none).
        let none = json!({"role": "assistant", "reasoning_content": null, "content": "x"});
        assert_eq!(completion_text(&none).unwrap(), "x");
    }

    #[test]
    fn unreadable_shapes_are_named() {
        for (v, needle) in [
            (json!(3), "not a number"),
            (json!([]), "not an empty array"),
            (json!(null), "not null"),
            (json!([1]), "must hold chat message objects, not a number"),
            (json!({"role": "assistant"}), "must have \"content\""),
            (
                json!({"content": 5}),
                "content must be a string or an array of parts, not a number",
            ),
            (json!({"content": [{"type": "image"}]}), "type \"image\""),
            (
                json!({"reasoning": "a", "thinking": "b", "content": ""}),
                "different reasoning",
            ),
            (
                json!({"reasoning_content": 1, "content": ""}),
                "must be a string, not a number",
            ),
        ] {
            let e = completion_text(&v).unwrap_err();
            assert!(e.contains(needle), "{v}: {e}");
        }
    }
}
