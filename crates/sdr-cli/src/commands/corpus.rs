//! `sdr corpus`: build, inspect and resample reference corpora (SPEC §5).

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, Result};
use indicatif::{ProgressBar, ProgressStyle};
use sdr_corpus::{
    build_corpus_with, merge_files, read_source, shard_source, BuildInfo, Columns, Corpus,
    CorpusData, CorpusError, ShardSpec, SourceFormat, SourceOptions, Split,
};

use crate::common::{check_not_an_input, check_output_file, log_line, print_stdout};
use crate::common::{EncoderArgs, LogProgress};

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: Sub,
}

// Parsed once per process; boxing the large variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(clap::Subcommand)]
pub enum Sub {
    /// Embed a set of reference reports into one corpus file (.safetensors).
    Build(BuildArgs),
    /// Merge the shards of `build --shard I/N` into the corpus one build would write.
    Merge(MergeArgs),
    /// Print a corpus file's metadata and counts (validates it on the way).
    Info(InfoArgs),
    /// Make a larger synthetic corpus by resampling the sentences of a built one.
    Synth(SynthArgs),
}

#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
sdr corpus build --input data/iu-xray/indiana_reports.csv --format csv --split train --out iu-train.safetensors\n  \
sdr corpus build --input rexgradient.csv --format csv --id-col id --findings-col Findings --impression-col Impression --sample 5000 --seed 0 --out rex.safetensors\n  \
sdr corpus build --input mimic-cxr-reports/files --format mimic-dir --sample 5000 --out mimic.safetensors\n\n\
Sentences are split by sdr-core's segmenter; identical sentence texts are embedded once.\n\
Reports missing one section are kept (left out of that section's aggregation); reports\n\
with neither section are dropped and counted. The file is written atomically.\n\n\
Sharded build (one machine per shard, then `sdr corpus merge`):\n  \
for i in 0 1 2; do sdr corpus build --input r.csv --format csv --shard $i/3 --out part-$i.safetensors; done\n  \
sdr corpus merge part-*.safetensors --out corpus.safetensors")]
pub struct BuildArgs {
    /// Source: a CSV file, a JSON Lines file, or a folder of MIMIC-CXR .txt reports.
    #[arg(long, value_name = "PATH")]
    pub input: PathBuf,
    /// Source layout: csv, jsonl or mimic-dir.
    #[arg(long, value_name = "FORMAT")]
    pub format: String,
    /// Keep one split by numeric id (IU X-ray rule: test uid%10==0,
    /// validation uid%10==1, train the rest): train, validation, test or all.
    #[arg(long, default_value = "all", value_name = "SPLIT")]
    pub split: String,
    /// Keep a uniform random sample of N reports (after the split filter;
    /// the paper uses 5,000).
    #[arg(allow_negative_numbers = true, long, value_name = "N")]
    pub sample: Option<usize>,
    /// Seed of the sample (SplitMix64-driven Fisher-Yates).
    #[arg(
        allow_negative_numbers = true,
        long,
        default_value_t = 0,
        value_name = "S"
    )]
    pub seed: u64,
    /// Id column / JSON key (default: the first of uid, id, study_id; else the record number).
    #[arg(long, value_name = "NAME")]
    pub id_col: Option<String>,
    /// Findings column / JSON key (exact, then case-insensitive match).
    #[arg(long, default_value = "findings", value_name = "NAME")]
    pub findings_col: String,
    /// Impression column / JSON key (exact, then case-insensitive match).
    #[arg(long, default_value = "impression", value_name = "NAME")]
    pub impression_col: String,
    /// Build only shard I of N (I counts from 0): the contiguous range of
    /// reports floor(I*n/N)..floor((I+1)*n/N) of the n selected, written with
    /// the metadata `sdr corpus merge` checks. Every shard reads the whole source.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<String>,
    /// Output corpus file (.safetensors).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub out: PathBuf,
    #[command(flatten)]
    pub encoder: EncoderArgs,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

#[derive(clap::Args)]
#[command(
    after_help = "The shards may be given in any order; merge orders them by shard index and\n\
refuses a missing or repeated shard, a file that is not a shard, and shards whose source,\n\
selection, encoder, segmenter or settings differ. The result equals a single build of the\n\
same reports (metadata `source` is the first shard's path). Written atomically."
)]
pub struct MergeArgs {
    /// Shard files written by `sdr corpus build --shard I/N`.
    #[arg(required = true, value_name = "SHARD")]
    pub parts: Vec<PathBuf>,
    /// Output corpus file (.safetensors).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub out: PathBuf,
    /// No progress bar or log lines.
    #[arg(long)]
    pub quiet: bool,
}

#[derive(clap::Args)]
pub struct InfoArgs {
    /// Corpus file.
    pub file: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub struct SynthArgs {
    /// A built corpus whose sentences are resampled.
    #[arg(long, value_name = "FILE")]
    pub from: PathBuf,
    /// Number of synthetic reports (refused when the corpus would exceed 8 GiB).
    #[arg(allow_negative_numbers = true, long, value_name = "N")]
    pub n: usize,
    /// Seed of the resampling.
    #[arg(
        allow_negative_numbers = true,
        long,
        default_value_t = 0,
        value_name = "S"
    )]
    pub seed: u64,
    /// Output corpus file.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub out: PathBuf,
}

pub fn run(args: Args) -> Result<()> {
    match args.command {
        Sub::Build(a) => build(a),
        Sub::Merge(a) => merge(a),
        Sub::Info(a) => info(a),
        Sub::Synth(a) => synth(a),
    }
}

fn build(a: BuildArgs) -> Result<()> {
    let format: SourceFormat = a.format.parse().map_err(|e| anyhow!("--format: {e}"))?;
    let split: Split = a.split.parse().map_err(|e| anyhow!("--split: {e}"))?;
    let opts = SourceOptions {
        format,
        columns: Columns {
            id: a.id_col.clone(),
            findings: a.findings_col.clone(),
            impression: a.impression_col.clone(),
        },
        split,
        sample: a.sample,
        seed: a.seed,
    };
    let shard = a
        .shard
        .as_deref()
        .map(|s| s.parse::<ShardSpec>())
        .transpose()
        .map_err(|e| anyhow!("--shard: {e}"))?;
    // A bad --out fails now, not after the embedding.
    check_output_file("--out", &a.out)?;
    check_not_an_input("--out", &a.out, &[&a.input])?;
    let t0 = Instant::now();
    let full = read_source(&a.input, &opts)?;
    if let Some(n) = a.sample.filter(|&n| n > full.reports.len()) {
        log_line(format_args!(
            "sdr corpus: warning: --sample {n}: only {} reports selected from {} (split {}); keeping all of them",
            full.reports.len(),
            a.input.display(),
            split.name()
        ));
    }
    let (source, shard_info) = match shard {
        Some(spec) => {
            let (part, info) = shard_source(&full, spec)?;
            (part, Some(info))
        }
        None => (full, None),
    };
    if !a.quiet && !std::io::stderr().is_terminal() {
        match &shard_info {
            Some(s) => log_line(format_args!(
                "sdr corpus: shard {}/{}: reports {}..{} of {} from {}",
                s.index,
                s.count,
                s.first,
                s.first + source.reports.len(),
                s.total,
                a.input.display()
            )),
            None => log_line(format_args!(
                "sdr corpus: {} reports from {}",
                source.reports.len(),
                a.input.display()
            )),
        }
    }
    let encoder = a.encoder.load()?;
    let pb = progress_bar(
        a.quiet,
        "embedding {bar:40} {pos}/{len} sentences [{elapsed_precise}<{eta_precise}]",
    )?;
    let lines = LogProgress::new("sdr corpus: embedding", "sentences", a.quiet);
    let data = build_corpus_with(
        &source,
        &encoder,
        &BuildInfo {
            source_format: format.name().to_string(),
            split: split.name().to_string(),
            sample: a.sample,
            seed: a.seed,
        },
        Some(&|done, total| {
            pb.set_length(total as u64);
            pb.set_position(done as u64);
            lines.update(done, Some(total));
        }),
    )?;
    pb.finish_and_clear();
    lines.finish();
    let written = match &shard_info {
        Some(s) => data.write_shard(&a.out, s),
        None => data.write(&a.out),
    };
    written.map_err(|e| write_error(e, &a.out))?;
    let what = match &shard_info {
        Some(s) => format!("shard {}/{} of {} reports: ", s.index, s.count, s.total),
        None => String::new(),
    };
    let with = |o: &[i64]| o.windows(2).filter(|w| w[1] > w[0]).count();
    log_line(format_args!(
        "sdr corpus: {what}{} reports ({} with findings, {} with impression; {} records read, {} without either section dropped), {} distinct sentences, encoder {} -> {} in {:.1}s",
        data.n_reports(),
        with(&data.findings_offsets),
        with(&data.impression_offsets),
        source.records,
        source.dropped_empty,
        data.sentences.len(),
        data.meta.encoder,
        a.out.display(),
        t0.elapsed().as_secs_f64()
    ));
    Ok(())
}

/// An indicatif bar when stderr is a terminal; otherwise hidden (the callers
/// print log lines before, during and after the work instead).
fn progress_bar(quiet: bool, template: &str) -> Result<ProgressBar> {
    if quiet || !std::io::stderr().is_terminal() {
        return Ok(ProgressBar::hidden());
    }
    let pb = ProgressBar::new(0);
    pb.set_style(ProgressStyle::with_template(template).map_err(|e| anyhow!("{e}"))?);
    Ok(pb)
}

fn merge(a: MergeArgs) -> Result<()> {
    check_output_file("--out", &a.out)?;
    let parts: Vec<&Path> = a.parts.iter().map(PathBuf::as_path).collect();
    check_not_an_input("--out", &a.out, &parts)?;
    let t0 = Instant::now();
    if !a.quiet && !std::io::stderr().is_terminal() {
        log_line(format_args!(
            "sdr corpus: merging {} shard files",
            a.parts.len()
        ));
    }
    let pb = progress_bar(
        a.quiet,
        "merging {bar:40} {pos}/{len} shards [{elapsed_precise}]",
    )?;
    let data = merge_files(
        &a.parts,
        Some(&|done, total| {
            pb.set_length(total as u64);
            pb.set_position(done as u64);
        }),
    )?;
    pb.finish_and_clear();
    write_data(&data, &a.out)?;
    log_line(format_args!(
        "sdr corpus: merged {} shards: {} reports, {} distinct sentences, encoder {} -> {} in {:.1}s",
        a.parts.len(),
        data.n_reports(),
        data.sentences.len(),
        data.meta.encoder,
        a.out.display(),
        t0.elapsed().as_secs_f64()
    ));
    Ok(())
}

fn info(a: InfoArgs) -> Result<()> {
    let c = Corpus::open(&a.file)?;
    let v = c.view();
    let with = |o: &[i64]| o.windows(2).filter(|w| w[1] > w[0]).count();
    let nf = with(v.findings.offsets);
    let ni = with(v.impression.offsets);
    let mut text = String::new();
    if a.json {
        let obj = serde_json::json!({
            "file": a.file.display().to_string(),
            "bytes": c.file_len(),
            "meta": c.meta(),
            "n_reports": c.n_reports(),
            "n_sentences": c.n_sentences(),
            "with_findings": nf,
            "with_impression": ni,
            "findings_sentences": v.findings.indices.len(),
            "impression_sentences": v.impression.indices.len(),
            "shard": c.shard(),
        });
        writeln!(text, "{obj}")?;
        return print_stdout(&text);
    }
    let m = c.meta();
    let t = &mut text;
    writeln!(
        t,
        "file               {} ({} bytes)",
        a.file.display(),
        c.file_len()
    )?;
    writeln!(
        t,
        "reports            {} ({nf} with findings, {ni} with impression)",
        c.n_reports()
    )?;
    writeln!(
        t,
        "sentences          {} distinct ({} findings + {} impression occurrences)",
        c.n_sentences(),
        v.findings.indices.len(),
        v.impression.indices.len()
    )?;
    writeln!(
        t,
        "encoder            {} (dim {}, weights sha256 {})",
        m.encoder, m.dim, m.encoder_sha256
    )?;
    writeln!(t, "segmenter          {}", m.segmenter_version)?;
    writeln!(
        t,
        "source             {} ({}, sha256 {})",
        m.source, m.source_format, m.source_sha256
    )?;
    writeln!(
        t,
        "split / sample     {} / {} (seed {})",
        m.split, m.sample, m.seed
    )?;
    if let Some(s) = c.shard() {
        writeln!(
            t,
            "shard              {}/{}: reports {}..{} of {} (selection sha256 {})",
            s.index,
            s.count,
            s.first,
            s.first + c.n_reports(),
            s.total,
            s.selection_sha256
        )?;
    }
    if c.n_reports() > 0 {
        writeln!(t, "first report id    {}", c.id(0))?;
    }
    print_stdout(&text)
}

/// Reads a mapped corpus back into memory (for resampling).
fn to_data(c: &Corpus) -> CorpusData {
    let v = c.view();
    CorpusData {
        meta: c.meta().clone(),
        embeddings: v.embeddings.to_vec(),
        sentences: (0..c.n_sentences())
            .map(|s| c.sentence(s).to_string())
            .collect(),
        ids: (0..c.n_reports()).map(|t| c.id(t).to_string()).collect(),
        findings_offsets: v.findings.offsets.to_vec(),
        findings_indices: v.findings.indices.to_vec(),
        impression_offsets: v.impression.offsets.to_vec(),
        impression_indices: v.impression.indices.to_vec(),
    }
}

fn synth(a: SynthArgs) -> Result<()> {
    if a.n == 0 {
        return Err(anyhow!("--n must be at least 1"));
    }
    check_output_file("--out", &a.out)?;
    check_not_an_input("--out", &a.out, &[&a.from])?;
    let base = Corpus::open(&a.from)?;
    let data = sdr_corpus::synth::resample_checked(&to_data(&base), a.n, a.seed)?;
    write_data(&data, &a.out)?;
    log_line(format_args!(
        "sdr corpus: {} synthetic reports resampled from {} ({} distinct sentences) -> {}",
        a.n,
        a.from.display(),
        data.sentences.len(),
        a.out.display()
    ));
    Ok(())
}

fn write_data(data: &CorpusData, out: &Path) -> Result<()> {
    data.write(out).map_err(|e| write_error(e, out))
}

/// A failed write of `out` as `cannot write OUT: REASON`: the corpus error
/// names the path too, which would say it twice.
fn write_error(e: CorpusError, out: &Path) -> anyhow::Error {
    match e {
        CorpusError::Io { source, .. } => anyhow!("cannot write {}: {source}", out.display()),
        e => e.into(),
    }
}
