//! The tokenizer and chat template stored in a GGUF file's metadata, rebuilt
//! so that no `tokenizer.json` has to travel with the model.
//!
//! Only GPT-2-style byte-level BPE (`tokenizer.ggml.model = gpt2`) is
//! supported, with the pre-tokenizers llama.cpp calls `gpt2`/`default` (the
//! GPT-2 regex) and `smollm` (each digit alone, then the GPT-2 regex).
//! Control tokens (`<|im_start|>`, `<|im_end|>`, ...) are special: they are
//! matched whole in the input and produce no text.

use std::collections::HashMap;

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
const CONTROL: i32 = 3;
const USER_DEFINED: i32 = 4;

/// Tokenizer and chat template of a GGUF model.
pub struct GgufTokenizer {
    inner: Tokenizer,
    /// Bytes each token stands for; empty for control tokens.
    bytes: Vec<Vec<u8>>,
    stop: Vec<u32>,
    template: Option<String>,
    bos: Option<String>,
    eos: Option<String>,
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

impl GgufTokenizer {
    /// Builds the tokenizer from GGUF metadata; `what` (the file) names errors.
    pub fn from_metadata(md: &HashMap<String, Value>, what: &str) -> Result<Self, GenError> {
        let meta = Meta {
            md,
            what: what.to_string(),
        };
        let model = meta.str("tokenizer.ggml.model")?;
        if model != "gpt2" {
            return Err(GenError::BadModel {
                what: what.to_string(),
                message: format!(
                    "tokenizer model {model:?} is not supported (only gpt2 byte-level BPE)"
                ),
            });
        }
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
        let merges = strings(&meta, "tokenizer.ggml.merges")?
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
            .zip(&types)
            .filter(|(_, &t)| t == CONTROL || t == USER_DEFINED)
            .map(|(s, &t)| AddedToken::from(s.to_string(), t == CONTROL))
            .collect();
        inner.add_special_tokens(&special);

        let to_byte = unicode_to_byte();
        let bytes = tokens
            .iter()
            .zip(&types)
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
        for name in ["<|im_end|>", "<|endoftext|>", "<|eot_id|>"] {
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
        let name = |i: Option<usize>| i.map(|i| tokens[i].to_string());
        Ok(Self {
            inner,
            bytes,
            stop,
            template: meta.str("tokenizer.chat_template").ok().map(str::to_string),
            bos: name(id("tokenizer.ggml.bos_token_id")),
            eos: name(id("tokenizer.ggml.eos_token_id")),
        })
    }

    /// Token ids of `text`; control tokens written in it are recognised.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, GenError> {
        let enc = self
            .inner
            .encode(text, false)
            .map_err(|source| GenError::Tokenizer {
                what: "tokenizing".into(),
                source,
            })?;
        Ok(enc.get_ids().to_vec())
    }

    /// The text of `ids`, control tokens left out.
    pub fn decode(&self, ids: &[u32]) -> Result<String, GenError> {
        self.inner
            .decode(ids, true)
            .map_err(|source| GenError::Tokenizer {
                what: "detokenizing".into(),
                source,
            })
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
    /// user turn and `add_generation_prompt`), or ChatML if it has none.
    pub fn render_chat(&self, prompt: &Prompt) -> Result<String, GenError> {
        let mut messages = Vec::new();
        if let Some(s) = &prompt.system {
            messages.push(minijinja::context! { role => "system", content => s });
        }
        messages.push(minijinja::context! { role => "user", content => &prompt.user });
        let Some(template) = &self.template else {
            let mut out = String::new();
            if let Some(s) = &prompt.system {
                out.push_str(&format!("<|im_start|>system\n{s}<|im_end|>\n"));
            }
            out.push_str(&format!(
                "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n",
                prompt.user
            ));
            return Ok(out);
        };
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
