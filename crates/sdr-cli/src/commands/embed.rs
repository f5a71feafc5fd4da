//! `sdr embed`: sentence embeddings (SPEC §2) for one sentence per line.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sdr_embed::{open_encoder, EncoderOptions, Parallelism, Precision};

use crate::common::{check_outputs, log_line, or_stdin};
use crate::jsonl::{Input, Output};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// One `{"text": ..., "embedding": [...]}` object per line, in input order.
    Jsonl,
    /// A little-endian float32 `.npy` matrix, one row per input line.
    Npy,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PrecisionArg {
    /// 32-bit floats (the reference; cosine >= 0.9999 to sentence-transformers).
    F32,
    /// On a GPU: bfloat16 weights and activations. On the CPU: bfloat16 GEMMs (f32
    /// activations) where the CPU runs them faster than f32: AVX-512 BF16 (AMD Zen 4/5,
    /// Intel Cooper Lake and later; SDR's own kernel) or AMX-BF16 (through the MKL build
    /// that scripts/setup.sh makes); f32 elsewhere, with a notice on stderr.
    Bf16,
    /// bfloat16 weights and activations in candle (slow on CPUs).
    Bf16Candle,
    /// IEEE half weights and activations.
    F16,
    /// f32 activations, dense-layer GEMMs in bfloat16 whatever the CPU: MKL with AMX,
    /// SDR's AVX-512 BF16 kernel, or MKL; needs AVX-512 BF16 or a build with
    /// `--features mkl`.
    MixedBf16,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ParallelArg {
    /// Several batches at once when there are at least as many batches as threads,
    /// otherwise one batch at a time with threaded matrix products
    Auto,
    /// One batch at a time, matrix products threaded over all cores.
    Gemm,
    /// Several batches at once on the thread pool.
    Batches,
}

#[derive(clap::Args)]
#[command(
    after_help = "Input:  one sentence per line (blank lines are skipped).\n\
Output: {\"text\": \"Heart size is normal.\", \"embedding\": [0.0123, ...]} per line, in input order,\n\
        or with --format npy a float32 matrix (rows in input order; needs --output).\n\n\
The model folder is --model, else $SDR_MODEL, else ${SDR_HOME:-~/.cache/sdr}/models/all-mpnet-base-v2;\n\
fetch it with `bash scripts/fetch-model.sh`. Repeated sentences are embedded once."
)]
pub struct Args {
    /// Text file with one sentence per line; `-` or absent reads stdin.
    pub input: Option<PathBuf>,
    /// sentence-transformers model folder (all-mpnet-base-v2 or a BERT-family model).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Jsonl)]
    pub format: Format,
    /// Write to this file (atomically: temporary file, then rename) instead of stdout.
    #[arg(long, short = 'o')]
    pub output: Option<PathBuf>,
    /// Sentences per forward pass (batches group sentences of similar length);
    /// default 32 on the CPU, 256 on a GPU.
    #[arg(allow_negative_numbers = true, long)]
    pub batch_size: Option<usize>,
    /// Where the encoder runs: `cpu`, or `cuda` / `cuda:N` (a build made with
    /// `bash scripts/build-sdr.sh --cuda`). On a GPU `--precision bf16` runs bf16
    /// weights and activations (tensor cores).
    #[arg(long, default_value = "cpu", value_name = "DEVICE",
          value_parser = crate::common::encoder::parse_device)]
    pub device: sdr_embed::EncoderDevice,
    /// Numeric precision; reduced precision is faster where the CPU supports it, less exact.
    #[arg(long, value_enum, default_value_t = PrecisionArg::F32)]
    pub precision: PrecisionArg,
    /// How batches use the cores.
    #[arg(long, value_enum, default_value_t = ParallelArg::Auto)]
    pub parallelism: ParallelArg,
    /// Keep a sentence-embedding cache in this folder across runs (keyed by model
    /// weights hash and precision); the folder must be writable. Saved after the
    /// output is written: a failed save is a warning, the output stands.
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Do not deduplicate repeated sentences (every line goes through the network).
    #[arg(long, conflicts_with = "cache_dir")]
    pub no_cache: bool,
}

/// One output line; fields in this order, floats printed as f32.
#[derive(serde::Serialize)]
struct Row<'a> {
    text: &'a str,
    embedding: &'a [f32],
}

/// Lines read and embedded per step (the progress bar advances per step).
const CHUNK: usize = 2048;

pub fn run(args: Args) -> Result<()> {
    if args.format == Format::Npy && args.output.as_deref().is_none_or(|p| p == Path::new("-")) {
        anyhow::bail!("--format npy needs --output FILE");
    }
    check_outputs(
        &[("--output", args.output.as_deref())],
        &[or_stdin(args.input.as_deref())],
    )?;
    crate::common::encoder::check_model_arg(args.model.as_deref())?;
    // Before the model loads and anything is written: a bad folder is found at once.
    if let Some(cd) = &args.cache_dir {
        crate::common::encoder::check_cache_dir(cd)?;
    }
    let precision = match args.precision {
        PrecisionArg::F32 => Precision::F32,
        PrecisionArg::Bf16 => Precision::Bf16,
        PrecisionArg::Bf16Candle => Precision::Bf16Candle,
        PrecisionArg::F16 => Precision::F16,
        PrecisionArg::MixedBf16 => Precision::MixedBf16,
    };
    let opts = EncoderOptions {
        precision,
        batch_size: args
            .batch_size
            .unwrap_or_else(|| args.device.default_batch_size()),
        device: args.device,
        parallelism: match args.parallelism {
            ParallelArg::Auto => Parallelism::Auto,
            ParallelArg::Gemm => Parallelism::Gemm,
            ParallelArg::Batches => Parallelism::Batches,
        },
        cache: !args.no_cache,
        ..Default::default()
    };
    // The one loader (`--model`, else $SDR_MODEL, else the cache folder).
    let loaded = open_encoder("mpnet", args.model.as_deref(), opts)?;
    if let Some(notice) = &loaded.notice {
        log_line(format_args!("sdr embed: {notice}"));
    }
    let Some(encoder) = loaded.model else {
        anyhow::bail!("the mpnet encoder loaded without its model");
    };
    let cache_file = match &args.cache_dir {
        Some(cd) => {
            let file = crate::common::encoder::cache_file(&encoder, cd)?;
            crate::common::encoder::load_cache(encoder.cache(), &file, "sdr embed")?.then_some(file)
        }
        None => None,
    };

    let mut input = Input::open(args.input.as_deref())?;
    let mut output = Output::create(args.output.as_deref())?;
    let progress = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    progress.set_style(
        ProgressStyle::with_template(
            "{spinner} {human_pos} sentences embedded ({per_sec}) {elapsed}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    let log = crate::common::LogProgress::new("sdr embed:", "sentences embedded", false);
    let mut line_no = 0usize;
    let mut rows = 0usize;
    let mut npy: Vec<f32> = Vec::new();
    loop {
        let chunk = input.next_chunk(CHUNK, &mut line_no)?;
        if chunk.is_empty() {
            break;
        }
        let texts: Vec<&str> = chunk
            .iter()
            .map(|(_, t)| t.trim_end_matches(['\n', '\r']))
            .collect();
        let m = encoder
            .embed_matrix(&texts)
            .with_context(|| format!("{}: lines {}..{}", input.name, chunk[0].0, line_no))?;
        match args.format {
            Format::Jsonl => {
                let w = output.writer();
                for (i, text) in texts.iter().enumerate() {
                    let row = Row {
                        text,
                        embedding: m.row(i),
                    };
                    serde_json::to_writer(&mut *w, &row)?;
                    w.write_all(b"\n").context("cannot write output")?;
                }
            }
            Format::Npy => npy.extend_from_slice(&m.data),
        }
        rows += texts.len();
        progress.set_position(rows as u64);
        log.update(rows, None);
    }
    if args.format == Format::Npy {
        write_npy(output.writer(), &npy, rows, encoder.dim())?;
    }
    output.finish()?;
    progress.finish_and_clear();
    log.finish();
    if let (Some(file), Some(cache)) = (&cache_file, encoder.cache()) {
        // The output is complete: a cache that cannot be saved (a full disk; the
        // folder was found writable at start) costs only the next run's time.
        if let Err(e) = cache.save(file) {
            log_line(format_args!(
                "sdr embed: warning: could not save the sentence cache: {e}"
            ));
        }
    }
    Ok(())
}

/// NumPy format 1.0: magic, header dict padded to a multiple of 64 bytes, then data.
fn write_npy(w: &mut dyn Write, data: &[f32], rows: usize, dim: usize) -> Result<()> {
    let dict = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({rows}, {dim}), }}");
    let unpadded = 10 + dict.len() + 1;
    let pad = (64 - unpadded % 64) % 64;
    let header_len = (dict.len() + pad + 1) as u16;
    w.write_all(b"\x93NUMPY\x01\x00")?;
    w.write_all(&header_len.to_le_bytes())?;
    w.write_all(dict.as_bytes())?;
    w.write_all(&vec![b' '; pad])?;
    w.write_all(b"\n")?;
    let mut bytes = Vec::with_capacity(data.len() * 4);
    for x in data {
        bytes.extend_from_slice(&x.to_le_bytes());
    }
    w.write_all(&bytes).context("cannot write output")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npy_header_is_aligned() {
        let mut buf = Vec::new();
        write_npy(&mut buf, &[1.0, 2.0, 3.0, 4.0], 2, 2).unwrap();
        let header_len = u16::from_le_bytes([buf[8], buf[9]]) as usize;
        assert_eq!((10 + header_len) % 64, 0);
        assert_eq!(buf.len(), 10 + header_len + 16);
        assert_eq!(buf[10 + header_len - 1], b'\n');
    }
}
