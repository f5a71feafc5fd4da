//! The packed-weights cache: MPNet's weights as [`PackedMpnet`] holds them (dense
//! layers packed for their GEMMs, embeddings), in one file that every process maps
//! read-only, so that N reward workers on a machine share one copy of the pages
//! instead of packing N copies into their own memory (bench/README.md, "worker memory").
//!
//! Where: `$SDR_PACKED_CACHE`, else `${SDR_HOME:-~/.cache/sdr}/packed/`, one file per
//! model folder, precision and GEMM (`<model>-<precision>-<gemm>-<folder hash>.pack`);
//! `SDR_PACKED_CACHE=off` packs in memory. Deleting the folder is always safe: the
//! next load writes the file again (a process that has it mapped keeps its pages).
//! Beside each file, an empty `.lock` file. Each file records the folder it was
//! packed from, so that [`list_packed_cache`] can tell which files no load will use
//! again (folder gone, weights changed, older format) and [`remove_packed_entry`]
//! remove them (`sdr cache list|prune|clear`).
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
//! length u32, meta count u32, blob count u32, folder length u32, the key, the model
//! folder's canonical path (its bytes), the meta values (u64), the blobs' (offset,
//! bytes) pairs (u64); zero padding to 64 bytes; then each blob, padded to 64 bytes.

use std::fs::File;
use std::path::{Path, PathBuf};

use candle_core::Result;
use sha2::{Digest, Sha256};

use super::mpnet::Config;
use super::pack_format::{read_header, Header, PackReader, PackWriter, Unusable, VERSION};
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

/// The cache file of the model in `model_dir` under `root`, its key, and the folder's
/// canonical path (which the file records, for `sdr cache`).
fn file_and_key(
    root: &Path,
    model_dir: &Path,
    mixed_bf16: bool,
) -> std::io::Result<(PathBuf, String, PathBuf)> {
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
    Ok((root.join(file), key, folder))
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
    let (path, key, folder) = match file_and_key(root, model_dir, mixed_bf16) {
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
    let folder = folder.as_os_str().as_encoded_bytes();
    let written = sdr_io::write_atomic(&path, |f| parts.write(&key, folder, f));
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

/// The folder the loader uses: [`PACKED_CACHE_ENV`], else `<sdr_home>/packed`;
/// `None` when the cache is off or there is no home folder.
pub fn packed_cache_dir() -> Option<PathBuf> {
    cache_root()
}

/// Whether a packed-weights file is still of use; [`PackedStatus::is_stale`] ones
/// are what `sdr cache prune` removes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PackedStatus {
    /// A load of its folder, here, maps it.
    Valid,
    /// Packed for another CPU or GEMM (a home folder shared by machines): a load
    /// there maps it, a load here never reads it. Kept.
    OtherMachine,
    /// Written by a newer SDR. Kept.
    NewerFormat,
    /// Its model folder no longer exists.
    FolderGone,
    /// Its model folder has no `model.safetensors` or `config.json` any more.
    WeightsGone,
    /// `model.safetensors` changed (contents, size or modification time).
    WeightsChanged,
    /// `config.json` changed.
    ConfigChanged,
    /// Not the name a load of its folder looks for (renamed, or the folder's path
    /// now resolves elsewhere).
    Renamed,
    /// Written by an older SDR (one that did not record the folder): a load rebuilds it.
    OlderFormat,
    /// Its header fails a check. (The data's checksum is checked by each load,
    /// which rebuilds a damaged file, not by the listing: that would read it all.)
    Damaged(String),
    /// The temporary file of a write that did not finish (its process was killed),
    /// or of one in progress, which removal skips since that process holds the lock.
    Unfinished,
    /// Could not be checked (permissions, say). Kept.
    Unchecked(String),
}

impl PackedStatus {
    pub fn is_valid(&self) -> bool {
        matches!(self, PackedStatus::Valid)
    }

    /// No load will map the file again: pruning removes it.
    pub fn is_stale(&self) -> bool {
        !matches!(
            self,
            PackedStatus::Valid
                | PackedStatus::OtherMachine
                | PackedStatus::NewerFormat
                | PackedStatus::Unchecked(_)
        )
    }

    /// What is wrong, for `Damaged` and `Unchecked`.
    pub fn detail(&self) -> Option<&str> {
        match self {
            PackedStatus::Damaged(why) | PackedStatus::Unchecked(why) => Some(why),
            _ => None,
        }
    }

    /// A few words, without the [`PackedStatus::detail`].
    pub fn label(&self) -> &'static str {
        match self {
            PackedStatus::Valid => "valid",
            PackedStatus::OtherMachine => "other CPU or GEMM",
            PackedStatus::NewerFormat => "newer format",
            PackedStatus::FolderGone => "folder gone",
            PackedStatus::WeightsGone => "weights gone",
            PackedStatus::WeightsChanged => "weights changed",
            PackedStatus::ConfigChanged => "config changed",
            PackedStatus::Renamed => "renamed",
            PackedStatus::OlderFormat => "older format",
            PackedStatus::Damaged(_) => "damaged",
            PackedStatus::Unfinished => "unfinished write",
            PackedStatus::Unchecked(_) => "unchecked",
        }
    }
}

impl std::fmt::Display for PackedStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.detail() {
            Some(why) => write!(f, "{}: {why}", self.label()),
            None => f.write_str(self.label()),
        }
    }
}

/// One file of the packed-weights cache, as [`list_packed_cache`] found it.
#[derive(Debug, Clone)]
pub struct PackedEntry {
    /// The `.pack` file (or a leftover temporary file of one).
    pub path: PathBuf,
    pub bytes: u64,
    /// The model folder it was packed from; `None` where the file does not say
    /// (older format, damaged header, temporary file).
    pub folder: Option<PathBuf>,
    /// `f32` or `bf16`, from the file's key, else from its name.
    pub precision: Option<String>,
    pub status: PackedStatus,
    /// The lock that writers of this file hold.
    lock: PathBuf,
    /// When listed: removal skips a file that a load has rewritten since.
    modified: Option<std::time::SystemTime>,
}

/// How [`remove_packed_entry`] went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    /// The file (and, for a `.pack`, its `.lock`) is gone.
    Removed,
    /// Another process holds its lock (it is packing that model now): kept.
    Busy,
    /// Rewritten or removed since it was listed: kept, list again.
    Changed,
}

/// The files of the packed-weights cache in `dir`, sorted by path, each checked
/// against its model folder as a load would (header and key; see [`PackedStatus`]).
/// A missing `dir` is an empty cache. Reads headers only; may hash a model's
/// weights where its folder has no `model.safetensors.sha256` (as a load does).
pub fn list_packed_cache(dir: &Path) -> std::io::Result<Vec<PackedEntry>> {
    let read = match std::fs::read_dir(dir) {
        Ok(r) => r,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for item in read {
        let item = item?;
        // Every name SDR writes here is ASCII; others are not ours.
        let Ok(name) = item.file_name().into_string() else {
            continue;
        };
        let path = item.path();
        // Only names SDR gives: a folder given by mistake (a git repository's packs, a
        // project's `.lock` files) loses nothing.
        let entry = if let Some(dest) = temporary_of(&name).filter(|d| is_cache_name(d)) {
            let Ok(meta) = std::fs::metadata(&path) else {
                continue;
            };
            PackedEntry {
                bytes: meta.len(),
                folder: None,
                precision: precision_in_name(dest).map(str::to_string),
                status: PackedStatus::Unfinished,
                lock: dir.join(dest).with_extension("lock"),
                modified: meta.modified().ok(),
                path,
            }
        } else if is_cache_name(&name) {
            // (A model folder named `.tmpXYZ`, as `tempfile` makes, gives a hidden name.)
            let Ok(meta) = std::fs::metadata(&path) else {
                continue;
            };
            if !meta.is_file() {
                continue;
            }
            let (folder, precision, status) = check_entry(dir, &path, meta.len());
            PackedEntry {
                bytes: meta.len(),
                folder,
                precision: precision.or_else(|| precision_in_name(&name).map(str::to_string)),
                status,
                lock: path.with_extension("lock"),
                modified: meta.modified().ok(),
                path,
            }
        } else {
            continue;
        };
        out.push(entry);
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// The `.pack` file whose `sdr_io` temporary file is `name` (`.<file>.XXXXXX.tmp.pack`;
/// a cache file's own name ends in its folder hash, `-<hex>.pack`).
fn temporary_of(name: &str) -> Option<&str> {
    let inner = name.strip_prefix('.')?.strip_suffix(".tmp.pack")?;
    let (dest, _random) = inner.rsplit_once('.')?;
    dest.ends_with(".pack").then_some(dest)
}

/// Whether `name` is one SDR gives a cache file: `<model>-<precision>-<gemm>-<hex>.pack`
/// (the hash is 12 hex digits in the files SDR writes).
fn is_cache_name(name: &str) -> bool {
    let Some(stem) = name.strip_suffix(".pack") else {
        return false;
    };
    let parts: Vec<&str> = stem.rsplitn(4, '-').collect();
    matches!(parts.as_slice(), [hash, gemm, precision, model]
        if !hash.is_empty()
            && hash.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
            && !gemm.is_empty()
            && matches!(*precision, "f32" | "bf16")
            && !model.is_empty())
}

/// The precision in a file name `<model>-<precision>-<gemm>-<hash>.pack`.
fn precision_in_name(name: &str) -> Option<&str> {
    let mut parts = name.rsplitn(4, '-');
    let precision = parts.nth(2)?;
    matches!(precision, "f32" | "bf16").then_some(precision)
}

/// The folder hash that ends a cache file's name.
fn folder_hash_in_name(path: &Path) -> Option<&str> {
    path.file_name()?.to_str()?.rsplit_once('-').map(|(_, h)| h)
}

#[cfg(unix)]
fn path_from_bytes(b: &[u8]) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    PathBuf::from(std::ffi::OsStr::from_bytes(b))
}

#[cfg(not(unix))]
fn path_from_bytes(b: &[u8]) -> PathBuf {
    PathBuf::from(String::from_utf8_lossy(b).into_owned())
}

/// The folder, precision and status of the `.pack` file `path` of `bytes` bytes.
fn check_entry(
    dir: &Path,
    path: &Path,
    bytes: u64,
) -> (Option<PathBuf>, Option<String>, PackedStatus) {
    let header = File::open(path).and_then(|mut f| read_header(&mut f, bytes));
    let b = match header {
        Ok(b) => b,
        Err(e) => return (None, None, PackedStatus::Unchecked(e.to_string())),
    };
    let header = match Header::parse(&b, bytes).and_then(|h| h.parts(bytes).map(|_| h)) {
        Ok(h) => h,
        Err(Unusable::Version(v)) if v < VERSION => return (None, None, PackedStatus::OlderFormat),
        Err(Unusable::Version(_)) => return (None, None, PackedStatus::NewerFormat),
        Err(Unusable::Damaged(why)) => return (None, None, PackedStatus::Damaged(why)),
        Err(Unusable::Missing | Unusable::Stale) => {
            return (
                None,
                None,
                PackedStatus::Damaged("unreadable header".into()),
            )
        }
    };
    let key = String::from_utf8_lossy(header.key()).into_owned();
    let precision = key
        .lines()
        .find_map(|l| l.strip_prefix("precision "))
        .and_then(|rest| rest.split(' ').next())
        .map(str::to_string);
    if header.folder().is_empty() {
        let why = "no model folder recorded".to_string();
        return (None, precision, PackedStatus::Damaged(why));
    }
    let folder = path_from_bytes(header.folder());
    let status = status_for(dir, path, &key, &folder, precision.as_deref());
    (Some(folder), precision, status)
}

/// What a load of `folder` would make of the file `path` whose key is `key`.
fn status_for(
    dir: &Path,
    path: &Path,
    key: &str,
    folder: &Path,
    precision: Option<&str>,
) -> PackedStatus {
    use std::io::ErrorKind::{NotADirectory, NotFound};
    match std::fs::metadata(folder) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return PackedStatus::FolderGone,
        Err(e) if matches!(e.kind(), NotFound | NotADirectory) => return PackedStatus::FolderGone,
        Err(e) => return PackedStatus::Unchecked(format!("{}: {e}", folder.display())),
    }
    let (want_file, want_key, _) = match file_and_key(dir, folder, precision == Some("bf16")) {
        Ok(t) => t,
        Err(e) if matches!(e.kind(), NotFound | NotADirectory) => return PackedStatus::WeightsGone,
        Err(e) => return PackedStatus::Unchecked(format!("{}: {e}", folder.display())),
    };
    if folder_hash_in_name(&want_file) != folder_hash_in_name(path) {
        return PackedStatus::Renamed;
    }
    // The key's lines (see `file_and_key`): the first that differs says why.
    match want_key.lines().zip(key.lines()).find(|(w, k)| w != k) {
        None if want_key == key => PackedStatus::Valid,
        Some((w, _)) if w.starts_with("weights ") => PackedStatus::WeightsChanged,
        Some((w, _)) if w.starts_with("config ") => PackedStatus::ConfigChanged,
        _ => PackedStatus::OtherMachine,
    }
}

/// Removes `entry`'s file and, for a `.pack`, its `.lock`, under that lock (a
/// non-blocking try: an entry that another process is packing now is left, as
/// [`Removal::Busy`]). A process that has the file mapped keeps its pages.
pub fn remove_packed_entry(entry: &PackedEntry) -> std::io::Result<Removal> {
    let Some(lock) = open_lock(&entry.lock)? else {
        return Ok(Removal::Changed);
    };
    match lock.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => return Ok(Removal::Busy),
        Err(std::fs::TryLockError::Error(e)) => return Err(e),
    }
    let same = std::fs::metadata(&entry.path)
        .is_ok_and(|m| m.len() == entry.bytes && m.modified().ok() == entry.modified);
    if !same {
        return Ok(Removal::Changed);
    }
    std::fs::remove_file(&entry.path)?;
    // A temporary file's lock is its `.pack`'s: it stays while that file does.
    if entry.status != PackedStatus::Unfinished || !entry.lock.with_extension("pack").exists() {
        remove_if_there(&entry.lock)?;
    }
    // A loader that opened the lock just before it was unlinked locks the unlinked
    // file, and one after it a new one: at worst the two pack the model twice and
    // rename in turn, each a whole file.
    Ok(Removal::Removed)
}

/// Removes the `.lock` files in `dir` that have no `.pack` beside them and that no
/// process holds (a load that failed, or whose `.pack` was removed, leaves one);
/// returns how many. A missing `dir` has none.
pub fn remove_lone_locks(dir: &Path) -> std::io::Result<usize> {
    let read = match std::fs::read_dir(dir) {
        Ok(r) => r,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    let mut removed = 0;
    for item in read {
        let path = item?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        // A lock SDR takes is empty and named after its cache file.
        let ours = name
            .strip_suffix(".lock")
            .is_some_and(|stem| is_cache_name(&format!("{stem}.pack")))
            && std::fs::metadata(&path).is_ok_and(|m| m.is_file() && m.len() == 0);
        if !ours || path.with_extension("pack").exists() {
            continue;
        }
        // Best effort: an empty file left is no loss.
        let Ok(Some(lock)) = open_lock(&path) else {
            continue;
        };
        if lock.try_lock().is_ok()
            && !path.with_extension("pack").exists()
            && remove_if_there(&path).is_ok()
        {
            removed += 1;
        }
    }
    Ok(removed)
}

/// The lock file at `path`, created if missing (as a loader does); `None` when the
/// folder itself is gone.
fn open_lock(path: &Path) -> std::io::Result<Option<File>> {
    let opened = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        // A lock file of another user's, in a shared folder: flock needs no write access.
        .or_else(|_| File::open(path));
    match opened {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn remove_if_there(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
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

    /// `path`'s entry in the listing of `root`.
    fn listed(root: &Path, path: &Path) -> PackedEntry {
        list_packed_cache(root)
            .unwrap()
            .into_iter()
            .find(|e| e.path == path)
            .unwrap_or_else(|| panic!("{} not listed", path.display()))
    }

    fn status_of(root: &Path, name: &str) -> PackedStatus {
        listed(root, &root.join(name)).status
    }

    #[test]
    fn the_listing_says_which_files_a_load_would_still_map() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let (mut valid_files, mut alive) = (Vec::new(), Vec::new());
        for mixed in precisions() {
            let case = Case::new(mixed);
            case.load(root);
            valid_files.push(case.file(root));
            let e = listed(root, &case.file(root));
            assert_eq!(e.status, PackedStatus::Valid);
            let folder = std::fs::canonicalize(case.folder.path()).unwrap();
            assert_eq!(e.folder.as_deref(), Some(folder.as_path()));
            let want = if mixed { "bf16" } else { "f32" };
            assert_eq!(e.precision.as_deref(), Some(want));
            assert_eq!(e.bytes, std::fs::metadata(&e.path).unwrap().len());
            alive.push(case);
        }
        let valid = Case::new(false);
        valid.load(root);
        valid_files.push(valid.file(root));
        let good = std::fs::read(valid.file(root)).unwrap();
        let name = |p: PathBuf| p.file_name().unwrap().to_string_lossy().into_owned();

        let gone = Case::new(false);
        gone.load(root);
        let gone_file = name(gone.file(root));
        std::fs::remove_dir_all(gone.folder.path()).unwrap();
        assert_eq!(status_of(root, &gone_file), PackedStatus::FolderGone);

        let weights = Case::new(false);
        weights.load(root);
        let st = weights.folder.path().join("model.safetensors");
        let later = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1 << 30);
        File::options()
            .write(true)
            .open(&st)
            .unwrap()
            .set_modified(later)
            .unwrap();
        let weights_file = name(weights.file(root));
        assert_eq!(status_of(root, &weights_file), PackedStatus::WeightsChanged);

        let config = Case::new(false);
        config.load(root);
        let cfg = config.folder.path().join("config.json");
        let text = std::fs::read_to_string(&cfg).unwrap();
        std::fs::write(&cfg, format!("{text}\n")).unwrap();
        assert_eq!(
            status_of(root, &name(config.file(root))),
            PackedStatus::ConfigChanged
        );

        let no_weights = Case::new(false);
        no_weights.load(root);
        let no_weights_file = name(no_weights.file(root));
        std::fs::remove_file(no_weights.folder.path().join("model.safetensors")).unwrap();
        assert_eq!(status_of(root, &no_weights_file), PackedStatus::WeightsGone);

        let hash = folder_hash_in_name(&valid.file(root)).unwrap().to_string();
        let mut older = good.clone();
        older[8..12].copy_from_slice(&1u32.to_le_bytes());
        let mut newer = good.clone();
        newer[8..12].copy_from_slice(&(VERSION + 1).to_le_bytes());
        let (_, key, folder) = file_and_key(root, valid.folder.path(), false).unwrap();
        let other_key = key.replace("precision f32 gemm", "precision f32 gemm Other");
        let mut other = Vec::new();
        PackWriter::default()
            .write(
                &other_key,
                folder.as_os_str().as_encoded_bytes(),
                &mut other,
            )
            .unwrap();
        let files: [(&str, &[u8], PackedStatus); 7] = [
            (
                "old-f32-avx512-000000000000.pack",
                &older,
                PackedStatus::OlderFormat,
            ),
            (
                "new-f32-avx512-000000000000.pack",
                &newer,
                PackedStatus::NewerFormat,
            ),
            (
                &format!("x-f32-other-{hash}"),
                &other,
                PackedStatus::OtherMachine,
            ),
            (
                "moved-f32-avx512-000000000000.pack",
                &good,
                PackedStatus::Renamed,
            ),
            (
                "junk-f32-avx512-111111111111.pack",
                b"not a pack",
                PackedStatus::Damaged("not a packed-weights file (too short or no magic)".into()),
            ),
            (
                "cut-f32-avx512-222222222222.pack",
                &good[..good.len() / 2],
                PackedStatus::Damaged(format!(
                    "{} bytes where the header says {}",
                    good.len() / 2,
                    good.len()
                )),
            ),
            (
                ".cut-f32-avx512-2.pack.Ab12Cd.tmp.pack",
                &good[..100],
                PackedStatus::Unfinished,
            ),
        ];
        for (file, bytes, want) in &files {
            std::fs::write(root.join(file), bytes).unwrap();
            assert_eq!(&status_of(root, file), want, "{file}");
        }
        assert_eq!(
            listed(root, &root.join(files[0].0)).precision.as_deref(),
            Some("f32")
        );
        assert_eq!(listed(root, &root.join(files[0].0)).folder, None);
        // A lock with no file, and files that are not the cache's.
        std::fs::write(root.join("lone-f32-avx512-333333333333.lock"), b"").unwrap();
        std::fs::write(root.join("notes.txt"), b"mine").unwrap();
        std::fs::create_dir(root.join("sub.pack")).unwrap();
        // Another program's packs and locks (a folder given by mistake): never listed
        // nor removed, even when empty or shaped almost like SDR's names.
        let foreign = [
            (
                "pack-8f3e2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f.pack",
                &b"PACK"[..],
            ),
            ("x-f16-avx512-000000000000.pack", b""),
            ("x-f32-avx512-00000000000g.pack", b"not a pack"),
            (".pack-1.pack.Ab12Cd.tmp.pack", b""),
            ("Cargo.lock", b"version = 4"),
            ("yarn.lock", b""),
            ("mine-f32-avx512-444444444444.lock", b"pid 7"),
        ];
        for (file, bytes) in foreign {
            std::fs::write(root.join(file), bytes).unwrap();
        }

        // Pruning: every stale entry goes with its lock, the rest stay.
        let all = list_packed_cache(root).unwrap();
        assert_eq!(all.len(), valid_files.len() + 4 + files.len());
        for e in all.iter().filter(|e| e.status.is_stale()) {
            assert_eq!(remove_packed_entry(e).unwrap(), Removal::Removed, "{e:?}");
        }
        assert_eq!(remove_lone_locks(root).unwrap(), 1);
        let mut left: Vec<String> = std::fs::read_dir(root)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        let mut want: Vec<String> = valid_files.iter().map(|p| name(p.clone())).collect();
        want.extend(valid_files.iter().map(|p| name(p.with_extension("lock"))));
        want.extend([files[1].0, files[2].0, "notes.txt", "sub.pack"].map(String::from));
        want.extend(foreign.map(|(f, _)| f.to_string()));
        want.sort();
        assert_eq!(left, want);
        assert_eq!(valid.load(root).0, Outcome::Mapped);
    }

    #[test]
    fn removal_takes_the_lock_and_skips_a_file_rewritten_since_listed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let case = Case::new(false);
        case.load(root);
        let e = listed(root, &case.file(root));
        // Another process packing this model holds the lock.
        let held = File::options().write(true).open(&e.lock).unwrap();
        held.lock().unwrap();
        assert_eq!(remove_packed_entry(&e).unwrap(), Removal::Busy);
        std::fs::remove_file(&e.path).unwrap();
        assert_eq!(remove_lone_locks(root).unwrap(), 0, "a held lock stays");
        drop(held);
        // Rewritten by a load since it was listed.
        assert_eq!(case.load(root).0, Outcome::Written);
        assert_eq!(remove_packed_entry(&e).unwrap(), Removal::Changed);
        assert_eq!(case.load(root).0, Outcome::Mapped);
        let e = listed(root, &case.file(root));
        assert_eq!(remove_packed_entry(&e).unwrap(), Removal::Removed);
        assert!(!e.path.exists() && !e.lock.exists());
        assert_eq!(std::fs::read_dir(root).unwrap().count(), 0);
        // A missing folder is an empty cache; a file is no folder.
        assert!(list_packed_cache(&root.join("none")).unwrap().is_empty());
        assert_eq!(remove_lone_locks(&root.join("none")).unwrap(), 0);
        let file = case.folder.path().join("config.json");
        assert!(list_packed_cache(&file).is_err());
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
