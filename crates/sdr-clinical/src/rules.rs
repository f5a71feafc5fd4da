//! The rules file: phrase lists per observation and cue lists, as JSON.
//!
//! The bundled file is `data/clinical/chexpert_rules.json`; its `comment`
//! fields and SPEC §8 document the format. Phrases are matched
//! case-insensitively on whole words after [`normalize_into`] (a `-` counts
//! as a space); a trailing `*` matches any word ending (`opacit*`).

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::error::{ClinicalError, Result};
use crate::observation::Observation;

/// The rules file as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RulesFile {
    #[serde(default)]
    #[allow(dead_code)]
    pub comment: Option<serde_json::Value>,
    pub version: u32,
    pub observations: BTreeMap<String, ObservationRules>,
    pub cues: Cues,
}

/// Phrases of one observation.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ObservationRules {
    #[serde(default)]
    #[allow(dead_code)]
    pub comment: Option<serde_json::Value>,
    /// Phrases that name the observation ("cardiomegaly", "pleural effusion").
    #[serde(default)]
    pub mentions: Vec<String>,
    /// Phrases that contain a mention but are not one ("pericardial effusion"):
    /// a mention overlapping one of these is dropped.
    #[serde(default)]
    pub unmentions: Vec<String>,
    /// Anatomy described by an attribute ("heart size" + "normal").
    #[serde(default)]
    pub anatomy: Vec<AnatomyRules>,
}

/// An anatomy phrase is a mention only when an attribute in the same clause,
/// at most `max_gap` words away, describes it: an abnormal attribute makes a
/// mention that cues then qualify, a normal one a negative mention.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AnatomyRules {
    #[serde(default)]
    #[allow(dead_code)]
    pub comment: Option<serde_json::Value>,
    pub phrases: Vec<String>,
    #[serde(default)]
    pub abnormal: Vec<String>,
    #[serde(default)]
    pub normal: Vec<String>,
    #[serde(default = "default_max_gap")]
    pub max_gap: usize,
}

fn default_max_gap() -> usize {
    8
}

/// Cue phrases. "before" cues qualify mentions after them up to the end of
/// the clause; "after" cues qualify mentions before them back to the start
/// of the clause.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Cues {
    #[serde(default)]
    #[allow(dead_code)]
    pub comment: Option<serde_json::Value>,
    #[serde(default)]
    pub negation_before: Vec<String>,
    #[serde(default)]
    pub negation_after: Vec<String>,
    #[serde(default)]
    pub uncertainty_before: Vec<String>,
    #[serde(default)]
    pub uncertainty_after: Vec<String>,
    /// Phrases that contain cue words but are no cue ("no change", "to
    /// suggest"); they hide those words and are otherwise ignored.
    #[serde(default)]
    pub pseudo: Vec<String>,
    /// Phrases that end a clause ("but", "however"); `;` always does.
    #[serde(default)]
    pub clause_breaks: Vec<String>,
}

impl RulesFile {
    pub(crate) fn parse(json: &str) -> Result<RulesFile> {
        let rules: RulesFile =
            serde_json::from_str(json).map_err(|e| ClinicalError::RulesJson(e.to_string()))?;
        if rules.version != 1 {
            return Err(ClinicalError::RulesJson(format!(
                "version {} is not supported (expected 1)",
                rules.version
            )));
        }
        for name in rules.observations.keys() {
            match Observation::from_name(name) {
                Some(Observation::NoFinding) => {
                    return Err(ClinicalError::RulesJson(
                        "`No Finding` takes no phrases: it is set from the other observations"
                            .into(),
                    ))
                }
                Some(_) => {}
                None => return Err(ClinicalError::UnknownObservation(name.clone())),
            }
        }
        Ok(rules)
    }
}

/// A phrase ready for the automaton: normalised text and whether it matches
/// any word ending (`*`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Phrase {
    pub text: String,
    pub prefix: bool,
}

impl Phrase {
    pub(crate) fn parse(list: &str, raw: &str) -> Result<Phrase> {
        let bad = |reason| ClinicalError::BadPhrase {
            list: list.to_string(),
            phrase: raw.to_string(),
            reason,
        };
        let (body, prefix) = match raw.trim_end().strip_suffix('*') {
            Some(b) => (b, true),
            None => (raw, false),
        };
        if body.contains('*') {
            return Err(bad("`*` is allowed only at the end"));
        }
        let mut text = String::new();
        normalize_into(body, &mut text);
        let text = text.trim().to_string();
        if text.is_empty() {
            return Err(bad("empty"));
        }
        if prefix && !text.ends_with(|c: char| c.is_ascii_alphanumeric()) {
            return Err(bad("`*` must follow a letter or digit"));
        }
        Ok(Phrase { text, prefix })
    }
}

/// The text normalisation shared by phrases and reports: ASCII lower case,
/// `-` and all whitespace become one space. Byte offsets into `out` are what
/// the matcher reports.
pub(crate) fn normalize_into(text: &str, out: &mut String) {
    out.clear();
    out.reserve(text.len());
    let mut space = false;
    for ch in text.chars() {
        if ch.is_whitespace() || ch == '-' {
            if !space {
                out.push(' ');
                space = true;
            }
        } else {
            out.push(ch.to_ascii_lowercase());
            space = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phrases_normalise_and_reject_bad_stars() {
        let p = Phrase::parse("t", " Air-Space  Disease ").unwrap();
        assert_eq!(p.text, "air space disease");
        assert!(!p.prefix);
        let p = Phrase::parse("t", "opacit*").unwrap();
        assert_eq!((p.text.as_str(), p.prefix), ("opacit", true));
        assert!(Phrase::parse("t", "a*b").is_err());
        assert!(Phrase::parse("t", "*").is_err());
        assert!(Phrase::parse("t", "  ").is_err());
    }

    #[test]
    fn unknown_observation_and_version_are_errors() {
        let e = RulesFile::parse(r#"{"version":1,"observations":{"Effusion":{}},"cues":{}}"#)
            .unwrap_err();
        assert!(e.to_string().contains("`Effusion`"), "{e}");
        let e = RulesFile::parse(r#"{"version":2,"observations":{},"cues":{}}"#).unwrap_err();
        assert!(e.to_string().contains("version 2"), "{e}");
        let e = RulesFile::parse(r#"{"version":1,"observations":{},"cues":{"negation":[]}}"#)
            .unwrap_err();
        assert!(e.to_string().contains("negation"), "{e}");
    }
}
