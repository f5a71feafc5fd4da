//! Content-addressed sentence cache: embeddings keyed by the sha256 of the text, so a
//! sentence that recurs (radiology reports repeat many) is embedded once per encoder.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use sha2::{Digest, Sha256};

use crate::error::{EmbedError, Result};

/// Key of a text: sha256 of its UTF-8 bytes.
pub type TextKey = [u8; 32];

/// sha256 of `text`.
pub fn text_key(text: &str) -> TextKey {
    Sha256::digest(text.as_bytes()).into()
}

/// Thread-safe in-memory map from text key to its (pooled, normalised) embedding.
#[derive(Default)]
pub struct SentenceCache {
    map: RwLock<HashMap<TextKey, Arc<[f32]>>>,
    hits: AtomicU64,
    misses: AtomicU64,
}

/// Counters of a cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheStats {
    pub entries: usize,
    pub hits: u64,
    pub misses: u64,
}

impl SentenceCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// The cached vector of `key`, counting a hit or a miss.
    pub fn get(&self, key: &TextKey) -> Option<Arc<[f32]>> {
        let found = self
            .map
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .cloned();
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    pub fn insert(&self, key: TextKey, vector: Arc<[f32]>) {
        self.map
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, vector);
    }

    pub fn stats(&self) -> CacheStats {
        CacheStats {
            entries: self.map.read().unwrap_or_else(|e| e.into_inner()).len(),
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
        }
    }

    pub fn clear(&self) {
        self.map.write().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// Writes the cache to `path` as a binary file: magic `SDRC1`, the dimension and
    /// count as little-endian u64, then per entry the 32-byte key and `dim` f32 values.
    /// Written to a temporary file and renamed (atomic).
    pub fn save(&self, path: &Path, dim: usize) -> Result<()> {
        let map = self.map.read().unwrap_or_else(|e| e.into_inner());
        let mut bytes = Vec::with_capacity(21 + map.len() * (32 + 4 * dim));
        bytes.extend_from_slice(b"SDRC1");
        bytes.extend_from_slice(&(dim as u64).to_le_bytes());
        let entries: Vec<_> = map.iter().filter(|(_, v)| v.len() == dim).collect();
        bytes.extend_from_slice(&(entries.len() as u64).to_le_bytes());
        for (k, v) in entries {
            bytes.extend_from_slice(k);
            for x in v.iter() {
                bytes.extend_from_slice(&x.to_le_bytes());
            }
        }
        let io = |source| EmbedError::Io {
            path: path.to_path_buf(),
            source,
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        std::fs::write(&tmp, &bytes).map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)
    }

    /// Adds the entries of a file written by [`SentenceCache::save`]; returns how many.
    /// A file of another dimension or a damaged file is an error naming the path.
    pub fn load(&self, path: &Path, dim: usize) -> Result<usize> {
        let bytes = std::fs::read(path).map_err(|source| EmbedError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let bad = |reason: &'static str| EmbedError::InvalidOption {
            name: "cache file",
            value: path.display().to_string(),
            reason,
        };
        if bytes.len() < 21 || &bytes[..5] != b"SDRC1" {
            return Err(bad("not an SDR sentence-cache file"));
        }
        let file_dim = u64::from_le_bytes(bytes[5..13].try_into().unwrap_or_default()) as usize;
        let n = u64::from_le_bytes(bytes[13..21].try_into().unwrap_or_default()) as usize;
        if file_dim != dim {
            return Err(bad("embedding dimension differs from the model's"));
        }
        let stride = 32 + 4 * dim;
        if bytes.len() != 21 + n.saturating_mul(stride) {
            return Err(bad("truncated or damaged"));
        }
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        for chunk in bytes[21..].chunks_exact(stride) {
            let mut key = [0u8; 32];
            key.copy_from_slice(&chunk[..32]);
            let v: Vec<f32> = chunk[32..]
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            map.insert(key, v.into());
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hit_after_insert_and_round_trip() {
        let c = SentenceCache::new();
        let k = text_key("No acute disease.");
        assert!(c.get(&k).is_none());
        c.insert(k, vec![1.0, 2.0].into());
        assert_eq!(c.get(&k).as_deref(), Some(&[1.0f32, 2.0][..]));
        assert_eq!(
            c.stats(),
            CacheStats {
                entries: 1,
                hits: 1,
                misses: 1
            }
        );
        let dir = std::env::temp_dir().join(format!("sdr-cache-test-{}", std::process::id()));
        let path = dir.join("c.bin");
        c.save(&path, 2).unwrap();
        let d = SentenceCache::new();
        assert_eq!(d.load(&path, 2).unwrap(), 1);
        assert!(d.load(&path, 3).is_err());
        assert_eq!(d.get(&k).as_deref(), Some(&[1.0f32, 2.0][..]));
        let _ = std::fs::remove_dir_all(dir);
    }
}
