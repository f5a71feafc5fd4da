//! Where the model folder is, and the identity of its weights.
//!
//! Lookup order: an explicit path (the CLI's `--model`), then the environment
//! variable `SDR_MODEL`, then the default cache folder
//! `${SDR_HOME:-$HOME/.cache/sdr}/models/all-mpnet-base-v2`, which
//! `scripts/fetch-model.sh` fills.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::{EmbedError, Result};

/// Environment variable naming the model folder.
pub const MODEL_ENV: &str = "SDR_MODEL";
/// Name of the default model, the encoder of SPEC §2.
pub const DEFAULT_MODEL: &str = "all-mpnet-base-v2";
/// sha256 of the default model's `model.safetensors` (SPEC §2).
pub const DEFAULT_MODEL_SHA256: &str =
    "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658";
/// Sidecar file, next to `model.safetensors`, caching its sha256.
pub const HASH_SIDECAR: &str = ".sha256";

/// The SDR home: `$SDR_HOME`, else `$HOME/.cache/sdr` (None without a home).
pub fn sdr_home() -> Option<PathBuf> {
    if let Some(h) = std::env::var_os("SDR_HOME").filter(|h| !h.is_empty()) {
        return Some(PathBuf::from(h));
    }
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".cache").join("sdr"))
}

/// The default model folder, `<sdr_home>/models/all-mpnet-base-v2`.
pub fn default_model_dir() -> Option<PathBuf> {
    sdr_home().map(|h| h.join("models").join(DEFAULT_MODEL))
}

/// Finds the model folder: `explicit`, else `$SDR_MODEL`, else the default cache
/// folder. The folder must exist and hold `config.json`; otherwise the error says
/// which place was looked at (or, for a folder that exists, what it lacks) and how
/// to fetch the model.
pub fn resolve_model_dir(explicit: Option<&Path>) -> Result<PathBuf> {
    let (dir, origin) = if let Some(p) = explicit {
        (p.to_path_buf(), "the folder given")
    } else if let Some(p) = std::env::var_os(MODEL_ENV).filter(|p| !p.is_empty()) {
        (PathBuf::from(p), "from SDR_MODEL")
    } else {
        match default_model_dir() {
            Some(p) => (p, "default cache folder"),
            None => {
                return Err(EmbedError::ModelDirMissing {
                    dir: PathBuf::from("$HOME/.cache/sdr/models/all-mpnet-base-v2"),
                    origin: "neither SDR_HOME nor HOME is set",
                })
            }
        }
    };
    if !dir.join("config.json").is_file() {
        // A folder that exists is not "not found": say what it lacks.
        if dir.is_dir() {
            return Err(EmbedError::MissingFile {
                dir,
                file: "config.json",
            });
        }
        return Err(EmbedError::ModelDirMissing { dir, origin });
    }
    Ok(dir)
}

/// sha256 (hex) of `<dir>/model.safetensors`. Taken from the sidecar `.sha256` when
/// present (written by `scripts/fetch-model.sh` after it verified the file), else
/// computed once and written to the sidecar (a read-only folder is not an error).
pub fn weights_sha256(dir: &Path) -> Result<String> {
    let sidecar = dir.join(HASH_SIDECAR);
    if let Ok(s) = std::fs::read_to_string(&sidecar) {
        let s = s.trim();
        if s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(s.to_ascii_lowercase());
        }
    }
    let path = dir.join("model.safetensors");
    let io = |source| EmbedError::Io {
        path: path.clone(),
        source,
    };
    let mut file = std::fs::File::open(&path).map_err(io)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(io)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    let hex = to_hex(&hasher.finalize());
    // Best effort (a folder we cannot write still loads), but never a torn file.
    let _ = sdr_io::write_atomic(&sidecar, |f| f.write_all(format!("{hex}\n").as_bytes()));
    Ok(hex)
}

pub(crate) fn to_hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(HEX[(b >> 4) as usize] as char);
        s.push(HEX[(b & 15) as usize] as char);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_missing_dir_names_fetch_script() {
        let err = resolve_model_dir(Some(Path::new("/nonexistent/sdr-model"))).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("/nonexistent/sdr-model"), "{msg}");
        assert!(msg.contains("scripts/fetch-model.sh"), "{msg}");
        assert!(!msg.contains('\n'));
    }

    #[test]
    fn a_folder_without_model_files_names_the_missing_file() {
        let dir = tempfile::tempdir().unwrap();
        let err = resolve_model_dir(Some(dir.path())).unwrap_err();
        assert!(matches!(err, EmbedError::MissingFile { .. }), "{err}");
        let msg = err.to_string();
        assert!(msg.contains("has no config.json"), "{msg}");
        assert!(!msg.contains("not found"), "{msg}");
    }

    #[test]
    fn hex_encodes() {
        assert_eq!(to_hex(&[0x00, 0xab, 0xff]), "00abff");
    }
}
