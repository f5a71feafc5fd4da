//! In-process generation with a GGUF model on the CPU: llama-family
//! (`general.architecture = llama`, e.g. SmolLM2) or Gemma 3 (`gemma3`).
//!
//! The prompt is run once; its keys and values are shared by the K
//! candidates, which are then decoded as one batch, each row at its own
//! position (the lock-step pauses rows that finished a sentence). Candidate
//! `i` samples with seed `seed + i` and its numbers never depend on the other
//! rows, so its text is the same whatever K is and whichever rows were
//! cancelled.

pub mod gemma3;
mod kernels;
pub mod llama;
pub mod tokenizer;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file::Value;
use candle_core::{Device, Tensor};
use candle_transformers::generation::{LogitsProcessor, Sampling};

use crate::{Backend, Candidates, End, GenError, Piece, Request, REPEAT_WINDOW};
use gemma3::Gemma3;
use llama::{Config, KvCache, Llama, Meta};
use tokenizer::{GgufTokenizer, Utf8Stream};

/// A decoder of one of the supported architectures.
pub enum Model {
    Llama(Llama),
    Gemma3(Gemma3),
}

impl Model {
    /// Loads a GGUF file with the decoder its `general.architecture` names;
    /// returns the metadata too (for the tokenizer).
    pub fn load(path: &Path) -> Result<(Self, HashMap<String, Value>), GenError> {
        let arch = {
            let (content, _) = llama::read_gguf(path)?;
            let meta = Meta {
                md: &content.metadata,
                what: path.display().to_string(),
            };
            meta.str("general.architecture")?.to_string()
        };
        match arch.as_str() {
            "llama" => Llama::load(path).map(|(m, md)| (Self::Llama(m), md)),
            "gemma3" => Gemma3::load(path).map(|(m, md)| (Self::Gemma3(m), md)),
            other => Err(GenError::BadModel {
                what: path.display().to_string(),
                message: format!("architecture {other:?} is not supported (llama or gemma3)"),
            }),
        }
    }

    /// The model's shape.
    pub fn config(&self) -> &Config {
        match self {
            Self::Llama(m) => m.config(),
            Self::Gemma3(m) => m.config(),
        }
    }

    /// Runs the prompt once; returns its cache (with no rows yet) and the
    /// logits of its last position.
    pub fn prefill(&self, tokens: &[u32]) -> Result<(KvCache, Vec<f32>), GenError> {
        match self {
            Self::Llama(m) => m.prefill(tokens),
            Self::Gemma3(m) => m.prefill(tokens),
        }
    }

    /// One decoding step: feeds `tokens[b]` to row `rows[b]` at that row's
    /// own position and returns the logits of every row, `vocab` per row.
    pub fn decode(
        &self,
        cache: &mut KvCache,
        rows: &[usize],
        tokens: &[u32],
    ) -> Result<Vec<f32>, GenError> {
        match self {
            Self::Llama(m) => m.decode(cache, rows, tokens),
            Self::Gemma3(m) => m.decode(cache, rows, tokens),
        }
    }
}

/// A GGUF model loaded for local generation.
pub struct LocalBackend {
    path: PathBuf,
    model: Model,
    tokenizer: GgufTokenizer,
}

impl LocalBackend {
    /// Loads the weights, tokenizer and chat template of a llama or gemma3 GGUF file.
    pub fn load(path: &Path) -> Result<Self, GenError> {
        let (model, metadata) = Model::load(path)?;
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
    pub fn model(&self) -> &Model {
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
        let rows = (0..request.k)
            .map(|i| Row {
                sampler: Sampler::new(
                    request.seed.wrapping_add(i as u64),
                    request.temperature,
                    request.top_p,
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

/// candle's `LogitsProcessor` with its top-p (nucleus) step done without
/// sorting the whole vocabulary: the same draws for the same seed (checked
/// against candle by the tests), a few times faster on Gemma's 262 144 tokens.
struct Sampler {
    inner: LogitsProcessor,
    /// The nucleus mass, when it cuts (`0 < p < 1`) and sampling is not greedy.
    top_p: Option<f32>,
}

impl Sampler {
    fn new(seed: u64, temperature: f64, top_p: f64) -> Self {
        // As LogitsProcessor::new(seed, Some(temperature), (top_p < 1).then_some(top_p)).
        if temperature < 1e-7 {
            return Self {
                inner: LogitsProcessor::new(seed, None, None),
                top_p: None,
            };
        }
        Self {
            inner: LogitsProcessor::from_sampling(seed, Sampling::All { temperature }),
            top_p: (top_p > 0.0 && top_p < 1.0).then_some(top_p as f32),
        }
    }

    fn sample(&mut self, logits: &Tensor) -> candle_core::Result<u32> {
        match self.top_p {
            None => self.inner.sample(logits),
            Some(p) => self.inner.sample_f(logits, |prs| nucleus(prs, p)),
        }
    }
}

/// How many of the most likely tokens are sorted first; the whole
/// vocabulary only when they hold less than the nucleus.
const NUCLEUS_FIRST: usize = 512;

/// candle's `sample_topp` clamping, in place: in order of decreasing
/// probability (ties by index), a token is kept while the running sum of the
/// kept ones is below `p`, and set to 0 after. Only the tokens at least as
/// likely as the [`NUCLEUS_FIRST`]-th are sorted, as they are the first ones
/// of the full order, unless their running sum stays below `p`.
fn nucleus(prs: &mut [f32], p: f32) {
    let mut order: Vec<usize> = if prs.len() > NUCLEUS_FIRST {
        let mut idx: Vec<usize> = (0..prs.len()).collect();
        let (_, &mut nth, _) =
            idx.select_nth_unstable_by(NUCLEUS_FIRST - 1, |&i, &j| prs[j].total_cmp(&prs[i]));
        let t = prs[nth];
        (0..prs.len())
            .filter(|&i| prs[i].total_cmp(&t).is_ge())
            .collect()
    } else {
        (0..prs.len()).collect()
    };
    order.sort_by(|&i, &j| prs[j].total_cmp(&prs[i]));
    let mut cumsum = 0f32;
    for &i in &order {
        if cumsum >= p {
            break;
        }
        cumsum += prs[i];
    }
    if cumsum < p && order.len() < prs.len() {
        // The head holds less than p: the full order, as candle does it.
        order = (0..prs.len()).collect();
        order.sort_by(|&i, &j| prs[j].total_cmp(&prs[i]));
    }
    let mut cumsum = 0f32;
    let mut keep = vec![false; prs.len()];
    for &i in &order {
        if cumsum >= p {
            break;
        }
        cumsum += prs[i];
        keep[i] = true;
    }
    for (pr, k) in prs.iter_mut().zip(keep) {
        if !k {
            *pr = 0.0;
        }
    }
}

struct Row {
    sampler: Sampler,
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
    model: &'a Model,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The same tokens as candle's top-p sampler, seed for seed.
    #[test]
    fn nucleus_sampling_draws_as_candle() {
        let mut rng = fastrand::Rng::with_seed(7);
        for (vocab, spread) in [(50, 1.0), (5000, 3.0), (5000, 12.0), (70_000, 8.0)] {
            // Repeated values make ties at the cut.
            let logits: Vec<f32> = (0..vocab)
                .map(|_| (rng.f32() * spread * 8.0).round() / 8.0)
                .collect();
            let t = Tensor::from_vec(logits, vocab, &Device::Cpu).unwrap();
            for (seed, temperature, top_p) in [
                (0, 0.8, 0.95),
                (1, 1.0, 0.5),
                (2, 0.3, 0.9),
                (3, 0.8, 1.0),
                (4, 0.0, 0.9),
                (5, 2.0, 0.999),
            ] {
                let mut ours = Sampler::new(seed, temperature, top_p);
                let mut candle =
                    LogitsProcessor::new(seed, Some(temperature), (top_p < 1.0).then_some(top_p));
                for step in 0..20 {
                    assert_eq!(
                        ours.sample(&t).unwrap(),
                        candle.sample(&t).unwrap(),
                        "vocab {vocab}, spread {spread}, seed {seed}, step {step}"
                    );
                }
            }
        }
    }

    /// A GGUF file with `metadata` and no tensors, in a fresh temporary directory.
    fn gguf_with(name: &str, metadata: &[(&str, Value)]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("sdr-gen-arch-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{name}.gguf"));
        let md: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (*k, v)).collect();
        let mut f = std::fs::File::create(&path).unwrap();
        candle_core::quantized::gguf_file::write(&mut f, &md, &[]).unwrap();
        path
    }

    #[test]
    fn unknown_or_incomplete_architectures_are_one_line_errors() {
        let arch = |a: &str| ("general.architecture", Value::String(a.into()));
        let cases = [
            (
                "mamba",
                vec![arch("mamba")],
                "architecture \"mamba\" is not supported (llama or gemma3)",
            ),
            ("noarch", vec![], "metadata general.architecture is missing"),
            (
                "gemma3",
                vec![arch("gemma3")],
                "metadata gemma3.embedding_length is missing",
            ),
            (
                "llama",
                vec![arch("llama")],
                "metadata llama.attention.head_count is missing",
            ),
        ];
        for (name, md, want) in cases {
            let path = gguf_with(name, &md);
            let e = LocalBackend::load(&path)
                .err()
                .expect("no model")
                .to_string();
            assert!(
                e.contains(want) && e.contains(&format!("{name}.gguf")),
                "{e}"
            );
            assert_eq!(e.lines().count(), 1, "{e}");
            std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
        }
    }

    #[test]
    fn nucleus_keeps_the_head() {
        let mut prs = vec![0.1, 0.4, 0.05, 0.3, 0.15];
        nucleus(&mut prs, 0.75);
        assert_eq!(prs, [0.0, 0.4, 0.0, 0.3, 0.15]);
    }
}
