//! A Gemma 3 decoder read from a GGUF file (`general.architecture = gemma3`),
//! decoding K rows as one batch over the KV cache of [`super::llama`],
//! whose prompt part is shared by all rows.
//!
//! It follows llama.cpp's `gemma3` graph. The token embedding is scaled by
//! `sqrt(d)`; each of the `L` layers computes, with `n_w(x) = x / sqrt(mean(x²) + ε) ⊙ w`
//! (the GGUF's norm weights already hold Gemma's `1 + w`):
//!
//! - attention: `q = Wq n(x)`, `k = Wk n(x)`, `v = Wv n(x)` in heads of
//!   width `h` (here wider than `d / heads`); each head of `q` and `k` gets
//!   its own RMSNorm (`attn_q_norm`, `attn_k_norm`), then RoPE in the NeoX
//!   layout (element `i` is paired with `i + h/2`); query head `j` reads
//!   key/value head `j / (heads / kv_heads)`; `a_j = Σ_t softmax_t(q_j·k_t / sqrt(h)) v_t`
//!   over the positions `t ≤ p` — in the local layers only the last
//!   `window` of them (`p - t < window`, `gemma3.attention.sliding_window`)
//!   and with RoPE base 10 000; every sixth layer (5, 11, …) is global, with
//!   all positions and base `gemma3.rope.freq_base`;
//!   `x ← x + n_post(Wo [a_1 … a_H])`;
//! - MLP: `x ← x + n_post'(W_down (gelu(W_gate n'(x)) ⊙ W_up n'(x)))` with
//!   the tanh approximation of GELU;
//!
//! and the logits are `E n_out(x)` with `E` the token embedding (or
//! `output.weight` if the file has one).
//!
//! As in `llama`, the projections run on the stacked rows with our kernels
//! (the Q4_K_M file's Q5_0, Q8_0, Q4_K and Q6_K weights are all covered, see
//! `kernels`) and everything else is plain Rust over each row, so a row's
//! numbers never depend on which other rows share its batch.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use candle_core::quantized::gguf_file::Value;
use candle_core::quantized::QTensor;

use super::llama::{
    self, add, matmul, read_gguf, rms_norm, Attention, Blocks, Config, KvCache, Linear, Loader,
    Meta,
};
use crate::GenError;

/// Layers `l` with `(l + 1) % PATTERN == 0` are global (llama.cpp's swa pattern for gemma3).
const PATTERN: usize = 6;
/// RoPE base of the local layers (llama.cpp's `rope_freq_base_train_swa` for gemma3).
const LOCAL_ROPE_BASE: f32 = 10_000.0;

struct Layer {
    attn_norm: Vec<f32>,
    wq: Linear,
    wk: Linear,
    wv: Linear,
    q_norm: Vec<f32>,
    k_norm: Vec<f32>,
    wo: Linear,
    post_attn_norm: Vec<f32>,
    ffn_norm: Vec<f32>,
    w_gate: Linear,
    w_up: Linear,
    w_down: Linear,
    post_ffn_norm: Vec<f32>,
}

/// A Gemma 3 model with quantized weights.
pub struct Gemma3 {
    cfg: Config,
    /// Positions a local layer attends to.
    window: usize,
    /// RoPE base of the local layers.
    local_base: f32,
    /// Position scale of the global layers' RoPE (`1 / rope.scaling.factor`).
    global_scale: f32,
    embed: Arc<QTensor>,
    embed_scale: f32,
    layers: Vec<Layer>,
    out_norm: Vec<f32>,
    output: Linear,
}

impl Gemma3 {
    /// Loads the weights of a `gemma3` GGUF; returns the metadata too (for the tokenizer).
    pub fn load(path: &Path) -> Result<(Self, HashMap<String, Value>), GenError> {
        let (content, mut reader) = read_gguf(path)?;
        let what = path.display().to_string();
        let meta = Meta {
            md: &content.metadata,
            what: what.clone(),
        };
        let arch = meta.str("general.architecture")?;
        if arch != "gemma3" {
            return Err(bad(&what, format!("architecture {arch:?} is not gemma3")));
        }
        let key = |k: &str| format!("gemma3.{k}");
        let dim = meta.usize(&key("embedding_length"))?;
        let n_head = meta.usize(&key("attention.head_count"))?;
        let n_kv_head = meta.usize(&key("attention.head_count_kv"))?;
        let head_dim = meta.usize(&key("attention.key_length"))?;
        let value_dim = meta
            .usize(&key("attention.value_length"))
            .unwrap_or(head_dim);
        if n_head == 0 || n_kv_head == 0 || n_head % n_kv_head != 0 {
            return Err(bad(
                &what,
                format!("inconsistent heads: {n_head} heads, {n_kv_head} kv heads"),
            ));
        }
        if head_dim == 0 || head_dim % 2 != 0 || value_dim != head_dim {
            return Err(bad(
                &what,
                format!("head widths {head_dim} (keys) and {value_dim} (values) are not supported"),
            ));
        }
        let window = meta.usize(&key("attention.sliding_window"))?;
        if window == 0 {
            return Err(bad(&what, "sliding window of 0 positions".into()));
        }
        let global_scale = match meta.f32(&key("rope.scaling.factor")) {
            Ok(f) if f.is_finite() && f > 0.0 => 1.0 / f,
            Ok(f) => return Err(bad(&what, format!("RoPE scaling factor {f}"))),
            Err(_) => 1.0,
        };
        if let Ok(kind) = meta.str(&key("rope.scaling.type")) {
            if kind != "linear" && kind != "none" {
                return Err(bad(
                    &what,
                    format!("RoPE scaling {kind:?} is not supported (linear)"),
                ));
            }
        }
        let cfg = Config {
            n_layer: meta.usize(&key("block_count"))?,
            dim,
            n_head,
            n_kv_head,
            head_dim,
            eps: meta.f32(&key("attention.layer_norm_rms_epsilon"))?,
            rope_base: meta.f32(&key("rope.freq_base")).unwrap_or(1_000_000.0),
            context: meta.usize(&key("context_length"))?,
            vocab: 0,
        };
        let local_base = meta
            .f32(&key("rope.local_freq_base"))
            .unwrap_or(LOCAL_ROPE_BASE);

        let mut ld = Loader {
            dense: false,
            content: &content,
            reader: &mut reader,
            what: &what,
        };
        let (q_dim, kv_dim) = (cfg.q_dim(), cfg.kv_dim());
        let mut layers = Vec::with_capacity(cfg.n_layer);
        for l in 0..cfg.n_layer {
            let p = format!("blk.{l}");
            let ffn = ld
                .info(&format!("{p}.ffn_up.weight"))?
                .shape
                .dims()
                .first()
                .copied()
                .unwrap_or(0);
            layers.push(Layer {
                attn_norm: ld.vector(&format!("{p}.attn_norm.weight"), dim)?,
                wq: ld.matmul(format!("{p}.attn_q.weight"), &[q_dim, dim])?,
                wk: ld.matmul(format!("{p}.attn_k.weight"), &[kv_dim, dim])?,
                wv: ld.matmul(format!("{p}.attn_v.weight"), &[kv_dim, dim])?,
                q_norm: ld.vector(&format!("{p}.attn_q_norm.weight"), head_dim)?,
                k_norm: ld.vector(&format!("{p}.attn_k_norm.weight"), head_dim)?,
                wo: ld.matmul(format!("{p}.attn_output.weight"), &[dim, q_dim])?,
                post_attn_norm: ld.vector(&format!("{p}.post_attention_norm.weight"), dim)?,
                ffn_norm: ld.vector(&format!("{p}.ffn_norm.weight"), dim)?,
                w_gate: ld.matmul(format!("{p}.ffn_gate.weight"), &[ffn, dim])?,
                w_up: ld.matmul(format!("{p}.ffn_up.weight"), &[ffn, dim])?,
                w_down: ld.matmul(format!("{p}.ffn_down.weight"), &[dim, ffn])?,
                post_ffn_norm: ld.vector(&format!("{p}.post_ffw_norm.weight"), dim)?,
            });
        }
        let out_norm = ld.vector("output_norm.weight", dim)?;
        let vocab = ld
            .info("token_embd.weight")?
            .shape
            .dims()
            .first()
            .copied()
            .unwrap_or(0);
        let embed = Arc::new(ld.tensor("token_embd.weight", &[vocab, dim])?);
        let output = if content.tensor_infos.contains_key("output.weight") {
            ld.matmul("output.weight".into(), &[vocab, dim])?
        } else {
            Linear::new(embed.clone(), "token_embd.weight", &what, false)?
        };
        let model = Self {
            cfg: Config { vocab, ..cfg },
            window,
            local_base,
            global_scale,
            embed,
            embed_scale: (dim as f32).sqrt(),
            layers,
            out_norm,
            output,
        };
        Ok((model, content.metadata))
    }

    /// The model's shape (`rope_base` is the global layers' base).
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Whether layer `l` attends to every position (else to the last `window`).
    pub fn is_global(l: usize) -> bool {
        (l + 1).is_multiple_of(PATTERN)
    }

    /// Runs the prompt once; returns its cache (with no rows yet) and the
    /// logits of its last position.
    pub fn prefill(&self, tokens: &[u32]) -> Result<(KvCache, Vec<f32>), GenError> {
        llama::prefill(self, tokens)
    }

    /// One decoding step: feeds `tokens[b]` to row `rows[b]` at that row's
    /// own position and returns the logits of every row, `vocab` per row.
    pub fn decode(
        &self,
        cache: &mut KvCache,
        rows: &[usize],
        tokens: &[u32],
    ) -> Result<Vec<f32>, GenError> {
        llama::decode(self, cache, rows, tokens)
    }

    /// `cos`/`sin` of `p·s·θ_i`, `θ_i = base^(-2i/h)`, for each row's position.
    fn rope_table(&self, positions: &[usize], base: f32, scale: f32) -> (Vec<f32>, Vec<f32>) {
        let hd = self.cfg.head_dim;
        let theta: Vec<f32> = (0..hd)
            .step_by(2)
            .map(|i| 1f32 / base.powf(i as f32 / hd as f32))
            .collect();
        let mut cos = Vec::with_capacity(positions.len() * theta.len());
        let mut sin = Vec::with_capacity(positions.len() * theta.len());
        for &p in positions {
            for &t in &theta {
                let a = p as f32 * scale * t;
                cos.push(a.cos());
                sin.push(a.sin());
            }
        }
        (cos, sin)
    }
}

fn bad(what: &str, message: String) -> GenError {
    GenError::BadModel {
        what: what.to_string(),
        message,
    }
}

/// Rotates every head of every row in place, NeoX layout (`i` with `i + h/2`).
fn rope_neox(x: &mut [f32], rows: usize, hd: usize, cos: &[f32], sin: &[f32]) {
    let half = hd / 2;
    let width = x.len() / rows;
    for (r, row) in x.chunks_mut(width).enumerate() {
        let (cos, sin) = (
            &cos[r * half..(r + 1) * half],
            &sin[r * half..(r + 1) * half],
        );
        for head in row.chunks_mut(hd) {
            let (a, b) = head.split_at_mut(half);
            for i in 0..half {
                let (x0, x1) = (a[i], b[i]);
                a[i] = x0 * cos[i] - x1 * sin[i];
                b[i] = x0 * sin[i] + x1 * cos[i];
            }
        }
    }
}

/// GELU, tanh approximation (`gelu_pytorch_tanh`).
fn gelu(x: f32) -> f32 {
    const C: f32 = 0.797_884_6; // sqrt(2 / π)
    0.5 * x * (1.0 + (C * (x + 0.044_715 * x * x * x)).tanh())
}

impl Blocks for Gemma3 {
    fn config(&self) -> &Config {
        &self.cfg
    }

    fn window(&self, l: usize) -> Option<usize> {
        (!Self::is_global(l)).then_some(self.window)
    }

    fn run(
        &self,
        tokens: &[u32],
        positions: &[usize],
        attention: &mut Attention,
    ) -> Result<Vec<f32>, GenError> {
        let m = tokens.len();
        let (dim, hd, eps) = (self.cfg.dim, self.cfg.head_dim, self.cfg.eps);
        let mut x = llama::embed(&self.embed, tokens, self.cfg.vocab)?;
        for v in x.iter_mut() {
            *v *= self.embed_scale;
        }
        let local = self.rope_table(positions, self.local_base, 1.0);
        let global = self.rope_table(positions, self.cfg.rope_base, self.global_scale);
        let mut h = vec![0f32; m * dim];
        for (l, layer) in self.layers.iter().enumerate() {
            rms_norm(&x, &layer.attn_norm, eps, &mut h);
            let q = matmul(&layer.wq, &h, m)?;
            let k = matmul(&layer.wk, &h, m)?;
            let v = matmul(&layer.wv, &h, m)?;
            let mut qn = vec![0f32; q.len()];
            let mut kn = vec![0f32; k.len()];
            rms_norm(&q, &layer.q_norm, eps, &mut qn);
            rms_norm(&k, &layer.k_norm, eps, &mut kn);
            let (cos, sin) = if Self::is_global(l) { &global } else { &local };
            rope_neox(&mut qn, m, hd, cos, sin);
            rope_neox(&mut kn, m, hd, cos, sin);
            let a = attention(l, &qn, &kn, &v);
            let o = matmul(&layer.wo, &a, m)?;
            let mut on = vec![0f32; o.len()];
            rms_norm(&o, &layer.post_attn_norm, eps, &mut on);
            add(&mut x, &on);
            rms_norm(&x, &layer.ffn_norm, eps, &mut h);
            let mut g = matmul(&layer.w_gate, &h, m)?;
            let u = matmul(&layer.w_up, &h, m)?;
            for (g, u) in g.iter_mut().zip(&u) {
                *g = gelu(*g) * u;
            }
            let d = matmul(&layer.w_down, &g, m)?;
            let mut dn = vec![0f32; d.len()];
            rms_norm(&d, &layer.post_ffn_norm, eps, &mut dn);
            add(&mut x, &dn);
        }
        Ok(x)
    }

    fn logits(&self, x: &[f32], m: usize) -> Result<Vec<f32>, GenError> {
        let mut h = vec![0f32; x.len()];
        rms_norm(x, &self.out_norm, self.cfg.eps, &mut h);
        matmul(&self.output, &h, m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sixth_layer_is_global() {
        let global: Vec<usize> = (0..18).filter(|&l| Gemma3::is_global(l)).collect();
        assert_eq!(global, [5, 11, 17]);
    }

    #[test]
    fn neox_rope_pairs_halves() {
        // One row, one head of width 4: pairs (0, 2) and (1, 3).
        let mut x = [1.0, 2.0, 3.0, 4.0];
        let (c, s) = (0.6f32, 0.8f32);
        rope_neox(&mut x, 1, 4, &[c, 1.0], &[s, 0.0]);
        assert_eq!(x, [1.0 * c - 3.0 * s, 2.0, 1.0 * s + 3.0 * c, 4.0]);
    }

    #[test]
    fn gelu_values() {
        assert_eq!(gelu(0.0), 0.0);
        assert!((gelu(1.0) - 0.841_192).abs() < 1e-5);
        assert!((gelu(-3.0) + 0.003_637).abs() < 1e-5);
    }
}
