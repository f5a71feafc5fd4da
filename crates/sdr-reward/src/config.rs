//! The reward's options, recorded once for every interface.
//!
//! `SDRReward(**options)` (TRL), verl's `reward_kwargs`, the OpenRLHF reward
//! file's `SDR_*` environment and `sdr serve`'s flags all configure the same
//! reward. Each reads this record instead of listing the options again: the
//! Python package gets it as `_sdr.REWARD_OPTIONS` (verl's accepted keys and the
//! OpenRLHF environment are built from it), `sdr serve` takes its flags'
//! defaults from it, and tests hold `SDRReward`'s signature and the server's
//! flags against it. A new option is one entry here plus its parameter; a new
//! trainer adapter reads the record and restates nothing.

/// How an option's value is written in an environment variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Free text (a metric spec, a device, a policy name).
    Text,
    /// A finite number.
    Number,
    /// `1` / `true` / `yes` or `0` / `false` / `no`.
    Flag,
    /// A file or folder.
    Path,
}

impl Kind {
    /// The name Python sees.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Text => "text",
            Kind::Number => "number",
            Kind::Flag => "flag",
            Kind::Path => "path",
        }
    }
}

/// One option of the reward.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionSpec {
    /// The keyword (`SDRReward(name=...)`, verl's `reward_kwargs`).
    pub name: &'static str,
    /// The environment variable the OpenRLHF reward file reads.
    pub env: &'static str,
    pub kind: Kind,
    /// The default as its text (what the flag shows); `None`: unset.
    pub default: Option<&'static str>,
    /// `sdr serve`'s flag, or `None` where the option only makes sense in the
    /// trainer's process (a Python encoder and its name).
    pub flag: Option<&'static str>,
}

const fn spec(
    name: &'static str,
    env: &'static str,
    kind: Kind,
    default: Option<&'static str>,
    flag: Option<&'static str>,
) -> OptionSpec {
    OptionSpec {
        name,
        env,
        kind,
        default,
        flag,
    }
}

/// Every option of the reward, in `SDRReward`'s order.
pub const REWARD_OPTIONS: [OptionSpec; 16] = [
    spec(
        "metric",
        "SDR_METRIC",
        Kind::Text,
        Some("chamfer"),
        Some("metric"),
    ),
    spec(
        "format_weight",
        "SDR_FORMAT_WEIGHT",
        Kind::Number,
        Some("1"),
        Some("format-weight"),
    ),
    spec(
        "semantic_weight",
        "SDR_SEMANTIC_WEIGHT",
        Kind::Number,
        Some("1"),
        Some("semantic-weight"),
    ),
    spec(
        "exact",
        "SDR_EXACT",
        Kind::Flag,
        Some("false"),
        Some("exact"),
    ),
    spec("model_dir", "SDR_MODEL", Kind::Path, None, Some("model")),
    // A Python callable or "module:attribute": runs in the trainer's process.
    spec("encoder", "SDR_ENCODER", Kind::Text, None, None),
    spec(
        "distinct_sentences",
        "SDR_DISTINCT_SENTENCES",
        Kind::Flag,
        Some("false"),
        None,
    ),
    spec(
        "clinical_weight",
        "SDR_CLINICAL_WEIGHT",
        Kind::Number,
        Some("0"),
        Some("clinical-weight"),
    ),
    spec(
        "cache_mib",
        "SDR_CACHE_MIB",
        Kind::Number,
        Some("1024"),
        Some("cache-mib"),
    ),
    spec(
        "cache_path",
        "SDR_CACHE_PATH",
        Kind::Path,
        None,
        Some("cache"),
    ),
    spec(
        "cache_save_interval",
        "SDR_CACHE_SAVE_INTERVAL",
        Kind::Number,
        Some("300"),
        Some("cache-save-secs"),
    ),
    // Names a custom encoder's vectors: only with `encoder`.
    spec("encoder_id", "SDR_ENCODER_ID", Kind::Text, None, None),
    spec(
        "device",
        "SDR_DEVICE",
        Kind::Text,
        Some("cpu"),
        Some("device"),
    ),
    spec(
        "precision",
        "SDR_PRECISION",
        Kind::Text,
        Some("f32"),
        Some("precision"),
    ),
    spec(
        "missing_section",
        "SDR_MISSING_SECTION",
        Kind::Text,
        Some("error"),
        Some("missing-section"),
    ),
    spec("cost", "SDR_COST", Kind::Text, Some("cosine"), Some("cost")),
];

/// The option called `name`.
///
/// # Panics
/// When no option has that name: a caller's typo, caught by its first test.
pub fn option(name: &str) -> &'static OptionSpec {
    REWARD_OPTIONS
        .iter()
        .find(|o| o.name == name)
        .unwrap_or_else(|| panic!("no reward option {name:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_variables_are_distinct_and_spelled_alike() {
        for (i, a) in REWARD_OPTIONS.iter().enumerate() {
            for b in &REWARD_OPTIONS[i + 1..] {
                assert_ne!(a.name, b.name);
                assert_ne!(a.env, b.env);
            }
            assert!(a.env.starts_with("SDR_"), "{}", a.env);
        }
        assert_eq!(option("cost").flag, Some("cost"));
        assert_eq!(
            option("cache_mib").default.unwrap().parse::<f64>().unwrap(),
            crate::DEFAULT_CACHE_MIB
        );
        assert_eq!(
            option("missing_section").default,
            Some(crate::MissingSection::default().name())
        );
    }
}
