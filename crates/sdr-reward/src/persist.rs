//! A sentence cache kept on disk: loaded on start, written atomically at
//! intervals and on exit, so a resumed or repeated training run starts warm.
//!
//! A file written by another encoder, or a damaged one, is refused with a
//! one-line message and the run goes on with an empty cache. A damaged file is
//! replaced by the next complete save (every save writes a temporary file and
//! renames it, so the path never holds half a cache); a valid file of another
//! encoder is never overwritten, since it is someone else's warm cache.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sdr_embed::{EmbedError, SentenceCache, SentenceEncoder};

/// What [`PersistentCache::open`] found at the path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadOutcome {
    /// No file yet: it is created by the first save.
    Missing,
    /// This many entries were loaded.
    Loaded(usize),
    /// The file was refused (the one-line reason); the cache starts empty.
    Refused(String),
}

impl LoadOutcome {
    /// A one-line message for logs.
    pub fn message(&self, path: &Path) -> String {
        match self {
            LoadOutcome::Missing => format!(
                "sentence cache {}: no file yet, starting empty",
                path.display()
            ),
            LoadOutcome::Loaded(n) => {
                format!("sentence cache {}: loaded {n} sentences", path.display())
            }
            LoadOutcome::Refused(why) => format!("{why}; starting with an empty cache"),
        }
    }
}

/// A reward's sentence cache, and its file's persistence with what was found there.
pub type OpenedCache = (
    Arc<SentenceCache>,
    Option<(Arc<PersistentCache>, LoadOutcome)>,
);

/// The sentence cache of a reward process (`sdr serve`, `sdr_rewards.SDRReward`):
/// `encoder`'s vectors bounded at `mib` MiB, and, with `file` (path, save
/// interval), loaded from and saved to that file. The one place a reward's
/// cache is made; what was found at the path comes back with it.
///
/// # Errors
/// A bound that is not a finite number >= 0, the encoder's identity error, or
/// a path that holds something other than a cache (a folder, another
/// program's file), refused before anything could be saved over it.
pub fn open_cache(
    encoder: &dyn SentenceEncoder,
    mib: f64,
    file: Option<(&Path, Duration)>,
) -> Result<OpenedCache, EmbedError> {
    if let Some((path, _)) = file {
        SentenceCache::check_path(path)?;
    }
    let cache = Arc::new(SentenceCache::for_encoder(encoder, Some(mib))?);
    let persist = file.map(|(path, interval)| {
        let (p, outcome) = PersistentCache::open(cache.clone(), path, interval);
        (Arc::new(p), outcome)
    });
    Ok((cache, persist))
}

/// A [`SentenceCache`] tied to a file.
pub struct PersistentCache {
    cache: Arc<SentenceCache>,
    path: PathBuf,
    interval: Duration,
    last_save: Mutex<Instant>,
    /// False when the file belongs to another encoder.
    writable: AtomicBool,
    /// Whether the last save failed (a folder made read-only, a full disk).
    failed: AtomicBool,
}

impl PersistentCache {
    /// Loads `path` into `cache` (when the file exists and fits) and returns the
    /// persistence, saving at most every `interval` from then on.
    pub fn open(
        cache: Arc<SentenceCache>,
        path: impl Into<PathBuf>,
        interval: Duration,
    ) -> (Self, LoadOutcome) {
        let path = path.into();
        let mut writable = true;
        let outcome = if !path.exists() {
            LoadOutcome::Missing
        } else {
            match cache.load(&path) {
                Ok(n) => LoadOutcome::Loaded(n),
                Err(e) => {
                    writable = !matches!(
                        e,
                        EmbedError::CacheEncoder { .. } | EmbedError::NotACache { .. }
                    );
                    let mut why = e.to_string();
                    if !writable {
                        why.push_str(" (the file is left as it is; give another path to persist this encoder's cache)");
                    }
                    LoadOutcome::Refused(why)
                }
            }
        };
        let p = PersistentCache {
            cache,
            path,
            interval,
            last_save: Mutex::new(Instant::now()),
            writable: AtomicBool::new(writable),
            failed: AtomicBool::new(false),
        };
        (p, outcome)
    }

    pub fn cache(&self) -> &Arc<SentenceCache> {
        &self.cache
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the cache is being saved to the file: false when the file holds
    /// another encoder's cache (never written), or when the last save failed
    /// (retried at the next interval; true again once one succeeds).
    pub fn is_writable(&self) -> bool {
        self.writable.load(Ordering::Relaxed) && !self.failed.load(Ordering::Relaxed)
    }

    /// Saves now when the cache changed; returns the entries written (0 when
    /// nothing was written).
    pub fn save(&self) -> Result<usize, EmbedError> {
        let mut last = self.last_save.lock().unwrap_or_else(|e| e.into_inner());
        if !self.writable.load(Ordering::Relaxed) || !self.cache.is_dirty() {
            return Ok(0);
        }
        let saved = self.cache.save(&self.path);
        self.failed.store(saved.is_err(), Ordering::Relaxed);
        let n = saved?;
        *last = Instant::now();
        Ok(n)
    }

    /// Saves when the interval has passed since the last save and the cache
    /// changed. A failed save is reported on stderr (one line) and retried at
    /// the next interval: losing the cache file must not stop training.
    pub fn save_if_due(&self) {
        let due = self
            .last_save
            .lock()
            .map(|t| t.elapsed() >= self.interval)
            .unwrap_or(true);
        if due {
            if let Err(e) = self.save() {
                // Not `eprintln!`: it panics on a closed stderr (a server whose log
                // pipe went away), and a lost log line must not stop training.
                let line = format!("sdr: could not save the sentence cache: {e}\n");
                let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
                *self.last_save.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sdr_embed::text_key;

    fn cache(identity: &str) -> Arc<SentenceCache> {
        Arc::new(SentenceCache::new(identity, 2, 1 << 20))
    }

    #[test]
    fn open_cache_refuses_a_folder_and_reloads_its_file() {
        let enc = sdr_embed::HashEncoder::new(4);
        let dir = tempfile::tempdir().unwrap();
        let e = open_cache(&enc, 1.0, Some((dir.path(), Duration::ZERO))).err();
        assert!(matches!(e, Some(EmbedError::NotACache { .. })), "{e:?}");
        let path = dir.path().join("c.bin");
        let (cache, persist) = open_cache(&enc, 1.0, Some((&path, Duration::ZERO))).unwrap();
        let (p, outcome) = persist.unwrap();
        assert_eq!(outcome, LoadOutcome::Missing);
        cache.insert(text_key("a"), vec![1.0, 0.0, 0.0, 0.0].into());
        assert_eq!(p.save().unwrap(), 1);
        let (_, again) = open_cache(&enc, 1.0, Some((&path, Duration::ZERO))).unwrap();
        assert_eq!(again.unwrap().1, LoadOutcome::Loaded(1));
        let (_, none) = open_cache(&enc, 1.0, None).unwrap();
        assert!(none.is_none());
        assert!(open_cache(&enc, -1.0, None).is_err());
    }

    #[test]
    fn round_trip_and_interval() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("cache.bin");
        let (p, outcome) = PersistentCache::open(cache("e"), &path, Duration::from_secs(3600));
        assert_eq!(outcome, LoadOutcome::Missing);
        p.cache().insert(text_key("a"), vec![1.0, 0.0].into());
        p.save_if_due(); // not due yet
        assert!(!path.exists());
        assert_eq!(p.save().unwrap(), 1);
        assert_eq!(p.save().unwrap(), 0, "nothing changed");
        let (q, outcome) = PersistentCache::open(cache("e"), &path, Duration::ZERO);
        assert_eq!(outcome, LoadOutcome::Loaded(1));
        q.cache().insert(text_key("b"), vec![0.0, 1.0].into());
        q.save_if_due(); // interval 0: due at once
        let (_, outcome) = PersistentCache::open(cache("e"), &path, Duration::ZERO);
        assert_eq!(outcome, LoadOutcome::Loaded(2));
    }

    #[test]
    fn another_encoders_file_is_refused_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cache.bin");
        let (p, _) = PersistentCache::open(cache("mpnet/f32"), &path, Duration::ZERO);
        p.cache().insert(text_key("a"), vec![1.0, 0.0].into());
        p.save().unwrap();
        let before = std::fs::read(&path).unwrap();

        let (q, outcome) = PersistentCache::open(cache("mpnet/bf16"), &path, Duration::ZERO);
        let LoadOutcome::Refused(why) = &outcome else {
            panic!("{outcome:?}")
        };
        assert!(
            why.contains("mpnet/f32") && why.contains("mpnet/bf16"),
            "{why}"
        );
        assert!(!outcome.message(&path).contains('\n'));
        assert_eq!(q.cache().stats().entries, 0);
        q.cache().insert(text_key("b"), vec![0.0, 1.0].into());
        assert_eq!(q.save().unwrap(), 0);
        assert_eq!(std::fs::read(&path).unwrap(), before, "not overwritten");
    }

    #[test]
    fn a_failed_save_makes_the_cache_not_writable_until_one_succeeds() {
        let dir = tempfile::tempdir().unwrap();
        // A file where the cache's folder should be: no save can succeed, even as root.
        let blocker = dir.path().join("sub");
        std::fs::write(&blocker, b"a file").unwrap();
        let path = blocker.join("cache.bin");
        let (p, _) = PersistentCache::open(cache("e"), &path, Duration::ZERO);
        assert!(p.is_writable());
        p.cache().insert(text_key("a"), vec![1.0, 0.0].into());
        assert!(p.save().is_err());
        assert!(!p.is_writable(), "/health would say the cache is saved");
        std::fs::remove_file(&blocker).unwrap();
        p.cache().insert(text_key("b"), vec![0.0, 1.0].into());
        assert_eq!(p.save().unwrap(), 2);
        assert!(p.is_writable());
    }

    #[test]
    fn a_damaged_file_is_refused_then_replaced_by_a_valid_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cache.bin");
        std::fs::write(
            &path,
            b"SDRC2 garbage that is not a cache at all, long enough",
        )
        .unwrap();
        let (p, outcome) = PersistentCache::open(cache("e"), &path, Duration::ZERO);
        assert!(matches!(outcome, LoadOutcome::Refused(_)), "{outcome:?}");
        assert!(p.is_writable());
        p.cache().insert(text_key("a"), vec![1.0, 0.0].into());
        assert_eq!(p.save().unwrap(), 1);
        let (_, outcome) = PersistentCache::open(cache("e"), &path, Duration::ZERO);
        assert_eq!(outcome, LoadOutcome::Loaded(1));
    }
}
