//! MPNet's forward pass on the CPU over *packed* tokens: the real tokens of a batch of
//! sentences stacked into one `[T, hidden]` matrix, with no padding.
//!
//! Every dense layer is per token, so it runs as one GEMM over the `T` rows
//! (`Y = X Wᵀ + b`, f32 or mixed bf16, see [`crate::gemm::Dense`]); only attention
//! looks across tokens, and it runs per sentence and head on slices of the fused
//! `[T, 3·hidden]` projection:
//!
//! ```text
//! a_ij = softmax_j( q_i·k_j / √d + B[h, bucket(j − i)] ),   ctx_i = Σ_j a_ij v_j
//! x ← LN(x + ctx Wₒᵀ + bₒ);   x ← LN(x + GELU(x W₁ᵀ + b₁) W₂ᵀ + b₂)
//! ```
//!
//! The maths is that of [`super::mpnet::MpnetModel`] (the reference the tests compare
//! against); what changes is the work around it. The candle graph pads every sentence
//! to the longest of its batch, allocates a tensor per operation, and turns attention
//! into hundreds of tiny batched matmuls; here the bias, the activation and the
//! residual-plus-layer-norm sit on the GEMMs' outputs in place, and attention is a few
//! dot products per score. On a 2-core Zen 4 that takes `--precision bf16` from 69 % to
//! most of its time in the GEMMs (bench/README.md).

use std::borrow::Cow;

use candle_core::safetensors::MmapedSafetensors;
use candle_core::{DType, Device, Result, Tensor};
use candle_nn::VarBuilder;

use super::mpnet::{relative_position_bucket, Config};
use super::pack_format::{PackReader, PackWriter};
use super::profile::{attention_flops, gemm_flops, timed, Stage};
use crate::gemm::Dense;
use crate::kernels::activation::{activate, Act};
use crate::kernels::attention::{attention, Heads};
use crate::kernels::norm::{layer_norm, Norm};
use crate::stored::Stored;

/// A thread's buffers for the outputs of [`PackedMpnet::forward`]'s GEMMs, kept from
/// one batch to the next: fresh buffers of several MB each cost page faults and the
/// kernel's page clearing on every batch (2 % of an f32 run on 2 cores).
#[derive(Default)]
struct Scratch {
    qkv: Vec<f32>,
    attn: Vec<f32>,
    inner: Vec<f32>,
    out: Vec<f32>,
    ctx: Vec<f32>,
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::default();
}

/// Largest buffer (values) a thread keeps between batches (32 MB; a batch of 32
/// report sentences needs a tenth of it), so that one batch of very long inputs
/// does not pin its memory.
const SCRATCH_KEEP: usize = 8 << 20;

/// Layer-norm parameters `prefix.weight`, `prefix.bias` of width `h`.
fn load_norm(w: &Weights, prefix: &str, h: usize, eps: f64) -> Result<Norm> {
    Ok(Norm {
        gamma: w.f32s(&format!("{prefix}.weight"), &[h])?.into_owned(),
        beta: w.f32s(&format!("{prefix}.bias"), &[h])?.into_owned(),
        eps: eps as f32,
    })
}

fn norm_to<'a>(n: &'a Norm, w: &mut PackWriter<'a>) {
    w.values(&n.gamma);
    w.values(&n.beta);
}

fn norm_from(r: &mut PackReader, h: usize, eps: f32) -> Result<Norm> {
    Ok(Norm {
        gamma: r.vec(h)?,
        beta: r.vec(h)?,
        eps,
    })
}

/// The activation `cfg` names, once its head count is checked.
fn check_config(cfg: &Config) -> Result<Act> {
    let h = cfg.hidden_size;
    if cfg.num_attention_heads == 0 || !h.is_multiple_of(cfg.num_attention_heads) {
        candle_core::bail!(
            "config.json: hidden_size {h} is not a multiple of num_attention_heads {}",
            cfg.num_attention_heads
        )
    }
    Ok(match cfg.hidden_act.as_str() {
        "gelu" => Act::GeluErf,
        "gelu_new" | "gelu_pytorch_tanh" => Act::GeluTanh,
        "relu" => Act::Relu,
        other => candle_core::bail!("config.json: unsupported hidden_act `{other}`"),
    })
}

/// Where [`PackedMpnet::load`] reads the checkpoint's tensors.
pub enum Weights<'a> {
    /// The memory-mapped `model.safetensors`: f32 tensors are read in place
    /// and packed straight from the mapping (no candle tensor, no copy of the
    /// file's 438 MB; a third of the start-up went to such copies).
    Mapped(&'a MmapedSafetensors),
    /// Any candle source (the tests' random models, other dtypes).
    Vars(VarBuilder<'a>),
}

impl Weights<'_> {
    /// The f32 values of tensor `name` (full checkpoint key), checked to have `shape`.
    fn f32s(&self, name: &str, shape: &[usize]) -> Result<Cow<'_, [f32]>> {
        match self {
            Weights::Mapped(st) => {
                let view = st.get(name)?;
                if view.shape() != shape {
                    candle_core::bail!("{name}: shape {:?}, expected {shape:?}", view.shape())
                }
                if view.dtype() != safetensors::Dtype::F32 {
                    return Ok(Cow::Owned(vec_of(st.load(name, &Device::Cpu)?)?));
                }
                let bytes = view.data();
                #[cfg(target_endian = "little")]
                {
                    // SAFETY: every bit pattern is an f32; only the aligned middle is used.
                    let (head, values, tail) = unsafe { bytes.align_to::<f32>() };
                    if head.is_empty() && tail.is_empty() {
                        return Ok(Cow::Borrowed(values));
                    }
                }
                Ok(Cow::Owned(
                    bytes
                        .chunks_exact(4)
                        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                        .collect(),
                ))
            }
            Weights::Vars(vb) => Ok(Cow::Owned(vec_of(vb.get(shape, name)?)?)),
        }
    }

    /// A dense layer `prefix.weight` (`out x inp`) and `prefix.bias`.
    fn dense(&self, prefix: &str, out: usize, inp: usize, mixed_bf16: bool) -> Result<Dense> {
        let w = self.f32s(&format!("{prefix}.weight"), &[out, inp])?;
        let b = self.f32s(&format!("{prefix}.bias"), &[out])?.into_owned();
        Dense::from_parts(&w, out, inp, Some(b), mixed_bf16)
    }
}

struct Layer {
    /// q, k and v fused: `[3·hidden, hidden]`.
    qkv: Dense,
    o: Dense,
    attn_norm: Norm,
    ffn_in: Dense,
    ffn_out: Dense,
    out_norm: Norm,
}

/// MPNet weights laid out for the packed forward pass: packed in this process, or
/// mapped from the packed-weights cache (`pack_cache.rs`; the large parts, the dense
/// layers' panels and the embeddings, are then pages shared between processes).
pub struct PackedMpnet {
    word: Stored<f32>,
    position: Stored<f32>,
    emb_norm: Norm,
    /// `[num_buckets, heads]`.
    rel_bias: Vec<f32>,
    layers: Vec<Layer>,
    act: Act,
    hidden: usize,
    heads: usize,
    vocab: usize,
    max_positions: usize,
    num_buckets: usize,
    pad: u32,
}

fn vec_of(t: Tensor) -> Result<Vec<f32>> {
    t.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()
}

impl PackedMpnet {
    /// Loads from a `VarBuilder` rooted at the checkpoint's top level (the keys of
    /// [`super::mpnet`]); with `mixed_bf16` the dense layers' GEMMs run in bf16.
    pub fn load(w: &Weights, cfg: &Config, mixed_bf16: bool) -> Result<Self> {
        let h = cfg.hidden_size;
        let act = check_config(cfg)?;
        let layers = (0..cfg.num_hidden_layers)
            .map(|i| -> Result<Layer> {
                let at = |rest: &str| format!("encoder.layer.{i}.{rest}");
                // q, k and v stacked into one `[3h, h]` layer.
                let mut qkv = Vec::with_capacity(3 * h * h);
                let mut bias = Vec::with_capacity(3 * h);
                for name in ["q", "k", "v"] {
                    qkv.extend_from_slice(
                        &w.f32s(&at(&format!("attention.attn.{name}.weight")), &[h, h])?,
                    );
                    bias.extend_from_slice(
                        &w.f32s(&at(&format!("attention.attn.{name}.bias")), &[h])?,
                    );
                }
                let eps = cfg.layer_norm_eps;
                let inter = cfg.intermediate_size;
                Ok(Layer {
                    qkv: Dense::from_parts(&qkv, 3 * h, h, Some(bias), mixed_bf16)?,
                    o: w.dense(&at("attention.attn.o"), h, h, mixed_bf16)?,
                    attn_norm: load_norm(w, &at("attention.LayerNorm"), h, eps)?,
                    ffn_in: w.dense(&at("intermediate.dense"), inter, h, mixed_bf16)?,
                    ffn_out: w.dense(&at("output.dense"), h, inter, mixed_bf16)?,
                    out_norm: load_norm(w, &at("output.LayerNorm"), h, eps)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let buckets = cfg.relative_attention_num_buckets;
        Ok(Self {
            word: w
                .f32s("embeddings.word_embeddings.weight", &[cfg.vocab_size, h])?
                .into_owned()
                .into(),
            position: w
                .f32s(
                    "embeddings.position_embeddings.weight",
                    &[cfg.max_position_embeddings, h],
                )?
                .into_owned()
                .into(),
            emb_norm: load_norm(w, "embeddings.LayerNorm", h, cfg.layer_norm_eps)?,
            rel_bias: w
                .f32s(
                    "encoder.relative_attention_bias.weight",
                    &[buckets, cfg.num_attention_heads],
                )?
                .into_owned(),
            layers,
            act,
            hidden: h,
            heads: cfg.num_attention_heads,
            vocab: cfg.vocab_size,
            max_positions: cfg.max_position_embeddings,
            num_buckets: buckets,
            pad: cfg.pad_token_id,
        })
    }

    /// Adds the model to a packed-weights file (`pack_cache.rs`), in the order
    /// [`PackedMpnet::read_from`] reads it; `false` where a layer cannot be stored.
    pub(crate) fn write_to<'a>(&'a self, w: &mut PackWriter<'a>) -> bool {
        w.values(&self.word);
        w.values(&self.position);
        norm_to(&self.emb_norm, w);
        w.values(&self.rel_bias);
        self.layers.iter().all(|l| {
            let dense = l.qkv.write_to(w) && l.o.write_to(w);
            norm_to(&l.attn_norm, w);
            let ffn = l.ffn_in.write_to(w) && l.ffn_out.write_to(w);
            norm_to(&l.out_norm, w);
            dense && ffn
        })
    }

    /// The model [`PackedMpnet::write_to`] wrote for `cfg` and `mixed_bf16`, its
    /// large parts read in place from the mapped file; every part's size is checked.
    pub(crate) fn read_from(r: &mut PackReader, cfg: &Config, mixed_bf16: bool) -> Result<Self> {
        let (h, inter) = (cfg.hidden_size, cfg.intermediate_size);
        let act = check_config(cfg)?;
        let eps = cfg.layer_norm_eps as f32;
        let values = |r: &mut PackReader, len: usize| -> Result<Stored<f32>> {
            let v = r.values::<f32>()?;
            if v.len() != len {
                candle_core::bail!("packed-weights file: {} values, expected {len}", v.len())
            }
            Ok(v)
        };
        let word = values(r, cfg.vocab_size * h)?;
        let position = values(r, cfg.max_position_embeddings * h)?;
        let emb_norm = norm_from(r, h, eps)?;
        let buckets = cfg.relative_attention_num_buckets;
        let rel_bias = r.vec(buckets * cfg.num_attention_heads)?;
        let layers = (0..cfg.num_hidden_layers)
            .map(|_| {
                Ok(Layer {
                    qkv: Dense::read_from(r, 3 * h, h, mixed_bf16)?,
                    o: Dense::read_from(r, h, h, mixed_bf16)?,
                    attn_norm: norm_from(r, h, eps)?,
                    ffn_in: Dense::read_from(r, inter, h, mixed_bf16)?,
                    ffn_out: Dense::read_from(r, h, inter, mixed_bf16)?,
                    out_norm: norm_from(r, h, eps)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            word,
            position,
            emb_norm,
            rel_bias,
            layers,
            act,
            hidden: h,
            heads: cfg.num_attention_heads,
            vocab: cfg.vocab_size,
            max_positions: cfg.max_position_embeddings,
            num_buckets: buckets,
            pad: cfg.pad_token_id,
        })
    }

    /// Whether the large parts (dense layers, embeddings) are pages of a shared file.
    #[cfg(test)]
    pub(crate) fn is_mapped(&self) -> bool {
        self.word.is_mapped()
            && self.position.is_mapped()
            && self.layers.iter().all(|l| {
                [&l.qkv, &l.o, &l.ffn_in, &l.ffn_out]
                    .iter()
                    .all(|d| d.is_mapped())
            })
    }

    pub fn hidden_size(&self) -> usize {
        self.hidden
    }

    /// Last hidden states of `seqs` (token ids, no padding), stacked: `[Σ len, hidden]`
    /// row-major. `threads`: whether the GEMMs may use the rayon pool (off when the
    /// caller runs one batch per core).
    pub fn forward(&self, seqs: &[&[u32]], threads: bool) -> Result<Vec<f32>> {
        let h = self.hidden;
        let lens: Vec<usize> = seqs.iter().map(|s| s.len()).collect();
        let t: usize = lens.iter().sum();
        let longest = lens.iter().copied().max().unwrap_or(0);
        if longest + self.pad as usize + 1 > self.max_positions {
            candle_core::bail!(
                "a sequence of {longest} tokens exceeds the model's {} positions",
                self.max_positions - self.pad as usize - 1
            )
        }
        let mut x = timed(Stage::Embeddings, 0, || -> Result<Vec<f32>> {
            let mut x = vec![0f32; t * h];
            for (row, (&id, i)) in x
                .chunks_exact_mut(h)
                .zip(seqs.iter().flat_map(|s| s.iter().zip(0..)))
            {
                if id as usize >= self.vocab {
                    candle_core::bail!("token id {id} is outside the vocabulary of {}", self.vocab)
                }
                // RoBERTa-style positions: padding_idx + 1 + index (no pads here).
                let p = self.pad as usize + 1 + i;
                let w = &self.word[id as usize * h..][..h];
                let e = &self.position[p * h..][..h];
                for ((o, a), b) in row.iter_mut().zip(w).zip(e) {
                    *o = a + b;
                }
            }
            layer_norm(&mut x, None, None, &self.emb_norm, threads);
            Ok(x)
        })?;
        // Bucket of every offset j - i in -(longest-1)..=(longest-1), shared by layers.
        let buckets: Vec<usize> = (0..(2 * longest).saturating_sub(1))
            .map(|o| {
                relative_position_bucket(o as i64 - longest as i64 + 1, self.num_buckets) as usize
            })
            .collect();
        // One buffer per GEMM output, reused by every layer and kept for this thread's
        // next batch. The biases are added by the pass after each GEMM (see
        // `Dense::apply_unbiased`).
        let Scratch {
            mut qkv,
            mut attn,
            mut inner,
            mut out,
            mut ctx,
        } = SCRATCH.with(|c| c.take());
        ctx.resize(t * h, 0.0); // every value is written by `attention`
        let no_bias = vec![0f32; 3 * h];
        let inner_size = self.layers.first().map_or(0, |l| l.ffn_in.out_dim());
        let (qkv_flops, o_flops) = (gemm_flops(t, h, 3 * h), gemm_flops(t, h, h));
        let ffn_flops = gemm_flops(t, h, inner_size);
        let attn_flops = attention_flops(&lens, h);
        for layer in &self.layers {
            let qkv_bias = timed(Stage::Qkv, qkv_flops, || {
                layer.qkv.apply_unbiased(&x, t, threads, &mut qkv)
            })?;
            let qkv_bias = qkv_bias.unwrap_or(&no_bias);
            let shape = Heads {
                hidden: h,
                heads: self.heads,
                rel_bias: &self.rel_bias,
            };
            timed(Stage::Attention, attn_flops, || {
                attention(
                    &qkv, qkv_bias, &lens, &mut ctx, &shape, &buckets, longest, threads,
                )
            });
            let o_bias = timed(Stage::AttnOut, o_flops, || {
                layer.o.apply_unbiased(&ctx, t, threads, &mut attn)
            })?;
            timed(Stage::AttnNorm, 0, || {
                layer_norm(&mut attn, o_bias, Some(&x), &layer.attn_norm, threads)
            });
            let in_bias = timed(Stage::FfnIn, ffn_flops, || {
                layer.ffn_in.apply_unbiased(&attn, t, threads, &mut inner)
            })?;
            timed(Stage::Activation, 0, || {
                activate(&mut inner, in_bias, self.act, threads)
            });
            let out_bias = timed(Stage::FfnOut, ffn_flops, || {
                layer.ffn_out.apply_unbiased(&inner, t, threads, &mut out)
            })?;
            timed(Stage::OutNorm, 0, || {
                layer_norm(&mut out, out_bias, Some(&attn), &layer.out_norm, threads)
            });
            std::mem::swap(&mut x, &mut out);
        }
        let keep = |mut v: Vec<f32>| {
            if v.capacity() > SCRATCH_KEEP {
                v = Vec::new();
            }
            v
        };
        SCRATCH.with(|c| {
            c.replace(Scratch {
                qkv: keep(qkv),
                attn: keep(attn),
                inner: keep(inner),
                out: keep(out),
                ctx: keep(ctx),
            })
        });
        Ok(x)
    }

    /// Mean over each sequence's tokens, L2-normalised (ε 1e-12 as torch's
    /// `normalize`): `[seqs, hidden]` row-major.
    pub fn pooled(&self, seqs: &[&[u32]], threads: bool) -> Result<Vec<f32>> {
        let h = self.hidden;
        let states = self.forward(seqs, threads)?;
        Ok(timed(Stage::Pooling, 0, || mean_pool(seqs, &states, h)))
    }
}

/// Mean over each sequence's rows of `states`, L2-normalised.
fn mean_pool(seqs: &[&[u32]], states: &[f32], h: usize) -> Vec<f32> {
    let mut out = vec![0f32; seqs.len() * h];
    let mut start = 0;
    for (s, row) in seqs.iter().zip(out.chunks_exact_mut(h)) {
        for tok in states[start * h..(start + s.len()) * h].chunks_exact(h) {
            row.iter_mut().zip(tok).for_each(|(o, v)| *o += v);
        }
        let inv = 1.0 / (s.len().max(1) as f32);
        row.iter_mut().for_each(|v| *v *= inv);
        let norm = row.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
        row.iter_mut().for_each(|v| *v /= norm);
        start += s.len();
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::models::mpnet::MpnetModel;
    use candle_core::Device;
    use std::collections::HashMap;

    /// A small random MPNet (2 layers) in both implementations.
    fn tiny(act: &str, hidden: usize, heads: usize) -> (Config, VarBuilder<'static>) {
        let (cfg, t) = tiny_tensors(act, hidden, heads);
        (cfg, VarBuilder::from_tensors(t, DType::F32, &Device::Cpu))
    }

    pub(crate) fn tiny_tensors(
        act: &str,
        hidden: usize,
        heads: usize,
    ) -> (Config, HashMap<String, Tensor>) {
        let cfg = Config {
            vocab_size: 50,
            hidden_size: hidden,
            num_hidden_layers: 2,
            num_attention_heads: heads,
            intermediate_size: 96,
            hidden_act: act.into(),
            max_position_embeddings: 40,
            layer_norm_eps: 1e-5,
            pad_token_id: 1,
            relative_attention_num_buckets: 32,
        };
        let dev = Device::Cpu;
        let mut t = HashMap::new();
        // Uniform values with the given mean and standard deviation, from a fixed LCG
        // so that every run tests the same model.
        let mut seed = 0x5d12_u64;
        let mut put = |name: String, shape: &[usize], std: f32, mean: f32| {
            let n: usize = shape.iter().product();
            let v: Vec<f32> = (0..n)
                .map(|_| {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let u = (seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
                    mean + u * std * 12f32.sqrt()
                })
                .collect();
            t.insert(name, Tensor::from_vec(v, shape, &dev).unwrap());
        };
        let (h, i) = (cfg.hidden_size, cfg.intermediate_size);
        put(
            "embeddings.word_embeddings.weight".into(),
            &[50, h],
            0.5,
            0.0,
        );
        put(
            "embeddings.position_embeddings.weight".into(),
            &[40, h],
            0.5,
            0.0,
        );
        put("embeddings.LayerNorm.weight".into(), &[h], 0.1, 1.0);
        put("embeddings.LayerNorm.bias".into(), &[h], 0.1, 0.0);
        put(
            "encoder.relative_attention_bias.weight".into(),
            &[32, heads],
            1.0,
            0.0,
        );
        for l in 0..cfg.num_hidden_layers {
            let p = format!("encoder.layer.{l}.");
            for n in ["q", "k", "v", "o"] {
                put(format!("{p}attention.attn.{n}.weight"), &[h, h], 0.2, 0.0);
                put(format!("{p}attention.attn.{n}.bias"), &[h], 0.1, 0.0);
            }
            for n in ["attention.LayerNorm", "output.LayerNorm"] {
                put(format!("{p}{n}.weight"), &[h], 0.1, 1.0);
                put(format!("{p}{n}.bias"), &[h], 0.1, 0.0);
            }
            put(format!("{p}intermediate.dense.weight"), &[i, h], 0.2, 0.0);
            put(format!("{p}intermediate.dense.bias"), &[i], 0.1, 0.0);
            put(format!("{p}output.dense.weight"), &[h, i], 0.2, 0.0);
            put(format!("{p}output.dense.bias"), &[h], 0.1, 0.0);
        }
        (cfg, t)
    }

    #[test]
    fn weights_read_in_place_from_the_file_give_the_same_model() {
        let (cfg, t) = tiny_tensors("gelu", 64, 4);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.safetensors");
        candle_core::safetensors::save(&t, &path).unwrap();
        // SAFETY: a file of this test, not written while mapped.
        let st = unsafe { MmapedSafetensors::new(&path) }.unwrap();
        let vb = VarBuilder::from_tensors(t, DType::F32, &Device::Cpu);
        let seqs = sequences(37);
        let refs: Vec<&[u32]> = seqs.iter().map(|s| s.as_slice()).collect();
        for mixed in [false, true] {
            if mixed && crate::gemm::Bf16Gemm::here().is_none() {
                continue;
            }
            let mapped = PackedMpnet::load(&Weights::Mapped(&st), &cfg, mixed).unwrap();
            let vars = PackedMpnet::load(&Weights::Vars(vb.clone()), &cfg, mixed).unwrap();
            assert_eq!(
                mapped.forward(&refs, false).unwrap(),
                vars.forward(&refs, false).unwrap(),
                "mixed bf16 {mixed}"
            );
        }
        // A tensor of the wrong shape names itself.
        let mut bad = cfg.clone();
        bad.intermediate_size += 1;
        let err = PackedMpnet::load(&Weights::Mapped(&st), &bad, false)
            .err()
            .unwrap();
        assert!(
            err.to_string().contains("intermediate.dense.weight"),
            "{err}"
        );
    }

    /// Sequences of lengths 1..=`n` with varied ids (no pad id 1).
    pub(crate) fn sequences(n: usize) -> Vec<Vec<u32>> {
        (1..=n)
            .map(|len| {
                (0..len)
                    .map(|j| ((j * 7 + len * 3) % 48 + 2) as u32)
                    .collect()
            })
            .collect()
    }

    /// The candle model's hidden states of `seqs`, padded to the longest.
    fn candle_hidden(model: &MpnetModel, seqs: &[Vec<u32>]) -> (Vec<f32>, usize) {
        let s = seqs.iter().map(|q| q.len()).max().unwrap();
        let mut ids = Vec::new();
        let mut mask = Vec::new();
        for q in seqs {
            ids.extend_from_slice(q);
            ids.extend(std::iter::repeat_n(1u32, s - q.len()));
            mask.extend(std::iter::repeat_n(1u32, q.len()));
            mask.extend(std::iter::repeat_n(0u32, s - q.len()));
        }
        let dev = Device::Cpu;
        let ids = Tensor::from_vec(ids, (seqs.len(), s), &dev).unwrap();
        let mask = Tensor::from_vec(mask, (seqs.len(), s), &dev).unwrap();
        let out = model.forward(&ids, &mask).unwrap();
        (out.flatten_all().unwrap().to_vec1::<f32>().unwrap(), s)
    }

    /// Max |difference| and min cosine over all token states, packed against candle.
    fn against_candle(
        act: &str,
        (hidden, heads): (usize, usize),
        mixed_bf16: bool,
        threads: bool,
    ) -> (f32, f32) {
        let (cfg, vb) = tiny(act, hidden, heads);
        let candle = MpnetModel::load_with(vb.clone(), &cfg, mixed_bf16).unwrap();
        let packed = PackedMpnet::load(&Weights::Vars(vb), &cfg, mixed_bf16).unwrap();
        let seqs = sequences(37); // up to 3 key tiles
        let refs: Vec<&[u32]> = seqs.iter().map(|s| s.as_slice()).collect();
        let got = packed.forward(&refs, threads).unwrap();
        let (want, s) = candle_hidden(&candle, &seqs);
        let h = cfg.hidden_size;
        let (mut worst, mut min_cos) = (0f32, 1f32);
        let mut row = 0;
        for (b, q) in seqs.iter().enumerate() {
            for i in 0..q.len() {
                let g = &got[(row + i) * h..][..h];
                let w = &want[(b * s + i) * h..][..h];
                let (mut dot, mut gg, mut ww) = (0f64, 0f64, 0f64);
                for (a, b) in g.iter().zip(w) {
                    assert!(a.is_finite());
                    worst = worst.max((a - b).abs());
                    dot += f64::from(*a) * f64::from(*b);
                    gg += f64::from(*a) * f64::from(*a);
                    ww += f64::from(*b) * f64::from(*b);
                }
                min_cos = min_cos.min((dot / (gg * ww).sqrt()) as f32);
            }
            row += q.len();
        }
        assert_eq!(row * h, got.len());
        (worst, min_cos)
    }

    #[test]
    fn packed_f32_matches_the_candle_model() {
        // Head sizes 16 (one attention tile) and 12 (padded to 16), and 64 as in
        // all-mpnet-base-v2 (four tiles).
        for (act, shape) in [("gelu", (64, 4)), ("gelu_new", (48, 4)), ("relu", (128, 2))] {
            for threads in [false, true] {
                let (d, _) = against_candle(act, shape, false, threads);
                eprintln!("{act} {shape:?} threads={threads}: max |diff| {d:e}");
                // Layer-normed outputs of order 1: only summation order differs.
                assert!(
                    d < 1e-4,
                    "{act} {shape:?} threads={threads}: max |diff| {d}"
                );
            }
        }
    }

    #[test]
    fn packed_bf16_matches_the_candle_model_with_the_same_gemms() {
        if crate::gemm::Bf16Gemm::here().is_none() {
            return;
        }
        // Inputs that differ by f32 rounding flip a bf16 rounding now and then, and an
        // untrained network amplifies that: compare directions, at the bf16 bar.
        let (d, cos) = against_candle("gelu", (64, 4), true, false);
        eprintln!("bf16: max |diff| {d:e}, min cos {cos}");
        assert!(cos > 0.9999, "min cos {cos}, max |diff| {d}");
    }

    #[test]
    fn pooled_rows_are_unit_means() {
        let (cfg, vb) = tiny("gelu", 64, 4);
        let packed = PackedMpnet::load(&Weights::Vars(vb), &cfg, false).unwrap();
        let seqs = sequences(5);
        let refs: Vec<&[u32]> = seqs.iter().map(|s| s.as_slice()).collect();
        let states = packed.forward(&refs, false).unwrap();
        let pooled = packed.pooled(&refs, false).unwrap();
        let h = cfg.hidden_size;
        let last = &seqs[4];
        let start: usize = seqs[..4].iter().map(|s| s.len()).sum();
        let mut mean = vec![0f32; h];
        for t in 0..last.len() {
            for (m, v) in mean.iter_mut().zip(&states[(start + t) * h..][..h]) {
                *m += v / last.len() as f32;
            }
        }
        let norm = mean.iter().map(|v| v * v).sum::<f32>().sqrt();
        for (p, m) in pooled[4 * h..].iter().zip(&mean) {
            assert!((p - m / norm).abs() < 1e-6);
        }
    }

    #[test]
    fn buffers_kept_between_batches_change_no_result() {
        let (cfg, vb) = tiny("gelu", 64, 4);
        let packed = PackedMpnet::load(&Weights::Vars(vb), &cfg, false).unwrap();
        let (long, short) = (sequences(30), sequences(3));
        let run = |seqs: &[Vec<u32>]| {
            let r: Vec<&[u32]> = seqs.iter().map(|q| q.as_slice()).collect();
            packed.forward(&r, true).unwrap()
        };
        // Each batch alone, on a thread of its own (no buffers kept yet)...
        let fresh =
            |seqs: Vec<Vec<u32>>| std::thread::scope(|s| s.spawn(|| run(&seqs)).join().unwrap());
        let (want_long, want_short) = (fresh(long.clone()), fresh(short.clone()));
        // ...and one after the other on this one, long, short, long.
        assert_eq!(run(&long), want_long);
        assert_eq!(run(&short), want_short);
        assert_eq!(run(&long), want_long);
    }

    #[test]
    fn bad_input_is_an_error() {
        let (cfg, vb) = tiny("gelu", 64, 4);
        let packed = PackedMpnet::load(&Weights::Vars(vb), &cfg, false).unwrap();
        let long = vec![5u32; 39];
        let e = packed.forward(&[&long], false).unwrap_err().to_string();
        assert!(e.contains("exceeds"), "{e}");
        let e = packed.forward(&[&[2, 99]], false).unwrap_err().to_string();
        assert!(e.contains("vocabulary"), "{e}");
        assert!(packed.forward(&[], false).unwrap().is_empty());
    }
}
