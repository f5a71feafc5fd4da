//! The two sections of a report (SPEC §1), the one `Section` type of the
//! workspace: parsing tags sentences with it, the corpus stores and scores
//! per section with it.

use serde::{Deserialize, Serialize};

/// Findings or Impression.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Section {
    /// The Findings section.
    Findings,
    /// The Impression section.
    Impression,
}

impl Section {
    /// Both sections, in report order.
    pub const BOTH: [Section; 2] = [Section::Findings, Section::Impression];

    /// `findings` or `impression` (file keys, JSON fields, messages).
    pub fn key(self) -> &'static str {
        match self {
            Section::Findings => "findings",
            Section::Impression => "impression",
        }
    }
}

impl std::fmt::Display for Section {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.key())
    }
}
