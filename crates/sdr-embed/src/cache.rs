//! The sentence cache: embeddings keyed by the sha256 of the normalised sentence
//! text, for one encoder identity, bounded in memory with LRU eviction.
//!
//! Radiology reports repeat themselves ("The lungs are clear." is in thousands of
//! IU reports, and a GRPO policy writes it in most completions), so the reward
//! embeds each distinct sentence once and looks it up afterwards. A cache belongs
//! to one encoder ([`SentenceCache::identity`]: model name, weights hash and
//! precision): two encoders never share entries, and a file saved by one is
//! refused by another. The cache is also what makes rewards reproducible within
//! a run: the candle encoder's output for a sentence can differ in the last bits
//! with the other sentences of its batch (padding length changes the matmul
//! shapes), and once a sentence is cached every later batch gets the same bits.
//!
//! File format (`SDRC2`, little-endian): magic, identity length (u32) and bytes,
//! dimension (u64), count (u64), then per entry the 32-byte key and `dim` f32
//! values, least recently used first, then the sha256 of everything before it.
//! A file at a cache path that does not start with `SDRC` is not a cache of any
//! version: it is refused ([`EmbedError::NotACache`]) and never overwritten.

use std::borrow::Cow;
use std::io::{Read, Write};
use std::num::NonZeroUsize;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use lru::LruCache;
use sha2::{Digest, Sha256};

use crate::error::{EmbedError, Result};

/// Key of a text: sha256 of its normalised UTF-8 bytes ([`normalise`]).
pub type TextKey = [u8; 32];

/// Bytes an entry costs beyond its vector: the key, the LRU list links, the hash
/// table slot and the `Arc` header, rounded up (measured: about 100 bytes).
pub const ENTRY_OVERHEAD: usize = 128;

const MAGIC: &[u8; 5] = b"SDRC2";
/// How every version of the format starts: a file that starts otherwise is
/// someone else's (a corpus given as the cache path, say), never read as a cache
/// nor replaced by one. Older versions and damaged caches are rebuilt.
const FAMILY: &[u8; 4] = b"SDRC";

/// The text a sentence is keyed and embedded by: trimmed, with every run of
/// whitespace collapsed to one space. Word-piece tokenisers split on whitespace
/// first, so this never changes a sentence's tokens, and sentences that differ
/// only in spacing share one entry.
pub fn normalise(text: &str) -> Cow<'_, str> {
    let trimmed = text.trim();
    let clean = !trimmed
        .as_bytes()
        .windows(2)
        .any(|w| w[0].is_ascii_whitespace() && w[1].is_ascii_whitespace())
        && !trimmed.chars().any(|c| c.is_whitespace() && c != ' ');
    if clean {
        Cow::Borrowed(trimmed)
    } else {
        Cow::Owned(trimmed.split_whitespace().collect::<Vec<_>>().join(" "))
    }
}

/// sha256 of `normalise(text)`.
pub fn text_key(text: &str) -> TextKey {
    Sha256::digest(normalise(text).as_bytes()).into()
}

/// Counters of a cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheStats {
    /// Sentences held now.
    pub entries: usize,
    /// Bytes they take, by [`SentenceCache::entry_bytes`].
    pub bytes: usize,
    /// The bound (`usize::MAX` for an unbounded cache).
    pub max_bytes: usize,
    /// Lookups that found their sentence, since creation.
    pub hits: u64,
    /// Lookups that did not.
    pub misses: u64,
    /// Entries dropped to stay within the bound.
    pub evictions: u64,
}

/// A thread-safe, bounded map from sentence to embedding for one encoder.
pub struct SentenceCache {
    identity: String,
    dim: usize,
    max_bytes: usize,
    lru: Mutex<LruCache<TextKey, Arc<[f32]>>>,
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: AtomicU64,
    dirty: AtomicBool,
}

impl std::fmt::Debug for SentenceCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentenceCache")
            .field("identity", &self.identity)
            .field("dim", &self.dim)
            .field("stats", &self.stats())
            .finish()
    }
}

impl SentenceCache {
    /// A cache for vectors of `dim` floats from the encoder `identity`, holding at
    /// most `max_bytes` (entries counted by [`SentenceCache::entry_bytes`]); the
    /// least recently used entries go first. A bound below one entry keeps nothing.
    pub fn new(identity: impl Into<String>, dim: usize, max_bytes: usize) -> Self {
        let entry = Self::entry_bytes(dim);
        // The LRU's capacity is in entries; at least 1 so that it can be built.
        let cap = NonZeroUsize::new((max_bytes / entry).max(1)).unwrap_or(NonZeroUsize::MIN);
        // The table grows with its entries: `LruCache::new` sizes it for `cap` up
        // front, so a generous bound (`--cache-mib 10000000`) aborted on allocation.
        let mut lru = LruCache::unbounded();
        lru.resize(cap);
        SentenceCache {
            identity: identity.into(),
            dim,
            max_bytes,
            lru: Mutex::new(lru),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            dirty: AtomicBool::new(false),
        }
    }

    /// A cache bounded in MiB (the unit of `--cache-mib` and `cache_mib=`).
    pub fn with_mib(identity: impl Into<String>, dim: usize, mib: f64) -> Result<Self> {
        if !(mib.is_finite() && mib >= 0.0) {
            return Err(EmbedError::InvalidOption {
                name: "cache size (MiB)",
                value: mib.to_string(),
                reason: "must be a finite number >= 0",
            });
        }
        Ok(Self::new(identity, dim, (mib * 1024.0 * 1024.0) as usize))
    }

    /// A cache without a practical bound (a corpus build holds every sentence anyway).
    pub fn unbounded(identity: impl Into<String>, dim: usize) -> Self {
        let mut c = Self::new(identity, dim, 0);
        c.lru = Mutex::new(LruCache::unbounded());
        c.max_bytes = usize::MAX;
        c
    }

    /// The one constructor of an encoder's cache (the CLI, `sdr serve`, Python): keyed
    /// by `encoder`'s identity and dimension, bounded at `mib` MiB (the unit of
    /// `--cache-mib` and `cache_mib=`), or unbounded for `None` (a command's lifetime).
    ///
    /// # Errors
    /// A bound that is not a finite number >= 0; the encoder's identity error.
    pub fn for_encoder(encoder: &dyn crate::SentenceEncoder, mib: Option<f64>) -> Result<Self> {
        let identity = encoder.identity()?;
        match mib {
            Some(mib) => Self::with_mib(identity, encoder.dim(), mib),
            None => Ok(Self::unbounded(identity, encoder.dim())),
        }
    }

    /// Bytes one entry of dimension `dim` counts for.
    pub fn entry_bytes(dim: usize) -> usize {
        dim * 4 + ENTRY_OVERHEAD
    }

    /// The encoder identity the vectors come from.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Vector length.
    pub fn dim(&self) -> usize {
        self.dim
    }

    fn lock(&self) -> MutexGuard<'_, LruCache<TextKey, Arc<[f32]>>> {
        self.lru.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn holds_nothing(&self) -> bool {
        self.max_bytes < Self::entry_bytes(self.dim)
    }

    /// The vector of `key`, counting a hit or a miss (and marking it recently used).
    pub fn get(&self, key: &TextKey) -> Option<Arc<[f32]>> {
        let found = self.lock().get(key).cloned();
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Stores `vector` under `key`, evicting the least recently used entries when
    /// full. A vector of another dimension is not stored.
    pub fn insert(&self, key: TextKey, vector: Arc<[f32]>) {
        if vector.len() != self.dim || self.holds_nothing() {
            return;
        }
        let mut lru = self.lock();
        let full = lru.len() == lru.cap().get() && !lru.contains(&key);
        lru.put(key, vector);
        drop(lru);
        if full {
            self.evictions.fetch_add(1, Ordering::Relaxed);
        }
        self.dirty.store(true, Ordering::Relaxed);
    }

    pub fn stats(&self) -> CacheStats {
        let entries = self.lock().len();
        CacheStats {
            entries,
            bytes: entries * Self::entry_bytes(self.dim),
            max_bytes: self.max_bytes,
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
        }
    }

    pub fn clear(&self) {
        self.lock().clear();
        self.dirty.store(true, Ordering::Relaxed);
    }

    /// Whether entries changed since the cache was last saved or loaded.
    pub fn is_dirty(&self) -> bool {
        self.dirty.load(Ordering::Relaxed)
    }

    /// Writes the cache to `path` atomically (a temporary file in the same folder,
    /// flushed to disk, then renamed over `path`); returns the entries written.
    pub fn save(&self, path: &Path) -> Result<usize> {
        let io = |source| EmbedError::Io {
            path: path.to_path_buf(),
            source,
        };
        // The last guard for every caller: a file we did not write is never replaced.
        Self::check_path(path)?;
        // Snapshot under the lock, least recently used first, so that loading
        // the file into a smaller cache keeps the most recent entries.
        let entries: Vec<(TextKey, Arc<[f32]>)> = {
            let lru = self.lock();
            lru.iter().rev().map(|(k, v)| (*k, v.clone())).collect()
        };
        self.dirty.store(false, Ordering::Relaxed);
        let mut bytes =
            Vec::with_capacity(64 + self.identity.len() + entries.len() * (32 + 4 * self.dim));
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&(self.identity.len() as u32).to_le_bytes());
        bytes.extend_from_slice(self.identity.as_bytes());
        bytes.extend_from_slice(&(self.dim as u64).to_le_bytes());
        bytes.extend_from_slice(&(entries.len() as u64).to_le_bytes());
        for (k, v) in &entries {
            bytes.extend_from_slice(k);
            for x in v.iter() {
                bytes.extend_from_slice(&x.to_le_bytes());
            }
        }
        let digest: [u8; 32] = Sha256::digest(&bytes).into();
        bytes.extend_from_slice(&digest);

        if let Some(dir) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        // Temporary file beside `path`, fsync, rename: the path never holds half a cache.
        sdr_io::write_atomic(path, |f| f.write_all(&bytes)).map_err(io)?;
        Ok(entries.len())
    }

    /// Adds the entries of a file written by [`SentenceCache::save`]; returns how
    /// many. A file of another encoder or dimension, or a damaged one, is an
    /// error naming the path and the fault, and adds nothing.
    ///
    /// A file that is no sentence cache at all is [`EmbedError::NotACache`]
    /// (checked on its first bytes, before a possibly large file is read).
    pub fn load(&self, path: &Path) -> Result<usize> {
        Self::check_path(path)?;
        let bytes = std::fs::read(path).map_err(|source| EmbedError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let damaged = |fault: &str| EmbedError::CacheFile {
            path: path.to_path_buf(),
            fault: fault.to_string(),
        };
        if bytes.len() >= MAGIC.len() && &bytes[..MAGIC.len()] != MAGIC {
            let version = String::from_utf8_lossy(&bytes[..MAGIC.len()]).into_owned();
            return Err(damaged(&format!(
                "format {version}, not {} (another SDR version)",
                String::from_utf8_lossy(MAGIC)
            )));
        }
        if bytes.len() < MAGIC.len() + 4 + 16 + 32 {
            return Err(damaged("truncated"));
        }
        let (body, digest) = bytes.split_at(bytes.len() - 32);
        if Sha256::digest(body).as_slice() != digest {
            return Err(damaged("checksum mismatch (truncated or damaged)"));
        }
        let mut at = MAGIC.len();
        let mut take = |n: usize| -> Result<&[u8]> {
            let s = body
                .get(at..at + n)
                .ok_or_else(|| damaged("truncated header"))?;
            at += n;
            Ok(s)
        };
        let id_len = u32::from_le_bytes(take(4)?.try_into().unwrap_or_default()) as usize;
        let identity = String::from_utf8_lossy(take(id_len)?).into_owned();
        let dim = u64::from_le_bytes(take(8)?.try_into().unwrap_or_default()) as usize;
        let n = u64::from_le_bytes(take(8)?.try_into().unwrap_or_default()) as usize;
        if identity != self.identity || dim != self.dim {
            return Err(EmbedError::CacheEncoder {
                path: path.to_path_buf(),
                found: format!("{identity} (dim {dim})"),
                expected: format!("{} (dim {})", self.identity, self.dim),
            });
        }
        let stride = 32 + 4 * dim;
        let rest = &body[at..];
        if rest.len() != n.saturating_mul(stride) {
            return Err(damaged("entry count does not match the file length"));
        }
        let mut lru = self.lock();
        for chunk in rest.chunks_exact(stride) {
            let mut key = [0u8; 32];
            key.copy_from_slice(&chunk[..32]);
            let v: Vec<f32> = chunk[32..]
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            if !self.holds_nothing() {
                lru.put(key, v.into());
            }
        }
        Ok(n)
    }

    /// Whether `path` may hold this crate's cache: nothing there, or a file that
    /// starts like one (of any version, damaged or not; an empty file too, which
    /// holds nothing to lose). A folder, a device or another program's file is
    /// [`EmbedError::NotACache`]: callers refuse it rather than read or replace it.
    pub fn check_path(path: &Path) -> Result<()> {
        let io = |source| EmbedError::Io {
            path: path.to_path_buf(),
            source,
        };
        let meta = match std::fs::metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io(e)),
        };
        let not_a_cache = |what| EmbedError::NotACache {
            path: path.to_path_buf(),
            what,
        };
        if meta.is_dir() {
            return Err(not_a_cache("a folder"));
        }
        if !meta.is_file() {
            return Err(not_a_cache("a special file (device, pipe or socket)"));
        }
        let mut head = Vec::with_capacity(FAMILY.len());
        std::fs::File::open(path)
            .and_then(|f| f.take(FAMILY.len() as u64).read_to_end(&mut head))
            .map_err(io)?;
        // A shorter file matching so far is a truncated cache.
        if head[..] != FAMILY[..head.len()] {
            return Err(not_a_cache("another kind of file"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(dim: usize, x: f32) -> Arc<[f32]> {
        vec![x; dim].into()
    }

    #[test]
    fn normalise_collapses_whitespace_only() {
        assert_eq!(normalise("  No acute disease.  "), "No acute disease.");
        assert_eq!(normalise("No\tacute \n disease."), "No acute disease.");
        assert!(matches!(
            normalise("The lungs are clear."),
            Cow::Borrowed(_)
        ));
        assert_eq!(text_key("a  b"), text_key(" a b "));
        assert_ne!(text_key("a b"), text_key("A b"));
    }

    #[test]
    fn hit_after_insert_and_round_trip() {
        let c = SentenceCache::new("enc", 2, 1 << 20);
        let k = text_key("No acute disease.");
        assert!(c.get(&k).is_none());
        c.insert(k, vec![1.0, 2.0].into());
        assert_eq!(c.get(&k).as_deref(), Some(&[1.0f32, 2.0][..]));
        let s = c.stats();
        assert_eq!((s.entries, s.hits, s.misses), (1, 1, 1));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.bin");
        assert_eq!(c.save(&path).unwrap(), 1);
        assert!(!c.is_dirty());
        let d = SentenceCache::new("enc", 2, 1 << 20);
        assert_eq!(d.load(&path).unwrap(), 1);
        assert_eq!(d.get(&k).as_deref(), Some(&[1.0f32, 2.0][..]));
    }

    #[test]
    fn another_encoder_or_a_damaged_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.bin");
        let c = SentenceCache::new("mpnet@abc/f32", 3, 1 << 20);
        c.insert(text_key("x"), v(3, 0.5));
        c.save(&path).unwrap();

        let other = SentenceCache::new("mpnet@abc/bf16", 3, 1 << 20);
        let e = other.load(&path).unwrap_err();
        assert!(matches!(e, EmbedError::CacheEncoder { .. }), "{e}");
        assert!(e.to_string().contains("bf16"), "{e}");
        assert_eq!(other.stats().entries, 0);

        let mut bytes = std::fs::read(&path).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let e = c.load(&path).unwrap_err();
        assert!(e.to_string().contains("checksum"), "{e}");
        std::fs::write(&path, &bytes[..bytes.len() - 7]).unwrap();
        assert!(matches!(
            c.load(&path).unwrap_err(),
            EmbedError::CacheFile { .. }
        ));
        std::fs::write(&path, b"SDRC1 an older version of the format, long enough").unwrap();
        let e = c.load(&path).unwrap_err();
        assert!(matches!(e, EmbedError::CacheFile { .. }), "{e}");
        assert!(e.to_string().contains("SDRC1"), "{e}");
    }

    #[test]
    fn a_file_that_is_no_cache_is_refused_and_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let c = SentenceCache::new("enc", 2, 1 << 20);
        c.insert(text_key("a"), v(2, 1.0));
        // The start of a safetensors corpus: a u64 header length, then JSON.
        let path = dir.path().join("corpus.safetensors");
        let corpus = b"\x10\x00\x00\x00\x00\x00\x00\x00{\"__metadata__\":{}}".repeat(4);
        std::fs::write(&path, &corpus).unwrap();
        let e = c.load(&path).unwrap_err();
        assert!(matches!(e, EmbedError::NotACache { .. }), "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains("corpus.safetensors") && !msg.contains('\n'),
            "{msg}"
        );
        let e = c.save(&path).unwrap_err();
        assert!(matches!(e, EmbedError::NotACache { .. }), "{e}");
        assert_eq!(std::fs::read(&path).unwrap(), corpus, "not overwritten");
        assert_eq!(c.stats().entries, 1);

        let folder = dir.path().join("folder");
        std::fs::create_dir(&folder).unwrap();
        assert!(c
            .save(&folder)
            .unwrap_err()
            .to_string()
            .contains("a folder"));
        assert!(matches!(
            c.load(&folder).unwrap_err(),
            EmbedError::NotACache { .. }
        ));

        // Nothing there, an empty file, a truncated magic: a cache may go there.
        let fresh = dir.path().join("fresh.sdrc");
        SentenceCache::check_path(&fresh).unwrap();
        std::fs::write(&fresh, b"").unwrap();
        assert!(matches!(
            c.load(&fresh).unwrap_err(),
            EmbedError::CacheFile { .. }
        ));
        std::fs::write(&fresh, b"SDR").unwrap();
        SentenceCache::check_path(&fresh).unwrap();
        assert_eq!(c.save(&fresh).unwrap(), 1);
        assert_eq!(
            SentenceCache::new("enc", 2, 1 << 20).load(&fresh).unwrap(),
            1
        );
    }

    #[test]
    fn memory_stays_within_the_bound_under_a_stream_of_distinct_sentences() {
        let dim = 768;
        let bound = 1 << 20; // 1 MiB: 327 entries of 3,200 bytes
        let c = SentenceCache::new("enc", dim, bound);
        let cap = bound / SentenceCache::entry_bytes(dim);
        for i in 0..10_000 {
            c.insert(text_key(&format!("sentence {i}")), v(dim, i as f32));
            let s = c.stats();
            assert!(s.bytes <= bound, "{s:?}");
        }
        let s = c.stats();
        assert_eq!(s.entries, cap);
        assert_eq!(s.evictions, (10_000 - cap) as u64);
        // The most recent survive, the oldest are gone.
        assert!(c.get(&text_key("sentence 9999")).is_some());
        assert!(c.get(&text_key("sentence 0")).is_none());
    }

    #[test]
    fn recently_used_entries_survive_eviction() {
        let dim = 4;
        let c = SentenceCache::new("enc", dim, 3 * SentenceCache::entry_bytes(dim));
        for s in ["a", "b", "c"] {
            c.insert(text_key(s), v(dim, 1.0));
        }
        assert!(c.get(&text_key("a")).is_some()); // a is now the most recent
        c.insert(text_key("d"), v(dim, 1.0)); // evicts b
        assert!(c.get(&text_key("b")).is_none());
        assert!(c.get(&text_key("a")).is_some());
    }

    #[test]
    fn a_zero_bound_keeps_nothing_and_bad_sizes_are_refused() {
        let c = SentenceCache::new("enc", 4, 0);
        c.insert(text_key("a"), v(4, 1.0));
        assert_eq!(c.stats().entries, 0);
        // A bound far beyond memory costs nothing until entries arrive.
        let huge = SentenceCache::with_mib("enc", 4, 1e13).unwrap();
        huge.insert(text_key("a"), v(4, 1.0));
        assert_eq!(huge.stats().entries, 1);
        assert!(SentenceCache::with_mib("enc", 4, -1.0).is_err());
        assert!(SentenceCache::with_mib("enc", 4, f64::NAN).is_err());
        let u = SentenceCache::unbounded("enc", 4);
        for i in 0..1000 {
            u.insert(text_key(&i.to_string()), v(4, 1.0));
        }
        assert_eq!(u.stats().entries, 1000);
    }

    #[test]
    fn concurrent_use_is_safe() {
        let c = Arc::new(SentenceCache::new(
            "enc",
            8,
            64 * SentenceCache::entry_bytes(8),
        ));
        std::thread::scope(|s| {
            for t in 0..4 {
                let c = c.clone();
                s.spawn(move || {
                    for i in 0..2_000 {
                        let k = text_key(&format!("{}", (i * 7 + t) % 100));
                        if c.get(&k).is_none() {
                            c.insert(k, v(8, i as f32));
                        }
                    }
                });
            }
        });
        let s = c.stats();
        assert!(s.entries <= 64);
        assert_eq!(s.hits + s.misses, 8_000);
    }
}
