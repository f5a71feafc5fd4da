//! The corpus file: one `.safetensors` file, written atomically, read through
//! a memory map.
//!
//! Tensors (little-endian, the safetensors convention):
//!
//! | key | dtype | shape | meaning |
//! |---|---|---|---|
//! | `embeddings` | F32 | `[S, D]` | one row per distinct sentence text (both sections share the table) |
//! | `sentences.bytes`, `sentences.offsets` | U8 `[..]`, I64 `[S+1]` | | UTF-8 text of sentence `s` is `bytes[offsets[s]..offsets[s+1]]` |
//! | `findings.offsets`, `findings.indices` | I64 `[N+1]`, U32 `[..]` | | rows of report `t`'s Findings: `indices[offsets[t]..offsets[t+1]]` (empty when the report has none) |
//! | `impression.offsets`, `impression.indices` | I64 `[N+1]`, U32 `[..]` | | the same for Impression |
//! | `report_ids.bytes`, `report_ids.offsets` | U8 `[..]`, I64 `[N+1]` | | report ids, as sentences |
//!
//! Metadata (string → string): `format` = `sdr-corpus`, `format_version` =
//! `2`, `encoder`, `encoder_sha256`, `dim`, `segmenter_version`, `source`,
//! `source_format`, `source_sha256`, `split`, `sample`, `seed`, `n_reports`,
//! `n_sentences`, `content_sha256` (sha256 over every tensor's name, dtype,
//! shape and bytes in key order: detects corruption of the data) and
//! `meta_sha256` (sha256 over every other metadata key and value,
//! `content_sha256` included, in key order, each as its byte length (u64
//! little-endian) then its UTF-8 bytes: detects corruption or hand edits of
//! the header, so the two checksums together cover the whole file). A shard
//! (`sdr corpus build --shard I/N`) adds `shard_index`, `shard_count`,
//! `shard_first`, `shard_total` and `selection_sha256` ([`crate::shard`]).
//!
//! Opening checks `format`, then `format_version` (version 1, without
//! `meta_sha256`, is refused with a request to rebuild), then `meta_sha256`,
//! before it reads any other metadata value.

use std::collections::HashMap;
use std::fs::File;
use std::ops::Range;
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use safetensors::tensor::{Dtype, SafeTensors, TensorView};
use sha2::{Digest, Sha256};

use crate::error::{CorpusError, Result};
use crate::shard_meta::ShardInfo;

pub const FORMAT: &str = "sdr-corpus";
/// Version 2: `meta_sha256` covers the header metadata (version 1 had only
/// `content_sha256`, over the tensors).
pub const FORMAT_VERSION: &str = "2";
/// The metadata key of the header checksum ([`meta_hash`]).
pub const META_SHA256: &str = "meta_sha256";

#[cfg(target_endian = "big")]
compile_error!(
    "the corpus file is little-endian and is read in place: big-endian hosts are not supported"
);

pub use sdr_core::report::Section;

/// Descriptive metadata of a corpus (what it was built from and with).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CorpusMeta {
    pub encoder: String,
    pub encoder_sha256: String,
    pub dim: usize,
    pub segmenter_version: String,
    pub source: String,
    pub source_format: String,
    pub source_sha256: String,
    /// `train`, `validation`, `test` or `all`.
    pub split: String,
    /// Requested sample size (`all` when not sampled).
    pub sample: String,
    pub seed: u64,
}

/// Per-report sentence rows of one section, CSR layout.
#[derive(Debug, Clone, Copy)]
pub struct SectionIndex<'a> {
    pub offsets: &'a [i64],
    pub indices: &'a [u32],
}

impl<'a> SectionIndex<'a> {
    /// Rows (into the embedding table) of report `t`'s section; empty when absent.
    pub fn rows(&self, t: usize) -> &'a [u32] {
        &self.indices[self.offsets[t] as usize..self.offsets[t + 1] as usize]
    }
    pub fn n_reports(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }
}

/// Borrowed view of a corpus, in memory or mapped: what scoring needs.
#[derive(Debug, Clone, Copy)]
pub struct CorpusView<'a> {
    pub dim: usize,
    /// `S x dim`, row-major.
    pub embeddings: &'a [f32],
    pub findings: SectionIndex<'a>,
    pub impression: SectionIndex<'a>,
}

impl<'a> CorpusView<'a> {
    pub fn section(&self, s: Section) -> SectionIndex<'a> {
        match s {
            Section::Findings => self.findings,
            Section::Impression => self.impression,
        }
    }
    pub fn n_reports(&self) -> usize {
        self.findings.n_reports()
    }
    pub fn n_sentences(&self) -> usize {
        self.embeddings.len() / self.dim.max(1)
    }
}

/// A corpus held in memory (as built, before writing).
#[derive(Debug, Clone)]
pub struct CorpusData {
    pub meta: CorpusMeta,
    pub embeddings: Vec<f32>,
    pub sentences: Vec<String>,
    pub ids: Vec<String>,
    pub findings_offsets: Vec<i64>,
    pub findings_indices: Vec<u32>,
    pub impression_offsets: Vec<i64>,
    pub impression_indices: Vec<u32>,
}

fn strings_to_csr(items: &[String]) -> (Vec<u8>, Vec<i64>) {
    let mut bytes = Vec::new();
    let mut offsets = Vec::with_capacity(items.len() + 1);
    offsets.push(0i64);
    for s in items {
        bytes.extend_from_slice(s.as_bytes());
        offsets.push(bytes.len() as i64);
    }
    (bytes, offsets)
}

fn le_bytes<T: Copy>(v: &[T]) -> &[u8] {
    // SAFETY: plain-old-data slices (f32, i64, u32) reinterpreted as bytes;
    // the host is little-endian (checked at compile time above).
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
}

fn dtype_name(d: Dtype) -> String {
    format!("{d:?}")
}

/// sha256 over `(name, dtype, shape, bytes)` of every tensor, names in sorted order.
fn content_hash<'b>(mut tensors: Vec<(&'b str, Dtype, Vec<usize>, &'b [u8])>) -> String {
    tensors.sort_by(|a, b| a.0.cmp(b.0));
    let mut h = Sha256::new();
    for (name, dtype, shape, bytes) in tensors {
        h.update(name.as_bytes());
        h.update([0]);
        h.update(dtype_name(dtype).as_bytes());
        h.update([0]);
        for d in shape {
            h.update((d as u64).to_le_bytes());
        }
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    }
    hex(&h.finalize())
}

/// sha256 over every metadata key and value except [`META_SHA256`] itself,
/// keys in byte order, each key and value as its length in bytes (u64
/// little-endian) followed by its UTF-8 bytes. The length prefixes make the
/// encoding injective: two different maps never hash the same bytes.
pub fn meta_hash(meta: &HashMap<String, String>) -> String {
    let mut entries: Vec<(&String, &String)> =
        meta.iter().filter(|(k, _)| *k != META_SHA256).collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    let mut h = Sha256::new();
    for (k, v) in entries {
        for s in [k, v] {
            h.update((s.len() as u64).to_le_bytes());
            h.update(s.as_bytes());
        }
    }
    hex(&h.finalize())
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl CorpusData {
    pub fn n_reports(&self) -> usize {
        self.ids.len()
    }

    pub fn view(&self) -> CorpusView<'_> {
        CorpusView {
            dim: self.meta.dim,
            embeddings: &self.embeddings,
            findings: SectionIndex {
                offsets: &self.findings_offsets,
                indices: &self.findings_indices,
            },
            impression: SectionIndex {
                offsets: &self.impression_offsets,
                indices: &self.impression_indices,
            },
        }
    }

    /// Writes the corpus to `path` atomically: a temporary file beside it,
    /// then a rename, so a reader never sees a partial file.
    pub fn write(&self, path: &Path) -> Result<()> {
        self.write_meta(path, None)
    }

    /// Writes a shard of a build: the corpus of its reports plus the metadata
    /// that lets [`crate::shard::merge_corpora`] check and order it.
    pub fn write_shard(&self, path: &Path, shard: &ShardInfo) -> Result<()> {
        self.write_meta(path, Some(shard))
    }

    fn write_meta(&self, path: &Path, shard: Option<&ShardInfo>) -> Result<()> {
        let n = self.n_reports();
        let s = self.sentences.len();
        let d = self.meta.dim;
        if self.embeddings.len() != s * d {
            return Err(CorpusError::bad(
                path,
                format!(
                    "refusing to write: {} embedding values for {s} sentences of dimension {d}",
                    self.embeddings.len()
                ),
            ));
        }
        let (sent_bytes, sent_offsets) = strings_to_csr(&self.sentences);
        let (id_bytes, id_offsets) = strings_to_csr(&self.ids);
        let tensors: Vec<(&str, Dtype, Vec<usize>, &[u8])> = vec![
            (
                "embeddings",
                Dtype::F32,
                vec![s, d],
                le_bytes(&self.embeddings),
            ),
            (
                "sentences.bytes",
                Dtype::U8,
                vec![sent_bytes.len()],
                &sent_bytes,
            ),
            (
                "sentences.offsets",
                Dtype::I64,
                vec![s + 1],
                le_bytes(&sent_offsets),
            ),
            (
                "findings.offsets",
                Dtype::I64,
                vec![n + 1],
                le_bytes(&self.findings_offsets),
            ),
            (
                "findings.indices",
                Dtype::U32,
                vec![self.findings_indices.len()],
                le_bytes(&self.findings_indices),
            ),
            (
                "impression.offsets",
                Dtype::I64,
                vec![n + 1],
                le_bytes(&self.impression_offsets),
            ),
            (
                "impression.indices",
                Dtype::U32,
                vec![self.impression_indices.len()],
                le_bytes(&self.impression_indices),
            ),
            (
                "report_ids.bytes",
                Dtype::U8,
                vec![id_bytes.len()],
                &id_bytes,
            ),
            (
                "report_ids.offsets",
                Dtype::I64,
                vec![n + 1],
                le_bytes(&id_offsets),
            ),
        ];
        let m = &self.meta;
        let mut meta: HashMap<String, String> = HashMap::new();
        for (k, v) in [
            ("format", FORMAT.to_string()),
            ("format_version", FORMAT_VERSION.to_string()),
            ("encoder", m.encoder.clone()),
            ("encoder_sha256", m.encoder_sha256.clone()),
            ("dim", d.to_string()),
            ("segmenter_version", m.segmenter_version.clone()),
            ("source", m.source.clone()),
            ("source_format", m.source_format.clone()),
            ("source_sha256", m.source_sha256.clone()),
            ("split", m.split.clone()),
            ("sample", m.sample.clone()),
            ("seed", m.seed.to_string()),
            ("n_reports", n.to_string()),
            ("n_sentences", s.to_string()),
            ("content_sha256", content_hash(tensors.clone())),
        ] {
            meta.insert(k.to_string(), v);
        }
        for (k, v) in shard.map(ShardInfo::to_meta).unwrap_or_default() {
            meta.insert(k.to_string(), v);
        }
        // Last: it covers every other key, shard keys and `content_sha256` included.
        let meta_sha256 = meta_hash(&meta);
        meta.insert(META_SHA256.to_string(), meta_sha256);
        let views = tensors
            .iter()
            .map(|(name, dtype, shape, bytes)| {
                TensorView::new(*dtype, shape.clone(), bytes)
                    .map(|v| (name.to_string(), v))
                    .map_err(|e| CorpusError::bad(path, format!("tensor `{name}`: {e}")))
            })
            .collect::<Result<Vec<_>>>()?;
        // In memory, then one atomic write: safetensors' own file writer
        // renames a 0600 temporary file of its own over the path.
        let bytes = safetensors::serialize(views, Some(meta))
            .map(sorted_metadata)
            .map_err(|e| CorpusError::bad(path, format!("cannot serialise: {e}")))?;
        let written = sdr_io::write_atomic(path, |f| std::io::Write::write_all(f, &bytes));
        written.map_err(|e| CorpusError::io(path, e))
    }
}

/// `bytes`, a safetensors file, with its `__metadata__` keys in sorted order.
///
/// safetensors writes the metadata map in hash order, which differs between
/// processes: the same corpus built twice would differ in bytes (and in sha256).
/// Sorting keeps every key, value and length, so no offset moves; a header not
/// laid out as expected (metadata first, compact JSON) is left as it is.
fn sorted_metadata(mut bytes: Vec<u8>) -> Vec<u8> {
    const PREFIX: &[u8] = b"{\"__metadata__\":";
    let Some(n) = bytes
        .get(..8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
    else {
        return bytes;
    };
    let Some(header) = usize::try_from(n).ok().and_then(|n| bytes.get(8..8 + n)) else {
        return bytes;
    };
    if !header.starts_with(PREFIX) {
        return bytes;
    }
    let Ok(text) = std::str::from_utf8(&header[PREFIX.len()..]) else {
        return bytes;
    };
    // The metadata object is a prefix of `text`; a BTreeMap serialises sorted.
    let mut stream = serde_json::Deserializer::from_str(text)
        .into_iter::<std::collections::BTreeMap<String, String>>();
    let Some(Ok(meta)) = stream.next() else {
        return bytes;
    };
    let end = stream.byte_offset();
    let Ok(sorted) = serde_json::to_string(&meta) else {
        return bytes;
    };
    if sorted.len() != end {
        return bytes;
    }
    let at = 8 + PREFIX.len();
    bytes[at..at + end].copy_from_slice(sorted.as_bytes());
    bytes
}

/// A corpus file mapped into memory, validated on open.
#[derive(Debug)]
pub struct Corpus {
    path: PathBuf,
    map: Mmap,
    meta: CorpusMeta,
    n_reports: usize,
    n_sentences: usize,
    embeddings: Range<usize>,
    sentences_bytes: Range<usize>,
    sentences_offsets: Range<usize>,
    findings_offsets: Range<usize>,
    findings_indices: Range<usize>,
    impression_offsets: Range<usize>,
    impression_indices: Range<usize>,
    ids_bytes: Range<usize>,
    ids_offsets: Range<usize>,
    content_sha256: String,
    meta_sha256: String,
    shard: Option<ShardInfo>,
}

/// Reinterprets a byte range of the map as a typed slice. Ranges were checked
/// for alignment and length at open time.
fn typed<'a, T>(map: &'a [u8], r: &Range<usize>) -> &'a [T] {
    let bytes = &map[r.clone()];
    // SAFETY: alignment and size checked in `Corpus::open` (`check_align`);
    // T is f32, i64 or u32, valid for every bit pattern.
    unsafe {
        std::slice::from_raw_parts(
            bytes.as_ptr() as *const T,
            bytes.len() / std::mem::size_of::<T>(),
        )
    }
}

fn check_offsets(
    path: &Path,
    name: &str,
    offsets: &[i64],
    expected_len: usize,
    end: usize,
) -> Result<()> {
    if offsets.len() != expected_len {
        return Err(CorpusError::bad(
            path,
            format!(
                "`{name}` has {} entries, expected {expected_len}",
                offsets.len()
            ),
        ));
    }
    if offsets.first() != Some(&0) {
        return Err(CorpusError::bad(
            path,
            format!("`{name}` does not start at 0"),
        ));
    }
    if let Some(w) = offsets.windows(2).position(|w| w[1] < w[0]) {
        return Err(CorpusError::bad(
            path,
            format!("`{name}` decreases at entry {}", w + 1),
        ));
    }
    if offsets.last().copied() != Some(end as i64) {
        return Err(CorpusError::bad(
            path,
            format!(
                "`{name}` ends at {}, but its data holds {end} entries",
                offsets.last().copied().unwrap_or(0)
            ),
        ));
    }
    Ok(())
}

impl Corpus {
    /// Maps and validates `path`: header, format version, the metadata
    /// checksum, tensor names, dtypes and shapes, offsets, indices, UTF-8 of
    /// the texts and the content checksum. Every fault is one
    /// [`CorpusError::BadCorpus`] naming the file.
    pub fn open(path: &Path) -> Result<Corpus> {
        let file = File::open(path).map_err(|e| CorpusError::io(path, e))?;
        // A folder opens, but does not map ("No such device").
        if file.metadata().is_ok_and(|m| m.is_dir()) {
            return Err(CorpusError::bad(path, "a folder, not a corpus file"));
        }
        // SAFETY: the file is opened read-only; like every memory-mapped
        // reader we rely on it not being truncated while mapped (the writer
        // replaces files by rename, which leaves an open map intact).
        let map = unsafe { Mmap::map(&file) }.map_err(|e| CorpusError::io(path, e))?;
        let bad = |f: String| CorpusError::bad(path, f);
        let (header_len, metadata) = SafeTensors::read_metadata(&map).map_err(|e| {
            bad(format!(
                "not a safetensors file or truncated ({e}; {} bytes)",
                map.len()
            ))
        })?;
        let data_start = 8 + header_len;
        let strings = metadata
            .metadata()
            .clone()
            .ok_or_else(|| bad("no metadata in the header".into()))?;
        let get = |k: &str| -> Result<String> {
            strings
                .get(k)
                .cloned()
                .ok_or_else(|| CorpusError::bad(path, format!("metadata key `{k}` missing")))
        };
        let format = strings.get("format").cloned().unwrap_or_default();
        if format != FORMAT {
            return Err(bad(format!(
                "metadata `format` is `{format}`, expected `{FORMAT}` (a safetensors file, but not a corpus)"
            )));
        }
        let version = get("format_version")?;
        if version != FORMAT_VERSION {
            let older = version
                .parse::<u32>()
                .ok()
                .zip(FORMAT_VERSION.parse::<u32>().ok())
                .is_some_and(|(v, current)| v < current);
            return Err(bad(if older {
                format!(
                    "format version {version} is no longer read (this build reads version \
                     {FORMAT_VERSION}, whose checksum covers the metadata too); rebuild it \
                     with `sdr corpus build`"
                )
            } else {
                format!("format version {version}; this build reads version {FORMAT_VERSION}")
            }));
        }
        // The header checksum before any other value is read: a corrupted or
        // edited value is reported as such, not as whatever it breaks.
        let recorded = get(META_SHA256)?;
        if meta_hash(&strings) != recorded {
            return Err(bad(
                "metadata checksum mismatch (the file's header was corrupted or edited)".into(),
            ));
        }
        let num = |k: &str| -> Result<usize> {
            let v = get(k)?;
            v.parse().map_err(|_| {
                CorpusError::bad(path, format!("metadata `{k}` = `{v}` is not a count"))
            })
        };
        let dim = num("dim")?;
        let n_reports = num("n_reports")?;
        let n_sentences = num("n_sentences")?;
        let seed_text = get("seed")?;
        let meta = CorpusMeta {
            encoder: get("encoder")?,
            encoder_sha256: get("encoder_sha256")?,
            dim,
            segmenter_version: get("segmenter_version")?,
            source: get("source")?,
            source_format: get("source_format")?,
            source_sha256: get("source_sha256")?,
            split: get("split")?,
            sample: get("sample")?,
            seed: seed_text
                .parse()
                .map_err(|_| bad(format!("metadata `seed` = `{seed_text}` is not a number")))?,
        };
        let content_sha256 = get("content_sha256")?;
        let shard = ShardInfo::from_meta(path, &strings)?;
        if dim == 0 {
            return Err(bad("metadata `dim` is 0".into()));
        }
        let infos = metadata.tensors();
        let tensor =
            |name: &str, dtype: Dtype, shape: Option<Vec<usize>>| -> Result<Range<usize>> {
                let info = infos
                    .get(name)
                    .ok_or_else(|| CorpusError::bad(path, format!("tensor `{name}` missing")))?;
                if info.dtype != dtype {
                    return Err(CorpusError::bad(
                        path,
                        format!("tensor `{name}` is {:?}, expected {dtype:?}", info.dtype),
                    ));
                }
                if let Some(s) = shape {
                    if info.shape != s {
                        return Err(CorpusError::bad(
                            path,
                            format!("tensor `{name}` has shape {:?}, expected {s:?}", info.shape),
                        ));
                    }
                } else if info.shape.len() != 1 {
                    return Err(CorpusError::bad(
                        path,
                        format!(
                            "tensor `{name}` has shape {:?}, expected one axis",
                            info.shape
                        ),
                    ));
                }
                let r = data_start + info.data_offsets.0..data_start + info.data_offsets.1;
                let align = dtype.bitsize() / 8;
                if !(map.as_ptr() as usize + r.start).is_multiple_of(align.max(1)) {
                    return Err(CorpusError::bad(
                        path,
                        format!("tensor `{name}` is not aligned to {align} bytes"),
                    ));
                }
                Ok(r)
            };
        let embeddings = tensor("embeddings", Dtype::F32, Some(vec![n_sentences, dim]))?;
        let sentences_bytes = tensor("sentences.bytes", Dtype::U8, None)?;
        let sentences_offsets =
            tensor("sentences.offsets", Dtype::I64, Some(vec![n_sentences + 1]))?;
        let findings_offsets = tensor("findings.offsets", Dtype::I64, Some(vec![n_reports + 1]))?;
        let findings_indices = tensor("findings.indices", Dtype::U32, None)?;
        let impression_offsets =
            tensor("impression.offsets", Dtype::I64, Some(vec![n_reports + 1]))?;
        let impression_indices = tensor("impression.indices", Dtype::U32, None)?;
        let ids_bytes = tensor("report_ids.bytes", Dtype::U8, None)?;
        let ids_offsets = tensor("report_ids.offsets", Dtype::I64, Some(vec![n_reports + 1]))?;

        let corpus = Corpus {
            path: path.to_path_buf(),
            map,
            meta,
            n_reports,
            n_sentences,
            embeddings,
            sentences_bytes,
            sentences_offsets,
            findings_offsets,
            findings_indices,
            impression_offsets,
            impression_indices,
            ids_bytes,
            ids_offsets,
            content_sha256,
            meta_sha256: recorded,
            shard,
        };
        corpus.validate(&infos)?;
        Ok(corpus)
    }

    fn validate(&self, infos: &HashMap<String, &safetensors::tensor::TensorInfo>) -> Result<()> {
        let p = &self.path;
        let m: &[u8] = &self.map;
        // Checksum first: a flipped byte anywhere in the data is reported as such.
        let data_start = self.embeddings.start - infos["embeddings"].data_offsets.0;
        let tensors: Vec<(&str, Dtype, Vec<usize>, &[u8])> = infos
            .iter()
            .map(|(name, info)| {
                let r = data_start + info.data_offsets.0..data_start + info.data_offsets.1;
                (name.as_str(), info.dtype, info.shape.clone(), &m[r])
            })
            .collect();
        let actual = content_hash(tensors);
        if actual != self.content_sha256 {
            return Err(CorpusError::bad(
                p,
                "content checksum mismatch (the file is corrupt or was modified)",
            ));
        }
        let s = self.n_sentences;
        check_offsets(
            p,
            "sentences.offsets",
            typed(m, &self.sentences_offsets),
            s + 1,
            self.sentences_bytes.len(),
        )?;
        check_offsets(
            p,
            "report_ids.offsets",
            typed(m, &self.ids_offsets),
            self.n_reports + 1,
            self.ids_bytes.len(),
        )?;
        for sec in Section::BOTH {
            let (o, i) = match sec {
                Section::Findings => (&self.findings_offsets, &self.findings_indices),
                Section::Impression => (&self.impression_offsets, &self.impression_indices),
            };
            let name = format!("{}.offsets", sec.key());
            let idx: &[u32] = typed(m, i);
            check_offsets(p, &name, typed(m, o), self.n_reports + 1, idx.len())?;
            if let Some(pos) = idx.iter().position(|&x| x as usize >= s) {
                return Err(CorpusError::bad(
                    p,
                    format!(
                        "`{}.indices` entry {pos} = {} is out of range (0..{s})",
                        sec.key(),
                        idx[pos]
                    ),
                ));
            }
        }
        if std::str::from_utf8(&m[self.sentences_bytes.clone()]).is_err() {
            return Err(CorpusError::bad(p, "`sentences.bytes` is not UTF-8"));
        }
        if std::str::from_utf8(&m[self.ids_bytes.clone()]).is_err() {
            return Err(CorpusError::bad(p, "`report_ids.bytes` is not UTF-8"));
        }
        let dim = self.meta.dim;
        let emb: &[f32] = typed(m, &self.embeddings);
        for (row, v) in emb.chunks_exact(dim).enumerate() {
            if let Some(fault) = sdr_core::cost::row_fault(v) {
                return Err(CorpusError::bad(
                    p,
                    format!("embedding row {row} is {fault}"),
                ));
            }
        }
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn meta(&self) -> &CorpusMeta {
        &self.meta
    }
    /// The file's identity: its `meta_sha256`, which covers every metadata
    /// value and, through `content_sha256`, every tensor (both checked by
    /// [`Corpus::open`]).
    pub fn meta_sha256(&self) -> &str {
        &self.meta_sha256
    }
    pub fn n_reports(&self) -> usize {
        self.n_reports
    }
    /// Where this file sits in a sharded build; `None` for an ordinary corpus.
    pub fn shard(&self) -> Option<&ShardInfo> {
        self.shard.as_ref()
    }
    pub fn n_sentences(&self) -> usize {
        self.n_sentences
    }
    pub fn file_len(&self) -> usize {
        self.map.len()
    }

    pub fn view(&self) -> CorpusView<'_> {
        let m: &[u8] = &self.map;
        CorpusView {
            dim: self.meta.dim,
            embeddings: typed(m, &self.embeddings),
            findings: SectionIndex {
                offsets: typed(m, &self.findings_offsets),
                indices: typed(m, &self.findings_indices),
            },
            impression: SectionIndex {
                offsets: typed(m, &self.impression_offsets),
                indices: typed(m, &self.impression_indices),
            },
        }
    }

    fn text<'a>(&'a self, bytes: &Range<usize>, offsets: &Range<usize>, i: usize) -> &'a str {
        let o: &[i64] = typed(&self.map, offsets);
        let b = &self.map[bytes.clone()];
        // Validated as UTF-8 as a whole at open; boundaries inside a
        // character would make a slice invalid, so fall back to lossless
        // refusal rather than panic.
        std::str::from_utf8(&b[o[i] as usize..o[i + 1] as usize]).unwrap_or("\u{fffd}")
    }

    /// Id of report `t` (`t < n_reports`).
    pub fn id(&self, t: usize) -> &str {
        self.text(&self.ids_bytes, &self.ids_offsets, t)
    }

    /// Text of distinct sentence `s` (`s < n_sentences`).
    pub fn sentence(&self, s: usize) -> &str {
        self.text(&self.sentences_bytes, &self.sentences_offsets, s)
    }

    /// [`Corpus::check_compatible`] with `encoder`, and refuses a corpus whose
    /// vectors have another dimension than the encoder's, which the recorded
    /// name and hash do not rule out (a hash stand-in's header edited by hand).
    pub fn check_encoder(
        &self,
        encoder: &dyn crate::SentenceEncoder,
        segmenter: &str,
    ) -> Result<()> {
        let name = encoder.name();
        self.check_compatible(&name, &encoder.weights_sha256()?, segmenter)?;
        if self.meta.dim != encoder.dim() {
            return Err(CorpusError::DimMismatch {
                path: self.path.clone(),
                encoder: name,
                found: self.meta.dim,
                expected: encoder.dim(),
            });
        }
        Ok(())
    }

    /// Refuses a corpus built with another encoder (name or weights hash), the same
    /// model at another precision (`encoder` is a recorded name,
    /// [`sdr_embed::Encoder::recorded_name`]) or another sentence segmenter than the
    /// ones in use. [`Corpus::check_encoder`] checks the dimension too.
    pub fn check_compatible(
        &self,
        encoder: &str,
        encoder_sha256: &str,
        segmenter: &str,
    ) -> Result<()> {
        let mismatch = |what, found: &str, expected: &str| CorpusError::Mismatch {
            path: self.path.clone(),
            what,
            found: found.to_string(),
            expected: expected.to_string(),
        };
        if self.meta.encoder != encoder {
            let (model, found) = crate::encoder::split_precision(&self.meta.encoder);
            let (in_use, expected) = crate::encoder::split_precision(encoder);
            if model == in_use {
                return Err(CorpusError::PrecisionMismatch {
                    path: self.path.clone(),
                    recorded: self.meta.encoder.clone(),
                    found: found.to_string(),
                    expected: expected.to_string(),
                });
            }
            return Err(mismatch("encoder", &self.meta.encoder, encoder));
        }
        if self.meta.encoder_sha256 != encoder_sha256 {
            return Err(mismatch(
                "encoder weights sha256",
                &self.meta.encoder_sha256,
                encoder_sha256,
            ));
        }
        if self.meta.segmenter_version != segmenter {
            return Err(mismatch(
                "segmenter",
                &self.meta.segmenter_version,
                segmenter,
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{build_corpus, BuildInfo, HashEncoder, SentenceEncoder, Source, SourceReport};
    use sdr_core::report::SEGMENTER_VERSION;

    /// A one-report corpus with these Findings, on the 8-d stand-in encoder.
    fn one_report(findings: &[&str]) -> CorpusData {
        let source = Source {
            name: "r.csv".into(),
            sha256: "0".into(),
            reports: vec![SourceReport {
                id: "1".into(),
                findings: findings.iter().map(|s| s.to_string()).collect(),
                impression: vec!["Normal.".into()],
            }],
            records: 1,
            dropped_empty: 0,
        };
        let info = BuildInfo {
            source_format: "csv".into(),
            split: "all".into(),
            sample: None,
            seed: 0,
        };
        build_corpus(&source, &HashEncoder::new(8), &info, None).unwrap()
    }

    #[test]
    fn a_dimension_unlike_the_encoders_and_a_folder_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut data = one_report(&["Lungs are clear."]);
        let path = dir.path().join("c.safetensors");
        data.write(&path).unwrap();
        let c = Corpus::open(&path).unwrap();
        c.check_encoder(&HashEncoder::new(8), SEGMENTER_VERSION)
            .unwrap();
        // An 8-d corpus whose header names the 16-d stand-in: name and hash
        // match, the vectors do not.
        data.meta.encoder = HashEncoder::new(16).name();
        data.write(&path).unwrap();
        let c = Corpus::open(&path).unwrap();
        let e = c
            .check_encoder(&HashEncoder::new(16), SEGMENTER_VERSION)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("c.safetensors")
                && e.contains("8-dimensional")
                && e.contains("16-dimensional"),
            "{e}"
        );
        let e = Corpus::open(dir.path()).err().unwrap().to_string();
        assert!(e.contains("a folder, not a corpus file"), "{e}");
    }

    #[test]
    fn the_same_corpus_is_the_same_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let data = one_report(&["Lungs are clear.", "No effusion."]);
        // Each write's metadata map has its own hash order: without sorting, 20
        // files of ~17 keys would all agree only by a miracle.
        let files: Vec<Vec<u8>> = (0..20)
            .map(|k| {
                let path = dir.path().join(format!("c{k}.safetensors"));
                data.write(&path).unwrap();
                std::fs::read(&path).unwrap()
            })
            .collect();
        assert!(files.iter().all(|f| f == &files[0]));
        let c = Corpus::open(&dir.path().join("c0.safetensors")).unwrap();
        assert_eq!(c.n_reports(), 1);
        let (_, meta) = SafeTensors::read_metadata(&files[0]).unwrap();
        let mut keys: Vec<&String> = meta.metadata().as_ref().unwrap().keys().collect();
        keys.sort();
        let n = u64::from_le_bytes(files[0][..8].try_into().unwrap()) as usize;
        let header = std::str::from_utf8(&files[0][8..8 + n]).unwrap();
        let at: Vec<usize> = keys
            .iter()
            .map(|k| header.find(&format!("\"{k}\":")).unwrap())
            .collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{header}");
    }

    #[test]
    fn a_header_not_laid_out_as_expected_is_left_as_it_is() {
        for bytes in [
            vec![],
            vec![1, 2, 3],
            b"\x05\0\0\0\0\0\0\0{\"a\":".to_vec(),
            b"\x02\0\0\0\0\0\0\0{}".to_vec(),
        ] {
            assert_eq!(sorted_metadata(bytes.clone()), bytes);
        }
    }
}
