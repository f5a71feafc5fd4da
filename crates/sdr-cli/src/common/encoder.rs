//! `--encoder` / `--model` / `--device` / `--precision` / `--cache-dir`: which sentence
//! encoder embeds text, where and at what precision it runs, and where its sentence
//! cache is kept between runs.

use std::path::{Path, PathBuf};

use std::sync::Arc;

use anyhow::{anyhow, Context, Result};
use sdr_embed::{
    open_encoder, CacheKeyed, Encoder, EncoderDevice, EncoderOptions, LoadedEncoder, Precision,
    SectionEmbedder, SentenceCache, SentenceEncoder,
};

use super::log_line;

/// `--precision` of the commands that embed for a corpus or a reward: the two that
/// matter there (`sdr embed` has the others).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PrecisionArg {
    /// 32-bit floats (the reference).
    F32,
    /// bfloat16 GEMMs with f32 activations on CPUs with AVX-512 BF16 or AMX-BF16,
    /// about 2x faster there; f32 on other CPUs, with a notice on stderr. On a GPU,
    /// bf16 weights and activations.
    Bf16,
}

impl From<PrecisionArg> for Precision {
    fn from(p: PrecisionArg) -> Self {
        match p {
            PrecisionArg::F32 => Precision::F32,
            PrecisionArg::Bf16 => Precision::Bf16,
        }
    }
}

/// Which sentence encoder embeds text.
#[derive(clap::Args, Clone)]
pub struct EncoderArgs {
    /// Sentence-transformers model folder (default: $SDR_MODEL, then
    /// ~/.cache/sdr/models/all-mpnet-base-v2, as put there by scripts/fetch-model.sh).
    #[arg(long, value_name = "DIR")]
    pub model: Option<PathBuf>,
    /// `mpnet`: the model folder above (SPEC §2). `hash-DIM`: a deterministic
    /// bag-of-words stand-in with no semantics, for tests and machines without
    /// the model; corpora record which one built them and refuse the other.
    #[arg(long, default_value = "mpnet", value_name = "NAME")]
    pub encoder: String,
    /// Where the encoder runs: `cpu`, or `cuda` / `cuda:N` (a build made with
    /// `bash scripts/build-sdr.sh --cuda`; `gpu` means `cuda:0`; batches of 256
    /// sentences). A corpus records the encoder and --precision, not the device, so
    /// one built on a GPU serves queries embedded on a CPU; at bf16 the two devices'
    /// vectors differ in rounding (the GPU rounds activations to bf16 too).
    #[arg(long, default_value = "cpu", value_name = "DEVICE", value_parser = parse_device)]
    pub device: EncoderDevice,
    /// Numeric precision of the encoder (`mpnet`). `bf16`: bfloat16 GEMMs (f32
    /// activations) on CPUs with AVX-512 BF16 or AMX-BF16, about 2x faster there,
    /// cosine >= 0.999 to f32; f32 on other CPUs, with a notice on stderr; on a GPU,
    /// bf16 weights and activations. Corpora record it (`all-mpnet-base-v2+bf16`) and
    /// refuse queries embedded at another precision.
    #[arg(long, value_enum, default_value_t = PrecisionArg::F32)]
    pub precision: PrecisionArg,
    /// Keep the sentence-embedding cache in this folder across runs (one file per
    /// model weights and precision, the one `sdr embed --cache-dir` uses): sentences
    /// embedded by an earlier command are read back instead of embedded again. Loaded
    /// at start (a damaged file or one of another encoder is ignored, with a notice;
    /// a path that is not a folder, or a cache file that is no sentence cache, is an
    /// error), written atomically when the command ends (except over a file of another
    /// encoder, which is left as it is).
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
}

/// clap's parser for `--device`, with the encoder's own message on bad input.
pub fn parse_device(s: &str) -> std::result::Result<EncoderDevice, String> {
    let device: EncoderDevice = s.parse().map_err(|e| format!("{e}"))?;
    if !device.compiled_in() {
        return Err(format!(
            "{device}: this `sdr` has no CUDA back-end; build one with \
             `bash scripts/build-sdr.sh --cuda`"
        ));
    }
    Ok(device)
}

impl EncoderArgs {
    /// The encoder and its sentence cache (filled from `--cache-dir` when given): the
    /// embedding stage of the command.
    pub fn load(&self) -> Result<Embedder> {
        let options = EncoderOptions {
            device: self.device,
            precision: self.precision.into(),
            batch_size: self.device.default_batch_size(),
            // The stage's cache is the one.
            cache: false,
            ..Default::default()
        };
        if self.encoder != "mpnet" {
            // The stand-ins keep no cache file, but a bad path is refused all the
            // same, as the help says (and nothing is made for them).
            if let Some(dir) = self
                .cache_dir
                .as_deref()
                .filter(|d| d.exists() && !d.is_dir())
            {
                anyhow::bail!("--cache-dir {}: not a folder", dir.display());
            }
            let loaded = open_encoder(&self.encoder, self.model.as_deref(), options)
                .map_err(|e| anyhow!("{e}"))?;
            return Embedder::new(loaded.encoder, None);
        }
        if let Some(dir) = &self.cache_dir {
            check_cache_dir(dir)?;
        }
        let loaded = open_model(self.model.as_deref(), options, "sdr")?;
        let Some(model) = loaded.model else {
            anyhow::bail!("the mpnet encoder loaded without its model");
        };
        // Keyed as `sdr embed` keys its cache (model name and precision; the file
        // name carries the weights' hash), so that the commands share one file.
        let encoder: Arc<dyn SentenceEncoder> = Arc::new(CacheKeyed(model.clone()));
        let file = match &self.cache_dir {
            Some(dir) => Some(
                cache_file(&model, dir)
                    .with_context(|| format!("--cache-dir {}", dir.display()))?,
            ),
            None => None,
        };
        Embedder::new(encoder, file)
    }
}

/// The embedding stage of a command: the encoder and its sentence cache, which
/// is read from a `--cache-dir` file at start and written back (atomically, only
/// if it changed) when the command ends.
pub struct Embedder {
    embedder: SectionEmbedder<'static>,
    /// Where the cache is saved; `None` without `--cache-dir`, or when the file
    /// holds another encoder's cache (see [`load_cache`]).
    file: Option<PathBuf>,
}

impl Embedder {
    fn new(encoder: Arc<dyn SentenceEncoder>, file: Option<PathBuf>) -> Result<Self> {
        let embedder = SectionEmbedder::unbounded(encoder).map_err(|e| anyhow!("{e}"))?;
        let file = match file {
            Some(f) => load_cache(Some(embedder.cache()), &f, "sdr")?.then_some(f),
            None => None,
        };
        Ok(Embedder { embedder, file })
    }
}

impl std::ops::Deref for Embedder {
    type Target = SectionEmbedder<'static>;
    fn deref(&self) -> &Self::Target {
        &self.embedder
    }
}

impl Drop for Embedder {
    fn drop(&mut self) {
        let cache = self.embedder.cache();
        if let (true, Some(file)) = (cache.is_dirty(), &self.file) {
            if let Err(e) = cache.save(file) {
                log_line(format_args!("sdr: could not save the sentence cache: {e}"));
            }
        }
    }
}

/// Loads the model folder (`model`, else `$SDR_MODEL`, else the default) through
/// the one loader ([`sdr_embed::open_encoder`]) and prints its notice (a precision
/// replaced on this CPU) on stderr, after `who: `.
pub fn open_model(
    model: Option<&Path>,
    options: EncoderOptions,
    who: &str,
) -> Result<LoadedEncoder> {
    check_model_arg(model)?;
    let hint = |e: &dyn std::fmt::Display| {
        anyhow!("{e} (run scripts/fetch-model.sh, or pass --model DIR)")
    };
    let loaded = open_encoder("mpnet", model, options).map_err(|e| hint(&e))?;
    if let Some(notice) = &loaded.notice {
        log_line(format_args!("{who}: {notice}"));
    }
    Ok(loaded)
}

/// Refuses a `--model` that is a file, which the model lookup would report as a
/// folder not found.
pub fn check_model_arg(model: Option<&Path>) -> Result<()> {
    match model {
        Some(p) if p.exists() && !p.is_dir() => Err(anyhow!(
            "--model {}: is a file, not a model folder (a sentence-transformers folder \
             holding config.json, model.safetensors and tokenizer.json)",
            p.display()
        )),
        _ => Ok(()),
    }
}

/// The cache file of `encoder` in `dir`: model name, weights hash and precision
/// ([`sdr_embed::EncoderIdentity::cache_file_name`]), so that a file is only ever
/// read by the encoder that wrote it.
pub fn cache_file(encoder: &Encoder, dir: &Path) -> Result<PathBuf> {
    Ok(dir.join(encoder.encoder_identity().cache_file_name()))
}

/// Checks `--cache-dir` before any work is done: a writable folder, or a path where
/// one can be made (made now, so that a run does not fail only when it saves at
/// the end).
pub fn check_cache_dir(dir: &Path) -> Result<()> {
    if dir.exists() && !dir.is_dir() {
        anyhow::bail!("--cache-dir {}: not a folder", dir.display());
    }
    std::fs::create_dir_all(dir).map_err(|e| {
        anyhow!(
            "--cache-dir {}: cannot create the folder: {e}",
            dir.display()
        )
    })?;
    // The temporary file a save makes, removed at once.
    sdr_io::AtomicFile::create(&dir.join("sdr-write-probe"))
        .map(drop)
        .map_err(|e| {
            anyhow!(
                "--cache-dir {}: cannot write in the folder: {e}",
                dir.display()
            )
        })
}

/// Fills `encoder`'s sentence cache from `file` when there is one; a damaged file or
/// one of another encoder costs only time, with a notice naming it. A file that is
/// no sentence cache at all is an error: it would be overwritten by the save.
///
/// Returns whether the cache may be saved to `file` at the end: not when the file
/// holds another encoder's cache, which is ignored and left as it is (a damaged
/// file holds nothing to keep, and is replaced).
pub fn load_cache(cache: Option<&SentenceCache>, file: &Path, who: &str) -> Result<bool> {
    sdr_embed::SentenceCache::check_path(file).map_err(|e| anyhow!("--cache-dir: {e}"))?;
    if let (true, Some(cache)) = (file.is_file(), cache) {
        match cache.load(file) {
            Ok(_) => {}
            Err(e @ sdr_embed::EmbedError::CacheEncoder { .. }) => {
                log_line(format_args!(
                    "{who}: {e}; starting with an empty sentence cache, which is not saved \
                     (the file is left as it is)"
                ));
                return Ok(false);
            }
            Err(e) => log_line(format_args!(
                "{who}: {e}; starting with an empty sentence cache"
            )),
        }
    }
    Ok(true)
}
