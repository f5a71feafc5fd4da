//! In-process generation with a GGUF llama-family model on the CPU.
//!
//! The prompt is run once; its keys and values are shared by the K
//! candidates, which are then decoded as one batch, each row at its own
//! position (the lock-step pauses rows that finished a sentence). Candidate
//! `i` samples with seed `seed + i` and its numbers never depend on the other
//! rows, so its text is the same whatever K is and whichever rows were
//! cancelled.

mod kernels;
pub mod llama;
pub mod tokenizer;

use std::path::{Path, PathBuf};

use candle_core::{Device, Tensor};
use candle_transformers::generation::LogitsProcessor;

use crate::{Backend, Candidates, End, GenError, Piece, Request, REPEAT_WINDOW};
use llama::{KvCache, Llama};
use tokenizer::{GgufTokenizer, Utf8Stream};

/// A GGUF model loaded for local generation.
pub struct LocalBackend {
    path: PathBuf,
    model: Llama,
    tokenizer: GgufTokenizer,
}

impl LocalBackend {
    /// Loads the weights, tokenizer and chat template of a llama GGUF file.
    pub fn load(path: &Path) -> Result<Self, GenError> {
        let (model, metadata) = Llama::load(path)?;
        let what = path.display().to_string();
        let tokenizer = GgufTokenizer::from_metadata(&metadata, &what)?;
        if tokenizer.vocab_size() > model.config().vocab {
            return Err(GenError::BadModel {
                what: what.to_string(),
                message: format!(
                    "{} tokens but the embedding has {} rows",
                    tokenizer.vocab_size(),
                    model.config().vocab
                ),
            });
        }
        Ok(Self {
            path: path.to_path_buf(),
            model,
            tokenizer,
        })
    }

    /// The model.
    pub fn model(&self) -> &Llama {
        &self.model
    }

    /// The tokenizer and chat template.
    pub fn tokenizer(&self) -> &GgufTokenizer {
        &self.tokenizer
    }

    /// Token ids of the request's prompt, chat template applied.
    pub fn prompt_tokens(&self, request: &Request) -> Result<Vec<u32>, GenError> {
        if !request.prompt.images.is_empty() {
            return Err(GenError::Request(format!(
                "{} is a text-only model; the prompt has {} image(s)",
                self.describe(),
                request.prompt.images.len()
            )));
        }
        let mut text = self.tokenizer.render_chat(&request.prompt)?;
        if let Some(prefill) = &request.prefill {
            text.push_str(prefill);
        }
        self.tokenizer.encode(&text)
    }
}

impl Backend for LocalBackend {
    fn describe(&self) -> String {
        let name = self.path.file_name().map_or_else(
            || self.path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        format!("local:{name}")
    }

    fn start<'a>(&'a mut self, request: &Request) -> Result<Box<dyn Candidates + 'a>, GenError> {
        request.validate()?;
        let tokens = self.prompt_tokens(request)?;
        let (mut cache, logits) = self.model.prefill(&tokens)?;
        cache.set_rows(request.k);
        let top_p = (request.top_p < 1.0).then_some(request.top_p);
        let rows = (0..request.k)
            .map(|i| Row {
                sampler: LogitsProcessor::new(
                    request.seed.wrapping_add(i as u64),
                    Some(request.temperature),
                    top_p,
                ),
                logits: Some(logits.clone()),
                unfed: None,
                produced: 0,
                text: Utf8Stream::default(),
                prefix: request.prefill.clone(),
                recent: Vec::new(),
                ended: false,
            })
            .collect();
        Ok(Box::new(LocalCandidates {
            model: &self.model,
            tokenizer: &self.tokenizer,
            cache,
            rows,
            max_tokens: request.max_tokens,
            repetition_penalty: request.repetition_penalty as f32,
        }))
    }
}

struct Row {
    sampler: LogitsProcessor,
    /// Distribution of the next token, once the last one has been fed.
    logits: Option<Vec<f32>>,
    /// Sampled token not yet run through the model.
    unfed: Option<u32>,
    produced: usize,
    text: Utf8Stream,
    /// The prefill, given back with the first piece (the candidate's text
    /// starts with it, as the parser must see the header).
    prefix: Option<String>,
    /// The last [`REPEAT_WINDOW`] tokens produced, for the repetition penalty.
    recent: Vec<u32>,
    ended: bool,
}

/// The K rows of one local request.
struct LocalCandidates<'a> {
    model: &'a Llama,
    tokenizer: &'a GgufTokenizer,
    cache: KvCache,
    rows: Vec<Row>,
    max_tokens: usize,
    repetition_penalty: f32,
}

impl LocalCandidates<'_> {
    fn end(&mut self, id: usize) {
        self.rows[id].ended = true;
        self.rows[id].logits = None;
        self.rows[id].unfed = None;
        self.cache.free(id);
    }
}

impl Candidates for LocalCandidates<'_> {
    fn k(&self) -> usize {
        self.rows.len()
    }

    fn next(&mut self, ids: &[usize]) -> Result<Vec<Piece>, GenError> {
        for (n, &id) in ids.iter().enumerate() {
            match self.rows.get(id) {
                None => {
                    return Err(GenError::Protocol(format!(
                        "candidate {id} does not exist (k = {})",
                        self.rows.len()
                    )))
                }
                Some(r) if r.ended => {
                    return Err(GenError::Protocol(format!(
                        "candidate {id} has ended or was cancelled"
                    )))
                }
                _ if ids[..n].contains(&id) => {
                    return Err(GenError::Protocol(format!("candidate {id} asked twice")))
                }
                _ => {}
            }
        }
        // Run the tokens sampled last time, for exactly the rows asked for.
        let (feed, tokens): (Vec<usize>, Vec<u32>) = ids
            .iter()
            .filter_map(|&id| self.rows[id].unfed.map(|t| (id, t)))
            .unzip();
        if !feed.is_empty() {
            let logits = self.model.decode(&mut self.cache, &feed, &tokens)?;
            let vocab = self.model.config().vocab;
            for (&id, l) in feed.iter().zip(logits.chunks_exact(vocab)) {
                self.rows[id].logits = Some(l.to_vec());
                self.rows[id].unfed = None;
            }
        }
        let context = self.model.config().context;
        let mut pieces = Vec::with_capacity(ids.len());
        for &id in ids {
            let row = &mut self.rows[id];
            let logits = row.logits.take().expect("fed above");
            let model_error = |source| GenError::Model {
                what: "local model".into(),
                source,
            };
            let mut logits = Tensor::from_vec(logits, self.model.config().vocab, &Device::Cpu)
                .map_err(model_error)?;
            if self.repetition_penalty != 1.0 && !row.recent.is_empty() {
                logits = candle_transformers::utils::apply_repeat_penalty(
                    &logits,
                    self.repetition_penalty,
                    &row.recent,
                )
                .map_err(model_error)?;
            }
            let token = match row.sampler.sample(&logits) {
                Ok(t) => t,
                Err(e) => {
                    pieces.push(Piece {
                        text: row.text.finish(),
                        tokens: 0,
                        end: Some(End::Error(format!("sampling: {e}"))),
                    });
                    self.end(id);
                    continue;
                }
            };
            row.produced += 1;
            if row.recent.len() == REPEAT_WINDOW {
                row.recent.remove(0);
            }
            row.recent.push(token);
            let mut piece = if self.tokenizer.is_stop(token) {
                Piece {
                    text: row.text.finish(),
                    tokens: 1,
                    end: Some(End::Stop),
                }
            } else {
                let mut text = row.text.push(self.tokenizer.token_bytes(token));
                // The token would be fed at this position.
                let position = self.cache.position(id).expect("live row");
                if row.produced >= self.max_tokens || position >= context {
                    text.push_str(&row.text.finish());
                    Piece {
                        text,
                        tokens: 1,
                        end: Some(End::Length),
                    }
                } else {
                    row.unfed = Some(token);
                    Piece {
                        text,
                        tokens: 1,
                        end: None,
                    }
                }
            };
            if let Some(prefix) = row.prefix.take() {
                piece.text.insert_str(0, &prefix);
            }
            if piece.end.is_some() {
                self.end(id);
            }
            pieces.push(piece);
        }
        Ok(pieces)
    }

    fn cancel(&mut self, id: usize) {
        if self.rows.get(id).is_some_and(|r| !r.ended) {
            self.end(id);
        }
    }

    fn produced(&self, id: usize) -> usize {
        self.rows.get(id).map_or(0, |r| r.produced)
    }
}
