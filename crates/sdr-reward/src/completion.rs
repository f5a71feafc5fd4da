//! The report in a completion, whatever shape the trainer hands the reward.
//!
//! Trainers pass a completion as plain text, as chat messages, or as a message
//! that a response parser has taken apart: TRL 1.x, with a tokenizer that has
//! a response schema (the qwen3 family, glm4moe, lfm2_5, nemotron_3,
//! deepseek_r1_distill), sends `{"role": "assistant", "reasoning_content": F,
//! "content": "<answer>I</answer>"}`, the `<think>` tags cut away. Scored as
//! is, the content breaks the template and every reward is 0. The report is
//! rebuilt as the model wrote it:
//!
//! `"<think>" + reasoning + "</think>" + content`
//!
//! with the reasoning from `reasoning_content` (Qwen, DeepSeek, GLM),
//! `reasoning` (vLLM, OpenAI-compatible servers) or `thinking` (LFM2.5), or
//! from content parts of type `thinking` / `reasoning`. Of a list of messages
//! the last `assistant` one is read (the last one when none has that role).
//! A shape that is none of these is an error naming it, never a silent 0: a
//! reward of 0 for a completion the reward could not read would look like a
//! bad model.
//!
//! These rules are written once, here, over [`Node`], a completion as a tree
//! of strings, maps and lists. `sdr serve` reads JSON into it
//! ([`Node::from_json`]); the Python bindings read Python objects into it. The
//! two differ only in how an error names a shape ([`Dialect`]): a JSON client
//! reads "an object with keys", a Python user "dict with keys ... got int".

use serde_json::Value;

/// Fields under which response parsers put the text between `<think>` and `</think>`.
pub const REASONING_KEYS: [&str; 3] = ["reasoning_content", "reasoning", "thinking"];
/// Content-part types that hold reasoning.
const REASONING_PARTS: [&str; 3] = ["thinking", "reasoning", "reasoning_content"];
/// Keys of a reasoning content part that hold its text, in the order they are tried.
const REASONING_PART_TEXT: [&str; 4] = ["thinking", "reasoning", "reasoning_content", "text"];

/// A completion as the rules see it.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Text(String),
    /// JSON `null`, Python `None`.
    Null,
    /// An object / dict, its keys as strings, in the caller's order.
    Map(Vec<(String, Node)>),
    /// An array / list; `container` is how the caller's language names it
    /// (`"list"`, `"tuple"`; unused in JSON).
    Seq {
        container: String,
        items: Vec<Node>,
    },
    /// Anything else, named as the caller's language names its type
    /// (`"a number"`, `"int"`, ...).
    Other(String),
}

impl Node {
    /// A JSON value as a completion tree.
    pub fn from_json(v: &Value) -> Node {
        match v {
            Value::String(s) => Node::Text(s.clone()),
            Value::Null => Node::Null,
            Value::Bool(_) => Node::Other("a boolean".into()),
            Value::Number(_) => Node::Other("a number".into()),
            Value::Array(a) => Node::Seq {
                container: "array".into(),
                items: a.iter().map(Node::from_json).collect(),
            },
            Value::Object(o) => Node::Map(
                o.iter()
                    .map(|(k, v)| (k.clone(), Node::from_json(v)))
                    .collect(),
            ),
        }
    }

    fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Map(m) => m.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    fn has(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Present and not null: a reasoning field set to `null` is no reasoning.
    fn set(&self, key: &str) -> Option<&Node> {
        self.get(key).filter(|v| **v != Node::Null)
    }
}

/// How errors name shapes, quote keys and list them: the caller's language.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// JSON request bodies (`sdr serve`): "not an object with keys [\"role\"]".
    Json,
    /// Python objects (the bindings): "got a dict with keys ['role']", "got int".
    Python,
}

impl Dialect {
    /// A short description of a node's shape.
    fn shape(self, v: &Node) -> String {
        match self {
            Dialect::Json => match v {
                Node::Null => "null".into(),
                Node::Text(_) => "a string".into(),
                Node::Seq { items, .. } if items.is_empty() => "an empty array".into(),
                Node::Seq { .. } => "an array".into(),
                Node::Map(m) => {
                    let keys: Vec<&str> = m.iter().map(|(k, _)| k.as_str()).take(8).collect();
                    format!("an object with keys {keys:?}")
                }
                Node::Other(name) => name.clone(),
            },
            Dialect::Python => match v {
                Node::Null => "NoneType".into(),
                Node::Text(_) => "str".into(),
                Node::Map(m) => {
                    let mut keys: Vec<&str> = m.iter().map(|(k, _)| k.as_str()).collect();
                    keys.sort_unstable();
                    keys.truncate(8);
                    format!("dict with keys {}", self.list(&keys))
                }
                Node::Seq { container, items } => {
                    let mut inner: Vec<String> = items.iter().map(|i| self.type_name(i)).collect();
                    inner.sort_unstable();
                    inner.dedup();
                    let inner = if inner.is_empty() {
                        "nothing".to_string()
                    } else {
                        inner.join(", ")
                    };
                    format!("{container} of {inner}")
                }
                Node::Other(name) => name.clone(),
            },
        }
    }

    /// Python's `type(v).__name__`.
    fn type_name(self, v: &Node) -> String {
        match v {
            Node::Null => "NoneType".into(),
            Node::Text(_) => "str".into(),
            Node::Map(_) => "dict".into(),
            Node::Seq { container, .. } => container.clone(),
            Node::Other(name) => name.clone(),
        }
    }

    /// A key as the language writes a string literal.
    fn quote(self, s: &str) -> String {
        match self {
            Dialect::Json => format!("{s:?}"),
            Dialect::Python => python_repr(s),
        }
    }

    /// A list of keys as the language writes it.
    fn list(self, items: &[&str]) -> String {
        match self {
            Dialect::Json => format!("{items:?}"),
            Dialect::Python => {
                let quoted: Vec<String> = items.iter().map(|s| python_repr(s)).collect();
                format!("[{}]", quoted.join(", "))
            }
        }
    }

    /// "not X" (JSON) or "got X" (Python) after a requirement.
    fn got(self, shape: String) -> String {
        match self {
            Dialect::Json => format!("not {shape}"),
            Dialect::Python => format!("got {shape}"),
        }
    }

    fn object(self) -> &'static str {
        match self {
            Dialect::Json => "an object",
            Dialect::Python => "a dict",
        }
    }

    fn array(self) -> &'static str {
        match self {
            Dialect::Json => "an array",
            Dialect::Python => "a list",
        }
    }
}

/// Python's `repr` of a string, enough for keys in messages.
fn python_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// The reader of one completion in one dialect.
struct Reader {
    d: Dialect,
}

impl Reader {
    fn string<'a>(&self, v: &'a Node, what: &str) -> Result<&'a str, String> {
        match v {
            Node::Text(s) => Ok(s),
            other => Err(format!(
                "{what} must be a string, {}",
                self.d.got(self.d.shape(other))
            )),
        }
    }

    /// (reasoning, text) of a content-parts list.
    fn parts(&self, content: &[Node]) -> Result<(String, String), String> {
        let d = self.d;
        let (mut reasoning, mut text) = (String::new(), String::new());
        for (k, part) in content.iter().enumerate() {
            match part {
                Node::Text(s) => text.push_str(s),
                Node::Map(_) => {
                    let kind = match part.get("type") {
                        None => "text",
                        Some(t) => {
                            self.string(t, &format!("content part {k} {}", d.quote("type")))?
                        }
                    };
                    if REASONING_PARTS.contains(&kind) {
                        let key = REASONING_PART_TEXT
                            .into_iter()
                            .find(|key| part.has(key))
                            .ok_or_else(|| {
                                format!(
                                    "content part {k} of type {} has no text ({})",
                                    d.quote(kind),
                                    d.shape(part)
                                )
                            })?;
                        let value = part.get(key).expect("found above");
                        reasoning.push_str(
                            self.string(value, &format!("content part {k} {}", d.quote(key)))?,
                        );
                    } else if kind == "text" && part.has("text") {
                        let value = part.get("text").expect("checked");
                        text.push_str(
                            self.string(value, &format!("content part {k} {}", d.quote("text")))?,
                        );
                    } else {
                        return Err(format!(
                            "content part {k} is not text or reasoning ({}, type {}); a report \
                             completion has only text",
                            d.shape(part),
                            d.quote(kind)
                        ));
                    }
                }
                other => {
                    return Err(format!(
                        "content part {k} must be a string or {}, {}",
                        d.object(),
                        d.got(d.shape(other))
                    ))
                }
            }
        }
        Ok((reasoning, text))
    }

    /// The report in one chat message.
    fn message(&self, m: &Node) -> Result<String, String> {
        let d = self.d;
        let present: Vec<&str> = REASONING_KEYS
            .into_iter()
            .filter(|k| m.set(k).is_some())
            .collect();
        if !m.has("content") && present.is_empty() {
            let need = match d {
                Dialect::Json => "a chat message must have \"content\"".to_string(),
                Dialect::Python => "a chat message must be a dict with a 'content' key".to_string(),
            };
            let shape = match d {
                Dialect::Json => d.shape(m),
                Dialect::Python => format!("a {}", d.shape(m)),
            };
            return Err(format!(
                "{need} (or a reasoning field: {}), {}",
                REASONING_KEYS.join(", "),
                d.got(shape)
            ));
        }
        if present.len() > 1 && present.iter().any(|k| m.get(k) != m.get(present[0])) {
            return Err(format!(
                "a chat message has different reasoning in {}: cannot tell which to score",
                d.list(&present)
            ));
        }
        let mut reasoning = match present.first() {
            Some(k) => Some(
                self.string(
                    m.get(k).expect("present"),
                    &format!("message {}", d.quote(k)),
                )?
                .to_string(),
            ),
            None => None,
        };
        let body = match m.get("content") {
            None | Some(Node::Null) => String::new(),
            Some(Node::Text(s)) => s.clone(),
            Some(Node::Seq { items, .. }) => {
                let (r, t) = self.parts(items)?;
                if !r.is_empty() || items.iter().any(is_reasoning_part) {
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
                    "message content must be a string or {} of parts, {}",
                    d.array(),
                    d.got(d.shape(other))
                ))
            }
        };
        Ok(match reasoning {
            Some(r) => format!("<think>{r}</think>{body}"),
            None => body,
        })
    }

    fn completion(&self, v: &Node) -> Result<String, String> {
        let d = self.d;
        match v {
            Node::Text(s) => Ok(s.clone()),
            Node::Map(_) => self.message(v),
            Node::Seq { items, .. } if !items.is_empty() => {
                if let Some(bad) = items.iter().find(|m| !matches!(m, Node::Map(_))) {
                    return Err(match d {
                        Dialect::Json => format!(
                            "an array completion must hold chat message objects, not {}",
                            d.shape(bad)
                        ),
                        Dialect::Python => format!(
                            "a list completion must hold chat message dicts, got a {}",
                            d.shape(v)
                        ),
                    });
                }
                let message = items
                    .iter()
                    .rev()
                    .find(|m| m.get("role") == Some(&Node::Text("assistant".into())))
                    .or(items.last())
                    .expect("non-empty");
                self.message(message)
            }
            other => {
                let shape = match (d, other) {
                    (Dialect::Python, Node::Seq { container, .. }) => {
                        format!("an empty {container}")
                    }
                    _ => d.shape(other),
                };
                Err(format!(
                    "a completion must be a string, a chat message {} or a non-empty {} of {}, {}",
                    match d {
                        Dialect::Json => "object",
                        Dialect::Python => "dict",
                    },
                    match d {
                        Dialect::Json => "array",
                        Dialect::Python => "list",
                    },
                    match d {
                        Dialect::Json => "them",
                        Dialect::Python => "chat messages",
                    },
                    d.got(shape)
                ))
            }
        }
    }
}

fn is_reasoning_part(p: &Node) -> bool {
    matches!(p.get("type"), Some(Node::Text(t)) if REASONING_PARTS.contains(&t.as_str()))
}

/// The report a completion holds: a string as is; a message, or a list of
/// messages (the last `assistant` one, else the last), rebuilt as the module
/// doc says. `Err` names the shape in `dialect`'s words.
pub fn completion_text(v: &Node, dialect: Dialect) -> Result<String, String> {
    Reader { d: dialect }.completion(v)
}

/// [`completion_text`] of a JSON value, in JSON's words (`sdr serve`).
pub fn json_completion_text(v: &Value) -> Result<String, String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        other => completion_text(&Node::from_json(other), Dialect::Json),
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
        assert_eq!(json_completion_text(&json!(report())).unwrap(), report());
        let m = json!({"role": "assistant", "content": report()});
        assert_eq!(json_completion_text(&m).unwrap(), report());
        let chat = json!([{"role": "user", "content": "x"}, m, {"role": "user", "content": "y"}]);
        assert_eq!(json_completion_text(&chat).unwrap(), report());
        let parts = json!([{"role": "assistant", "content": [{"type": "text", "text": report()}]}]);
        assert_eq!(json_completion_text(&parts).unwrap(), report());
    }

    #[test]
    fn parsed_reasoning_is_put_back_between_think_tags() {
        for key in REASONING_KEYS {
            let m =
                json!([{"role": "assistant", key: F, "content": format!("<answer>{I}</answer>")}]);
            assert_eq!(json_completion_text(&m).unwrap(), report(), "{key}");
        }
        let blocks = json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": F},
            {"type": "text", "text": format!("<answer>{I}</answer>")}
        ]});
        assert_eq!(json_completion_text(&blocks).unwrap(), report());
        // A null reasoning field is no reasoning (the model wrote none).
        let none = json!({"role": "assistant", "reasoning_content": null, "content": "x"});
        assert_eq!(json_completion_text(&none).unwrap(), "x");
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
            let e = json_completion_text(&v).unwrap_err();
            assert!(e.contains(needle), "{v}: {e}");
        }
    }

    #[test]
    fn python_names_shapes_in_its_own_words() {
        let py = |v: Node| completion_text(&v, Dialect::Python).unwrap_err();
        let map = |pairs: &[(&str, Node)]| {
            Node::Map(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.clone()))
                    .collect(),
            )
        };
        let list = |items: Vec<Node>| Node::Seq {
            container: "list".into(),
            items,
        };
        let text = |s: &str| Node::Text(s.into());
        let role = map(&[("role", text("assistant"))]);
        assert!(py(list(vec![role.clone()])).starts_with(
            "a chat message must be a dict with a 'content' key (or a reasoning field: \
             reasoning_content, reasoning, thinking), got a dict with keys ['role']"
        ));
        assert_eq!(
            py(list(vec![text("a"), text("b")])),
            "a list completion must hold chat message dicts, got a list of str"
        );
        assert!(py(Node::Other("int".into())).ends_with("got int"));
        assert!(py(list(vec![])).ends_with("got an empty list"));
        let both = map(&[
            ("reasoning", text("a")),
            ("thinking", text("b")),
            ("content", text("")),
        ]);
        assert!(py(both).contains("different reasoning in ['reasoning', 'thinking']"));
        let five = map(&[("content", Node::Other("int".into()))]);
        assert!(py(five).ends_with("a string or a list of parts, got int"));
        assert_eq!(python_repr("it's"), "\"it's\"");
    }
}
