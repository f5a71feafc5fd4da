//! Clinical correctness without model weights: CheXpert-14 labels from
//! report text by phrase rules, and CheXpert-rule F1 (SPEC §8).
//!
//! - [`Labeler`] labels a report's 14 CheXpert observations (Irvin et al.,
//!   AAAI 2019) as positive, negative, uncertain or not mentioned. Phrase
//!   and cue lists live in a readable JSON file
//!   (`data/clinical/chexpert_rules.json`, bundled; your own with
//!   [`Labeler::from_rules_path`]); matching runs two Aho-Corasick automata
//!   per sentence, with no model and no regular expressions.
//! - [`chexpert_f1`] scores candidate labels against reference labels over a
//!   corpus (macro and micro over 14 and over 5 observations);
//!   [`example_f1`] scores one pair (for rewards).
//! - [`Labeler::sentence_facts`] gives one sentence's clinical facts
//!   (finding, polarity, side, size/severity) for the clinical cost of
//!   `sdr_core::cost::clinical` (SPEC §10), over CheXpert's 14 and the
//!   findings of `data/clinical/sentence_facts.json`.
//! - [`Consistency`] checks an Impression against its own Findings, with no
//!   reference: contradictions, unsupported findings, omitted abnormal
//!   findings (SPEC §10a).
//! - [`iu`] validates the labeler against IU X-ray's MeSH coding.
//!
//! The metric is called "CheXpert-rule F1": it is computed with these rules,
//! not with the CheXbert model, and its numbers are not CheXbert F1.
//!
//! ```
//! use sdr_clinical::{example_f1, Labeler, Observation, UncertainPolicy};
//!
//! let labeler = Labeler::default();
//! let hyp = labeler.label("<think>Heart size normal. No effusion.</think><answer>Normal chest.</answer>");
//! let reference = labeler.label("Findings: The lungs are clear.\nImpression: No acute disease.");
//! assert_eq!(hyp[Observation::NoFinding], reference[Observation::NoFinding]);
//! assert_eq!(example_f1(&hyp, &reference, UncertainPolicy::Positive), 1.0);
//! ```

#![warn(missing_docs)]

mod consistency;
mod cost;
mod costs;
mod error;
mod extras;
mod f1;
mod facts;
pub mod iu;
mod labeler;
mod observation;
mod rules;

pub use consistency::{
    Consistency, ConsistencyReport, ConsistencyWeights, Expectations, Issue, Statement,
    BUNDLED_EXPECTATIONS,
};
pub use cost::{fact_text, ClinicalCost, FACT_CACHE_ENTRIES};
pub use costs::{cost_forms, open_cost, open_cost_spec, parse_cost, register_cost, FAMILIES};
pub use error::{ClinicalError, Result};
pub use extras::BUNDLED_EXTRAS;
pub use f1::{chexpert_f1, example_f1, F1Report, ObservationScore, Scores, UncertainPolicy};
pub use facts::QUALIFIER_GAP;
pub use labeler::{report_sentences, Labeler, BUNDLED_RULES};
pub use observation::{Label, Labels, Observation};
