//! The tokenizer and chat template stored in a GGUF file's metadata, rebuilt
//! so that no `tokenizer.json` has to travel with the model.
//!
//! Two tokenizer models are supported:
//!
//! - GPT-2-style byte-level BPE (`tokenizer.ggml.model = gpt2`, SmolLM2),
//!   with the pre-tokenizers llama.cpp calls `gpt2`/`default` (the GPT-2
//!   regex) and `smollm` (each digit alone, then the GPT-2 regex);
//! - SentencePiece BPE (`tokenizer.ggml.model = llama`, Gemma), encoded as
//!   llama.cpp does: spaces become `▁` (and one is put in front of the text
//!   if `tokenizer.ggml.add_space_prefix`), the text is split into
//!   characters, and the adjacent pair whose concatenation is a token with
//!   the highest score is merged until none is; a character left that is no
//!   token is written as its UTF-8 bytes (`<0xNN>` tokens).
//!
//! Control tokens (`<|im_start|>`, `<start_of_turn>`, ...) and user-defined
//! ones (Gemma's `\n`, runs of spaces, HTML tags) are matched whole in the
//! input first, longest first, as llama.cpp does; control tokens produce no text.
//!
//! The chat template is the GGUF's `tokenizer.chat_template`; a file without
//! one gets Gemma's turns if its architecture is a Gemma, ChatML otherwise.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

use candle_core::quantized::gguf_file::Value;
use tokenizers::decoders::byte_level::ByteLevel;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::{AddedToken, Tokenizer};

use super::llama::Meta;
use crate::{GenError, Prompt};

/// llama.cpp's token types (`tokenizer.ggml.token_type`).
const NORMAL: i32 = 1;
const UNKNOWN: i32 = 2;
const CONTROL: i32 = 3;
const USER_DEFINED: i32 = 4;
const UNUSED: i32 = 5;
const BYTE: i32 = 6;

/// Tokenizer and chat template of a GGUF model.
pub struct GgufTokenizer {
    inner: Inner,
    /// Bytes each token stands for; empty for control tokens.
    bytes: Vec<Vec<u8>>,
    stop: Vec<u32>,
    template: Template,
    bos: Option<String>,
    eos: Option<String>,
}

enum Inner {
    Bpe(Box<Tokenizer>),
    Spm(Spm),
}

/// How prompts are turned into the model's text.
enum Template {
    /// The GGUF's Jinja template.
    Jinja(String),
    /// `<|im_start|>role\n…<|im_end|>\n`.
    ChatMl,
    /// `<start_of_turn>user\n…<end_of_turn>\n<start_of_turn>model\n`.
    Gemma,
}

/// A SentencePiece BPE vocabulary, encoded as llama.cpp does.
struct Spm {
    /// Token text to id (every token, as llama.cpp looks them up).
    ids: HashMap<String, u32>,
    scores: Vec<f32>,
    /// Control and user-defined tokens, longest first, matched before the merges.
    specials: Vec<(String, u32)>,
    /// The token of each byte, for characters that are no token.
    byte_ids: Vec<u32>,
    add_space_prefix: bool,
}

/// A candidate merge of two adjacent symbols: highest score first, then leftmost.
struct Bigram {
    score: f32,
    left: usize,
    right: usize,
    len: usize,
}

impl PartialEq for Bigram {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Bigram {}

impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Bigram {
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then_with(|| other.left.cmp(&self.left))
    }
}

/// A run of the text being merged: bytes `start..start + len`, linked to its neighbours.
#[derive(Clone, Copy)]
struct Symbol {
    start: usize,
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

impl Spm {
    /// Splits `text` at the special tokens (longest first, each occurrence
    /// left to right, as llama.cpp's `tokenizer_st_partition`), then encodes
    /// the pieces between them.
    fn encode(&self, text: &str) -> Vec<u32> {
        enum Frag<'a> {
            Text(&'a str),
            Token(u32),
        }
        let mut frags = vec![Frag::Text(text)];
        for (special, id) in &self.specials {
            if !text.contains(special.as_str()) {
                continue;
            }
            let mut next = Vec::with_capacity(frags.len());
            for f in frags {
                match f {
                    Frag::Text(mut t) => {
                        while let Some(at) = t.find(special.as_str()) {
                            if at > 0 {
                                next.push(Frag::Text(&t[..at]));
                            }
                            next.push(Frag::Token(*id));
                            t = &t[at + special.len()..];
                        }
                        if !t.is_empty() {
                            next.push(Frag::Text(t));
                        }
                    }
                    token => next.push(token),
                }
            }
            frags = next;
        }
        let mut out = Vec::new();
        let mut after_special = true;
        for f in frags {
            match f {
                Frag::Token(id) => {
                    out.push(id);
                    after_special = true;
                }
                Frag::Text(t) => {
                    let mut escaped = String::with_capacity(t.len() + 3);
                    if self.add_space_prefix && after_special {
                        escaped.push('▁');
                    }
                    escaped.push_str(&t.replace(' ', "▁"));
                    self.merge(&escaped, &mut out);
                    after_special = false;
                }
            }
        }
        out
    }

    /// llama.cpp's `llm_tokenizer_spm_session::tokenize` on escaped text.
    fn merge(&self, text: &str, out: &mut Vec<u32>) {
        let mut symbols: Vec<Symbol> = Vec::new();
        for (i, (start, c)) in text.char_indices().enumerate() {
            symbols.push(Symbol {
                start,
                len: c.len_utf8(),
                prev: i.checked_sub(1),
                next: Some(i + 1),
            });
        }
        let Some(last) = symbols.last_mut() else {
            return;
        };
        last.next = None;
        let mut queue = BinaryHeap::new();
        let bigram = |symbols: &[Symbol], left: Option<usize>, right: Option<usize>| {
            let (left, right) = (left?, right?);
            let (l, r) = (symbols[left], symbols[right]);
            let len = l.len + r.len;
            let id = *self.ids.get(&text[l.start..l.start + len])?;
            Some(Bigram {
                score: self.scores[id as usize],
                left,
                right,
                len,
            })
        };
        for i in 1..symbols.len() {
            queue.extend(bigram(&symbols, Some(i - 1), Some(i)));
        }
        while let Some(b) = queue.pop() {
            let (l, r) = (symbols[b.left], symbols[b.right]);
            // Stale: one side was merged since.
            if l.len == 0 || r.len == 0 || l.len + r.len != b.len {
                continue;
            }
            symbols[b.left].len = b.len;
            symbols[b.right].len = 0;
            symbols[b.left].next = r.next;
            if let Some(n) = r.next {
                symbols[n].prev = Some(b.left);
            }
            queue.extend(bigram(&symbols, l.prev, Some(b.left)));
            queue.extend(bigram(&symbols, Some(b.left), r.next));
        }
        let mut i = Some(0);
        while let Some(at) = i {
            let s = symbols[at];
            let piece = &text[s.start..s.start + s.len];
            match self.ids.get(piece) {
                Some(&id) => out.push(id),
                // Only single characters are left unmerged and unknown.
                None => out.extend(piece.bytes().map(|b| self.byte_ids[b as usize])),
            }
            i = s.next;
        }
    }
}

/// GPT-2's reversible map from bytes to printable characters, inverted.
fn unicode_to_byte() -> HashMap<char, u8> {
    let mut printable: Vec<u8> = (b'!'..=b'~')
        .chain(0xA1..=0xAC)
        .chain(0xAE..=0xFF)
        .collect();
    let mut chars: Vec<u32> = printable.iter().map(|&b| b as u32).collect();
    let mut n = 0;
    for b in 0..=255u8 {
        if !printable.contains(&b) {
            printable.push(b);
            chars.push(256 + n);
            n += 1;
        }
    }
    printable
        .into_iter()
        .zip(chars)
        .map(|(b, c)| (char::from_u32(c).expect("below 512"), b))
        .collect()
}

fn strings<'a>(meta: &'a Meta, key: &str) -> Result<Vec<&'a str>, GenError> {
    let Value::Array(items) = meta.get(key)? else {
        return Err(GenError::BadModel {
            what: meta.what.to_string(),
            message: format!("metadata {key} is not an array"),
        });
    };
    items
        .iter()
        .map(|v| match v {
            Value::String(s) => Ok(s.as_str()),
            _ => Err(GenError::BadModel {
                what: meta.what.to_string(),
                message: format!("metadata {key} holds a non-string"),
            }),
        })
        .collect()
}

/// The GPT-2 byte-level BPE of SmolLM2 and the like, and each token's bytes.
fn bpe(meta: &Meta, tokens: &[&str], types: &[i32]) -> Result<(Inner, Vec<Vec<u8>>), GenError> {
    let what = meta.what.as_str();
    let pre = meta.str("tokenizer.ggml.pre").unwrap_or("default");
    let byte_level = ByteLevel::new(false, true, true);
    let pre_tokenizer = match pre {
        "default" | "gpt2" => Sequence::new(vec![byte_level.into()]),
        "smollm" => Sequence::new(vec![
            PreTokenizerWrapper::Digits(Digits::new(true)),
            byte_level.into(),
        ]),
        other => {
            return Err(GenError::BadModel {
                what: what.to_string(),
                message: format!(
                    "pre-tokenizer {other:?} is not supported (gpt2, default or smollm)"
                ),
            })
        }
    };
    let merges = strings(meta, "tokenizer.ggml.merges")?
        .into_iter()
        .map(|m| {
            m.split_once(' ')
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .ok_or_else(|| GenError::BadModel {
                    what: what.to_string(),
                    message: format!("merge {m:?} has no space"),
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let vocab: Vocab = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.to_string(), i as u32))
        .collect();
    let bpe = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .build()
        .map_err(|source| GenError::Tokenizer {
            what: format!("{what}: building the BPE tokenizer"),
            source,
        })?;
    let mut inner = Tokenizer::new(bpe);
    inner.with_pre_tokenizer(Some(pre_tokenizer));
    inner.with_decoder(Some(ByteLevel::default()));
    let special: Vec<AddedToken> = tokens
        .iter()
        .zip(types)
        .filter(|(_, &t)| t == CONTROL || t == USER_DEFINED)
        .map(|(s, &t)| AddedToken::from(s.to_string(), t == CONTROL))
        .collect();
    inner.add_special_tokens(&special);

    let to_byte = unicode_to_byte();
    let bytes = tokens
        .iter()
        .zip(types)
        .map(|(s, &t)| match t {
            CONTROL => Vec::new(),
            USER_DEFINED => s.as_bytes().to_vec(),
            _ => s
                .chars()
                .flat_map(|c| match to_byte.get(&c) {
                    Some(&b) => vec![b],
                    None => c.to_string().into_bytes(),
                })
                .collect(),
        })
        .collect();
    Ok((Inner::Bpe(Box::new(inner)), bytes))
}

/// The byte of a `<0xNN>` token.
fn byte_token(s: &str) -> Option<u8> {
    let hex = s.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

/// The SentencePiece BPE of Gemma and the like, and each token's bytes (as
/// llama.cpp's `token_to_piece`: `▁` is a space, `<0xNN>` its byte, control
/// and unused tokens nothing, the unknown token `▅`).
fn spm(meta: &Meta, tokens: &[&str], types: &[i32]) -> Result<(Inner, Vec<Vec<u8>>), GenError> {
    let what = meta.what.as_str();
    let scores: Vec<f32> = match meta.get("tokenizer.ggml.scores") {
        Ok(Value::Array(v)) => v.iter().map(|s| s.to_f32().unwrap_or(0.0)).collect(),
        _ => {
            return Err(GenError::BadModel {
                what: what.to_string(),
                message: "metadata tokenizer.ggml.scores is missing or not an array".into(),
            })
        }
    };
    if scores.len() != tokens.len() {
        return Err(GenError::BadModel {
            what: what.to_string(),
            message: format!("{} scores for {} tokens", scores.len(), tokens.len()),
        });
    }
    let ids: HashMap<String, u32> = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.to_string(), i as u32))
        .collect();
    let mut byte_ids = vec![None; 256];
    for (i, (s, &t)) in tokens.iter().zip(types).enumerate() {
        if t == BYTE {
            if let Some(b) = byte_token(s) {
                byte_ids[b as usize] = Some(i as u32);
            }
        }
    }
    let unk = meta
        .usize("tokenizer.ggml.unknown_token_id")
        .ok()
        .filter(|&i| i < tokens.len())
        .map(|i| i as u32);
    let byte_ids = byte_ids
        .into_iter()
        .enumerate()
        .map(|(b, id)| {
            id.or(unk).ok_or_else(|| GenError::BadModel {
                what: what.to_string(),
                message: format!("no token for byte 0x{b:02X} and no unknown token"),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut specials: Vec<(String, u32)> = tokens
        .iter()
        .zip(types)
        .enumerate()
        .filter(|(_, (s, &t))| (t == CONTROL || t == USER_DEFINED) && !s.is_empty())
        .map(|(i, (s, _))| (s.to_string(), i as u32))
        .collect();
    specials.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.1.cmp(&b.1)));
    let add_space_prefix = match meta.get("tokenizer.ggml.add_space_prefix") {
        Ok(Value::Bool(b)) => *b,
        _ => true,
    };
    let bytes = tokens
        .iter()
        .zip(types)
        .map(|(s, &t)| match t {
            NORMAL | USER_DEFINED => s.replace('▁', " ").into_bytes(),
            BYTE => byte_token(s).map_or_else(Vec::new, |b| vec![b]),
            UNKNOWN => "▅".as_bytes().to_vec(),
            CONTROL | UNUSED => Vec::new(),
            _ => s.replace('▁', " ").into_bytes(),
        })
        .collect();
    let spm = Spm {
        ids,
        scores,
        specials,
        byte_ids,
        add_space_prefix,
    };
    Ok((Inner::Spm(spm), bytes))
}

impl GgufTokenizer {
    /// Builds the tokenizer from GGUF metadata; `what` (the file) names errors.
    pub fn from_metadata(md: &HashMap<String, Value>, what: &str) -> Result<Self, GenError> {
        let meta = Meta {
            md,
            what: what.to_string(),
        };
        let model = meta.str("tokenizer.ggml.model")?;
        let tokens = strings(&meta, "tokenizer.ggml.tokens")?;
        let types: Vec<i32> = match meta.get("tokenizer.ggml.token_type") {
            Ok(Value::Array(v)) => v.iter().map(|t| t.to_i32().unwrap_or(NORMAL)).collect(),
            _ => vec![NORMAL; tokens.len()],
        };
        if types.len() != tokens.len() {
            return Err(GenError::BadModel {
                what: what.to_string(),
                message: format!("{} token types for {} tokens", types.len(), tokens.len()),
            });
        }
        let (inner, bytes) = match model {
            "gpt2" => bpe(&meta, &tokens, &types)?,
            "llama" => spm(&meta, &tokens, &types)?,
            other => {
                return Err(GenError::BadModel {
                    what: what.to_string(),
                    message: format!(
                        "tokenizer model {other:?} is not supported (gpt2 byte-level BPE or llama SentencePiece)"
                    ),
                })
            }
        };

        let id = |key: &str| meta.usize(key).ok().filter(|&i| i < tokens.len());
        let mut stop: Vec<u32> = Vec::new();
        for i in [
            id("tokenizer.ggml.eos_token_id"),
            id("tokenizer.ggml.eot_token_id"),
        ]
        .into_iter()
        .flatten()
        {
            stop.push(i as u32);
        }
        for name in ["<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<end_of_turn>"] {
            if let Some(i) = tokens.iter().position(|t| *t == name) {
                if types[i] == CONTROL && !stop.contains(&(i as u32)) {
                    stop.push(i as u32);
                }
            }
        }
        if stop.is_empty() {
            return Err(GenError::BadModel {
                what: what.to_string(),
                message: "no end-of-sequence token (tokenizer.ggml.eos_token_id)".to_string(),
            });
        }
        let template = match meta.str("tokenizer.chat_template") {
            Ok(t) => Template::Jinja(t.to_string()),
            Err(_)
                if meta
                    .str("general.architecture")
                    .is_ok_and(|a| a.starts_with("gemma")) =>
            {
                Template::Gemma
            }
            Err(_) => Template::ChatMl,
        };
        let name = |i: Option<usize>| i.map(|i| tokens[i].to_string());
        Ok(Self {
            inner,
            bytes,
            stop,
            template,
            bos: name(id("tokenizer.ggml.bos_token_id")),
            eos: name(id("tokenizer.ggml.eos_token_id")),
        })
    }

    /// Token ids of `text`; control tokens written in it are recognised.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, GenError> {
        match &self.inner {
            Inner::Bpe(t) => {
                let enc = t
                    .encode(text, false)
                    .map_err(|source| GenError::Tokenizer {
                        what: "tokenizing".into(),
                        source,
                    })?;
                Ok(enc.get_ids().to_vec())
            }
            Inner::Spm(s) => Ok(s.encode(text)),
        }
    }

    /// The text of `ids`, control tokens left out.
    pub fn decode(&self, ids: &[u32]) -> Result<String, GenError> {
        match &self.inner {
            Inner::Bpe(t) => t.decode(ids, true).map_err(|source| GenError::Tokenizer {
                what: "detokenizing".into(),
                source,
            }),
            Inner::Spm(_) => {
                if let Some(&bad) = ids.iter().find(|&&i| i as usize >= self.bytes.len()) {
                    return Err(GenError::Request(format!(
                        "token id {bad} is outside the vocabulary of {}",
                        self.bytes.len()
                    )));
                }
                let bytes: Vec<u8> = ids
                    .iter()
                    .flat_map(|&i| self.token_bytes(i))
                    .copied()
                    .collect();
                Ok(String::from_utf8_lossy(&bytes).into_owned())
            }
        }
    }

    /// The bytes token `id` stands for (empty for control tokens and unknown ids).
    pub fn token_bytes(&self, id: u32) -> &[u8] {
        self.bytes.get(id as usize).map_or(&[], Vec::as_slice)
    }

    /// Whether `id` ends a generation (EOS, `<|im_end|>`, ...).
    pub fn is_stop(&self, id: u32) -> bool {
        self.stop.contains(&id)
    }

    /// Vocabulary size.
    pub fn vocab_size(&self) -> usize {
        self.bytes.len()
    }

    /// The prompt as the model expects it: the GGUF's chat template
    /// (`tokenizer.chat_template`, rendered with the system turn if any, the
    /// user turn and `add_generation_prompt`), or, if it has none, Gemma's
    /// turns for a Gemma (as Gemma 3's template writes them: BOS, the system
    /// text and a blank line at the start of the user turn, the user text
    /// trimmed) and ChatML for the others.
    pub fn render_chat(&self, prompt: &Prompt) -> Result<String, GenError> {
        let template = match &self.template {
            Template::Jinja(t) => t,
            Template::ChatMl => {
                let mut out = String::new();
                if let Some(s) = &prompt.system {
                    out.push_str(&format!("<|im_start|>system\n{s}<|im_end|>\n"));
                }
                out.push_str(&format!(
                    "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n",
                    prompt.user
                ));
                return Ok(out);
            }
            Template::Gemma => {
                let mut out = self.bos.clone().unwrap_or_default();
                out.push_str("<start_of_turn>user\n");
                if let Some(s) = &prompt.system {
                    out.push_str(s);
                    out.push_str("\n\n");
                }
                out.push_str(prompt.user.trim());
                out.push_str("<end_of_turn>\n<start_of_turn>model\n");
                return Ok(out);
            }
        };
        let mut messages = Vec::new();
        if let Some(s) = &prompt.system {
            messages.push(minijinja::context! { role => "system", content => s });
        }
        messages.push(minijinja::context! { role => "user", content => &prompt.user });
        let mut env = minijinja::Environment::new();
        env.add_function(
            "raise_exception",
            |msg: String| -> Result<String, minijinja::Error> {
                Err(minijinja::Error::new(
                    minijinja::ErrorKind::InvalidOperation,
                    msg,
                ))
            },
        );
        env.render_str(
            template,
            minijinja::context! {
                messages => messages,
                add_generation_prompt => true,
                bos_token => self.bos.clone().unwrap_or_default(),
                eos_token => self.eos.clone().unwrap_or_default(),
            },
        )
        .map_err(|source| GenError::Template { source })
    }
}

/// Turns a token's bytes into text as soon as they form valid UTF-8, so a
/// character split over tokens is emitted whole, with the next token.
#[derive(Debug, Default, Clone)]
pub struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    /// Appends `bytes`; returns the text that became complete. Invalid
    /// sequences become U+FFFD, as in [`String::from_utf8_lossy`].
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    return out;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    out.push_str(
                        std::str::from_utf8(&self.pending[..valid]).expect("valid prefix"),
                    );
                    match e.error_len() {
                        None => {
                            self.pending.drain(..valid);
                            return out;
                        }
                        Some(n) => {
                            out.push('\u{FFFD}');
                            self.pending.drain(..valid + n);
                        }
                    }
                }
            }
        }
    }

    /// The rest at the end of a stream (an unfinished character becomes U+FFFD).
    pub fn finish(&mut self) -> String {
        let s = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A small SentencePiece vocabulary laid out as Gemma's GGUF is.
    fn spm_metadata(add_space_prefix: bool) -> HashMap<String, Value> {
        let mut tokens: Vec<(String, f32, i32)> = vec![
            ("<pad>".into(), 0.0, CONTROL),
            ("<eos>".into(), 0.0, CONTROL),
            ("<bos>".into(), 0.0, CONTROL),
            ("<unk>".into(), 0.0, CONTROL),
            ("<start_of_turn>".into(), 0.0, CONTROL),
            ("<end_of_turn>".into(), 0.0, CONTROL),
            ("\n".into(), 0.0, USER_DEFINED),
            ("\n\n".into(), 0.0, USER_DEFINED),
            ("  ".into(), 0.0, USER_DEFINED),
        ];
        for b in 0..=255u8 {
            tokens.push((format!("<0x{b:02X}>"), 0.0, BYTE));
        }
        // Higher score merges first (Gemma's scores are minus the rank).
        for (t, score) in [
            ("▁", -1.0),
            ("a", -2.0),
            ("b", -3.0),
            ("c", -4.0),
            ("u", -5.0),
            ("s", -6.0),
            ("e", -7.0),
            ("r", -8.0),
            (":", -9.0),
            ("ab", -10.0),
            ("bc", -11.0),
            ("▁a", -12.0),
            ("▁ab", -13.0),
            ("us", -14.0),
            ("er", -15.0),
            ("user", -16.0),
            ("use", -17.0),
            ("é", -18.0),
            ("aa", -19.0),
        ] {
            tokens.push((t.into(), score, NORMAL));
        }
        let array =
            |f: &dyn Fn(&(String, f32, i32)) -> Value| Value::Array(tokens.iter().map(f).collect());
        let mut md = HashMap::new();
        md.insert(
            "general.architecture".into(),
            Value::String("gemma3".into()),
        );
        md.insert("tokenizer.ggml.model".into(), Value::String("llama".into()));
        md.insert(
            "tokenizer.ggml.tokens".into(),
            array(&|t| Value::String(t.0.clone())),
        );
        md.insert("tokenizer.ggml.scores".into(), array(&|t| Value::F32(t.1)));
        md.insert(
            "tokenizer.ggml.token_type".into(),
            array(&|t| Value::I32(t.2)),
        );
        md.insert("tokenizer.ggml.bos_token_id".into(), Value::U32(2));
        md.insert("tokenizer.ggml.eos_token_id".into(), Value::U32(1));
        md.insert("tokenizer.ggml.unknown_token_id".into(), Value::U32(3));
        md.insert(
            "tokenizer.ggml.add_space_prefix".into(),
            Value::Bool(add_space_prefix),
        );
        md
    }

    fn spm(add_space_prefix: bool) -> GgufTokenizer {
        GgufTokenizer::from_metadata(&spm_metadata(add_space_prefix), "test.gguf").unwrap()
    }

    fn pieces(t: &GgufTokenizer, text: &str) -> Vec<String> {
        t.encode(text)
            .unwrap()
            .iter()
            .map(|&i| String::from_utf8_lossy(t.token_bytes(i)).into_owned())
            .collect()
    }

    #[test]
    fn spm_merges_the_best_scored_pair_first() {
        let t = spm(false);
        // "ab" (-10) beats "bc" (-11): a b c -> ab c.
        assert_eq!(pieces(&t, "abc"), ["ab", "c"]);
        // "bc" is taken when "ab" cannot be: c b c -> c bc.
        assert_eq!(pieces(&t, "cbc"), ["c", "bc"]);
        // Equal pairs: the leftmost first (a a a -> aa a).
        assert_eq!(pieces(&t, "aaa"), ["aa", "a"]);
        // Spaces are ▁ and merge with what follows.
        assert_eq!(pieces(&t, "ab ab"), ["ab", " ab"]);
        assert_eq!(pieces(&t, "user"), ["user"]);
        assert_eq!(pieces(&t, "uses"), ["use", "s"]);
    }

    #[test]
    fn spm_byte_fallback_and_round_trips() {
        let t = spm(false);
        // "é" is a token; "ü" and "€" are not: their UTF-8 bytes are.
        assert_eq!(pieces(&t, "é"), ["é"]);
        let ids = t.encode("aü€").unwrap();
        let n = |s: &str| t.encode(s).unwrap();
        assert_eq!(ids[0], n("a")[0]);
        assert_eq!(ids.len(), 1 + 2 + 3);
        assert_eq!(t.token_bytes(ids[1]), [0xC3]);
        assert_eq!(t.decode(&ids).unwrap(), "aü€");
        // Streaming the tokens' bytes gives the same text.
        let mut stream = Utf8Stream::default();
        let streamed: String = ids.iter().map(|&i| stream.push(t.token_bytes(i))).collect();
        assert_eq!(streamed + &stream.finish(), "aü€");
        for text in [
            "",
            " ",
            "  a  b ",
            "x\ny\n\n\nz",
            "abc bca cab",
            "é€\u{1F600}",
            "\t<b>",
        ] {
            assert_eq!(
                t.decode(&t.encode(text).unwrap()).unwrap(),
                text,
                "{text:?}"
            );
        }
    }

    #[test]
    fn spm_special_tokens_match_whole_longest_first() {
        let t = spm(false);
        let ids = t
            .encode("<bos><start_of_turn>user\n\n\nab<end_of_turn>")
            .unwrap();
        let names: Vec<String> = ids
            .iter()
            .map(|&i| match i {
                2 => "<bos>".into(),
                4 => "<start_of_turn>".into(),
                5 => "<end_of_turn>".into(),
                _ => String::from_utf8_lossy(t.token_bytes(i)).into_owned(),
            })
            .collect();
        assert_eq!(
            names,
            [
                "<bos>",
                "<start_of_turn>",
                "user",
                "\n\n",
                "\n",
                "ab",
                "<end_of_turn>"
            ]
        );
        // Control tokens give no text; the user-defined ones theirs.
        assert_eq!(t.decode(&ids).unwrap(), "user\n\n\nab");
        assert!(t.is_stop(1) && t.is_stop(5) && !t.is_stop(4));
        // A run of two spaces is its own (user-defined) token.
        assert_eq!(pieces(&t, "a  b"), ["a", "  ", "b"]);
    }

    #[test]
    fn spm_space_prefix() {
        let t = spm(true);
        assert_eq!(pieces(&t, "ab"), [" ab"]);
        // After a special token a prefix again, as llama.cpp does.
        let ids = t.encode("<bos>ab").unwrap();
        assert_eq!(ids[0], 2);
        assert_eq!(String::from_utf8_lossy(t.token_bytes(ids[1])), " ab");
    }

    proptest! {
        #[test]
        fn spm_round_trip(text in "[abcusé€ \n:<>x\u{1F600}]{0,40}") {
            let t = spm(false);
            let ids = t.encode(&text).unwrap();
            prop_assert_eq!(t.decode(&ids).unwrap(), text);
        }
    }

    #[test]
    fn gemma_chat_template() {
        let t = spm(false);
        let prompt = Prompt {
            system: None,
            user: "  Describe the film.\n".into(),
            images: vec![],
        };
        assert_eq!(
            t.render_chat(&prompt).unwrap(),
            "<bos><start_of_turn>user\nDescribe the film.<end_of_turn>\n<start_of_turn>model\n"
        );
        let prompt = Prompt {
            system: Some("You are a radiologist.".into()),
            ..prompt
        };
        assert_eq!(
            t.render_chat(&prompt).unwrap(),
            "<bos><start_of_turn>user\nYou are a radiologist.\n\nDescribe the film.<end_of_turn>\n<start_of_turn>model\n"
        );
        // Without a Gemma architecture (and no template in the file): ChatML.
        let mut md = spm_metadata(false);
        md.remove("general.architecture");
        let t = GgufTokenizer::from_metadata(&md, "test.gguf").unwrap();
        assert!(t
            .render_chat(&prompt)
            .unwrap()
            .starts_with("<|im_start|>system\n"));
    }

    #[test]
    fn spm_bad_metadata_is_an_error() {
        let mut md = spm_metadata(false);
        md.insert(
            "tokenizer.ggml.scores".into(),
            Value::Array(vec![Value::F32(0.0)]),
        );
        let e = GgufTokenizer::from_metadata(&md, "test.gguf")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("test.gguf") && e.contains("scores"), "{e}");
        let mut md = spm_metadata(false);
        md.insert("tokenizer.ggml.model".into(), Value::String("bert".into()));
        let e = GgufTokenizer::from_metadata(&md, "test.gguf")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("\"bert\" is not supported"), "{e}");
        assert_eq!(e.lines().count(), 1);
        // Out-of-vocabulary ids are an error, not a panic.
        assert!(spm(false).decode(&[1_000_000]).is_err());
    }

    #[test]
    fn byte_map_is_gpt2() {
        let m = unicode_to_byte();
        assert_eq!(m.len(), 256);
        assert_eq!(m[&'Ġ'], b' ');
        assert_eq!(m[&'Ċ'], b'\n');
        assert_eq!(m[&'a'], b'a');
    }

    #[test]
    fn split_character_waits() {
        let mut s = Utf8Stream::default();
        let e = "é".as_bytes();
        assert_eq!(s.push(b"caf"), "caf");
        assert_eq!(s.push(&e[..1]), "");
        assert_eq!(s.push(&e[1..]), "é");
        assert_eq!(s.push(&[0xE2, 0x82]), "");
        assert_eq!(s.finish(), "\u{FFFD}");
    }

    proptest! {
        #[test]
        fn stream_equals_lossy(bytes in proptest::collection::vec(any::<u8>(), 0..64),
                               cuts in proptest::collection::vec(0usize..64, 0..8)) {
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(bytes.len())).collect();
            cuts.sort();
            let mut s = Utf8Stream::default();
            let mut out = String::new();
            let mut at = 0;
            for c in cuts.into_iter().chain([bytes.len()]) {
                out.push_str(&s.push(&bytes[at..c]));
                at = c;
            }
            out.push_str(&s.finish());
            prop_assert_eq!(out, String::from_utf8_lossy(&bytes).into_owned());
        }
    }
}
