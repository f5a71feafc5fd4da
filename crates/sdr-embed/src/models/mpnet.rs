//! MPNet encoder (Song et al., 2020, "MPNet: Masked and Permuted Pre-training for
//! Language Understanding", <https://arxiv.org/abs/2004.09297>), the backbone of
//! `sentence-transformers/all-mpnet-base-v2` used by SDR (SPEC §2).
//!
//! Written for candle from the structure of Hugging Face transformers'
//! `models/mpnet/modeling_mpnet.py` (huggingface/transformers, `MPNetModel`), with the
//! checkpoint keys of the sentence-transformers `model.safetensors`:
//!
//! ```text
//! embeddings.{word_embeddings,position_embeddings,LayerNorm}
//! encoder.relative_attention_bias                      [num_buckets, heads]
//! encoder.layer.N.attention.attn.{q,k,v,o}
//! encoder.layer.N.attention.LayerNorm
//! encoder.layer.N.intermediate.dense
//! encoder.layer.N.output.{dense,LayerNorm}
//! ```
//!
//! Differences from BERT: no token-type embeddings; RoBERTa-style position ids
//! (`padding_idx + cumulative count of non-pad tokens`, pad positions keep
//! `padding_idx`); and a T5-style bidirectional relative-position bias, bucketed once
//! per forward pass and added to the attention scores of every layer.
//!
//! Inference only: dropout is the identity. Tokenising and pooling live outside this
//! file (see `crate::encoder`).

use candle_core::{DType, Device, Module, Result, Tensor};
use candle_nn::{Embedding, LayerNorm, Linear, VarBuilder};

use crate::gemm::Dense;
use serde::Deserialize;

/// `config.json` of an MPNet checkpoint (fields SDR reads; others are ignored).
#[derive(Debug, Clone, Deserialize)]
pub struct Config {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    #[serde(default = "default_act")]
    pub hidden_act: String,
    pub max_position_embeddings: usize,
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
    #[serde(default = "default_pad")]
    pub pad_token_id: u32,
    #[serde(default = "default_buckets")]
    pub relative_attention_num_buckets: usize,
}

fn default_act() -> String {
    "gelu".into()
}
fn default_eps() -> f64 {
    1e-5
}
fn default_pad() -> u32 {
    1
}
fn default_buckets() -> usize {
    32
}

impl Default for Config {
    /// The configuration of `microsoft/mpnet-base` / all-mpnet-base-v2.
    fn default() -> Self {
        Self {
            vocab_size: 30527,
            hidden_size: 768,
            num_hidden_layers: 12,
            num_attention_heads: 12,
            intermediate_size: 3072,
            hidden_act: default_act(),
            max_position_embeddings: 514,
            layer_norm_eps: default_eps(),
            pad_token_id: default_pad(),
            relative_attention_num_buckets: default_buckets(),
        }
    }
}

/// Maximum relative distance that still gets its own log-spaced bucket (MPNet uses 128).
const MAX_DISTANCE: i64 = 128;

/// Bucket of a relative position `memory - context`, bidirectional, as in T5 and
/// MPNet: half the buckets for each sign; within a half, exact buckets for
/// `|n| < num_buckets/4` and log-spaced ones up to `MAX_DISTANCE`, clamped after.
pub fn relative_position_bucket(relative_position: i64, num_buckets: usize) -> u32 {
    let half = (num_buckets / 2) as i64;
    let n = -relative_position;
    let mut ret = if n < 0 { half } else { 0 };
    let n = n.abs();
    let max_exact = half / 2;
    if n < max_exact {
        ret += n;
    } else {
        let scaled = ((n as f32 / max_exact as f32).ln()
            / (MAX_DISTANCE as f32 / max_exact as f32).ln()
            * (half - max_exact) as f32) as i64;
        ret += (max_exact + scaled).min(half - 1);
    }
    ret as u32
}

/// The `hidden_act` values [`gelu`] implements; any other is refused at load.
const ACTIVATIONS: [&str; 4] = ["gelu", "gelu_new", "gelu_pytorch_tanh", "relu"];

fn gelu(xs: &Tensor, act: &str) -> Result<Tensor> {
    match act {
        "gelu_new" | "gelu_pytorch_tanh" => xs.gelu(),
        "relu" => xs.relu(),
        "gelu" => crate::kernels::activation::gelu_erf(xs),
        other => candle_core::bail!("unsupported hidden_act `{other}`"),
    }
}

struct Embeddings {
    word_embeddings: Embedding,
    position_embeddings: Embedding,
    layer_norm: LayerNorm,
    pad_token_id: u32,
}

impl Embeddings {
    fn load(vb: VarBuilder, cfg: &Config) -> Result<Self> {
        Ok(Self {
            word_embeddings: candle_nn::embedding(
                cfg.vocab_size,
                cfg.hidden_size,
                vb.pp("word_embeddings"),
            )?,
            position_embeddings: candle_nn::embedding(
                cfg.max_position_embeddings,
                cfg.hidden_size,
                vb.pp("position_embeddings"),
            )?,
            layer_norm: candle_nn::layer_norm(
                cfg.hidden_size,
                cfg.layer_norm_eps,
                vb.pp("LayerNorm"),
            )?,
            pad_token_id: cfg.pad_token_id,
        })
    }

    /// RoBERTa-style position ids: `pad + 1 + (number of non-pad tokens before)` for
    /// real tokens, `pad` for padding.
    fn position_ids(&self, input_ids: &Tensor) -> Result<Tensor> {
        let ids = input_ids.to_vec2::<u32>()?;
        let (b, s) = input_ids.dims2()?;
        let pad = self.pad_token_id;
        let mut pos = Vec::with_capacity(b * s);
        for row in &ids {
            let mut count = 0u32;
            for &id in row {
                if id != pad {
                    count += 1;
                    pos.push(pad + count);
                } else {
                    pos.push(pad);
                }
            }
        }
        Tensor::from_vec(pos, (b, s), input_ids.device())
    }

    fn forward(&self, input_ids: &Tensor) -> Result<Tensor> {
        let positions = self.position_ids(input_ids)?;
        let xs = self
            .word_embeddings
            .forward(input_ids)?
            .add(&self.position_embeddings.forward(&positions)?)?;
        self.layer_norm.forward(&xs)
    }
}

struct SelfAttention {
    /// q, k and v fused into one `[3 * hidden, hidden]` projection: one GEMM instead of three.
    qkv: Dense,
    o: Dense,
    layer_norm: LayerNorm,
    num_heads: usize,
    head_dim: usize,
}

impl SelfAttention {
    fn load(vb: VarBuilder, cfg: &Config, bf16: bool) -> Result<Self> {
        let h = cfg.hidden_size;
        let attn = vb.pp("attn");
        let mut ws = Vec::with_capacity(3);
        let mut bs = Vec::with_capacity(3);
        for name in ["q", "k", "v"] {
            let p = attn.pp(name);
            ws.push(p.get((h, h), "weight")?);
            bs.push(p.get(h, "bias")?);
        }
        let qkv = Linear::new(Tensor::cat(&ws, 0)?, Some(Tensor::cat(&bs, 0)?));
        Ok(Self {
            qkv: Dense::new(qkv, bf16)?,
            o: Dense::new(candle_nn::linear(h, h, attn.pp("o"))?, bf16)?,
            layer_norm: candle_nn::layer_norm(h, cfg.layer_norm_eps, vb.pp("LayerNorm"))?,
            num_heads: cfg.num_attention_heads,
            head_dim: h / cfg.num_attention_heads,
        })
    }

    /// `bias`: `[batch, heads, seq, seq]` (relative-position bias plus padding mask).
    fn forward(&self, xs: &Tensor, bias: &Tensor) -> Result<Tensor> {
        let (b, s, h) = xs.dims3()?;
        let qkv = self
            .qkv
            .forward(xs)?
            .reshape((b, s, 3, self.num_heads, self.head_dim))?
            .permute((2, 0, 3, 1, 4))?; // [3, b, heads, s, d]
        let q = qkv.get(0)?.contiguous()?;
        let k = qkv.get(1)?.contiguous()?;
        let v = qkv.get(2)?.contiguous()?;
        let scale = 1.0 / (self.head_dim as f64).sqrt();
        let scores = (q.matmul(&k.t()?)? * scale)?.add(bias)?;
        let probs = candle_nn::ops::softmax_last_dim(&scores)?;
        let ctx = probs
            .matmul(&v)?
            .transpose(1, 2)?
            .contiguous()?
            .reshape((b, s, h))?;
        let out = self.o.forward(&ctx)?;
        self.layer_norm.forward(&(out + xs)?)
    }
}

struct Layer {
    attention: SelfAttention,
    intermediate: Dense,
    output: Dense,
    output_norm: LayerNorm,
    act: String,
}

impl Layer {
    fn load(vb: VarBuilder, cfg: &Config, bf16: bool) -> Result<Self> {
        let out = vb.pp("output");
        Ok(Self {
            attention: SelfAttention::load(vb.pp("attention"), cfg, bf16)?,
            intermediate: Dense::new(
                candle_nn::linear(
                    cfg.hidden_size,
                    cfg.intermediate_size,
                    vb.pp("intermediate").pp("dense"),
                )?,
                bf16,
            )?,
            output: Dense::new(
                candle_nn::linear(cfg.intermediate_size, cfg.hidden_size, out.pp("dense"))?,
                bf16,
            )?,
            output_norm: candle_nn::layer_norm(
                cfg.hidden_size,
                cfg.layer_norm_eps,
                out.pp("LayerNorm"),
            )?,
            act: match cfg.hidden_act.as_str() {
                a if ACTIVATIONS.contains(&a) => a.to_string(),
                other => candle_core::bail!(
                    "config.json: unsupported hidden_act `{other}` (supported: {})",
                    ACTIVATIONS.join(", ")
                ),
            },
        })
    }

    fn forward(&self, xs: &Tensor, bias: &Tensor) -> Result<Tensor> {
        let attn = self.attention.forward(xs, bias)?;
        let hidden = gelu(&self.intermediate.forward(&attn)?, &self.act)?;
        let out = self.output.forward(&hidden)?;
        self.output_norm.forward(&(out + attn)?)
    }
}

/// The MPNet encoder: embeddings, `num_hidden_layers` transformer layers, and the
/// shared relative-attention bias table. Returns the last hidden state.
pub struct MpnetModel {
    embeddings: Embeddings,
    layers: Vec<Layer>,
    relative_attention_bias: Embedding,
    num_buckets: usize,
    num_heads: usize,
    dtype: DType,
    device: Device,
}

impl MpnetModel {
    /// Loads from a `VarBuilder` rooted at the checkpoint's top level (keys
    /// `embeddings.*`, `encoder.*`). The pooler, if present, is not used.
    pub fn load(vb: VarBuilder, cfg: &Config) -> Result<Self> {
        Self::load_with(vb, cfg, false)
    }

    /// As [`MpnetModel::load`]; with `mixed_bf16` the dense layers run their GEMMs in
    /// bfloat16 on MKL (feature `mkl`), everything else in the weights' dtype.
    pub fn load_with(vb: VarBuilder, cfg: &Config, mixed_bf16: bool) -> Result<Self> {
        let enc = vb.pp("encoder");
        let layers = (0..cfg.num_hidden_layers)
            .map(|i| Layer::load(enc.pp("layer").pp(i), cfg, mixed_bf16))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            embeddings: Embeddings::load(vb.pp("embeddings"), cfg)?,
            layers,
            relative_attention_bias: candle_nn::embedding(
                cfg.relative_attention_num_buckets,
                cfg.num_attention_heads,
                enc.pp("relative_attention_bias"),
            )?,
            num_buckets: cfg.relative_attention_num_buckets,
            num_heads: cfg.num_attention_heads,
            dtype: vb.dtype(),
            device: vb.device().clone(),
        })
    }

    /// `[1, heads, seq, seq]` bias from the bucketed relative positions, computed once
    /// per forward pass and shared by all layers.
    fn position_bias(&self, seq: usize) -> Result<Tensor> {
        let mut buckets = Vec::with_capacity(seq * seq);
        for context in 0..seq as i64 {
            for memory in 0..seq as i64 {
                buckets.push(relative_position_bucket(memory - context, self.num_buckets));
            }
        }
        let buckets = Tensor::from_vec(buckets, (seq, seq), &self.device)?;
        self.relative_attention_bias
            .forward(&buckets)? // [seq, seq, heads]
            .permute((2, 0, 1))?
            .unsqueeze(0)
    }

    /// `input_ids`, `attention_mask`: `[batch, seq]` u32 (mask 1 for real tokens).
    /// Returns the last hidden state `[batch, seq, hidden]`.
    pub fn forward(&self, input_ids: &Tensor, attention_mask: &Tensor) -> Result<Tensor> {
        let (b, s) = input_ids.dims2()?;
        let mut xs = self.embeddings.forward(input_ids)?;
        // Padding mask as an additive bias: 0 for real keys, a large negative for pads.
        let mask = attention_mask.to_dtype(DType::F32)?;
        let mask = ((mask - 1.0)? * 1e9)?.reshape((b, 1, 1, s))?;
        let bias = self
            .position_bias(s)?
            .to_dtype(DType::F32)?
            .broadcast_add(&mask)?
            .broadcast_as((b, self.num_heads, s, s))?
            .contiguous()?
            .to_dtype(self.dtype)?;
        for layer in &self.layers {
            xs = layer.forward(&xs, &bias)?;
        }
        Ok(xs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_match_t5_layout() {
        // Exact buckets near zero; the sign picks the half.
        assert_eq!(relative_position_bucket(0, 32), 0);
        assert_eq!(relative_position_bucket(-1, 32), 1);
        assert_eq!(relative_position_bucket(1, 32), 17);
        assert_eq!(relative_position_bucket(-7, 32), 7);
        assert_eq!(relative_position_bucket(7, 32), 23);
        // Log-spaced then clamped at the last bucket of each half.
        assert_eq!(relative_position_bucket(-8, 32), 8);
        assert_eq!(relative_position_bucket(-1000, 32), 15);
        assert_eq!(relative_position_bucket(1000, 32), 31);
    }
}
