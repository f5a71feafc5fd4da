//! A llama-architecture decoder read from a GGUF file, decoding K rows as one
//! batch over a KV cache whose prompt part is shared by all rows.
//!
//! For a hidden state `x` (width `d`), each of the `L` layers computes
//!
//! - RMSNorm: `n(x) = x / sqrt(mean(x²) + ε) ⊙ w`;
//! - attention: `q = Wq n(x)`, `k = Wk n(x)`, `v = Wv n(x)`, split into heads of
//!   width `h`; RoPE rotates each pair `(2i, 2i+1)` of `q` and `k` at position
//!   `p` by the angle `p·θ_i`, `θ_i = base^(-2i/h)` (llama.cpp's "normal",
//!   interleaved rotation: its GGUF converter permutes `Wq`/`Wk` so that this
//!   equals Hugging Face's rotate-half); query head `j` uses key/value head
//!   `j / (heads / kv_heads)` (grouped-query attention), and
//!   `a_j = Σ_t softmax_t(q_j·k_t / sqrt(h)) v_t` over positions `t ≤ p`;
//!   `x ← x + Wo [a_1 … a_H]`;
//! - SwiGLU MLP: `x ← x + W_down (silu(W_gate n'(x)) ⊙ W_up n'(x))`,
//!   `silu(z) = z / (1 + e^{-z})`;
//!
//! and the logits are `W_out n_out(x)` (`W_out` is the token embedding when
//! the file has no `output.weight`).
//!
//! The projections run on the stacked rows (our Q4_1/Q8_0 kernels, see
//! `kernels`, else candle's `QMatMul`). Everything between them (norms, RoPE,
//! attention, SiLU) is plain Rust over each row, so a row's numbers never
//! depend on which other rows share its batch: each output of a projection
//! is computed from its own row alone, in a fixed order (checked by the tests).

use std::collections::HashMap;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;
use std::sync::Arc;

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};
use rayon::prelude::*;

use super::kernels::QWeight;
use crate::GenError;

/// Shape and constants of the model, from the GGUF metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Number of transformer blocks.
    pub n_layer: usize,
    /// Hidden width `d`.
    pub dim: usize,
    /// Query heads.
    pub n_head: usize,
    /// Key/value heads (grouped-query attention).
    pub n_kv_head: usize,
    /// Width of one head.
    pub head_dim: usize,
    /// RMSNorm epsilon.
    pub eps: f32,
    /// RoPE base frequency.
    pub rope_base: f32,
    /// Training context: positions `0..context` are valid.
    pub context: usize,
    /// Vocabulary size (rows of the output matrix).
    pub vocab: usize,
}

impl Config {
    pub(super) fn kv_dim(&self) -> usize {
        self.n_kv_head * self.head_dim
    }

    /// Width of the queries and attended values, all heads.
    pub(super) fn q_dim(&self) -> usize {
        self.n_head * self.head_dim
    }
}

struct Layer {
    attn_norm: Vec<f32>,
    wq: Linear,
    wk: Linear,
    wv: Linear,
    wo: Linear,
    ffn_norm: Vec<f32>,
    w_gate: Linear,
    w_up: Linear,
    w_down: Linear,
}

/// The keys and values of one layer for a run of positions, `kv_dim` floats per position.
#[derive(Debug, Clone, Default)]
pub(super) struct Kv {
    k: Vec<f32>,
    v: Vec<f32>,
}

/// KV cache of one prompt and the K rows continuing it.
///
/// The prompt's keys and values are stored once and read by every row; each
/// row owns only what it generated, so rows advance independently and a
/// cancelled row's memory is freed at once.
#[derive(Debug, Clone)]
pub struct KvCache {
    prefix: Vec<Kv>,
    prefix_len: usize,
    rows: Vec<Option<Vec<Kv>>>,
    kv_dim: usize,
}

impl KvCache {
    /// Tokens of the shared prompt.
    pub fn prefix_len(&self) -> usize {
        self.prefix_len
    }

    /// Replaces the rows by `k` fresh rows continuing the prompt.
    pub fn set_rows(&mut self, k: usize) {
        let layers = self.prefix.len();
        self.rows = (0..k).map(|_| Some(vec![Kv::default(); layers])).collect();
    }

    /// Position of the next token fed to `row`; `None` once it is freed.
    pub fn position(&self, row: usize) -> Option<usize> {
        let r = self.rows.get(row)?.as_ref()?;
        Some(self.prefix_len + r[0].k.len() / self.kv_dim)
    }

    /// Frees `row`'s own keys and values; it cannot be decoded any more.
    pub fn free(&mut self, row: usize) {
        if let Some(r) = self.rows.get_mut(row) {
            *r = None;
        }
    }
}

/// A llama-family model with quantized weights.
pub struct Llama {
    cfg: Config,
    embed: Arc<QTensor>,
    layers: Vec<Layer>,
    out_norm: Vec<f32>,
    output: Linear,
    /// `cos(p·θ_i)` and `sin(p·θ_i)`, `head_dim / 2` per position.
    cos: Vec<f32>,
    sin: Vec<f32>,
}

pub(super) fn candle_err(what: &str) -> impl Fn(candle_core::Error) -> GenError + '_ {
    move |source| GenError::Model {
        what: what.to_string(),
        source,
    }
}

/// Reads the GGUF header and metadata of `path`.
pub fn read_gguf(path: &Path) -> Result<(gguf_file::Content, BufReader<File>), GenError> {
    let file = File::open(path).map_err(|source| GenError::ModelFile {
        path: path.to_path_buf(),
        source,
    })?;
    let mut reader = BufReader::new(file);
    let content = gguf_file::Content::read(&mut reader).map_err(|e| GenError::BadModel {
        what: path.display().to_string(),
        message: format!("not a readable GGUF file: {}", one_line(&e.to_string())),
    })?;
    Ok((content, reader))
}

fn one_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().to_string()
}

/// Typed access to GGUF metadata, with errors naming the file and key.
pub(crate) struct Meta<'a> {
    pub(crate) md: &'a HashMap<String, Value>,
    pub(crate) what: String,
}

impl Meta<'_> {
    pub(crate) fn get(&self, key: &str) -> Result<&Value, GenError> {
        self.md.get(key).ok_or_else(|| GenError::BadModel {
            what: self.what.to_string(),
            message: format!("metadata {key} is missing"),
        })
    }

    pub(crate) fn usize(&self, key: &str) -> Result<usize, GenError> {
        let v = self.get(key)?;
        let n = match v {
            Value::U8(_) | Value::U16(_) | Value::U32(_) | Value::U64(_) => v.to_u64().ok(),
            Value::I8(x) => u64::try_from(*x).ok(),
            Value::I16(x) => u64::try_from(*x).ok(),
            Value::I32(x) => u64::try_from(*x).ok(),
            Value::I64(x) => u64::try_from(*x).ok(),
            _ => None,
        };
        n.map(|n| n as usize).ok_or_else(|| GenError::BadModel {
            what: self.what.to_string(),
            message: format!("metadata {key} is not a non-negative integer"),
        })
    }

    pub(crate) fn f32(&self, key: &str) -> Result<f32, GenError> {
        match self.get(key)? {
            Value::F32(x) => Ok(*x),
            Value::F64(x) => Ok(*x as f32),
            _ => Err(GenError::BadModel {
                what: self.what.to_string(),
                message: format!("metadata {key} is not a float"),
            }),
        }
    }

    pub(crate) fn str(&self, key: &str) -> Result<&str, GenError> {
        match self.get(key)? {
            Value::String(s) => Ok(s),
            _ => Err(GenError::BadModel {
                what: self.what.to_string(),
                message: format!("metadata {key} is not a string"),
            }),
        }
    }
}

/// Reads tensors of one GGUF file, checking their shapes.
pub(super) struct Loader<'a> {
    pub(super) dense: bool,
    pub(super) content: &'a gguf_file::Content,
    pub(super) reader: &'a mut BufReader<File>,
    pub(super) what: &'a str,
}

impl Loader<'_> {
    pub(super) fn info(&self, name: &str) -> Result<&gguf_file::TensorInfo, GenError> {
        self.content
            .tensor_infos
            .get(name)
            .ok_or_else(|| GenError::BadModel {
                what: self.what.to_string(),
                message: format!("tensor {name} is missing"),
            })
    }

    pub(super) fn tensor(&mut self, name: &str, dims: &[usize]) -> Result<QTensor, GenError> {
        let found = self.info(name)?.shape.dims().to_vec();
        if found != dims {
            return Err(GenError::BadModel {
                what: self.what.to_string(),
                message: format!("tensor {name} has shape {found:?}, expected {dims:?}"),
            });
        }
        self.content
            .tensor(self.reader, name, &Device::Cpu)
            .map_err(|source| GenError::Model {
                what: format!("{}: truncated or corrupt GGUF: tensor {name}", self.what),
                source,
            })
    }

    pub(super) fn matmul(&mut self, name: String, dims: &[usize]) -> Result<Linear, GenError> {
        let t = self.tensor(&name, dims)?;
        Linear::new(Arc::new(t), &name, self.what, self.dense)
    }

    pub(super) fn vector(&mut self, name: &str, n: usize) -> Result<Vec<f32>, GenError> {
        self.tensor(name, &[n])?
            .dequantize(&Device::Cpu)
            .and_then(|t| t.to_vec1::<f32>())
            .map_err(candle_err(self.what))
    }
}

impl Llama {
    /// Loads the weights of a `llama` GGUF; returns the metadata too (for the tokenizer).
    pub fn load(path: &Path) -> Result<(Self, HashMap<String, Value>), GenError> {
        Self::load_with(path, false)
    }

    /// Loads the weights dequantized to f32, so that the activations are not
    /// rounded to 8 bits either: slow, for checking the model's arithmetic
    /// against a reference (an 8-bit rounding that flips moves the logits by
    /// tenths and would hide everything else).
    pub fn load_dequantized(path: &Path) -> Result<(Self, HashMap<String, Value>), GenError> {
        Self::load_with(path, true)
    }

    fn load_with(path: &Path, dense: bool) -> Result<(Self, HashMap<String, Value>), GenError> {
        let (content, mut reader) = read_gguf(path)?;
        let what = path.display().to_string();
        let meta = Meta {
            md: &content.metadata,
            what: what.clone(),
        };
        let arch = meta.str("general.architecture")?;
        if arch != "llama" {
            return Err(GenError::BadModel {
                what: what.to_string(),
                message: format!("architecture {arch:?} is not supported (llama or gemma3)"),
            });
        }
        let n_head = meta.usize("llama.attention.head_count")?;
        let dim = meta.usize("llama.embedding_length")?;
        let n_kv_head = meta.usize("llama.attention.head_count_kv")?;
        if n_head == 0 || n_kv_head == 0 || dim % n_head != 0 || n_head % n_kv_head != 0 {
            return Err(GenError::BadModel {
                what: what.to_string(),
                message: format!(
                    "inconsistent heads: {n_head} heads, {n_kv_head} kv heads, width {dim}"
                ),
            });
        }
        let head_dim = dim / n_head;
        if let Ok(rope_dim) = meta.usize("llama.rope.dimension_count") {
            if rope_dim != head_dim {
                return Err(GenError::BadModel {
                    what: what.to_string(),
                    message: format!(
                        "partial RoPE ({rope_dim} of {head_dim} dims) is not supported"
                    ),
                });
            }
        }
        if meta.usize("llama.expert_count").unwrap_or(0) > 1 {
            return Err(GenError::BadModel {
                what: what.to_string(),
                message: "mixture-of-experts llama models are not supported".to_string(),
            });
        }
        let cfg = Config {
            n_layer: meta.usize("llama.block_count")?,
            dim,
            n_head,
            n_kv_head,
            head_dim,
            eps: meta.f32("llama.attention.layer_norm_rms_epsilon")?,
            rope_base: meta.f32("llama.rope.freq_base").unwrap_or(10_000.0),
            context: meta.usize("llama.context_length")?,
            vocab: 0,
        };

        let mut ld = Loader {
            dense,
            content: &content,
            reader: &mut reader,
            what: &what,
        };
        let kv_dim = cfg.kv_dim();
        let mut layers = Vec::with_capacity(cfg.n_layer);
        let mut norms = Vec::with_capacity(cfg.n_layer);
        for l in 0..cfg.n_layer {
            let p = format!("blk.{l}");
            // The MLP width is only known from the tensors.
            let ffn = ld.info(&format!("{p}.ffn_up.weight"))?.shape.dims()[0];
            layers.push(Layer {
                attn_norm: Vec::new(),
                wq: ld.matmul(format!("{p}.attn_q.weight"), &[dim, dim])?,
                wk: ld.matmul(format!("{p}.attn_k.weight"), &[kv_dim, dim])?,
                wv: ld.matmul(format!("{p}.attn_v.weight"), &[kv_dim, dim])?,
                wo: ld.matmul(format!("{p}.attn_output.weight"), &[dim, dim])?,
                ffn_norm: Vec::new(),
                w_gate: ld.matmul(format!("{p}.ffn_gate.weight"), &[ffn, dim])?,
                w_up: ld.matmul(format!("{p}.ffn_up.weight"), &[ffn, dim])?,
                w_down: ld.matmul(format!("{p}.ffn_down.weight"), &[dim, ffn])?,
            });
            norms.push((
                format!("{p}.attn_norm.weight"),
                format!("{p}.ffn_norm.weight"),
            ));
        }
        for (layer, (a, f)) in layers.iter_mut().zip(&norms) {
            layer.attn_norm = ld.vector(a, dim)?;
            layer.ffn_norm = ld.vector(f, dim)?;
        }
        let out_norm = ld.vector("output_norm.weight", dim)?;
        let vocab = ld.info("token_embd.weight")?.shape.dims()[0];
        let embed = ld.tensor("token_embd.weight", &[vocab, dim])?;
        let embed = Arc::new(embed);
        let output = if content.tensor_infos.contains_key("output.weight") {
            ld.matmul("output.weight".into(), &[vocab, dim])?
        } else {
            Linear::new(embed.clone(), "token_embd.weight", &what, dense)?
        };
        let cfg = Config { vocab, ..cfg };
        let (cos, sin) = rope_tables(&cfg);
        let model = Self {
            cfg,
            embed,
            layers,
            out_norm,
            output,
            cos,
            sin,
        };
        Ok((model, content.metadata))
    }

    /// The model's shape.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Runs the prompt once; returns its cache (with no rows yet) and the
    /// logits of its last position.
    pub fn prefill(&self, tokens: &[u32]) -> Result<(KvCache, Vec<f32>), GenError> {
        prefill(self, tokens)
    }

    /// One decoding step: feeds `tokens[b]` to row `rows[b]` at that row's
    /// own position and returns the logits of every row, `vocab` per row.
    pub fn decode(
        &self,
        cache: &mut KvCache,
        rows: &[usize],
        tokens: &[u32],
    ) -> Result<Vec<f32>, GenError> {
        decode(self, cache, rows, tokens)
    }

    /// The transformer blocks over `tokens` (one row each, at `positions`);
    /// `attention(layer, q, k, v)` stores the roped keys and values and
    /// returns the attended values, `dim` per row. Returns the final hidden states.
    fn run(
        &self,
        tokens: &[u32],
        positions: &[usize],
        attention: &mut Attention,
    ) -> Result<Vec<f32>, GenError> {
        let m = tokens.len();
        let dim = self.cfg.dim;
        let mut x = embed(&self.embed, tokens, self.cfg.vocab)?;
        let mut h = vec![0f32; m * dim];
        for (l, layer) in self.layers.iter().enumerate() {
            rms_norm(&x, &layer.attn_norm, self.cfg.eps, &mut h);
            let mut q = matmul(&layer.wq, &h, m)?;
            let mut k = matmul(&layer.wk, &h, m)?;
            let v = matmul(&layer.wv, &h, m)?;
            self.rope(&mut q, positions);
            self.rope(&mut k, positions);
            let a = attention(l, &q, &k, &v);
            let o = matmul(&layer.wo, &a, m)?;
            add(&mut x, &o);
            rms_norm(&x, &layer.ffn_norm, self.cfg.eps, &mut h);
            let mut g = matmul(&layer.w_gate, &h, m)?;
            let u = matmul(&layer.w_up, &h, m)?;
            for (g, u) in g.iter_mut().zip(&u) {
                *g = *g / (1.0 + (-*g).exp()) * u;
            }
            let d = matmul(&layer.w_down, &g, m)?;
            add(&mut x, &d);
        }
        Ok(x)
    }

    /// Logits of `m` final hidden states.
    fn logits(&self, x: &[f32], m: usize) -> Result<Vec<f32>, GenError> {
        let mut h = vec![0f32; x.len()];
        rms_norm(x, &self.out_norm, self.cfg.eps, &mut h);
        matmul(&self.output, &h, m)
    }

    /// Rotates every head of every row in place (interleaved pairs).
    fn rope(&self, x: &mut [f32], positions: &[usize]) {
        let hd = self.cfg.head_dim;
        let half = hd / 2;
        let width = x.len() / positions.len();
        for (row, &p) in x.chunks_mut(width).zip(positions) {
            let cos = &self.cos[p * half..(p + 1) * half];
            let sin = &self.sin[p * half..(p + 1) * half];
            for head in row.chunks_mut(hd) {
                for i in 0..half {
                    let (a, b) = (head[2 * i], head[2 * i + 1]);
                    head[2 * i] = a * cos[i] - b * sin[i];
                    head[2 * i + 1] = a * sin[i] + b * cos[i];
                }
            }
        }
    }
}

/// `attention(layer, q, k, v)`: stores the roped keys and values of a
/// layer and returns the attended values, `q_dim` per row.
pub(super) type Attention<'a> = dyn FnMut(usize, &[f32], &[f32], &[f32]) -> Vec<f32> + 'a;

/// What the shared prompt and decoding passes need of a model.
pub(super) trait Blocks {
    fn config(&self) -> &Config;
    /// How many positions, the latest ones, layer `l` attends to (`None`: all).
    fn window(&self, l: usize) -> Option<usize>;
    /// The blocks over `tokens` (one row each, at `positions`), with
    /// `attention` in every layer; returns the final hidden states.
    fn run(
        &self,
        tokens: &[u32],
        positions: &[usize],
        attention: &mut Attention,
    ) -> Result<Vec<f32>, GenError>;
    /// Logits of `m` final hidden states.
    fn logits(&self, x: &[f32], m: usize) -> Result<Vec<f32>, GenError>;
}

impl Blocks for Llama {
    fn config(&self) -> &Config {
        &self.cfg
    }

    fn window(&self, _: usize) -> Option<usize> {
        None
    }

    fn run(
        &self,
        tokens: &[u32],
        positions: &[usize],
        attention: &mut Attention,
    ) -> Result<Vec<f32>, GenError> {
        Llama::run(self, tokens, positions, attention)
    }

    fn logits(&self, x: &[f32], m: usize) -> Result<Vec<f32>, GenError> {
        Llama::logits(self, x, m)
    }
}

/// First position a query at `p` sees through a window of `w` positions.
fn window_start(p: usize, w: Option<usize>) -> usize {
    w.map_or(0, |w| (p + 1).saturating_sub(w))
}

/// The prompt pass: its cache (with no rows yet) and the logits of its last position.
pub(super) fn prefill<M: Blocks>(
    model: &M,
    tokens: &[u32],
) -> Result<(KvCache, Vec<f32>), GenError> {
    let cfg = model.config();
    let n = tokens.len();
    if n == 0 {
        return Err(GenError::Request("the prompt has no tokens".into()));
    }
    if n >= cfg.context {
        return Err(GenError::Request(format!(
            "the prompt is {n} tokens; the model's context is {} and must leave room for one generated token",
            cfg.context
        )));
    }
    let kv_dim = cfg.kv_dim();
    let q_dim = cfg.q_dim();
    let mut prefix = vec![Kv::default(); cfg.n_layer];
    let positions: Vec<usize> = (0..n).collect();
    let (hd, nh, group) = (cfg.head_dim, cfg.n_head, cfg.n_head / cfg.n_kv_head);
    let hidden = model.run(tokens, &positions, &mut |l, q, k, v| {
        let kv = &mut prefix[l];
        kv.k.extend_from_slice(k);
        kv.v.extend_from_slice(v);
        let kv = &*kv;
        let window = model.window(l);
        let mut out = vec![0f32; n * q_dim];
        out.par_chunks_mut(q_dim).enumerate().for_each(|(i, o)| {
            let lo = window_start(i, window);
            let mut scores = Vec::with_capacity(i + 1 - lo);
            let seg = (
                &kv.k[lo * kv_dim..(i + 1) * kv_dim],
                &kv.v[lo * kv_dim..(i + 1) * kv_dim],
            );
            for j in 0..nh {
                attend(
                    &q[i * q_dim + j * hd..][..hd],
                    &[seg],
                    (j / group) * hd,
                    kv_dim,
                    &mut scores,
                    &mut o[j * hd..(j + 1) * hd],
                );
            }
        });
        out
    })?;
    let dim = cfg.dim;
    let logits = model.logits(&hidden[(n - 1) * dim..], 1)?;
    let cache = KvCache {
        prefix,
        prefix_len: n,
        rows: Vec::new(),
        kv_dim,
    };
    Ok((cache, logits))
}

/// One decoding step: feeds `tokens[b]` to row `rows[b]` at that row's own
/// position and returns the logits of every row, `vocab` per row.
pub(super) fn decode<M: Blocks>(
    model: &M,
    cache: &mut KvCache,
    rows: &[usize],
    tokens: &[u32],
) -> Result<Vec<f32>, GenError> {
    let cfg = model.config();
    if rows.len() != tokens.len() {
        return Err(GenError::Protocol(format!(
            "{} rows but {} tokens",
            rows.len(),
            tokens.len()
        )));
    }
    let mut positions = Vec::with_capacity(rows.len());
    for (b, &r) in rows.iter().enumerate() {
        if rows[..b].contains(&r) {
            return Err(GenError::Protocol(format!("row {r} given twice")));
        }
        let p = cache
            .position(r)
            .ok_or_else(|| GenError::Protocol(format!("row {r} is not in the cache")))?;
        if p >= cfg.context {
            return Err(GenError::Request(format!(
                "row {r} is at position {p}, past the model's context of {}",
                cfg.context
            )));
        }
        positions.push(p);
    }
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let kv_dim = cache.kv_dim;
    let q_dim = cfg.q_dim();
    let (hd, nh, group) = (cfg.head_dim, cfg.n_head, cfg.n_head / cfg.n_kv_head);
    let KvCache {
        prefix,
        prefix_len,
        rows: row_kv,
        ..
    } = cache;
    let prefix_len = *prefix_len;
    let hidden = model.run(tokens, &positions, &mut |l, q, k, v| {
        for (b, &r) in rows.iter().enumerate() {
            let own = &mut row_kv[r].as_mut().expect("row checked live")[l];
            own.k.extend_from_slice(&k[b * kv_dim..(b + 1) * kv_dim]);
            own.v.extend_from_slice(&v[b * kv_dim..(b + 1) * kv_dim]);
        }
        let shared = &prefix[l];
        let row_kv = &*row_kv;
        let window = model.window(l);
        let positions = &positions;
        let mut out = vec![0f32; rows.len() * q_dim];
        out.par_chunks_mut(q_dim).enumerate().for_each(|(b, o)| {
            let own = &row_kv[rows[b]].as_ref().expect("row checked live")[l];
            let lo = window_start(positions[b], window);
            let (ps, os) = (
                lo.min(prefix_len) * kv_dim,
                lo.saturating_sub(prefix_len) * kv_dim,
            );
            let segs = [
                (&shared.k[ps..], &shared.v[ps..]),
                (&own.k[os..], &own.v[os..]),
            ];
            let mut scores = Vec::new();
            for j in 0..nh {
                attend(
                    &q[b * q_dim + j * hd..][..hd],
                    &segs,
                    (j / group) * hd,
                    kv_dim,
                    &mut scores,
                    &mut o[j * hd..(j + 1) * hd],
                );
            }
        });
        out
    })?;
    model.logits(&hidden, rows.len())
}

/// The embedding rows of `tokens`, checked against the vocabulary.
pub(super) fn embed(table: &QTensor, tokens: &[u32], vocab: usize) -> Result<Vec<f32>, GenError> {
    if let Some(&t) = tokens.iter().find(|&&t| t as usize >= vocab) {
        return Err(GenError::Request(format!(
            "token id {t} is outside the vocabulary of {vocab}"
        )));
    }
    let err = candle_err("local model");
    let ids = Tensor::new(tokens, &Device::Cpu).map_err(&err)?;
    to_vec(table.embedding(&ids).map_err(&err)?)
}

/// `cos`/`sin` of `p·θ_i` for every position of the context, computed in f32
/// as llama.cpp and candle do.
fn rope_tables(cfg: &Config) -> (Vec<f32>, Vec<f32>) {
    let hd = cfg.head_dim;
    let theta: Vec<f32> = (0..hd)
        .step_by(2)
        .map(|i| 1f32 / cfg.rope_base.powf(i as f32 / hd as f32))
        .collect();
    let mut cos = Vec::with_capacity(cfg.context * theta.len());
    let mut sin = Vec::with_capacity(cfg.context * theta.len());
    for p in 0..cfg.context {
        for &t in &theta {
            let a = p as f32 * t;
            cos.push(a.cos());
            sin.push(a.sin());
        }
    }
    (cos, sin)
}

pub(super) fn to_vec(t: Tensor) -> Result<Vec<f32>, GenError> {
    t.flatten_all()
        .and_then(|t| t.to_vec1::<f32>())
        .map_err(candle_err("local model"))
}

/// A weight matrix: our kernels for the types they cover, candle's otherwise.
pub(super) enum Linear {
    Own(QWeight),
    Candle(QMatMul),
    /// Dequantized, `n × k` row-major.
    Dense {
        w: Vec<f32>,
        n: usize,
    },
}

impl Linear {
    pub(super) fn new(
        t: Arc<QTensor>,
        name: &str,
        what: &str,
        dense: bool,
    ) -> Result<Self, GenError> {
        if dense {
            let n = t.shape().dims()[0];
            let w = t
                .dequantize(&Device::Cpu)
                .and_then(|t| t.flatten_all())
                .and_then(|t| t.to_vec1::<f32>())
                .map_err(candle_err(what))?;
            return Ok(Self::Dense { w, n });
        }
        match QWeight::from_qtensor(&t) {
            Some(Ok(w)) => Ok(Self::Own(w)),
            Some(Err(message)) => Err(GenError::BadModel {
                what: format!("{what}: tensor {name}"),
                message,
            }),
            None => QMatMul::from_arc(t)
                .map(Self::Candle)
                .map_err(candle_err(what)),
        }
    }
}

/// `x W^T` for `m` stacked rows of `x`.
pub(super) fn matmul(w: &Linear, x: &[f32], m: usize) -> Result<Vec<f32>, GenError> {
    match w {
        Linear::Own(w) => Ok(w.matmul(x, m)),
        Linear::Dense { w, n } => {
            let k = w.len() / n;
            let mut y = vec![0f32; m * n];
            y.par_chunks_mut(*n).enumerate().for_each(|(r, out)| {
                let row = &x[r * k..(r + 1) * k];
                for (o, col) in out.iter_mut().zip(w.chunks_exact(k)) {
                    *o = dot(row, col);
                }
            });
            Ok(y)
        }
        Linear::Candle(w) => {
            let err = candle_err("local model");
            let t = Tensor::from_slice(x, (m, x.len() / m), &Device::Cpu).map_err(&err)?;
            to_vec(w.forward(&t).map_err(&err)?)
        }
    }
}

pub(super) fn add(x: &mut [f32], y: &[f32]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

/// Row-wise RMSNorm of `x` into `out`, in candle's order of operations.
pub(super) fn rms_norm(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    let n = w.len();
    for (src, dst) in x.chunks(n).zip(out.chunks_mut(n)) {
        let sum2: f32 = src.iter().map(|v| v * v).sum();
        let m = (sum2 / n as f32 + eps).sqrt();
        for ((d, s), a) in dst.iter_mut().zip(src).zip(w) {
            *d = *s / m * *a;
        }
    }
}

/// Eight-lane dot product (so that it vectorises); the order of additions
/// is fixed, hence the same for a row whatever its batch.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for j in 0..8 {
            acc[j] += x[j] * y[j];
        }
    }
    let mut s = acc.iter().sum::<f32>();
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}

/// One query head against the keys and values of `segs` (consecutive runs of
/// positions, `kv_dim` floats each, the head's slice starting at `off`).
fn attend(
    q: &[f32],
    segs: &[(&[f32], &[f32])],
    off: usize,
    kv_dim: usize,
    scores: &mut Vec<f32>,
    out: &mut [f32],
) {
    let hd = q.len();
    let scale = 1.0 / (hd as f32).sqrt();
    scores.clear();
    for (k, _) in segs {
        for key in k.chunks_exact(kv_dim) {
            scores.push(dot(q, &key[off..off + hd]) * scale);
        }
    }
    let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0f32;
    for s in scores.iter_mut() {
        *s = (*s - max).exp();
        sum += *s;
    }
    out.fill(0.0);
    let mut t = 0;
    for (_, v) in segs {
        for val in v.chunks_exact(kv_dim) {
            let p = scores[t] / sum;
            for (o, x) in out.iter_mut().zip(&val[off..off + hd]) {
                *o += p * x;
            }
            t += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_matches_naive() {
        let a: Vec<f32> = (0..67).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..67).map(|i| (i as f32 * 0.11).cos()).collect();
        let naive: f64 = a.iter().zip(&b).map(|(x, y)| (x * y) as f64).sum();
        assert!((dot(&a, &b) as f64 - naive).abs() < 1e-5);
    }

    #[test]
    fn attention_is_a_convex_combination() {
        // Two positions, kv_dim 4 holding one head of width 2 at offset 2.
        let k = [0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0];
        let v = [0.0, 0.0, 10.0, 0.0, 0.0, 0.0, 0.0, 20.0];
        let q = [3.0, 0.0];
        let mut out = [0f32; 2];
        // Split over two segments, as prompt and own tokens are.
        attend(
            &q,
            &[(&k[..4], &v[..4]), (&k[4..], &v[4..])],
            2,
            4,
            &mut Vec::new(),
            &mut out,
        );
        let s = 3.0f32 / 2f32.sqrt();
        let p0 = s.exp() / (s.exp() + 1.0);
        assert!((out[0] - 10.0 * p0).abs() < 1e-5, "{out:?}");
        assert!((out[1] - 20.0 * (1.0 - p0)).abs() < 1e-5, "{out:?}");
    }

    #[test]
    fn rms_norm_rows() {
        let x = [3.0, 4.0, 0.0, 0.0];
        let mut out = [1f32; 4];
        rms_norm(&x, &[1.0, 2.0], 1e-6, &mut out);
        let r = (12.5f32 + 1e-6).sqrt();
        assert_eq!(out, [3.0 / r, 8.0 / r, 0.0, 0.0]);
    }
}
