//! Where a shard sits in the whole: its `I/N` ([`ShardSpec`]) and what its
//! file's header records about it ([`ShardInfo`]). A leaf below `store.rs`
//! (which reads and writes the header) and `shard.rs` (which cuts and merges).

use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;
use std::str::FromStr;

use crate::error::{CorpusError, Result};

/// `I/N`: shard `I` (0-based) of `N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardSpec {
    pub index: usize,
    pub count: usize,
}

impl FromStr for ShardSpec {
    type Err = CorpusError;
    fn from_str(s: &str) -> Result<Self> {
        let bad = |reason: &str| CorpusError::InvalidOption {
            name: "shard",
            value: s.to_string(),
            reason: reason.to_string(),
        };
        let (i, n) = s
            .split_once('/')
            .ok_or_else(|| bad("expected I/N, e.g. 0/4 (I counts from 0)"))?;
        let index: usize = i
            .trim()
            .parse()
            .map_err(|_| bad("I is not a non-negative integer"))?;
        let count: usize = n
            .trim()
            .parse()
            .map_err(|_| bad("N is not a positive integer"))?;
        if count == 0 {
            return Err(bad("N must be at least 1"));
        }
        if index >= count {
            return Err(bad("I must be below N (shards are numbered 0..N-1)"));
        }
        Ok(ShardSpec { index, count })
    }
}

impl std::fmt::Display for ShardSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl ShardSpec {
    /// Positions of this shard's reports among `n` selected reports.
    pub fn range(&self, n: usize) -> Range<usize> {
        // u128: i * n cannot overflow for any realistic n, but costs nothing.
        let at = |k: usize| ((k as u128 * n as u128) / self.count as u128) as usize;
        at(self.index)..at(self.index + 1)
    }
}

/// What a shard file records about its place in the whole (metadata keys
/// `shard_index`, `shard_count`, `shard_first`, `shard_total`,
/// `selection_sha256`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ShardInfo {
    pub index: usize,
    pub count: usize,
    /// Position of the shard's first report in the selection.
    pub first: usize,
    /// Reports in the whole selection.
    pub total: usize,
    pub selection_sha256: String,
}

impl ShardInfo {
    pub(crate) const KEYS: [&'static str; 5] = [
        "shard_index",
        "shard_count",
        "shard_first",
        "shard_total",
        "selection_sha256",
    ];

    pub(crate) fn to_meta(&self) -> Vec<(&'static str, String)> {
        vec![
            ("shard_index", self.index.to_string()),
            ("shard_count", self.count.to_string()),
            ("shard_first", self.first.to_string()),
            ("shard_total", self.total.to_string()),
            ("selection_sha256", self.selection_sha256.clone()),
        ]
    }

    /// Reads the shard keys of a corpus header: `None` when there are none
    /// (an ordinary corpus); an error naming `path` when they are partial or
    /// malformed.
    pub(crate) fn from_meta(path: &Path, meta: &HashMap<String, String>) -> Result<Option<Self>> {
        if Self::KEYS.iter().all(|k| !meta.contains_key(*k)) {
            return Ok(None);
        }
        let get = |k: &str| {
            meta.get(k)
                .ok_or_else(|| CorpusError::bad(path, format!("shard metadata key `{k}` missing")))
        };
        let num = |k: &str| -> Result<usize> {
            let v = get(k)?;
            v.parse().map_err(|_| {
                CorpusError::bad(path, format!("metadata `{k}` = `{v}` is not a count"))
            })
        };
        let info = ShardInfo {
            index: num("shard_index")?,
            count: num("shard_count")?,
            first: num("shard_first")?,
            total: num("shard_total")?,
            selection_sha256: get("selection_sha256")?.clone(),
        };
        if info.index >= info.count {
            return Err(CorpusError::bad(
                path,
                format!(
                    "shard index {} is not below the count {}",
                    info.index, info.count
                ),
            ));
        }
        Ok(Some(info))
    }

    pub fn spec(&self) -> ShardSpec {
        ShardSpec {
            index: self.index,
            count: self.count,
        }
    }
}
