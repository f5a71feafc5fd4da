//! The transformer under the pooling layer, chosen from `config.json`'s `model_type`:
//! MPNet (this crate's `mpnet.rs` on candle, or `packed.rs` for f32 and mixed-bf16 on
//! the CPU) or the BERT family (candle-transformers' BERT).

use std::path::Path;

use candle_core::safetensors::MmapedSafetensors;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert;

use super::mpnet;
use super::pack_cache;
use super::packed::{PackedMpnet, Weights};
use crate::error::{EmbedError, Result};

/// Set to `candle` to run MPNet on the CPU through the candle graph instead of the
/// packed forward pass (same numbers; for A/B timing and as a fallback).
pub const GRAPH_ENV: &str = "SDR_ENCODER_GRAPH";

/// A loaded transformer returning the last hidden state.
pub enum Backbone {
    Mpnet(mpnet::MpnetModel),
    /// MPNet over packed tokens, without padding (f32 and mixed bf16 on the CPU).
    MpnetPacked(PackedMpnet),
    Bert(bert::BertModel),
}

/// What the folder's `config.json` says, as far as SDR needs.
pub struct Loaded {
    pub backbone: Backbone,
    pub hidden_size: usize,
    pub pad_id: u32,
    pub max_position_embeddings: usize,
}

fn read_json(path: &Path) -> Result<serde_json::Value> {
    let text = std::fs::read_to_string(path).map_err(|source| EmbedError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| EmbedError::Json {
        path: path.to_path_buf(),
        source,
    })
}

impl Backbone {
    /// Loads `config.json` and `model.safetensors` from `dir` with weights in `dtype`;
    /// the packed MPNet through the packed-weights cache of this process
    /// ([`pack_cache::cache_root`]).
    pub fn load(dir: &Path, dtype: DType, mixed_bf16: bool, device: &Device) -> Result<Loaded> {
        let root = pack_cache::cache_root();
        Self::load_cached(dir, dtype, mixed_bf16, device, root.as_deref())
    }

    /// [`Backbone::load`] with the packed-weights cache under `cache` (none: packed
    /// in memory).
    pub(crate) fn load_cached(
        dir: &Path,
        dtype: DType,
        mixed_bf16: bool,
        device: &Device,
        cache: Option<&Path>,
    ) -> Result<Loaded> {
        let config_path = dir.join("config.json");
        let value = read_json(&config_path)?;
        let model_type = value
            .get("model_type")
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_string();
        let weights = dir.join("model.safetensors");
        if !weights.is_file() {
            return Err(EmbedError::MissingFile {
                dir: dir.to_path_buf(),
                file: "model.safetensors",
            });
        }
        let model_err = |e: candle_core::Error| EmbedError::model(dir, &e);
        let json_err = |source| EmbedError::Json {
            path: config_path.clone(),
            source,
        };
        // SAFETY: the file is memory-mapped read-only; SDR never writes model files
        // while an encoder holds them (the fetch script renames complete folders).
        let st = unsafe { MmapedSafetensors::new(&weights) }.map_err(model_err)?;
        // The one mapping serves the candle graphs too.
        let vars =
            |st: MmapedSafetensors| VarBuilder::from_backend(Box::new(st), dtype, device.clone());
        match model_type.as_str() {
            "mpnet" => {
                let cfg: mpnet::Config = serde_json::from_value(value).map_err(json_err)?;
                let candle_graph = std::env::var(GRAPH_ENV).is_ok_and(|v| v == "candle");
                let backbone = if device.is_cpu() && dtype == DType::F32 && !candle_graph {
                    let pack = || PackedMpnet::load(&Weights::Mapped(&st), &cfg, mixed_bf16);
                    let (packed, _) = pack_cache::load_or_build(cache, dir, &cfg, mixed_bf16, pack)
                        .map_err(model_err)?;
                    Backbone::MpnetPacked(packed)
                } else {
                    Backbone::Mpnet(
                        mpnet::MpnetModel::load_with(vars(st), &cfg, mixed_bf16)
                            .map_err(model_err)?,
                    )
                };
                Ok(Loaded {
                    backbone,
                    hidden_size: cfg.hidden_size,
                    pad_id: cfg.pad_token_id,
                    max_position_embeddings: cfg.max_position_embeddings
                        - cfg.pad_token_id as usize
                        - 1,
                })
            }
            "bert" if mixed_bf16 => Err(EmbedError::InvalidOption {
                name: "precision",
                value: "mixed-bf16".into(),
                reason: "only implemented for MPNet models",
            }),
            "bert" => {
                let cfg: bert::Config = serde_json::from_value(value).map_err(json_err)?;
                let model = bert::BertModel::load(vars(st), &cfg).map_err(model_err)?;
                Ok(Loaded {
                    backbone: Backbone::Bert(model),
                    hidden_size: cfg.hidden_size,
                    pad_id: cfg.pad_token_id as u32,
                    max_position_embeddings: cfg.max_position_embeddings,
                })
            }
            other => Err(EmbedError::UnsupportedModel {
                path: config_path,
                model_type: other.to_string(),
            }),
        }
    }

    /// The packed MPNet, which takes token lists directly (no padding to build).
    pub fn packed(&self) -> Option<&PackedMpnet> {
        match self {
            Backbone::MpnetPacked(m) => Some(m),
            _ => None,
        }
    }

    /// The candle graphs: `input_ids`, `attention_mask` `[batch, seq]` u32; returns
    /// `[batch, seq, hidden]`. The packed MPNet runs through [`Backbone::packed`].
    pub fn forward(
        &self,
        input_ids: &Tensor,
        attention_mask: &Tensor,
    ) -> candle_core::Result<Tensor> {
        match self {
            Backbone::Mpnet(m) => m.forward(input_ids, attention_mask),
            Backbone::MpnetPacked(_) => candle_core::bail!(
                "the packed MPNet takes token lists without padding: call it through `packed()`"
            ),
            Backbone::Bert(m) => {
                let token_type_ids = input_ids.zeros_like()?;
                m.forward(input_ids, &token_type_ids, Some(attention_mask))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// all-mpnet-base-v2 (as the parity tests find it) packed in memory, written to
    /// the packed-weights cache, and mapped from it: the same bits.
    #[test]
    fn the_real_model_mapped_from_the_cache_gives_the_bits_of_a_fresh_pack() {
        let dir = crate::discover::resolve_model_dir(None)
            .unwrap_or_else(|e| panic!("{e} (the parity tests need it too)"));
        let root = tempfile::tempdir().unwrap();
        let seqs: Vec<Vec<u32>> = (1..40)
            .map(|len| {
                (0..len)
                    .map(|j| (j * 7919 + len * 131) % 30000 + 3)
                    .collect()
            })
            .collect();
        let refs: Vec<&[u32]> = seqs.iter().map(|s| s.as_slice()).collect();
        let mut precisions = vec![false];
        if crate::gemm::Bf16Gemm::here().is_some() {
            precisions.push(true);
        }
        let dev = Device::Cpu;
        for mixed in precisions {
            let out = |cache: Option<&Path>| {
                let loaded = Backbone::load_cached(&dir, DType::F32, mixed, &dev, cache).unwrap();
                let m = loaded.backbone.packed().expect("the packed MPNet");
                m.pooled(&refs, true).unwrap()
            };
            let fresh = out(None);
            assert_eq!(out(Some(root.path())), fresh, "written, mixed bf16 {mixed}");
            assert_eq!(out(Some(root.path())), fresh, "mapped, mixed bf16 {mixed}");
        }
    }
}
