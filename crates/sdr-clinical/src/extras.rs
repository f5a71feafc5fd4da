//! The findings beyond CheXpert's 14 (`data/clinical/sentence_facts.json`):
//! the labeler matches their mentions, and the sentence facts (`facts.rs`)
//! report them, so they sit in a file of their own that both import.

use serde::Deserialize;

use crate::error::{ClinicalError, Result};
use crate::observation::Observation;

/// The bundled findings beyond CheXpert's 14, `data/clinical/sentence_facts.json`.
pub const BUNDLED_EXTRAS: &str = include_str!("../../../data/clinical/sentence_facts.json");

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExtrasFile {
    #[serde(default)]
    #[allow(dead_code)]
    comment: Option<serde_json::Value>,
    pub findings: Vec<ExtraFinding>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExtraFinding {
    pub name: String,
    pub mentions: Vec<String>,
}

impl ExtrasFile {
    pub(crate) fn parse(json: &str) -> Result<ExtrasFile> {
        let f: ExtrasFile = serde_json::from_str(json)
            .map_err(|e| ClinicalError::RulesJson(format!("sentence_facts.json: {e}")))?;
        for x in &f.findings {
            if Observation::ALL.iter().any(|o| o.name() == x.name) {
                return Err(ClinicalError::RulesJson(format!(
                    "sentence_facts.json: `{}` is a CheXpert observation",
                    x.name
                )));
            }
        }
        Ok(f)
    }
}
