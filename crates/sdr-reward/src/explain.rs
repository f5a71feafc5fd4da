//! Why a reward is what it is, for `sdr explain` and `sdr_rewards.explain`
//! alike: candidates and references embedded in one call of the embedding
//! stage, then each study explained by `sdr_core::explain` under the
//! reward's sentence cost (SPEC §9; the cost's notes under the clinical cost).

use std::sync::Arc;

use sdr_core::cost::CostKind;
use sdr_core::explain::{explain_texts, explain_texts_with, ExplainOptions, ReportExplanation};
use sdr_core::{ParsedReport, SentenceCost};
use sdr_embed::{EmbedControl, EmbedError, SectionBatch, SectionEmbedder};

use crate::reference::ReferenceSections;

/// Explains rewards under one metric, threshold and sentence cost.
#[derive(Debug, Clone)]
pub struct Explainer {
    options: ExplainOptions,
    cost: Option<Arc<dyn SentenceCost>>,
}

impl Explainer {
    /// An explainer with `options` under the sentence cost `cost`.
    ///
    /// # Errors
    /// [`sdr_core::SdrError::BadCost`] for a cost the registry refuses.
    pub fn new(options: ExplainOptions, cost: &CostKind) -> sdr_core::Result<Self> {
        Ok(Explainer {
            options,
            cost: sdr_clinical::open_cost(cost)?,
        })
    }

    /// The metric, weights and threshold.
    pub fn options(&self) -> &ExplainOptions {
        &self.options
    }

    /// Each study's explanation: `studies[k]` is a candidate (its sections
    /// read only when it is well formed) and its reference. The new
    /// sentences of all of them go to the encoder in one embedding call.
    ///
    /// # Errors
    /// The embedding stage's error for the whole call; each study's own
    /// error (a non-finite vector, say) in its slot.
    pub fn explain(
        &self,
        studies: &[(&ParsedReport, &ReferenceSections)],
        embedder: &SectionEmbedder<'_>,
        control: &EmbedControl<'_>,
    ) -> Result<Vec<sdr_core::Result<ReportExplanation>>, EmbedError> {
        // Study `k`'s reference is report `2k`, its candidate `2k + 1`.
        let mut batch = SectionBatch::new();
        for (c, r) in studies {
            batch.push(&r.findings, &r.impression);
            if c.format_valid {
                batch.push(&c.findings, &c.impression);
            } else {
                batch.push_empty();
            }
        }
        let sets = embedder.embed(&batch, control)?;
        let (dim, row) = (sets.dim(), |t: &str| sets.vector_of(t).unwrap_or_default());
        let options = &self.options;
        Ok(crate::parallel::map(studies, |_, (c, r)| {
            let cand = c
                .format_valid
                .then_some((&c.findings[..], &c.impression[..]));
            let refs = (&r.findings[..], &r.impression[..]);
            let Some(cost) = &self.cost else {
                return explain_texts(options, cand, refs, dim, row, 0);
            };
            let with_intra = options.reward.metric.needs_intra();
            let mut e = explain_texts_with(options, cand, refs, dim, row, 0, |_, c, r| {
                cost.section_cost(c, r, with_intra)
            })?;
            e.cost = Some(cost.spec());
            Ok(e)
        }))
    }
}
