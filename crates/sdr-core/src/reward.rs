//! Reward composition for GRPO (paper §3.2, SPEC §4), over embedded sections.
//!
//! $$R^S_{\mathrm{sem}} = 1 - \min\bigl(\mathcal D(E^S(\hat y), E^S(y)), 1\bigr),\quad
//!   R_{\mathrm{sem}} = R^F_{\mathrm{sem}} + R^I_{\mathrm{sem}},\quad
//!   R = \lambda_{\mathrm{fmt}} R_{\mathrm{fmt}} + \lambda_{\mathrm{sem}} R_{\mathrm{sem}}$$
//!
//! where `S` ranges over Findings (F) and Impression (I), `E^S` is the set of
//! sentence embeddings of section `S`, and `R_sem = 0` whenever `R_fmt = 0`
//! (a malformed generation is penalised through both terms). The `min(., 1)`
//! keeps hung-pen, the one unbounded metric, from making rewards negative.
//!
//! Solver outcomes (SPEC §4, "Non-convergence"): a distance whose solver did
//! not converge enters with its last iterate when that is finite, and the
//! section is counted in `unconverged`; a non-finite distance gives the
//! section's semantic term 0 and is counted in `failed`. A reward is never NaN.

use crate::cost::{Element, SetView};
use crate::distance::{evaluate_all, Evaluation, Metric};
use crate::error::{Result, SdrError};
use crate::report::Section;

/// Weights and metric of the combined reward.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RewardConfig {
    pub metric: Metric,
    /// `lambda_fmt` (paper: 1).
    pub format_weight: f64,
    /// `lambda_sem` (paper: 1).
    pub semantic_weight: f64,
}

impl Default for RewardConfig {
    fn default() -> Self {
        RewardConfig {
            metric: Metric::Chamfer,
            format_weight: 1.0,
            semantic_weight: 1.0,
        }
    }
}

impl RewardConfig {
    /// `R = lambda_fmt R_fmt + lambda_sem (R_sem^F + R_sem^I)` (SPEC §4): the
    /// one place the paper's reward is composed from its terms.
    pub fn combine(&self, format: f64, findings: f64, impression: f64) -> f64 {
        self.format_weight * format + self.semantic_weight * (findings + impression)
    }
}

/// The reward and its components, for logging.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub struct RewardBreakdown {
    /// `R_fmt` in {0, 1}.
    pub format: f64,
    /// `R_sem^F` in [0, 1].
    pub findings: f64,
    /// `R_sem^I` in [0, 1].
    pub impression: f64,
    /// Beyond the paper: the CheXpert-14 example F1 between candidate and
    /// reference labels, set (and added to `reward` with its weight) only by
    /// callers that enable the optional clinical term; 0 otherwise.
    pub clinical: f64,
    /// `lambda_fmt * R_fmt + lambda_sem * (R_sem^F + R_sem^I)`
    /// (`+ lambda_clin * clinical` when the clinical term is on).
    pub reward: f64,
    /// Sections (0-2) whose distance solver stopped before converging; their
    /// last iterate was used.
    pub unconverged: u8,
    /// Sections (0-2) whose distance was not finite; their term is 0.
    pub failed: u8,
}

impl RewardBreakdown {
    /// Sets the optional clinical term and adds it to the reward with its
    /// weight: `reward += lambda_clin * F1` (the one place it is composed).
    pub fn add_clinical(&mut self, weight: f64, f1: f64) {
        self.clinical = f1;
        self.reward += weight * f1;
    }
}

/// Embedded Findings and Impression of one report.
#[derive(Debug, Clone, Copy)]
pub struct EmbeddedSections<'a, T = f64> {
    pub findings: SetView<'a, T>,
    pub impression: SetView<'a, T>,
}

/// `1 - min(D(generated, reference), 1)` for one section, with the solver's
/// outcome: 0 when `D` is not finite (see the module docs).
pub fn section_reward<T: Element>(
    metric: &Metric,
    generated: &SetView<'_, T>,
    reference: &SetView<'_, T>,
) -> Result<(f64, Evaluation)> {
    let e = evaluate_all(std::slice::from_ref(metric), generated, reference)?[0];
    Ok((section_term(&e), e))
}

/// The semantic term of one section from its distance's evaluation.
pub fn section_term(e: &Evaluation) -> f64 {
    if e.value.is_finite() {
        1.0 - e.value.min(1.0)
    } else {
        0.0
    }
}

/// The combined reward of one generation against its reference.
///
/// `generated` is `None` when the generation failed the format check.
/// `index` names the sample in errors (an empty reference section is an
/// input error, SPEC §4).
///
/// ```
/// use sdr_core::{reward::*, SetView};
/// let f = [1.0, 0.0, 0.0, 1.0];
/// let i = [1.0, 1.0];
/// let refs = EmbeddedSections { findings: SetView::new(&f, 2), impression: SetView::new(&i, 2) };
/// let r = reward(&RewardConfig::default(), Some(&refs), &refs, 0).unwrap();
/// assert_eq!(r.reward, 3.0); // format 1 + two perfect sections
/// let r = reward(&RewardConfig::default(), None, &refs, 0).unwrap();
/// assert_eq!(r.reward, 0.0);
/// ```
pub fn reward<T: Element>(
    config: &RewardConfig,
    generated: Option<&EmbeddedSections<'_, T>>,
    reference: &EmbeddedSections<'_, T>,
    index: usize,
) -> Result<RewardBreakdown> {
    reward_with(config, generated, reference, index, |_, g, r| {
        Ok(evaluate_all(std::slice::from_ref(&config.metric), g, r)?[0])
    })
}

/// [`reward`] with each section's distance computed by `distance(section,
/// generated, reference)`: the place a cost other than the cosine (the
/// clinical cost of SPEC §10, which reads the sentences' texts) enters the
/// reward. The reference checks, the clipping and the weights are
/// [`reward`]'s.
pub fn reward_with<T: Element>(
    config: &RewardConfig,
    generated: Option<&EmbeddedSections<'_, T>>,
    reference: &EmbeddedSections<'_, T>,
    index: usize,
    distance: impl Fn(Section, &SetView<'_, T>, &SetView<'_, T>) -> Result<Evaluation>,
) -> Result<RewardBreakdown> {
    if reference.findings.n == 0 {
        return Err(SdrError::EmptySection {
            index,
            section: "findings",
        });
    }
    if reference.impression.n == 0 {
        return Err(SdrError::EmptySection {
            index,
            section: "impression",
        });
    }
    let Some(gen) = generated else {
        return Ok(RewardBreakdown::default());
    };
    let ef = distance(Section::Findings, &gen.findings, &reference.findings)?;
    let ei = distance(Section::Impression, &gen.impression, &reference.impression)?;
    let (findings, impression) = (section_term(&ef), section_term(&ei));
    let count = |f: fn(&Evaluation) -> bool| u8::from(f(&ef)) + u8::from(f(&ei));
    Ok(RewardBreakdown {
        format: 1.0,
        findings,
        impression,
        clinical: 0.0,
        reward: config.combine(1.0, findings, impression),
        unconverged: count(|e| !e.converged && e.value.is_finite()),
        failed: count(|e| !e.value.is_finite()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_reference_section_is_an_error() {
        let f = [1.0, 0.0];
        let empty: [f64; 0] = [];
        let refs = EmbeddedSections {
            findings: SetView::new(&f, 2),
            impression: SetView::new(&empty, 2),
        };
        let err = reward(&RewardConfig::default(), None, &refs, 7).unwrap_err();
        assert_eq!(
            err,
            SdrError::EmptySection {
                index: 7,
                section: "impression"
            }
        );
    }

    #[test]
    fn hung_pen_is_clamped_and_weights_apply() {
        let g = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0];
        let r = [1.0, 0.0];
        let gen = EmbeddedSections {
            findings: SetView::new(&g, 2),
            impression: SetView::new(&r, 2),
        };
        let refs = EmbeddedSections {
            findings: SetView::new(&r, 2),
            impression: SetView::new(&r, 2),
        };
        let cfg = RewardConfig {
            metric: "hung-pen:alpha=0.5".parse().unwrap(),
            format_weight: 0.5,
            semantic_weight: 2.0,
        };
        let out = reward(&cfg, Some(&gen), &refs, 0).unwrap();
        // |3 - 1| * 0.5 = 1 already: the Findings distance is clamped to 1.
        assert_eq!(out.findings, 0.0);
        assert_eq!(out.impression, 1.0);
        assert_eq!(out.reward, 0.5 + 2.0 * 1.0);
        assert_eq!((out.unconverged, out.failed), (0, 0));
    }

    #[test]
    fn non_finite_distances_give_zero_terms() {
        let bad = Evaluation {
            value: f64::NAN,
            converged: false,
            iterations: 7,
        };
        assert_eq!(section_term(&bad), 0.0);
        let late = Evaluation {
            value: 0.25,
            converged: false,
            iterations: 100_000,
        };
        assert_eq!(section_term(&late), 0.75);
        assert_eq!(section_term(&Evaluation::exact(3.0)), 0.0);
    }
}
