//! The packed-weights cache: MPNet's weights as [`PackedMpnet`] holds them (dense
//! layers packed for their GEMMs, embeddings), in one file that every process maps
//! read-only, so that N reward workers on a machine share one copy of the pages
//! instead of packing N copies into their own memory (bench/README.md, "worker memory").
//!
//! Where: `$SDR_PACKED_CACHE`, else `${SDR_HOME:-~/.cache/sdr}/packed/`, one file per
//! model folder, precision and GEMM (`<model>-<precision>-<gemm>-<folder hash>.pack`);
//! `SDR_PACKED_CACHE=off` packs in memory. Deleting the folder is always safe: the
//! next load writes the file again (a process that has it mapped keeps its pages).
//! Beside each file, an empty `.lock` file.
//!
//! The file is written once, atomically (`sdr_core::io`, under an exclusive lock so
//! that workers starting together pack it once), and checked on every load: magic,
//! version, length, a checksum of the header and one of the data, and the key, which
//! names everything that changes the packed values (the checkpoint's sha256, size and
//! modification time; config.json's sha256; the precision and the GEMM this build
//! and CPU pick). A file that fails a check is rebuilt; a folder that cannot be
//! written costs one line on stderr and the weights are packed in memory as before.
//! The numbers are the same either way: the file holds the bits a fresh pack makes.
//!
//! Layout (little-endian): `MAGIC`, version u32, header length u32, file length u64,
//! data checksum u64, header checksum u64 (over the header with this field zero), key
//! length u32, meta count u32, blob count u32, 0u32, the key, the meta values (u64),
//! the blobs' (offset, bytes) pairs (u64); zero padding to 64 bytes; then each blob,
//! padded to 64 bytes.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use candle_core::Result;
use memmap2::Mmap;
use sha2::{Digest, Sha256};

use super::mpnet::Config;
use super::packed::PackedMpnet;
use crate::discover::to_hex;
use crate::gemm::{Bf16Gemm, F32Gemm};
use crate::stored::{bytes_of, Stored, Word};

/// Environment variable: the cache folder, or `off` for none.
pub const PACKED_CACHE_ENV: &str = "SDR_PACKED_CACHE";

const MAGIC: &[u8; 8] = b"SDRPACK\0";
/// Bump on any change of the file layout or of a packing (`kernels/avx512_gemm.rs`'s
/// panels, the order in which `PackedMpnet` writes its parts).
const VERSION: u32 = 1;
const ALIGN: usize = 64;
/// Bytes of the fixed part of the header.
const FIXED: usize = 56;

/// The cache folder this process uses: [`PACKED_CACHE_ENV`], else
/// `<sdr_home>/packed`; `None` when turned off or without a home.
pub(crate) fn cache_root() -> Option<PathBuf> {
    match std::env::var_os(PACKED_CACHE_ENV) {
        Some(v) if v == "off" || v == "0" => None,
        Some(v) if !v.is_empty() => Some(PathBuf::from(v)),
        _ => crate::discover::sdr_home().map(|h| h.join("packed")),
    }
}

/// How [`load_or_build`] got the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Mapped from a valid cache file.
    Mapped,
    /// Packed, written to the cache (replacing a stale or damaged file, if any) and
    /// mapped from it.
    Written,
    /// Packed in this process's memory: no cache folder, a layer that cannot be
    /// stored (MKL's opaque packed formats), or the reason the file could not be written.
    InMemory(String),
}

/// Parts of a model in the order they are written, borrowed from it.
#[derive(Default)]
pub(crate) struct PackWriter<'a> {
    meta: Vec<u64>,
    blobs: Vec<&'a [u8]>,
}

impl<'a> PackWriter<'a> {
    pub(crate) fn meta(&mut self, v: u64) {
        self.meta.push(v);
    }

    pub(crate) fn values<T: Word>(&mut self, v: &'a [T]) {
        self.blobs.push(bytes_of(v));
    }

    /// The whole file: header and blobs.
    fn write(&self, key: &str, out: &mut impl Write) -> std::io::Result<()> {
        let table = FIXED + key.len() + 8 * self.meta.len() + 16 * self.blobs.len();
        let header_len = table.next_multiple_of(ALIGN);
        let mut offsets = Vec::with_capacity(self.blobs.len());
        let mut at = header_len;
        let mut data = Checksum::default();
        for b in &self.blobs {
            offsets.push((at as u64, b.len() as u64));
            at += b.len().next_multiple_of(ALIGN);
            data.padded(b);
        }
        let mut h = Vec::with_capacity(header_len);
        h.extend_from_slice(MAGIC);
        h.extend_from_slice(&VERSION.to_le_bytes());
        h.extend_from_slice(&(header_len as u32).to_le_bytes());
        h.extend_from_slice(&(at as u64).to_le_bytes());
        h.extend_from_slice(&data.finish().to_le_bytes());
        h.extend_from_slice(&0u64.to_le_bytes()); // the header checksum, below
        for n in [key.len(), self.meta.len(), self.blobs.len(), 0] {
            h.extend_from_slice(&(n as u32).to_le_bytes());
        }
        h.extend_from_slice(key.as_bytes());
        self.meta
            .iter()
            .for_each(|m| h.extend_from_slice(&m.to_le_bytes()));
        for (o, l) in offsets {
            h.extend_from_slice(&o.to_le_bytes());
            h.extend_from_slice(&l.to_le_bytes());
        }
        h.resize(header_len, 0);
        let mut sum = Checksum::default();
        sum.padded(&h);
        h[32..40].copy_from_slice(&sum.finish().to_le_bytes());
        out.write_all(&h)?;
        let zeros = [0u8; ALIGN];
        for b in &self.blobs {
            out.write_all(b)?;
            out.write_all(&zeros[..b.len().next_multiple_of(ALIGN) - b.len()])?;
        }
        Ok(())
    }
}

/// A checked cache file, handing out its parts in the order they were written.
pub(crate) struct PackReader {
    map: Arc<Mmap>,
    meta: std::vec::IntoIter<u64>,
    blobs: std::vec::IntoIter<(usize, usize)>,
}

/// Why a cache file is not used.
enum Unusable {
    /// No file (or it cannot be opened): build it, silently.
    Missing,
    /// Written for other weights, config or GEMM: rebuild it, silently.
    Stale,
    /// Truncated or damaged: rebuild it, with a line on stderr.
    Damaged(String),
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

impl PackReader {
    /// Maps `path` and checks it (see the module docs) against `key`.
    fn open(path: &Path, key: &str) -> std::result::Result<Self, Unusable> {
        let file = File::open(path).map_err(|_| Unusable::Missing)?;
        let damaged = |why: &str| Unusable::Damaged(why.to_string());
        // SAFETY: a read-only mapping of a file that is only ever replaced by rename,
        // never written in place; every value read from it is checked below.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| Unusable::Damaged(e.to_string()))?;
        let b: &[u8] = &map;
        if b.len() < FIXED || &b[..8] != MAGIC {
            return Err(damaged("not a packed-weights file (too short or no magic)"));
        }
        if u32_at(b, 8) != VERSION {
            return Err(Unusable::Stale);
        }
        let header_len = u32_at(b, 12) as usize;
        if u64_at(b, 16) != b.len() as u64 {
            return Err(Unusable::Damaged(format!(
                "{} bytes where the header says {}",
                b.len(),
                u64_at(b, 16)
            )));
        }
        if header_len < FIXED || header_len > b.len() || !header_len.is_multiple_of(ALIGN) {
            return Err(damaged("bad header length"));
        }
        let mut header = b[..header_len].to_vec();
        header[32..40].fill(0);
        let mut sum = Checksum::default();
        sum.padded(&header);
        if sum.finish() != u64_at(b, 32) {
            return Err(damaged("header checksum mismatch"));
        }
        let (key_len, n_meta, n_blobs) = (
            u32_at(b, 40) as usize,
            u32_at(b, 44) as usize,
            u32_at(b, 48) as usize,
        );
        let table = FIXED + key_len + 8 * n_meta + 16 * n_blobs;
        if table > header_len {
            return Err(damaged("header table overruns the header"));
        }
        if &b[FIXED..FIXED + key_len] != key.as_bytes() {
            return Err(Unusable::Stale);
        }
        let mut at = FIXED + key_len;
        let meta: Vec<u64> = (0..n_meta).map(|i| u64_at(b, at + 8 * i)).collect();
        at += 8 * n_meta;
        let mut blobs = Vec::with_capacity(n_blobs);
        for i in 0..n_blobs {
            let (o, l) = (u64_at(b, at + 16 * i), u64_at(b, at + 16 * i + 8));
            let end = o.checked_add(l).filter(|&e| e <= b.len() as u64);
            if o < header_len as u64 || end.is_none() {
                return Err(damaged("a part lies outside the file"));
            }
            blobs.push((o as usize, l as usize));
        }
        let mut data = Checksum::default();
        data.padded(&b[header_len..]);
        if data.finish() != u64_at(b, 24) {
            return Err(damaged("data checksum mismatch"));
        }
        Ok(PackReader {
            map: Arc::new(map),
            meta: meta.into_iter(),
            blobs: blobs.into_iter(),
        })
    }

    pub(crate) fn meta(&mut self) -> Result<u64> {
        self.meta
            .next()
            .ok_or_else(|| candle_core::Error::Msg("packed-weights file: too few values".into()))
    }

    /// The next part, read in place from the mapping.
    pub(crate) fn values<T: Word>(&mut self) -> Result<Stored<T>> {
        let (start, bytes) = self
            .blobs
            .next()
            .ok_or_else(|| candle_core::Error::Msg("packed-weights file: too few parts".into()))?;
        let size = std::mem::size_of::<T>();
        if !bytes.is_multiple_of(size) {
            candle_core::bail!("packed-weights file: a part of {bytes} bytes")
        }
        Stored::mapped(&self.map, start, bytes / size)
            .ok_or_else(|| candle_core::Error::Msg("packed-weights file: misplaced part".into()))
    }

    /// The next part, copied and checked to hold `len` values (small parts: norms,
    /// biases).
    pub(crate) fn vec<T: Word>(&mut self, len: usize) -> Result<Vec<T>> {
        let v = self.values::<T>()?;
        if v.len() != len {
            candle_core::bail!(
                "packed-weights file: a part of {} values, expected {len}",
                v.len()
            )
        }
        Ok(v.to_vec())
    }

    /// Checks that every part was read.
    pub(crate) fn finish(mut self) -> Result<()> {
        if self.meta.next().is_some() || self.blobs.next().is_some() {
            candle_core::bail!("packed-weights file: parts left unread")
        }
        Ok(())
    }
}

/// A 64-bit checksum over 64-byte chunks (a last partial chunk zero-padded), eight
/// independent lanes of `(h ^ w) · φ` rotated: each step is a bijection of the lane,
/// so any single changed word changes the sum; several GB/s, so checking the whole
/// file on every load costs a few tens of milliseconds.
struct Checksum {
    lanes: [u64; 8],
    len: u64,
}

impl Default for Checksum {
    fn default() -> Self {
        Checksum {
            lanes: std::array::from_fn(|i| i as u64 + 1),
            len: 0,
        }
    }
}

const PHI: u64 = 0x9E37_79B9_7F4A_7C15;

impl Checksum {
    fn chunk(&mut self, c: &[u8]) {
        for (lane, w) in self.lanes.iter_mut().zip(c.chunks_exact(8)) {
            let w = u64::from_le_bytes(w.try_into().expect("8 bytes"));
            *lane = (*lane ^ w).wrapping_mul(PHI).rotate_left(29);
        }
    }

    /// Adds `bytes` followed by zeros up to a multiple of 64.
    fn padded(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(ALIGN);
        for c in chunks.by_ref() {
            self.chunk(c);
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; ALIGN];
            last[..rest.len()].copy_from_slice(rest);
            self.chunk(&last);
        }
        self.len += bytes.len().next_multiple_of(ALIGN) as u64;
    }

    fn finish(&self) -> u64 {
        let h = self
            .lanes
            .iter()
            .fold(self.len, |h, &l| (h ^ l).wrapping_mul(PHI).rotate_left(31));
        h ^ (h >> 32)
    }
}

/// sha256 (hex) of a small file.
fn file_sha256(path: &Path) -> std::io::Result<String> {
    Ok(to_hex(&Sha256::digest(std::fs::read(path)?)))
}

/// The cache file of the model in `model_dir` under `root`, and its key.
fn file_and_key(
    root: &Path,
    model_dir: &Path,
    mixed_bf16: bool,
) -> std::io::Result<(PathBuf, String)> {
    let weights = model_dir.join("model.safetensors");
    let meta = std::fs::metadata(&weights)?;
    let mtime = meta
        .modified()?
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let sha = crate::discover::weights_sha256(model_dir).map_err(std::io::Error::other)?;
    let config = file_sha256(&model_dir.join("config.json"))?;
    // The GEMM decides the packing; the build does not otherwise (an MKL build's
    // AVX-512 layers are packed as any build's, and its MKL layers are not stored), so
    // the `sdr` binary and the Python wheel share one file.
    let (precision, gemm) = if mixed_bf16 {
        let gemm = Bf16Gemm::here().map_or("None".into(), |g| format!("{g:?}"));
        ("bf16", gemm)
    } else {
        ("f32", format!("{:?}", F32Gemm::here()))
    };
    let features = crate::kernels::avx512_gemm::features();
    let key = format!(
        "sdr packed mpnet v{VERSION}\nweights sha256 {sha} bytes {} mtime {mtime}\n\
         config sha256 {config}\nprecision {precision} gemm {gemm}\n\
         cpu {features} arch {} endian little\n",
        meta.len(),
        std::env::consts::ARCH,
    );
    let folder = std::fs::canonicalize(model_dir).unwrap_or_else(|_| model_dir.to_path_buf());
    let folder_hash = to_hex(&Sha256::digest(folder.to_string_lossy().as_bytes()));
    let name: String = model_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let gemm: String = gemm
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect::<String>()
        .to_ascii_lowercase();
    let file = format!("{name}-{precision}-{gemm}-{}.pack", &folder_hash[..12]);
    Ok((root.join(file), key))
}

/// One line on stderr, once per process: the cache is a speed and memory matter,
/// never an error.
fn note(line: String) {
    use std::sync::atomic::{AtomicBool, Ordering};
    static SAID: AtomicBool = AtomicBool::new(false);
    if !SAID.swap(true, Ordering::Relaxed) {
        eprintln!("sdr: {line}");
    }
}

/// The model in `model_dir` from its cache file under `root`, or `build`'s, written
/// to the cache and mapped from there (see the module docs). Fails only where
/// `build` (or reading the model folder) fails.
pub(crate) fn load_or_build(
    root: Option<&Path>,
    model_dir: &Path,
    cfg: &Config,
    mixed_bf16: bool,
    build: impl FnOnce() -> Result<PackedMpnet>,
) -> Result<(PackedMpnet, Outcome)> {
    if cfg!(not(target_endian = "little")) {
        return Ok((build()?, Outcome::InMemory("big-endian machine".into())));
    }
    let Some(root) = root else {
        return Ok((build()?, Outcome::InMemory("no cache folder".into())));
    };
    let (path, key) = match file_and_key(root, model_dir, mixed_bf16) {
        Ok(p) => p,
        Err(e) => {
            let why = format!("packed-weights cache: {}: {e}", model_dir.display());
            note(format!("{why}; packing in memory"));
            return Ok((build()?, Outcome::InMemory(why)));
        }
    };
    let open = |path: &Path| -> std::result::Result<PackedMpnet, Unusable> {
        let mut r = PackReader::open(path, &key)?;
        let model = PackedMpnet::read_from(&mut r, cfg, mixed_bf16)
            .and_then(|m| r.finish().map(|()| m))
            .map_err(|e| Unusable::Damaged(e.to_string()))?;
        Ok(model)
    };
    let mut damaged = match open(&path) {
        Ok(m) => return Ok((m, Outcome::Mapped)),
        Err(Unusable::Damaged(why)) => Some(why),
        Err(_) => None,
    };
    // One process packs while the others wait for its file (verl starts 8 workers at
    // once); without a lock (a read-only folder) each packs for itself.
    let lock = std::fs::create_dir_all(root)
        .and_then(|()| {
            File::options()
                .create(true)
                .truncate(false)
                .write(true)
                .open(path.with_extension("lock"))
        })
        .and_then(|f| f.lock().map(|()| f));
    if lock.is_ok() {
        match open(&path) {
            Ok(m) => return Ok((m, Outcome::Mapped)),
            Err(Unusable::Damaged(why)) => damaged = Some(why),
            Err(_) => damaged = None,
        }
    }
    if let Some(why) = &damaged {
        note(format!(
            "packed-weights cache {}: {why}; rebuilding it",
            path.display()
        ));
    }
    let model = build()?;
    let mut parts = PackWriter::default();
    if !model.write_to(&mut parts) {
        return Ok((
            model,
            Outcome::InMemory("a layer's GEMM packs opaquely".into()),
        ));
    }
    let written = sdr_core::io::write_atomic(&path, |f| parts.write(&key, f));
    drop(lock);
    if let Err(e) = written {
        let why = format!(
            "cannot write the packed-weights cache {}: {e}",
            path.display()
        );
        note(format!("{why}; packing in memory"));
        return Ok((model, Outcome::InMemory(why)));
    }
    match open(&path) {
        Ok(mapped) => Ok((mapped, Outcome::Written)),
        // Replaced in between by a process of other settings, say: keep this one.
        Err(_) => Ok((
            model,
            Outcome::InMemory("the file just written did not check".into()),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::packed::tests::{sequences, tiny_tensors};
    use crate::models::packed::Weights;
    use candle_core::safetensors::MmapedSafetensors;

    /// A model folder of the tiny random MPNet (config.json, model.safetensors).
    fn tiny_folder() -> (tempfile::TempDir, Config) {
        let (cfg, t) = tiny_tensors("gelu", 64, 4);
        let dir = tempfile::tempdir().unwrap();
        candle_core::safetensors::save(&t, dir.path().join("model.safetensors")).unwrap();
        let config = serde_json::json!({
            "model_type": "mpnet",
            "vocab_size": cfg.vocab_size,
            "hidden_size": cfg.hidden_size,
            "num_hidden_layers": cfg.num_hidden_layers,
            "num_attention_heads": cfg.num_attention_heads,
            "intermediate_size": cfg.intermediate_size,
            "hidden_act": cfg.hidden_act,
            "max_position_embeddings": cfg.max_position_embeddings,
            "layer_norm_eps": cfg.layer_norm_eps,
            "pad_token_id": cfg.pad_token_id,
            "relative_attention_num_buckets": cfg.relative_attention_num_buckets,
        });
        std::fs::write(dir.path().join("config.json"), config.to_string()).unwrap();
        (dir, cfg)
    }

    /// The precisions this CPU runs the packed MPNet at.
    fn precisions() -> Vec<bool> {
        let mut p = vec![false];
        if Bf16Gemm::here().is_some() {
            p.push(true);
        }
        p
    }

    struct Case {
        folder: tempfile::TempDir,
        cfg: Config,
        mixed: bool,
        want: Vec<f32>,
    }

    impl Case {
        fn new(mixed: bool) -> Case {
            let (folder, cfg) = tiny_folder();
            let want = Case::output(&Case::pack(folder.path(), &cfg, mixed).unwrap());
            Case {
                folder,
                cfg,
                mixed,
                want,
            }
        }

        fn pack(dir: &Path, cfg: &Config, mixed: bool) -> Result<PackedMpnet> {
            // SAFETY: a file of this test, not written while mapped.
            let st = unsafe { MmapedSafetensors::new(dir.join("model.safetensors")) }?;
            let model = PackedMpnet::load(&Weights::Mapped(&st), cfg, mixed)?;
            Ok(model)
        }

        fn output(m: &PackedMpnet) -> Vec<f32> {
            let seqs = sequences(37);
            let refs: Vec<&[u32]> = seqs.iter().map(|s| s.as_slice()).collect();
            let mut out = m.forward(&refs, false).unwrap();
            out.extend(m.pooled(&refs, true).unwrap());
            out
        }

        /// Loads through the cache under `root`, checks the numbers, and says how.
        fn load(&self, root: &Path) -> (Outcome, bool) {
            let dir = self.folder.path();
            let (m, how) = load_or_build(Some(root), dir, &self.cfg, self.mixed, || {
                Case::pack(dir, &self.cfg, self.mixed)
            })
            .unwrap();
            assert_eq!(Case::output(&m), self.want, "mixed bf16 {}", self.mixed);
            (how, m.is_mapped())
        }

        fn file(&self, root: &Path) -> PathBuf {
            file_and_key(root, self.folder.path(), self.mixed)
                .unwrap()
                .0
        }
    }

    #[test]
    fn the_mapped_cache_gives_the_bits_of_a_fresh_pack() {
        for mixed in precisions() {
            let case = Case::new(mixed);
            let root = tempfile::tempdir().unwrap();
            assert_eq!(case.load(root.path()), (Outcome::Written, true));
            assert_eq!(case.load(root.path()), (Outcome::Mapped, true));
            // A hit does not pack.
            let (_, how) = load_or_build(
                Some(root.path()),
                case.folder.path(),
                &case.cfg,
                mixed,
                || candle_core::bail!("packed although the file was valid"),
            )
            .unwrap();
            assert_eq!(how, Outcome::Mapped);
            // f32 and bf16 files live side by side.
            let names = std::fs::read_dir(root.path()).unwrap().count();
            assert_eq!(names, 2, "the .pack file and its .lock");
        }
    }

    #[test]
    fn a_truncated_or_damaged_file_is_rebuilt() {
        for mixed in precisions() {
            let case = Case::new(mixed);
            let root = tempfile::tempdir().unwrap();
            assert_eq!(case.load(root.path()).0, Outcome::Written);
            let path = case.file(root.path());
            let good = std::fs::read(&path).unwrap();
            type Hurt = fn(&mut Vec<u8>);
            let damage: [(&str, Hurt); 5] = [
                ("truncated", |b| b.truncate(b.len() / 2)),
                ("header only", |b| b.truncate(FIXED)),
                ("empty", |b| b.clear()),
                ("a flipped weight bit", |b| *b.last_mut().unwrap() ^= 1),
                ("a flipped header bit", |b| b[FIXED] ^= 4),
            ];
            for (what, hurt) in damage {
                let mut bad = good.clone();
                hurt(&mut bad);
                // Written in place here on purpose (SDR itself only renames).
                std::fs::write(&path, &bad).unwrap();
                assert_eq!(case.load(root.path()), (Outcome::Written, true), "{what}");
                assert_eq!(std::fs::read(&path).unwrap(), good, "{what}");
            }
        }
    }

    #[test]
    fn changed_weights_or_config_make_a_new_file() {
        let case = Case::new(false);
        let root = tempfile::tempdir().unwrap();
        assert_eq!(case.load(root.path()).0, Outcome::Written);
        let before = std::fs::read(case.file(root.path())).unwrap();
        // Same numbers, another config.json: another key, the file rewritten.
        let config = case.folder.path().join("config.json");
        let text = std::fs::read_to_string(&config).unwrap();
        std::fs::write(&config, format!("{text}\n")).unwrap();
        assert_eq!(case.load(root.path()).0, Outcome::Written);
        let after = std::fs::read(case.file(root.path())).unwrap();
        assert_ne!(before, after);
        assert_eq!(case.load(root.path()).0, Outcome::Mapped);
    }

    #[test]
    fn an_unwritable_folder_packs_in_memory() {
        for mixed in precisions() {
            let case = Case::new(mixed);
            let dir = tempfile::tempdir().unwrap();
            // Below a regular file: no folder can be made there, even as root.
            let file = dir.path().join("a-file");
            std::fs::write(&file, b"").unwrap();
            let (how, mapped) = case.load(&file.join("packed"));
            assert!(matches!(how, Outcome::InMemory(_)), "{how:?}");
            assert!(!mapped);
        }
        // No cache folder at all.
        let case = Case::new(false);
        let dir = case.folder.path();
        let (m, how) = load_or_build(None, dir, &case.cfg, false, || {
            Case::pack(dir, &case.cfg, false)
        })
        .unwrap();
        assert!(matches!(how, Outcome::InMemory(_)));
        assert_eq!(Case::output(&m), case.want);
    }

    #[test]
    fn checksum_sees_every_word_and_padding() {
        let sum = |b: &[u8]| {
            let mut c = Checksum::default();
            c.padded(b);
            c.finish()
        };
        let base: Vec<u8> = (0..200u32).map(|i| (i * 7) as u8).collect();
        let h = sum(&base);
        for at in [0, 63, 64, 130, 199] {
            let mut b = base.clone();
            b[at] ^= 0x80;
            assert_ne!(sum(&b), h, "byte {at}");
        }
        // The zero padding of a last partial chunk is what the file holds.
        let mut padded = base.clone();
        padded.resize(256, 0);
        assert_eq!(sum(&padded), h);
    }
}
