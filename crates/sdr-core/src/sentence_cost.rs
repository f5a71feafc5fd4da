//! The sentence cost a set distance reads, as a trait: the paper's cosine
//! cost (SPEC §3) is the absence of one; a cost beyond it (the clinical cost
//! of SPEC §10) changes the cosine matrix of each pair of sets from what it
//! knows of the sentences:
//!
//! $$M'_{ij} = g\bigl(M_{ij};\ \alpha(a_1..a_n),\ \alpha(b_1..b_m)\bigr)$$
//!
//! with `M` the cosine cost of the pair and `α(s)` the cost's annotation of
//! sentence `s`, computed once per distinct sentence ([`SentenceCost::annotate`])
//! and carried beside its embedding row (the reward's embedding stage, the
//! corpus's sentence table). Every caller (reward, selection, consensus,
//! pruning, explanations, `sdr serve`, Python) holds an
//! `Arc<dyn SentenceCost>` opened from a spec by the registry
//! (`sdr_clinical::costs`), so a new cost is its own file and one
//! registration there.
//!
//! A leaf above `cost` and `explain`: it reads both, neither reads it.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use crate::cost::{NamedCost, PairCost};
use crate::error::Result;
use crate::explain::{SectionCost, Sentences};

/// What a cost knows of one sentence (the clinical cost: its facts),
/// shared between the sets and batches that contain the sentence.
pub type Annotation = Arc<dyn Any + Send + Sync>;

/// A sentence cost beyond the cosine cost. Object safe; `&self` everywhere,
/// so one instance serves every thread.
pub trait SentenceCost: Send + Sync + fmt::Debug {
    /// The spec that opens this cost again (`clinical:lambda=1.5`), as
    /// explanations and output keys name it.
    fn spec(&self) -> String;

    /// The annotation of one sentence; a cost may keep a cache of them.
    fn annotate(&self, sentence: &str) -> Annotation;

    /// [`SentenceCost::annotate`] for a sentence annotated exactly once
    /// (a corpus's sentence table), which a cache would only hold on to.
    fn annotate_once(&self, sentence: &str) -> Annotation {
        self.annotate(sentence)
    }

    /// The pair's cost from its cosine cost, `a` (one annotation per row)
    /// and `b` (one per column), and whether it differs from the cosine cost.
    ///
    /// # Errors
    /// Annotations that are not one per row / column, or not this cost's.
    fn apply<'a>(
        &self,
        cosine: PairCost<'a>,
        a: &[Annotation],
        b: &[Annotation],
    ) -> Result<(PairCost<'a>, bool)>;

    /// Whether `apply` only adds non-negative values to the cosine matrix
    /// and keeps its maximum as the OT family's scale: then every corpus
    /// lower bound computed on the cosine cost still bounds the distance
    /// (`sdr_corpus::bounds::kind_for`). `false` turns those bounds off.
    fn adds_only(&self) -> bool {
        false
    }

    /// Whether the cost of `(a, b)` is that of `(b, a)` transposed, so that
    /// consensus can read one pair both ways.
    fn symmetric(&self) -> bool {
        false
    }

    /// The costs an explanation reads for one section: the cost the metric
    /// reads, the cosine cost, and per sentence a note in words (none by
    /// default).
    ///
    /// # Errors
    /// Those of [`PairCost::between`] and [`SentenceCost::apply`].
    fn section_cost(
        &self,
        candidate: &Sentences<'_>,
        reference: &Sentences<'_>,
        with_intra: bool,
    ) -> Result<SectionCost> {
        let cos = PairCost::between(&candidate.vectors, &reference.vectors, with_intra)?;
        let cosine = cos.cross.as_ref().clone();
        let notes =
            |s: &[String]| -> Vec<Annotation> { s.iter().map(|t| self.annotate(t)).collect() };
        let (cost, _) = self.apply(cos, &notes(candidate.text), &notes(reference.text))?;
        let (n, m) = (cosine.n, cosine.m);
        Ok(SectionCost {
            cost,
            cosine,
            candidate_notes: vec![None; n],
            reference_notes: vec![None; m],
        })
    }
}

/// A family of sentence costs known by name to the registry
/// (`sdr_clinical::costs`): how a spec of that name is checked (to its
/// canonical form) and opened. A cost's file defines its family; the
/// registry lists it once.
#[derive(Debug, Clone, Copy)]
pub struct CostFamily {
    /// The spec's name (the part before `:`).
    pub name: &'static str,
    /// Its parameters for help and errors, e.g. `weight=W`.
    pub params: &'static str,
    /// The canonical spec of a valid `spec`, or what is wrong with it, in
    /// one line; loads nothing.
    pub check: fn(spec: &NamedCost) -> std::result::Result<String, String>,
    /// The cost of a checked spec.
    pub open: fn(spec: &NamedCost) -> std::result::Result<Arc<dyn SentenceCost>, String>,
}
