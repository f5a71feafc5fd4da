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
//! The file is written once, atomically (`sdr_io`, under an exclusive lock so
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
use std::path::{Path, PathBuf};

use candle_core::Result;
use sha2::{Digest, Sha256};

use super::mpnet::Config;
use super::pack_format::{PackReader, PackWriter, Unusable, VERSION};
use super::packed::PackedMpnet;
use crate::discover::to_hex;
use crate::gemm::{Bf16Gemm, F32Gemm};

/// Environment variable: the cache folder, or `off` for none.
pub const PACKED_CACHE_ENV: &str = "SDR_PACKED_CACHE";

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
    let written = sdr_io::write_atomic(&path, |f| parts.write(&key, f));
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
    use crate::models::pack_format::{Checksum, FIXED};
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
