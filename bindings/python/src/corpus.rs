//! `sdr_rewards.build_corpus` / `sdr_rewards.merge_corpus`: the reference-corpus build of
//! `sdr corpus build` (whole or one shard) and `sdr corpus merge`, for
//! distributed builds (recipes/ray_corpus.py runs one shard per Ray task).

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use sdr_corpus::{
    build_corpus_with as build, merge_files, read_source, shard_source, BuildInfo, Columns,
    CorpusError, SectionEmbedder, ShardSpec, SourceFormat, SourceOptions, Split,
};

use crate::encoder::open_encoder;
use crate::error::corpus_err;

struct Built {
    n_reports: usize,
    n_sentences: usize,
    encoder: String,
    shard: Option<sdr_corpus::ShardInfo>,
}

/// Build a reference corpus, or one shard of it, as `sdr corpus build` does.
///
/// ``shard=(i, n)`` builds shard `i` (from 0) of `n`: the contiguous reports
/// ``i*r//n .. (i+1)*r//n`` of the `r` selected, with the metadata
/// :func:`merge_corpus` checks. Returns ``{"out", "n_reports", "n_sentences",
/// "encoder", "shard"}`` (``shard``: ``{"index", "count", "first", "total",
/// "selection_sha256"}`` or None). The file is written atomically.
///
/// ``device`` and ``precision`` (``"f32"`` or ``"bf16"``) are where and how the
/// encoder runs; a bf16 corpus records its encoder as ``all-mpnet-base-v2+bf16``, and
/// ``sdr select`` / ``PruneScorer`` then want ``precision="bf16"`` queries too.
#[pyfunction]
#[pyo3(signature = (input, out, format, *, shard = None, split = "all", sample = None, seed = 0,
    id_col = None, findings_col = "findings", impression_col = "impression",
    encoder = "mpnet", model_dir = None, device = "cpu", precision = "f32"))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn build_corpus<'py>(
    py: Python<'py>,
    input: PathBuf,
    out: PathBuf,
    format: &str,
    shard: Option<(usize, usize)>,
    split: &str,
    sample: Option<usize>,
    seed: u64,
    id_col: Option<String>,
    findings_col: &str,
    impression_col: &str,
    encoder: &str,
    model_dir: Option<PathBuf>,
    device: &str,
    precision: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let format: SourceFormat = format.parse().map_err(corpus_err)?;
    let split: Split = split.parse().map_err(corpus_err)?;
    let spec = match shard {
        Some((index, count)) => Some(
            format!("{index}/{count}")
                .parse::<ShardSpec>()
                .map_err(corpus_err)?,
        ),
        None => None,
    };
    let opts = SourceOptions {
        format,
        columns: Columns {
            id: id_col,
            findings: findings_col.to_string(),
            impression: impression_col.to_string(),
        },
        split,
        sample,
        seed,
    };
    let enc = open_encoder(py, encoder, model_dir, device, precision, false)?.encoder;
    let out_path = out.clone();
    let built = py
        .detach(move || {
            sdr_reward::install(move || -> Result<Built, CorpusError> {
                let full = read_source(&input, &opts)?;
                let (source, info) = match spec {
                    Some(s) => {
                        let (part, info) = shard_source(&full, s)?;
                        (part, Some(info))
                    }
                    None => (full, None),
                };
                let data = build(
                    &source,
                    &SectionEmbedder::unbounded(enc).map_err(CorpusError::from)?,
                    &BuildInfo {
                        source_format: format.name().to_string(),
                        split: split.name().to_string(),
                        sample,
                        seed,
                    },
                    None,
                )?;
                match &info {
                    Some(s) => data.write_shard(&out_path, s)?,
                    None => data.write(&out_path)?,
                }
                Ok(Built {
                    n_reports: data.n_reports(),
                    n_sentences: data.sentences.len(),
                    encoder: data.meta.encoder.clone(),
                    shard: info,
                })
            })
        })
        .map_err(corpus_err)?;
    let d = PyDict::new(py);
    d.set_item("out", out)?;
    d.set_item("n_reports", built.n_reports)?;
    d.set_item("n_sentences", built.n_sentences)?;
    d.set_item("encoder", built.encoder)?;
    match built.shard {
        Some(s) => {
            let sd = PyDict::new(py);
            sd.set_item("index", s.index)?;
            sd.set_item("count", s.count)?;
            sd.set_item("first", s.first)?;
            sd.set_item("total", s.total)?;
            sd.set_item("selection_sha256", s.selection_sha256)?;
            d.set_item("shard", sd)?;
        }
        None => d.set_item("shard", py.None())?,
    }
    Ok(d)
}

/// Merge the shard files of one build into the corpus a single build would
/// write (``sdr corpus merge``). `parts` may come in any order; a missing or
/// repeated shard, a file that is not a shard, or shards of different sources
/// or settings raise ValueError naming the file. Returns ``{"out",
/// "n_reports", "n_sentences"}``. The file is written atomically.
#[pyfunction]
pub(crate) fn merge_corpus<'py>(
    py: Python<'py>,
    parts: Vec<PathBuf>,
    out: PathBuf,
) -> PyResult<Bound<'py, PyDict>> {
    let out_path = out.clone();
    let (n_reports, n_sentences) = py
        .detach(move || -> Result<(usize, usize), CorpusError> {
            let data = merge_files(&parts, None)?;
            data.write(&out_path)?;
            Ok((data.n_reports(), data.sentences.len()))
        })
        .map_err(corpus_err)?;
    let d = PyDict::new(py);
    d.set_item("out", out)?;
    d.set_item("n_reports", n_reports)?;
    d.set_item("n_sentences", n_sentences)?;
    Ok(d)
}
