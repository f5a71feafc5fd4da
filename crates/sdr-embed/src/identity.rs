//! What identifies a loaded model's vectors: fixed once, when [`crate::Encoder::load`]
//! has resolved the folder and the precision, and formatted here only.
//!
//! Three strings name a model where something is kept on disk, and each must stay
//! what it is, or the files keyed by it no longer load:
//!
//! - the **recorded name** (`all-mpnet-base-v2`, `all-mpnet-base-v2+bf16`): what a
//!   corpus file records as its encoder ([`EncoderIdentity::recorded_name`]);
//! - the **identity** (`all-mpnet-base-v2@<sha256>/f32`): what the reward's sentence
//!   caches are keyed by (`SDRReward(cache_path=...)`, `sdr serve --cache`;
//!   [`EncoderIdentity::identity`], the model's [`crate::SentenceEncoder::identity`]);
//! - the **cache key** (`all-mpnet-base-v2/f32`): what [`crate::Encoder::cache`] and
//!   the CLI's `--cache-dir` files are keyed by, the file's name carrying the weights'
//!   hash ([`EncoderIdentity::cache_key`], [`EncoderIdentity::cache_file_name`]).

use std::path::{Path, PathBuf};

use crate::discover::weights_sha256;
use crate::error::Result;
use crate::precision::Precision;

/// The names of one loaded model (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncoderIdentity {
    dir: PathBuf,
    name: String,
    precision: Precision,
    weights_sha256: String,
    recorded: String,
    identity: String,
    cache_key: String,
}

impl EncoderIdentity {
    /// The identity of the model folder `dir` run at `precision` (the one in force,
    /// after `bf16` was resolved for the device and CPU). The weights' sha256 comes
    /// from the folder's `.sha256` sidecar, else is computed once and the sidecar
    /// written ([`crate::weights_sha256`]).
    ///
    /// # Errors
    /// `model.safetensors` cannot be read.
    pub(crate) fn load(dir: &Path, precision: Precision) -> Result<Self> {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| dir.display().to_string());
        let weights_sha256 = weights_sha256(dir)?;
        // f32 adds nothing, so corpora built before precision existed keep matching;
        // every bf16 variant is `+bf16`, on any device.
        let recorded = match precision {
            Precision::F32 => name.clone(),
            Precision::Bf16 | Precision::Bf16Candle | Precision::MixedBf16 => {
                format!("{name}+bf16")
            }
            Precision::F16 => format!("{name}+f16"),
        };
        Ok(EncoderIdentity {
            dir: dir.to_path_buf(),
            identity: format!("{name}@{weights_sha256}/{precision}"),
            cache_key: format!("{name}/{precision}"),
            name,
            precision,
            weights_sha256,
            recorded,
        })
    }

    /// The model folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The model's name: its folder's name (e.g. `all-mpnet-base-v2`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The precision in force.
    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// sha256 (hex) of `model.safetensors`, as read at load.
    pub fn weights_sha256(&self) -> &str {
        &self.weights_sha256
    }

    /// The encoder name a corpus records: the model's name, plus `+bf16` (or `+f16`)
    /// when its vectors are computed at reduced precision, so that a corpus built at
    /// one precision refuses queries embedded at another. f32 adds nothing. Every bf16
    /// variant is `+bf16`, on any device: bf16 vectors of two devices differ in
    /// rounding, each within bf16's tolerance of f32.
    pub fn recorded_name(&self) -> &str {
        &self.recorded
    }

    /// `name@sha256/precision`: everything the vectors depend on, the model's
    /// [`crate::SentenceEncoder::identity`], which the reward's sentence caches are
    /// keyed by.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// `name/precision`: the identity of [`crate::Encoder::cache`] and of the CLI's
    /// `--cache-dir` files, whose name ([`EncoderIdentity::cache_file_name`]) carries
    /// the weights' hash.
    pub fn cache_key(&self) -> &str {
        &self.cache_key
    }

    /// The name of this model's `--cache-dir` file: `name-<16 hex of the weights'
    /// sha256>-<Precision>.sdrc` (e.g. `all-mpnet-base-v2-78c0197b6159d926-F32.sdrc`).
    pub fn cache_file_name(&self) -> String {
        format!(
            "{}-{}-{:?}.sdrc",
            self.name,
            &self.weights_sha256[..16],
            self.precision
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The strings corpus files and sentence caches on disk were written with: they
    /// must never change.
    #[test]
    fn the_names_are_those_files_on_disk_are_keyed_by() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("all-mpnet-base-v2");
        std::fs::create_dir(&dir).unwrap();
        let sha = "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658";
        std::fs::write(dir.join(".sha256"), format!("{sha}\n")).unwrap();
        for (precision, recorded, shown, file) in [
            (Precision::F32, "all-mpnet-base-v2", "f32", "F32"),
            (Precision::Bf16, "all-mpnet-base-v2+bf16", "bf16", "Bf16"),
            (
                Precision::Bf16Candle,
                "all-mpnet-base-v2+bf16",
                "bf16-candle",
                "Bf16Candle",
            ),
            (Precision::F16, "all-mpnet-base-v2+f16", "f16", "F16"),
            (
                Precision::MixedBf16,
                "all-mpnet-base-v2+bf16",
                "mixed-bf16",
                "MixedBf16",
            ),
        ] {
            let id = EncoderIdentity::load(&dir, precision).unwrap();
            assert_eq!(id.name(), "all-mpnet-base-v2");
            assert_eq!(id.recorded_name(), recorded);
            assert_eq!(id.weights_sha256(), sha);
            assert_eq!(id.identity(), format!("all-mpnet-base-v2@{sha}/{shown}"));
            assert_eq!(id.cache_key(), format!("all-mpnet-base-v2/{shown}"));
            assert_eq!(
                id.cache_file_name(),
                format!("all-mpnet-base-v2-78c0197b6159d926-{file}.sdrc")
            );
        }
    }

    #[test]
    fn unreadable_weights_fail_the_load() {
        let tmp = tempfile::tempdir().unwrap();
        let e = EncoderIdentity::load(tmp.path(), Precision::F32).unwrap_err();
        assert!(e.to_string().contains("model.safetensors"), "{e}");
    }
}
