//! Sentence tokenisation as sentence-transformers does it: the folder's
//! `tokenizer.json` with its fixed 128-token padding and truncation replaced by
//! truncation at `max_seq_length` from `sentence_bert_config.json` (special tokens
//! included) and no padding; batches are padded later, to their longest member.

use std::path::Path;

use tokenizers::{Tokenizer, TruncationParams};

use crate::error::{EmbedError, Result};

/// One tokenised sentence.
#[derive(Debug, Clone)]
pub struct Tokens {
    pub ids: Vec<u32>,
    pub tokens: Vec<String>,
}

/// A `tokenizer.json` tokenizer set up like sentence-transformers.
pub struct SentenceTokenizer {
    inner: Tokenizer,
    max_seq_length: usize,
    pad_id: u32,
}

impl SentenceTokenizer {
    /// Loads `<dir>/tokenizer.json`, truncating at `max_seq_length` tokens.
    pub fn load(dir: &Path, max_seq_length: usize, pad_id: u32) -> Result<Self> {
        let path = dir.join("tokenizer.json");
        if !path.is_file() {
            return Err(EmbedError::MissingFile {
                dir: dir.to_path_buf(),
                file: "tokenizer.json",
            });
        }
        let mut inner = Tokenizer::from_file(&path).map_err(|e| EmbedError::Tokenizer {
            what: path.display().to_string(),
            message: e.to_string(),
        })?;
        inner.with_padding(None);
        inner
            .with_truncation(Some(TruncationParams {
                max_length: max_seq_length,
                ..Default::default()
            }))
            .map_err(|e| EmbedError::Tokenizer {
                what: path.display().to_string(),
                message: e.to_string(),
            })?;
        Ok(Self {
            inner,
            max_seq_length,
            pad_id,
        })
    }

    /// Longest sequence, special tokens included.
    pub fn max_seq_length(&self) -> usize {
        self.max_seq_length
    }

    /// Id used to pad batches.
    pub fn pad_id(&self) -> u32 {
        self.pad_id
    }

    /// Tokenises each text (in parallel), adding the special tokens.
    pub fn encode(&self, texts: &[&str], with_tokens: bool) -> Result<Vec<Tokens>> {
        let encodings =
            self.inner
                .encode_batch(texts.to_vec(), true)
                .map_err(|e| EmbedError::Tokenizer {
                    what: format!("batch of {} texts", texts.len()),
                    message: e.to_string(),
                })?;
        Ok(encodings
            .into_iter()
            .map(|e| Tokens {
                ids: e.get_ids().to_vec(),
                tokens: if with_tokens {
                    e.get_tokens().to_vec()
                } else {
                    Vec::new()
                },
            })
            .collect())
    }
}
