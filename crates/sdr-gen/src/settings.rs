//! The settings a resumable run's records hold, compared on `--resume`.
//!
//! `sdr generate --resume` and live `sdr prune --resume` keep the studies a
//! stopped run wrote, but only when they were made with this run's settings:
//! one output file never mixes two configurations. Each command describes a
//! record's settings as one [`RunSettings`] (parsed from the record, or built
//! from its fields) and this run's as another; [`RunSettings::diff`] names the
//! first one that differs.
//!
//! A setting a command does not check is `None` on both sides. A setting a
//! record lacks (or holds as `null`) reads as `None` and shows as `none`.

use std::collections::{HashMap, HashSet};
use std::fmt;

use serde::{Deserialize, Serialize};

/// The sampling settings of a generation, as live `sdr prune` records nest
/// them under `"sampling"`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SamplingSettings {
    /// Candidates per study (`-k`).
    pub k: Option<usize>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub max_tokens: Option<usize>,
    pub repetition_penalty: Option<f64>,
    pub prefill: Option<String>,
}

impl SamplingSettings {
    /// The settings `req` samples with.
    pub fn of(req: &crate::Request) -> SamplingSettings {
        SamplingSettings {
            k: Some(req.k),
            temperature: Some(req.temperature),
            top_p: Some(req.top_p),
            max_tokens: Some(req.max_tokens),
            repetition_penalty: Some(req.repetition_penalty),
            prefill: req.prefill.clone(),
        }
    }
}

/// Everything that determines a study's record in a resumable run, as the
/// record holds it (the field names are the record's). Compared by equality.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunSettings {
    /// `live` or `replay` (`sdr prune`).
    pub mode: Option<String>,
    /// The back-end's description (`local:...gguf`, `openai:...`).
    pub backend: Option<String>,
    /// The prompt template's name.
    pub prompt: Option<String>,
    /// The study's context (indication, ...) given to the prompt.
    pub context: Option<String>,
    /// The study's seed.
    pub seed: Option<u64>,
    /// Absent (`null`) in a record reads as every sampling setting `None`.
    #[serde(deserialize_with = "null_as_default")]
    pub sampling: SamplingSettings,
    /// The selection policy key (`chamfer@min`, `clinical/ot@avg`).
    pub policy: Option<String>,
    pub warmup: Option<usize>,
    pub fraction: Option<f64>,
    pub survivors: Option<usize>,
    /// The corpus file's `meta_sha256`.
    pub corpus_sha256: Option<String>,
    /// The study's full token count (`--full`).
    pub tokens_full: Option<usize>,
}

fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// One of the [`RunSettings`], in the order [`RunSettings::diff`] checks them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    Mode,
    Backend,
    Prompt,
    Context,
    Seed,
    K,
    Temperature,
    TopP,
    MaxTokens,
    RepetitionPenalty,
    Prefill,
    Policy,
    Warmup,
    Fraction,
    Survivors,
    Corpus,
    FullTokens,
}

impl Setting {
    /// The option (or, for what no one option sets, the setting) that an
    /// error names: `--warmup`, `-k`, `back-end`, `--corpus (sha256)`, ...
    pub fn option(self) -> &'static str {
        match self {
            Setting::Mode => "mode",
            Setting::Backend => "back-end",
            Setting::Prompt => "--prompt",
            Setting::Context => "context",
            Setting::Seed => "seed",
            Setting::K => "-k",
            Setting::Temperature => "--temperature",
            Setting::TopP => "--top-p",
            Setting::MaxTokens => "--max-tokens",
            Setting::RepetitionPenalty => "--repetition-penalty",
            Setting::Prefill => "--prefill",
            Setting::Policy => "--metric/--agg",
            Setting::Warmup => "--warmup",
            Setting::Fraction => "--fraction",
            Setting::Survivors => "--survivors",
            Setting::Corpus => "--corpus (sha256)",
            Setting::FullTokens => "--full tokens",
        }
    }
}

/// The first setting in which two [`RunSettings`] differ, with both values
/// as an error shows them (`none` for a missing one; strings as they are,
/// numbers as JSON writes them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingsDiff {
    pub setting: Setting,
    pub was: String,
    pub now: String,
}

impl fmt::Display for SettingsDiff {
    /// `--warmup 1, this run has 2`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}, this run has {}",
            self.setting.option(),
            self.was,
            self.now
        )
    }
}

/// A setting's value in an error message.
fn show<T: Serialize>(v: &Option<T>) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::Null) => "none".into(),
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => "?".into(),
    }
}

fn differs<T: PartialEq + Serialize>(
    setting: Setting,
    was: &Option<T>,
    now: &Option<T>,
) -> Option<SettingsDiff> {
    (was != now).then(|| SettingsDiff {
        setting,
        was: show(was),
        now: show(now),
    })
}

impl RunSettings {
    /// The settings `sdr generate --resume` checks of a generated study:
    /// back-end, prompt, seed and K (the others unset, so never compared).
    pub fn generated(backend: &str, prompt: &str, seed: u64, k: usize) -> RunSettings {
        RunSettings {
            backend: Some(backend.to_string()),
            prompt: Some(prompt.to_string()),
            seed: Some(seed),
            sampling: SamplingSettings {
                k: Some(k),
                ..SamplingSettings::default()
            },
            ..RunSettings::default()
        }
    }

    /// These settings as a record written now reads them back: through
    /// JSON text, so that numbers compare as parsed from a file.
    pub fn as_written(&self) -> RunSettings {
        serde_json::to_string(self)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_else(|| self.clone())
    }

    /// The first setting (in [`Setting`] order) in which `self`, a kept
    /// record's settings, differs from `now`, this run's, compared as a
    /// record written now would hold them ([`RunSettings::as_written`]);
    /// `None` when they are the same.
    pub fn diff(&self, now: &RunSettings) -> Option<SettingsDiff> {
        let now = now.as_written();
        if *self == now {
            return None;
        }
        let (a, b) = (&self.sampling, &now.sampling);
        differs(Setting::Mode, &self.mode, &now.mode)
            .or_else(|| differs(Setting::Backend, &self.backend, &now.backend))
            .or_else(|| differs(Setting::Prompt, &self.prompt, &now.prompt))
            .or_else(|| differs(Setting::Context, &self.context, &now.context))
            .or_else(|| differs(Setting::Seed, &self.seed, &now.seed))
            .or_else(|| differs(Setting::K, &a.k, &b.k))
            .or_else(|| differs(Setting::Temperature, &a.temperature, &b.temperature))
            .or_else(|| differs(Setting::TopP, &a.top_p, &b.top_p))
            .or_else(|| differs(Setting::MaxTokens, &a.max_tokens, &b.max_tokens))
            .or_else(|| {
                differs(
                    Setting::RepetitionPenalty,
                    &a.repetition_penalty,
                    &b.repetition_penalty,
                )
            })
            .or_else(|| differs(Setting::Prefill, &a.prefill, &b.prefill))
            .or_else(|| differs(Setting::Policy, &self.policy, &now.policy))
            .or_else(|| differs(Setting::Warmup, &self.warmup, &now.warmup))
            .or_else(|| differs(Setting::Fraction, &self.fraction, &now.fraction))
            .or_else(|| differs(Setting::Survivors, &self.survivors, &now.survivors))
            .or_else(|| differs(Setting::Corpus, &self.corpus_sha256, &now.corpus_sha256))
            .or_else(|| differs(Setting::FullTokens, &self.tokens_full, &now.tokens_full))
    }
}

/// The seed of the candidates of the study at `index` (input order) in a run seeded with
/// `base`: one rule for `sdr generate`, live `sdr prune` and their resume checks, so that
/// a study keeps its candidates wherever it is generated.
pub fn study_seed(base: u64, index: usize) -> u64 {
    base.wrapping_add(1000 * index as u64)
}

/// Why a record a stopped run kept cannot be resumed.
#[derive(Debug, Clone, PartialEq)]
pub enum KeptError {
    /// Its study is not among this run's studies.
    Unknown { id: String },
    /// It was written with other settings: the first that differs.
    Differs { id: String, diff: SettingsDiff },
    /// A record of the same study came earlier.
    Twice { id: String },
}

impl fmt::Display for KeptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeptError::Unknown { id } => write!(f, "study {id} is not among this run's studies"),
            KeptError::Differs { id, diff } => {
                write!(
                    f,
                    "study {id} was made with {diff}; resume with the same settings"
                )
            }
            KeptError::Twice { id } => write!(f, "study {id} appears twice"),
        }
    }
}

/// The resume check of a run over `ids` (its studies, in input order): each kept record
/// is matched to its study and compared with the settings this run gives that study, so
/// that one output file never mixes two configurations.
pub struct Resume<'a> {
    index: HashMap<&'a str, usize>,
    seen: HashSet<usize>,
}

impl<'a> Resume<'a> {
    pub fn new(ids: impl IntoIterator<Item = &'a str>) -> Self {
        let mut index = HashMap::new();
        for (i, id) in ids.into_iter().enumerate() {
            // The first study of an id is the one a record belongs to.
            index.entry(id).or_insert(i);
        }
        Resume {
            index,
            seen: HashSet::new(),
        }
    }

    /// Checks a kept record of study `id` written with settings `was` against
    /// `expected(index)`, this run's settings for the study at `index`; returns that
    /// index. Checked in this order: the study is this run's, the settings are the
    /// same, the study was not kept before.
    pub fn check(
        &mut self,
        id: &str,
        was: &RunSettings,
        expected: impl FnOnce(usize) -> RunSettings,
    ) -> Result<usize, KeptError> {
        let Some(&index) = self.index.get(id) else {
            return Err(KeptError::Unknown { id: id.to_string() });
        };
        if let Some(diff) = was.diff(&expected(index)) {
            return Err(KeptError::Differs {
                id: id.to_string(),
                diff,
            });
        }
        if !self.seen.insert(index) {
            return Err(KeptError::Twice { id: id.to_string() });
        }
        Ok(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live() -> RunSettings {
        RunSettings {
            mode: Some("live".into()),
            backend: Some("openai:http://x/v1 m".into()),
            prompt: Some("p2".into()),
            context: None,
            seed: Some(0),
            sampling: SamplingSettings {
                k: Some(4),
                temperature: Some(0.7),
                top_p: Some(0.95),
                max_tokens: Some(160),
                repetition_penalty: Some(1.0),
                prefill: None,
            },
            policy: Some("chamfer@min".into()),
            warmup: Some(1),
            fraction: Some(0.5),
            survivors: Some(1),
            corpus_sha256: Some("abc".into()),
            tokens_full: None,
        }
    }

    #[test]
    fn the_same_settings_have_no_diff() {
        assert_eq!(live().diff(&live()), None);
        assert_eq!(RunSettings::default().diff(&RunSettings::default()), None);
    }

    #[test]
    fn the_diff_names_the_first_differing_option() {
        let was = live();
        let mut now = live();
        now.warmup = Some(2);
        now.sampling.temperature = Some(0.2);
        let d = was.diff(&now).unwrap();
        assert_eq!(d.setting, Setting::Temperature);
        assert_eq!(d.to_string(), "--temperature 0.7, this run has 0.2");
        now.sampling.temperature = Some(0.7);
        assert_eq!(
            was.diff(&now).unwrap().to_string(),
            "--warmup 1, this run has 2"
        );
        type Edit = fn(&mut RunSettings);
        let cases: [(Edit, &str); 7] = [
            (
                |s| s.policy = Some("chamfer@avg".into()),
                "--metric/--agg chamfer@min, this run has chamfer@avg",
            ),
            (|s| s.seed = Some(5), "seed 0, this run has 5"),
            (|s| s.sampling.k = Some(8), "-k 4, this run has 8"),
            (
                |s| s.fraction = Some(1.0),
                "--fraction 0.5, this run has 1.0",
            ),
            (
                |s| s.tokens_full = Some(9),
                "--full tokens none, this run has 9",
            ),
            (
                |s| s.corpus_sha256 = Some("def".into()),
                "--corpus (sha256) abc, this run has def",
            ),
            (
                |s| s.context = Some("Indication: x".into()),
                "context none, this run has Indication: x",
            ),
        ];
        for (f, want) in cases {
            let mut now = live();
            f(&mut now);
            assert_eq!(was.diff(&now).unwrap().to_string(), want);
        }
    }

    #[test]
    fn generated_studies_compare_back_end_prompt_seed_and_k() {
        let was = RunSettings::generated("local:m.gguf", "p2", 9000, 8);
        assert_eq!(
            was.diff(&RunSettings::generated("local:m.gguf", "p2", 9000, 8)),
            None
        );
        let d = was
            .diff(&RunSettings::generated("local:m.gguf", "p1", 9000, 4))
            .unwrap();
        assert_eq!(
            (d.setting, d.was.as_str(), d.now.as_str()),
            (Setting::Prompt, "p2", "p1")
        );
        let d = was
            .diff(&RunSettings::generated("local:m.gguf", "p2", 9000, 4))
            .unwrap();
        assert_eq!(d.to_string(), "-k 8, this run has 4");
    }

    #[test]
    fn a_record_reads_as_it_was_written() {
        let line = r#"{"id":"s0","mode":"live","policy":"chamfer@min","warmup":1,"fraction":0.5,
            "chosen":0,"survivors":1,"corpus_sha256":"abc","tokens_full":null,
            "backend":"openai:http://x/v1 m","prompt":"p2","context":null,"seed":0,
            "sampling":{"k":4,"temperature":0.7,"top_p":0.95,"max_tokens":160,
            "repetition_penalty":1.0,"prefill":null},"distances":{"evaluated":3}}"#;
        let was: RunSettings = serde_json::from_str(line).unwrap();
        assert_eq!(was, live());
        assert_eq!(was.diff(&live()), None);
    }

    #[test]
    fn missing_settings_read_as_none() {
        // A replay record: no generation settings at all; mode differs first.
        let was: RunSettings =
            serde_json::from_str(r#"{"mode":"replay","policy":"chamfer@min","sampling":null}"#)
                .unwrap();
        assert_eq!(was.sampling, SamplingSettings::default());
        let d = was.diff(&live()).unwrap();
        assert_eq!(d.to_string(), "mode replay, this run has live");
        let mut now = live();
        now.mode = Some("replay".into());
        assert_eq!(
            was.diff(&now).unwrap().to_string(),
            "back-end none, this run has openai:http://x/v1 m"
        );
    }

    #[test]
    fn numbers_compare_as_read_back() {
        // A value that a file holds as its shortest text.
        let mut now = live();
        now.sampling.top_p = Some(0.1 + 0.2);
        let was: RunSettings = serde_json::from_str(&serde_json::to_string(&now).unwrap()).unwrap();
        assert_eq!(was.diff(&now), None);
    }

    #[test]
    fn resume_matches_records_to_studies_and_refuses_what_does_not_fit() {
        let ids = ["a", "b", "a"];
        let mut r = Resume::new(ids);
        let now = |i: usize| RunSettings::generated("local:m.gguf", "p2", study_seed(7, i), 8);
        // Study b is the second: seed 7 + 1000.
        let b = RunSettings::generated("local:m.gguf", "p2", 1007, 8);
        assert_eq!(r.check("b", &b, now), Ok(1));
        // A record of id a belongs to its first study.
        let a = RunSettings::generated("local:m.gguf", "p2", 7, 8);
        assert_eq!(r.check("a", &a, now), Ok(0));
        assert_eq!(
            r.check("a", &a, now),
            Err(KeptError::Twice { id: "a".into() })
        );
        assert_eq!(
            r.check("c", &a, now).unwrap_err().to_string(),
            "study c is not among this run's studies"
        );
        let mut r = Resume::new(ids);
        let other_k = RunSettings::generated("local:m.gguf", "p2", 7, 4);
        let e = r.check("a", &other_k, now).unwrap_err();
        let KeptError::Differs { diff, .. } = &e else {
            panic!("{e}")
        };
        assert_eq!(
            (diff.setting, diff.was.as_str(), diff.now.as_str()),
            (Setting::K, "4", "8")
        );
        // The refused record is not counted as kept.
        assert_eq!(r.check("a", &a, now), Ok(0));
        assert_eq!(study_seed(u64::MAX, 1), 999);
    }
}
