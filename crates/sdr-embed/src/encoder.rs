//! Sentence encoder: tokenise, batch by length, run the backbone, mean-pool over the
//! attention mask and L2-normalise, as sentence-transformers' `Transformer` →
//! `Pooling(mean)` → `Normalize` pipeline (SPEC §2).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use candle_core::{DType, Device, Tensor};
use rayon::prelude::*;

use crate::cache::SentenceCache;
use crate::error::{EmbedError, Result};
use crate::gemm::Bf16Gemm;
use crate::identity::EncoderIdentity;
use crate::kernels::avx512_gemm;
use crate::models::backbone::Backbone;
use crate::sections::{EmbedControl, SectionEmbedder};
use crate::sentence_encoder::SentenceEncoder;
use crate::tokenize::{SentenceTokenizer, Tokens};

// Their paths of 0.1 (`sdr_embed::encoder::...`).
pub use crate::cpu::{cpu_has_amx_bf16, cpu_is_intel};
pub use crate::precision::Precision;

/// Where the encoder runs: the CPU, or a CUDA GPU (builds with the `cuda` feature).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EncoderDevice {
    #[default]
    Cpu,
    /// CUDA device ordinal (`cuda` = `cuda:0`).
    Cuda(usize),
}

impl EncoderDevice {
    /// Sentences per forward pass when the caller does not say: small batches keep
    /// padding low on a CPU; a GPU needs wide ones to fill its cores.
    pub fn default_batch_size(self) -> usize {
        match self {
            EncoderDevice::Cpu => 32,
            EncoderDevice::Cuda(_) => 256,
        }
    }

    /// Whether this build can open the device at all (`cuda` needs the `cuda` feature).
    pub fn compiled_in(self) -> bool {
        match self {
            EncoderDevice::Cpu => true,
            EncoderDevice::Cuda(_) => cfg!(feature = "cuda"),
        }
    }

    fn open(self) -> Result<Device> {
        match self {
            EncoderDevice::Cpu => Ok(Device::Cpu),
            #[cfg(feature = "cuda")]
            EncoderDevice::Cuda(n) => Device::new_cuda(n).map_err(|e| EmbedError::Device {
                device: self.to_string(),
                // candle attaches a backtrace to driver errors; the user needs one line.
                message: crate::error::candle_message(&e),
            }),
            #[cfg(not(feature = "cuda"))]
            EncoderDevice::Cuda(_) => Err(EmbedError::InvalidOption {
                name: "device",
                value: self.to_string(),
                reason: "this build has no CUDA back-end; build one with \
                         `bash scripts/build-sdr.sh --cuda` (toolkit from scripts/install-cuda.sh)",
            }),
        }
    }
}

impl std::fmt::Display for EncoderDevice {
    /// The spelling `FromStr` accepts: `cpu`, `cuda:N`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EncoderDevice::Cpu => f.write_str("cpu"),
            EncoderDevice::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

impl std::str::FromStr for EncoderDevice {
    type Err = EmbedError;
    fn from_str(s: &str) -> Result<Self> {
        let lower = s.trim().to_ascii_lowercase();
        let bad = || EmbedError::InvalidOption {
            name: "device",
            value: s.to_string(),
            reason: "expected cpu, cuda or cuda:N",
        };
        match lower.as_str() {
            "cpu" => Ok(EncoderDevice::Cpu),
            "cuda" | "gpu" => Ok(EncoderDevice::Cuda(0)),
            other => match other.strip_prefix("cuda:") {
                Some(n) => n.parse().map(EncoderDevice::Cuda).map_err(|_| bad()),
                None => Err(bad()),
            },
        }
    }
}

/// `Bf16` as run on this build, device and CPU: on a GPU bf16 weights and activations
/// (cuBLAS on tensor cores); on the CPU mixed bf16 where a bf16 GEMM is faster than f32
/// (see [`resolve_cpu_precision`]), otherwise f32 and the reason.
fn resolve_precision(
    asked: Precision,
    amx_bf16: bool,
    device: EncoderDevice,
) -> Result<(Precision, Option<String>)> {
    if device != EncoderDevice::Cpu {
        return match asked {
            Precision::Bf16 | Precision::Bf16Candle => Ok((Precision::Bf16Candle, None)),
            Precision::MixedBf16 => Err(EmbedError::InvalidOption {
                name: "precision",
                value: "mixed-bf16".into(),
                reason: "mixed bf16 GEMMs run on the CPU only; use bf16 on a GPU",
            }),
            other => Ok((other, None)),
        };
    }
    Ok(resolve_cpu_precision(
        asked,
        amx_bf16,
        avx512_gemm::supported(),
    ))
}

/// `Bf16` is mixed bf16 where a bf16 GEMM beats f32: MKL with AMX (the `mkl` build), or
/// the AVX-512 BF16 kernel; f32 otherwise (MKL's bf16 GEMM without AMX runs no faster
/// than its f32 GEMM).
fn resolve_cpu_precision(
    asked: Precision,
    amx_bf16: bool,
    avx512_bf16: bool,
) -> (Precision, Option<String>) {
    if asked != Precision::Bf16 {
        return (asked, None);
    }
    if avx512_bf16 || (amx_bf16 && cfg!(feature = "mkl")) {
        (Precision::MixedBf16, None)
    } else {
        (
            Precision::F32,
            Some(
                "bf16: this CPU has no AVX-512 BF16 (nor AMX-BF16 with the MKL build), \
                 where a bf16 GEMM is no faster than f32 (bench/README.md); running f32"
                    .into(),
            ),
        )
    }
}

/// How the two (or more) cores are used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Parallelism {
    /// `Batches` when there are at least as many batches as threads, else `Gemm`:
    /// with few sentences one batch's matrix products are all there is to split, with
    /// many, whole batches per core avoid the per-operation synchronisation (about 1.4x
    /// on 600 IU sentences, 2 cores; bench/README.md).
    #[default]
    Auto,
    /// Batches run one after the other; candle's matmul uses all threads.
    Gemm,
    /// Batches run concurrently on the rayon pool (nested matmul threading too).
    Batches,
}

/// Options of [`Encoder::load`].
#[derive(Debug, Clone)]
pub struct EncoderOptions {
    pub precision: Precision,
    /// Sentences per forward pass; batches are formed from sentences of similar length.
    pub batch_size: usize,
    pub parallelism: Parallelism,
    /// Keep a content-addressed cache of sentence embeddings in memory.
    pub cache: bool,
    /// Truncation length; `None` reads `max_seq_length` from `sentence_bert_config.json`
    /// (384 for all-mpnet-base-v2).
    pub max_seq_length: Option<usize>,
    /// CPU or a CUDA GPU; on a GPU batches run one after the other.
    pub device: EncoderDevice,
}

impl Default for EncoderOptions {
    fn default() -> Self {
        Self {
            precision: Precision::F32,
            batch_size: 32,
            parallelism: Parallelism::Auto,
            cache: true,
            max_seq_length: None,
            device: EncoderDevice::Cpu,
        }
    }
}

/// Embeddings of many sentences as one row-major matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct Embeddings {
    pub data: Vec<f32>,
    pub dim: usize,
}

impl Embeddings {
    pub fn rows(&self) -> usize {
        self.data.len().checked_div(self.dim).unwrap_or(0)
    }
    pub fn row(&self, i: usize) -> &[f32] {
        &self.data[i * self.dim..(i + 1) * self.dim]
    }
}

/// Last-layer token vectors of one sentence (special tokens included), unpooled and
/// unnormalised, for token-level metrics such as BERTScore.
#[derive(Debug, Clone)]
pub struct TokenEmbeddings {
    pub ids: Vec<u32>,
    pub tokens: Vec<String>,
    /// `ids.len() × dim`, row-major.
    pub vectors: Vec<f32>,
    pub dim: usize,
}

/// A loaded sentence encoder.
pub struct Encoder {
    /// Folder, name, precision in force: fixed here at load, the one source of
    /// every name and identity the encoder is known by.
    identity: EncoderIdentity,
    backbone: Backbone,
    tokenizer: SentenceTokenizer,
    dim: usize,
    device: Device,
    opts: EncoderOptions,
    cache: Option<Arc<SentenceCache>>,
    notice: Option<String>,
}

/// Runs `f` with MKL's GEMMs single-threaded on this thread: when whole batches run
/// concurrently, one per core, MKL's own threads would only oversubscribe the cores
/// (about 10% slower on 2 cores).
#[cfg(feature = "mkl")]
fn blas_single_threaded<T>(f: impl FnOnce() -> T) -> T {
    extern "C" {
        // int MKL_Set_Num_Threads_Local(int nth); returns the previous setting (0 = global).
        fn MKL_Set_Num_Threads_Local(nth: i32) -> i32;
    }
    // SAFETY: a thread-local MKL setting, restored before returning.
    let previous = unsafe { MKL_Set_Num_Threads_Local(1) };
    let out = f();
    unsafe { MKL_Set_Num_Threads_Local(previous) };
    out
}

#[cfg(not(feature = "mkl"))]
fn blas_single_threaded<T>(f: impl FnOnce() -> T) -> T {
    f()
}

fn read_max_seq_length(dir: &Path) -> Result<Option<usize>> {
    let path = dir.join("sentence_bert_config.json");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(EmbedError::Io { path, source }),
    };
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|source| EmbedError::Json { path, source })?;
    Ok(v.get("max_seq_length")
        .and_then(|x| x.as_u64())
        .map(|x| x as usize))
}

/// The folder of the sentence-transformers `Pooling` module: its `path` in
/// `modules.json`, else the conventional `1_Pooling`.
fn pooling_dir(dir: &Path) -> Result<PathBuf> {
    let path = dir.join("modules.json");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(dir.join("1_Pooling")),
        Err(source) => return Err(EmbedError::Io { path, source }),
    };
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|source| EmbedError::Json {
        path: path.clone(),
        source,
    })?;
    // SDR computes Transformer -> mean Pooling -> Normalize (the output is unit-norm
    // either way); any other module (a Dense projection, ...) would change the
    // vectors, so the folder is refused rather than embedded differently.
    for m in v.as_array().into_iter().flatten() {
        let kind = m.get("type").and_then(|t| t.as_str()).unwrap_or("");
        let known = [".Transformer", ".Pooling", ".Normalize"]
            .iter()
            .any(|k| kind.ends_with(k));
        if !known {
            return Err(EmbedError::UnsupportedConfig {
                path,
                message: format!(
                    "module {kind:?} is not supported (SDR runs Transformer, mean Pooling and Normalize)"
                ),
            });
        }
    }
    let module = v.as_array().into_iter().flatten().find(|m| {
        m.get("type")
            .and_then(|t| t.as_str())
            .is_some_and(|t| t.ends_with(".Pooling"))
    });
    Ok(
        match module.and_then(|m| m.get("path")).and_then(|p| p.as_str()) {
            Some(p) => dir.join(p),
            None => dir.join("1_Pooling"),
        },
    )
}

/// Refuses a pooling config (`1_Pooling/config.json`) asking for anything but
/// what [`Encoder`] computes, mean pooling over tokens of `hidden_size`: the
/// vectors would otherwise differ silently from sentence-transformers'. No file
/// means mean pooling, the default of the folders SDR was built for.
fn check_pooling(dir: &Path, hidden_size: usize) -> Result<()> {
    let path = pooling_dir(dir)?.join("config.json");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => return Err(EmbedError::Io { path, source }),
    };
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|source| EmbedError::Json {
            path: path.clone(),
            source,
        })?;
    let refuse = |message: String| EmbedError::UnsupportedConfig {
        path: path.clone(),
        message,
    };
    let Some(config) = value.as_object() else {
        return Err(refuse("expected a JSON object".into()));
    };
    if let Some(d) = config.get("word_embedding_dimension") {
        match d.as_u64() {
            Some(d) if d as usize == hidden_size => {}
            _ => {
                return Err(refuse(format!(
                "word_embedding_dimension {d} differs from the model's hidden_size {hidden_size}"
            )))
            }
        }
    }
    // sentence-transformers' default when the key is absent.
    let mut mean = true;
    let mut others = Vec::new();
    for (key, on) in config
        .iter()
        .filter(|(k, _)| k.starts_with("pooling_mode_"))
    {
        let Some(on) = on.as_bool() else {
            return Err(refuse(format!("{key} must be true or false, not {on}")));
        };
        match (key.as_str(), on) {
            ("pooling_mode_mean_tokens", on) => mean = on,
            (_, true) => others.push(key.as_str()),
            (_, false) => {}
        }
    }
    if !others.is_empty() {
        return Err(refuse(format!(
            "asks for {}; SDR implements mean pooling only (pooling_mode_mean_tokens)",
            others.join(" + ")
        )));
    }
    if !mean {
        return Err(refuse(
            "pooling_mode_mean_tokens is not true; SDR implements mean pooling only".into(),
        ));
    }
    Ok(())
}

impl Encoder {
    /// Loads a sentence-transformers folder (`config.json`, `model.safetensors`,
    /// `tokenizer.json`, `sentence_bert_config.json`) onto `opts.device`.
    pub fn load(dir: &Path, opts: EncoderOptions) -> Result<Self> {
        if !dir.join("config.json").is_file() {
            if dir.is_dir() {
                return Err(EmbedError::MissingFile {
                    dir: dir.to_path_buf(),
                    file: "config.json",
                });
            }
            return Err(EmbedError::ModelDirMissing {
                dir: dir.to_path_buf(),
                origin: "no config.json",
            });
        }
        if opts.batch_size == 0 {
            return Err(EmbedError::InvalidOption {
                name: "batch_size",
                value: "0".into(),
                reason: "must be at least 1",
            });
        }
        let (precision, notice) =
            resolve_precision(opts.precision, cpu_has_amx_bf16(), opts.device)?;
        let device = opts.device.open()?;
        let opts = EncoderOptions { precision, ..opts };
        if opts.precision == Precision::MixedBf16 && Bf16Gemm::here().is_none() {
            return Err(EmbedError::InvalidOption {
                name: "precision",
                value: "mixed-bf16".into(),
                reason: "needs a CPU with AVX-512 BF16 or a build with the `mkl` feature \
                         (bash scripts/install-mkl.sh)",
            });
        }
        let loaded = Backbone::load(
            dir,
            opts.precision.dtype(),
            opts.precision == Precision::MixedBf16,
            &device,
        )?;
        check_pooling(dir, loaded.hidden_size)?;
        let max_len = match opts.max_seq_length {
            Some(n) => n,
            None => read_max_seq_length(dir)?.unwrap_or(loaded.max_position_embeddings),
        }
        .min(loaded.max_position_embeddings)
        .max(2);
        let tokenizer = SentenceTokenizer::load(dir, max_len, loaded.pad_id)?;
        // Every name the vectors are known by, fixed here, once the weights loaded.
        let identity = EncoderIdentity::load(dir, precision)?;
        // Keyed by the cache key, as the `--cache-dir` files that `sdr embed` fills.
        let cache = opts.cache.then(|| {
            Arc::new(SentenceCache::unbounded(
                identity.cache_key(),
                loaded.hidden_size,
            ))
        });
        Ok(Self {
            identity,
            backbone: loaded.backbone,
            tokenizer,
            dim: loaded.hidden_size,
            device,
            cache,
            opts,
            notice,
        })
    }

    /// The precision the encoder runs at (`Bf16` resolved for this CPU and build).
    pub fn precision(&self) -> Precision {
        self.opts.precision
    }

    /// Why the precision asked for was replaced, if it was (one line, for the user).
    pub fn notice(&self) -> Option<&str> {
        self.notice.as_deref()
    }

    /// The model's name (its folder name, e.g. `all-mpnet-base-v2`).
    pub fn name(&self) -> &str {
        self.identity.name()
    }

    /// The name a corpus records for this encoder: [`Encoder::name`], plus `+bf16`
    /// (or `+f16`) at reduced precision ([`EncoderIdentity::recorded_name`]).
    pub fn recorded_name(&self) -> &str {
        self.identity.recorded_name()
    }

    /// Every name and identity of this encoder, fixed at load.
    pub fn encoder_identity(&self) -> &EncoderIdentity {
        &self.identity
    }

    /// The model folder.
    pub fn dir(&self) -> &Path {
        self.identity.dir()
    }

    /// Embedding dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Options in force.
    pub fn options(&self) -> &EncoderOptions {
        &self.opts
    }

    /// Truncation length in tokens (special tokens included).
    pub fn max_seq_length(&self) -> usize {
        self.tokenizer.max_seq_length()
    }

    /// The sentence cache, when enabled.
    pub fn cache(&self) -> Option<&SentenceCache> {
        self.cache.as_deref()
    }

    /// What identifies this encoder's vectors in the sentence-cache files of
    /// `--cache-dir` (the model's name and precision; the file name carries the
    /// weights' hash): the identity of [`Encoder::cache`]
    /// ([`EncoderIdentity::cache_key`]).
    pub fn cache_identity(&self) -> String {
        self.identity.cache_key().to_string()
    }

    /// sha256 of `model.safetensors`, read at load (from the `.sha256` sidecar where
    /// there is one, else computed and the sidecar written).
    pub fn weights_sha256(&self) -> Result<String> {
        Ok(self.identity.weights_sha256().to_string())
    }

    /// Number of tokens (special tokens included, after truncation) of each text.
    pub fn token_counts(&self, texts: &[&str]) -> Result<Vec<usize>> {
        Ok(self
            .tokenizer
            .encode(texts, false)?
            .iter()
            .map(|t| t.ids.len())
            .collect())
    }

    /// Unit-norm sentence embeddings, one `Vec` per text, in input order.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let m = self.embed_matrix(texts)?;
        Ok(m.data.chunks_exact(self.dim).map(|r| r.to_vec()).collect())
    }

    /// Unit-norm sentence embeddings as a `texts.len() × dim` matrix, in input order;
    /// with the cache on, through [`SectionEmbedder`] (each distinct text embedded
    /// once, repeats and earlier texts from the cache).
    pub fn embed_matrix(&self, texts: &[&str]) -> Result<Embeddings> {
        let Some(cache) = &self.cache else {
            return self.embed_uncached(texts);
        };
        // The network alone (`SentenceEncoder::embed`), with the cache of its cache key.
        let embedder = SectionEmbedder::keyed(self, cache.clone(), self.identity.cache_key())?;
        let (data, _) = embedder.embed_texts(texts, &EmbedControl::default())?;
        Ok(Embeddings {
            data,
            dim: self.dim,
        })
    }

    /// Embeds without the cache: every text goes through the network.
    pub fn embed_uncached(&self, texts: &[&str]) -> Result<Embeddings> {
        let dim = self.dim;
        let tokens = self.tokenizer.encode(texts, false)?;
        let batches = self.length_batches(&tokens);
        // A GPU runs one batch at a time; its kernels are the parallelism.
        let concurrent = self.opts.device == EncoderDevice::Cpu
            && match self.opts.parallelism {
                Parallelism::Auto => batches.len() >= rayon::current_num_threads(),
                Parallelism::Gemm => false,
                Parallelism::Batches => true,
            };
        let run = |batch: &Vec<usize>| -> Result<Vec<f32>> {
            let rows: Vec<&Tokens> = batch.iter().map(|&i| &tokens[i]).collect();
            self.pooled_batch(&rows, !concurrent)
                .map_err(|e| EmbedError::model(self.dir(), &e))
        };
        let outputs: Vec<Vec<f32>> = if concurrent {
            batches
                .par_iter()
                .map(|b| blas_single_threaded(|| run(b)))
                .collect::<Result<_>>()?
        } else {
            batches.iter().map(run).collect::<Result<_>>()?
        };
        let mut data = vec![0f32; texts.len() * dim];
        for (batch, out) in batches.iter().zip(outputs) {
            for (r, &i) in batch.iter().enumerate() {
                data[i * dim..(i + 1) * dim].copy_from_slice(&out[r * dim..(r + 1) * dim]);
            }
        }
        Ok(Embeddings { data, dim })
    }

    /// Last-layer token vectors of each text (see [`TokenEmbeddings`]).
    pub fn embed_tokens(&self, texts: &[&str]) -> Result<Vec<TokenEmbeddings>> {
        let dim = self.dim;
        let tokens = self.tokenizer.encode(texts, true)?;
        let batches = self.length_batches(&tokens);
        let mut out: Vec<Option<TokenEmbeddings>> = (0..texts.len()).map(|_| None).collect();
        for batch in &batches {
            let rows: Vec<&Tokens> = batch.iter().map(|&i| &tokens[i]).collect();
            let hidden = self
                .hidden_batch(&rows)
                .map_err(|e| EmbedError::model(self.dir(), &e))?;
            for (&i, vectors) in batch.iter().zip(hidden) {
                out[i] = Some(TokenEmbeddings {
                    ids: tokens[i].ids.clone(),
                    tokens: tokens[i].tokens.clone(),
                    vectors,
                    dim,
                });
            }
        }
        Ok(out.into_iter().flatten().collect())
    }

    /// Indices grouped into batches of similar token length (longest first), so that
    /// padding to the longest member wastes little.
    fn length_batches(&self, tokens: &[Tokens]) -> Vec<Vec<usize>> {
        let mut order: Vec<usize> = (0..tokens.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(tokens[i].ids.len()));
        order
            .chunks(self.opts.batch_size)
            .map(|c| c.to_vec())
            .collect()
    }

    fn batch_tensors(&self, rows: &[&Tokens]) -> candle_core::Result<(Tensor, Tensor, usize)> {
        let seq = rows.iter().map(|t| t.ids.len()).max().unwrap_or(0).max(1);
        let pad = self.tokenizer.pad_id();
        let mut ids = Vec::with_capacity(rows.len() * seq);
        let mut mask = Vec::with_capacity(rows.len() * seq);
        for t in rows {
            ids.extend_from_slice(&t.ids);
            ids.extend(std::iter::repeat_n(pad, seq - t.ids.len()));
            mask.extend(std::iter::repeat_n(1u32, t.ids.len()));
            mask.extend(std::iter::repeat_n(0u32, seq - t.ids.len()));
        }
        let ids = Tensor::from_vec(ids, (rows.len(), seq), &self.device)?;
        let mask = Tensor::from_vec(mask, (rows.len(), seq), &self.device)?;
        Ok((ids, mask, seq))
    }

    /// Mean over real tokens, then L2 normalisation (eps 1e-12 as torch's normalize).
    /// `threads`: whether the batch may use the rayon pool (off when batches run one
    /// per core).
    fn pooled_batch(&self, rows: &[&Tokens], threads: bool) -> candle_core::Result<Vec<f32>> {
        if let Some(packed) = self.backbone.packed() {
            let seqs: Vec<&[u32]> = rows.iter().map(|t| t.ids.as_slice()).collect();
            return packed.pooled(&seqs, threads);
        }
        let (ids, mask, _) = self.batch_tensors(rows)?;
        let hidden = self.backbone.forward(&ids, &mask)?.to_dtype(DType::F32)?;
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
        let counts = mask.sum(1)?.clamp(1e-9, f64::INFINITY)?;
        let mean = summed.broadcast_div(&counts)?;
        let norm = mean
            .sqr()?
            .sum_keepdim(1)?
            .sqrt()?
            .clamp(1e-12, f64::INFINITY)?;
        mean.broadcast_div(&norm)?.flatten_all()?.to_vec1::<f32>()
    }

    /// Last-layer vectors of each row's tokens (`len x dim`, row-major), without the
    /// padding.
    fn hidden_batch(&self, rows: &[&Tokens]) -> candle_core::Result<Vec<Vec<f32>>> {
        let dim = self.dim;
        let (states, stride) = if let Some(packed) = self.backbone.packed() {
            let seqs: Vec<&[u32]> = rows.iter().map(|t| t.ids.as_slice()).collect();
            (packed.forward(&seqs, true)?, None)
        } else {
            let (ids, mask, seq) = self.batch_tensors(rows)?;
            let hidden = self.backbone.forward(&ids, &mask)?.to_dtype(DType::F32)?;
            (hidden.flatten_all()?.to_vec1::<f32>()?, Some(seq))
        };
        let mut start = 0;
        Ok(rows
            .iter()
            .map(|t| {
                let n = t.ids.len();
                let v = states[start * dim..(start + n) * dim].to_vec();
                // Packed rows follow each other; padded rows are `seq` apart.
                start += stride.unwrap_or(n);
                v
            })
            .collect())
    }
}

impl SentenceEncoder for Encoder {
    fn name(&self) -> String {
        Encoder::name(self).to_string()
    }
    fn weights_sha256(&self) -> Result<String> {
        Encoder::weights_sha256(self)
    }
    fn dim(&self) -> usize {
        Encoder::dim(self)
    }
    /// The network's vectors, without [`Encoder::cache`]: callers embed through
    /// [`crate::SectionEmbedder`], whose cache is the one.
    fn embed(&self, texts: &[&str]) -> Result<Vec<f32>> {
        Ok(self.embed_uncached(texts)?.data)
    }
    /// `name@sha256/precision` ([`crate::EncoderIdentity::identity`]).
    fn identity(&self) -> Result<String> {
        Ok(self.encoder_identity().identity().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A folder whose pooling config is `config` (none when `None`).
    fn pooling_folder(config: Option<&str>) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        if let Some(c) = config {
            std::fs::create_dir(dir.path().join("1_Pooling")).unwrap();
            std::fs::write(dir.path().join("1_Pooling/config.json"), c).unwrap();
        }
        dir
    }

    #[test]
    fn mean_pooling_or_no_pooling_config_is_accepted() {
        let st = r#"{"word_embedding_dimension": 768, "pooling_mode_cls_token": false,
            "pooling_mode_mean_tokens": true, "pooling_mode_max_tokens": false,
            "pooling_mode_mean_sqrt_len_tokens": false}"#;
        check_pooling(pooling_folder(Some(st)).path(), 768).unwrap();
        check_pooling(pooling_folder(None).path(), 768).unwrap();
        check_pooling(pooling_folder(Some("{}")).path(), 384).unwrap();
    }

    #[test]
    fn other_poolings_and_a_wrong_dimension_are_refused_naming_the_file() {
        for (config, says) in [
            (
                r#"{"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false}"#,
                "pooling_mode_cls_token",
            ),
            (
                r#"{"pooling_mode_max_tokens": true, "pooling_mode_mean_tokens": true}"#,
                "pooling_mode_max_tokens",
            ),
            (
                r#"{"pooling_mode_mean_tokens": false}"#,
                "mean pooling only",
            ),
            (r#"{"pooling_mode_mean_tokens": "yes"}"#, "true or false"),
            (
                r#"{"word_embedding_dimension": 384, "pooling_mode_mean_tokens": true}"#,
                "word_embedding_dimension 384",
            ),
            ("[]", "JSON object"),
        ] {
            let dir = pooling_folder(Some(config));
            let e = check_pooling(dir.path(), 768).unwrap_err();
            let msg = e.to_string();
            assert!(matches!(e, EmbedError::UnsupportedConfig { .. }), "{msg}");
            assert!(msg.contains("1_Pooling/config.json"), "{msg}");
            assert!(msg.contains(says), "{config}: {msg}");
            assert!(!msg.contains('\n'), "{msg}");
        }
    }

    #[test]
    fn the_pooling_folder_comes_from_modules_json() {
        let dir = pooling_folder(None);
        std::fs::write(
            dir.path().join("modules.json"),
            r#"[{"idx": 0, "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "path": "pool", "type": "sentence_transformers.models.Pooling"}]"#,
        )
        .unwrap();
        std::fs::create_dir(dir.path().join("pool")).unwrap();
        std::fs::write(
            dir.path().join("pool/config.json"),
            r#"{"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false}"#,
        )
        .unwrap();
        let msg = check_pooling(dir.path(), 768).unwrap_err().to_string();
        assert!(msg.contains("pool/config.json"), "{msg}");
    }

    #[test]
    fn a_module_beyond_pooling_and_normalize_is_refused() {
        let dir = pooling_folder(None);
        std::fs::write(
            dir.path().join("modules.json"),
            r#"[{"idx": 0, "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                {"idx": 2, "path": "2_Dense", "type": "sentence_transformers.models.Dense"},
                {"idx": 3, "path": "3_Normalize", "type": "sentence_transformers.models.Normalize"}]"#,
        )
        .unwrap();
        let msg = check_pooling(dir.path(), 768).unwrap_err().to_string();
        assert!(
            msg.contains("modules.json") && msg.contains("models.Dense"),
            "{msg}"
        );
    }

    #[test]
    fn a_folder_without_config_json_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let msg = Encoder::load(dir.path(), EncoderOptions::default())
            .err()
            .unwrap()
            .to_string();
        assert!(msg.contains("has no config.json"), "{msg}");
    }

    #[test]
    fn bf16_resolves_for_build_and_cpu() {
        let cpu = resolve_cpu_precision;
        assert_eq!(cpu(Precision::F32, true, true), (Precision::F32, None));
        assert_eq!(
            cpu(Precision::Bf16Candle, false, false).0,
            Precision::Bf16Candle
        );
        let (neither, why) = cpu(Precision::Bf16, false, false);
        assert_eq!(neither, Precision::F32);
        assert!(why.unwrap().starts_with("bf16: "));
        // AVX-512 BF16 has its own kernel, in every build.
        assert_eq!(
            cpu(Precision::Bf16, false, true),
            (Precision::MixedBf16, None)
        );
        let with_amx = cpu(Precision::Bf16, true, false).0;
        let expected = if cfg!(feature = "mkl") {
            Precision::MixedBf16
        } else {
            Precision::F32
        };
        assert_eq!(with_amx, expected);
        // The GEMM behind mixed bf16: MKL with AMX, else the AVX-512 kernel.
        let mkl = cfg!(feature = "mkl").then_some(Bf16Gemm::Mkl);
        assert_eq!(Bf16Gemm::pick(true, true), mkl.or(Some(Bf16Gemm::Avx512)));
        assert_eq!(Bf16Gemm::pick(false, true), Some(Bf16Gemm::Avx512));
        assert_eq!(Bf16Gemm::pick(false, false), mkl);
    }

    #[test]
    fn bf16_on_a_gpu_is_bf16_weights_and_activations() {
        let gpu = EncoderDevice::Cuda(0);
        let got = resolve_precision(Precision::Bf16, false, gpu).unwrap();
        assert_eq!(got, (Precision::Bf16Candle, None));
        assert_eq!(
            resolve_precision(Precision::F16, false, gpu).unwrap().0,
            Precision::F16
        );
        assert!(resolve_precision(Precision::MixedBf16, true, gpu).is_err());
    }

    #[test]
    fn devices_parse_and_print() {
        for (text, want) in [
            ("cpu", EncoderDevice::Cpu),
            ("CUDA", EncoderDevice::Cuda(0)),
            ("cuda:1", EncoderDevice::Cuda(1)),
        ] {
            let got: EncoderDevice = text.parse().unwrap();
            assert_eq!(got, want);
            assert_eq!(got.to_string().parse::<EncoderDevice>().unwrap(), want);
        }
        for bad in ["cuda:x", "tpu", "cuda:-1", ""] {
            let err = bad.parse::<EncoderDevice>().unwrap_err().to_string();
            assert!(err.contains("expected cpu, cuda or cuda:N"), "{bad}: {err}");
        }
        assert_eq!(EncoderDevice::Cpu.default_batch_size(), 32);
        assert_eq!(EncoderDevice::Cuda(0).default_batch_size(), 256);
    }

    #[test]
    fn cuda_without_the_feature_is_a_clear_error() {
        if cfg!(feature = "cuda") {
            return;
        }
        let err = EncoderDevice::Cuda(0).open().unwrap_err().to_string();
        assert!(err.contains("no CUDA back-end"), "{err}");
        assert!(err.contains("build-sdr.sh --cuda"), "{err}");
    }

    #[test]
    fn bf16_and_candle_bf16_parse() {
        assert_eq!("bf16".parse::<Precision>().unwrap(), Precision::Bf16);
        assert_eq!(
            "bf16-candle".parse::<Precision>().unwrap(),
            Precision::Bf16Candle
        );
        assert!("int4".parse::<Precision>().is_err());
    }
}
