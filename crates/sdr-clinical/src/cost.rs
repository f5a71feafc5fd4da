//! The clinical cost of a pair of embedded sentence sets from their texts
//! (SPEC §10): what a reward, a corpus or `sdr explain` calls when it holds
//! two sets of embeddings and the sentences they embed.
//!
//! Facts are annotated once per distinct sentence (keyed by the labeler's
//! normalised text: lower case, one space) and kept in a bounded cache
//! shared by threads, so a batch of rewards labels each sentence once and the
//! per-pair work is `O(facts(A) x facts(B) + n m)` on top of the cosine cost.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use sdr_core::cost::clinical::{
    ClinicalWeights, Conflict, Fact, FactList, Laterality, PairConflicts, Polarity,
};
use sdr_core::cost::CostKind;
use sdr_core::cost::{Element, PairCost, SetView};
use sdr_core::explain::{SectionCost, Sentences};
use sdr_core::{Annotation, CostFamily, SentenceCost};

use crate::labeler::Labeler;
use crate::rules::normalize_into;

/// Distinct sentences kept before the cache starts over.
pub const FACT_CACHE_ENTRIES: usize = 1 << 18;

/// The clinical cost with its labeler, weights and fact cache. Cheap to
/// share across threads (`&self` everywhere).
///
/// ```
/// use sdr_clinical::ClinicalCost;
/// use sdr_core::{Metric, SetView};
///
/// let cost = ClinicalCost::default();
/// // Two one-sentence sets whose embeddings are close, stating opposite facts.
/// let (a, b) = ([1.0f32, 0.0, 0.1], [1.0f32, 0.05, 0.1]);
/// let (va, vb) = (SetView::new(&a[..], 3), SetView::new(&b[..], 3));
/// let cosine = Metric::Chamfer.evaluate(&sdr_core::cost::PairCost::between(&va, &vb, false).unwrap()).unwrap().value;
/// let (pc, conflicts) = cost
///     .pair_cost(&va, &["No pneumothorax."], &vb, &["There is a pneumothorax."], false)
///     .unwrap();
/// assert!(conflicts.any());
/// assert!(Metric::Chamfer.evaluate(&pc).unwrap().value > cosine + 0.2);
/// ```
#[derive(Debug)]
pub struct ClinicalCost {
    labeler: Labeler,
    weights: ClinicalWeights,
    cache: RwLock<HashMap<String, Arc<Vec<Fact>>>>,
}

impl Default for ClinicalCost {
    /// The bundled rules and the default weights.
    fn default() -> Self {
        ClinicalCost::new(Labeler::default(), ClinicalWeights::default())
            .expect("the default weights are valid")
    }
}

impl ClinicalCost {
    /// A clinical cost with `labeler` and `weights`.
    ///
    /// # Errors
    /// A weight out of range, as one line naming it.
    pub fn new(labeler: Labeler, weights: ClinicalWeights) -> Result<Self, String> {
        weights.check()?;
        Ok(ClinicalCost {
            labeler,
            weights,
            cache: RwLock::new(HashMap::new()),
        })
    }

    /// The weights in use.
    pub fn weights(&self) -> &ClinicalWeights {
        &self.weights
    }

    /// The labeler in use (for fact names).
    pub fn labeler(&self) -> &Labeler {
        &self.labeler
    }

    /// The facts of each sentence, from the cache where seen before.
    pub fn facts(&self, sentences: &[&str]) -> Vec<Arc<Vec<Fact>>> {
        let mut key = String::new();
        sentences
            .iter()
            .map(|s| self.fact_list(s, &mut key))
            .collect()
    }

    /// The facts of one sentence, from the cache where seen before (the annotation an
    /// embedding stage computes once per distinct sentence of a batch).
    pub fn sentence_facts(&self, sentence: &str) -> Arc<Vec<Fact>> {
        self.fact_list(sentence, &mut String::new())
    }

    fn fact_list(&self, s: &str, key: &mut String) -> Arc<Vec<Fact>> {
        normalize_into(s.trim(), key);
        if let Some(f) = self
            .cache
            .read()
            .expect("fact cache lock")
            .get(key.as_str())
        {
            return Arc::clone(f);
        }
        let f = Arc::new(self.labeler.sentence_facts(s));
        let mut cache = self.cache.write().expect("fact cache lock");
        if cache.len() >= FACT_CACHE_ENTRIES {
            cache.clear();
        }
        cache.insert(key.clone(), Arc::clone(&f));
        f
    }

    /// The clinical [`PairCost`] of sets `a` and `b` whose rows embed the
    /// sentences `a_text` and `b_text` (in order), with their conflicts;
    /// the intra-set costs (GW) when `with_intra`.
    ///
    /// # Errors
    /// What [`PairCost::between`] refuses (empty sets, bad rows), and texts
    /// that do not have one sentence per row.
    pub fn pair_cost<T: Element>(
        &self,
        a: &SetView<'_, T>,
        a_text: &[&str],
        b: &SetView<'_, T>,
        b_text: &[&str],
        with_intra: bool,
    ) -> sdr_core::Result<(PairCost<'static>, PairConflicts)> {
        let cos = PairCost::between(a, b, with_intra)?;
        self.penalize(cos, a_text, b_text)
    }

    /// [`ClinicalCost::pair_cost`] on a cosine [`PairCost`] built by the
    /// caller (from a Gram matrix, say).
    ///
    /// # Errors
    /// Texts that do not have one sentence per row / column.
    pub fn penalize<'a>(
        &self,
        cosine: PairCost<'a>,
        a_text: &[&str],
        b_text: &[&str],
    ) -> sdr_core::Result<(PairCost<'a>, PairConflicts)> {
        cosine.clinical(&self.facts(a_text), &self.facts(b_text), &self.weights)
    }
}

impl ClinicalCost {
    /// The costs `sdr explain` reads for one section under the clinical cost
    /// ([`sdr_core::explain::explain_section_with`]): the penalised cost the
    /// metric reads, the cosine cost the explanation states pairs in, and per
    /// sentence its conflict in words ([`ClinicalCost::describe`]).
    ///
    /// # Errors
    /// Those of [`ClinicalCost::pair_cost`].
    pub fn section_cost(
        &self,
        candidate: &Sentences<'_>,
        reference: &Sentences<'_>,
        with_intra: bool,
    ) -> sdr_core::Result<SectionCost> {
        let cos = PairCost::between(&candidate.vectors, &reference.vectors, with_intra)?;
        let cosine = cos.cross.as_ref().clone();
        let facts = |s: &[String]| {
            let t: Vec<&str> = s.iter().map(String::as_str).collect();
            self.facts(&t)
        };
        let (fa, fb) = (facts(candidate.text), facts(reference.text));
        let (cost, conflicts) = cos.clinical(&fa, &fb, &self.weights)?;
        let notes =
            |own: &[Option<Conflict>], facts: &[Arc<Vec<Fact>>], other: &[Arc<Vec<Fact>>]| {
                own.iter()
                    .zip(facts)
                    .map(|(c, f)| c.as_ref().map(|c| self.describe(c, f, other)))
                    .collect()
            };
        Ok(SectionCost {
            cost,
            cosine,
            candidate_notes: notes(&conflicts.a, &fa, &fb),
            reference_notes: notes(&conflicts.b, &fb, &fa),
        })
    }
}

/// The clinical cost as a [`SentenceCost`]: a sentence's annotation is its
/// facts (`Vec<Fact>`, from the cache), the pair cost the penalised matrix.
impl SentenceCost for ClinicalCost {
    fn spec(&self) -> String {
        CostKind::of_weights(&self.weights).to_string()
    }

    fn annotate(&self, sentence: &str) -> Annotation {
        self.sentence_facts(sentence)
    }

    /// Not cached: a corpus labels each of its sentences once.
    fn annotate_once(&self, sentence: &str) -> Annotation {
        Arc::new(self.labeler.sentence_facts(sentence))
    }

    fn apply<'a>(
        &self,
        cosine: PairCost<'a>,
        a: &[Annotation],
        b: &[Annotation],
    ) -> sdr_core::Result<(PairCost<'a>, bool)> {
        if let Some(k) = a.iter().chain(b).position(|x| !x.is::<Vec<Fact>>()) {
            return Err(sdr_core::SdrError::BadCost {
                spec: self.spec(),
                message: format!("annotation {k} is not a list of facts"),
            });
        }
        let (cost, conflicts) = cosine.clinical(a, b, &self.weights)?;
        Ok((cost, conflicts.any()))
    }

    /// The penalty adds `λ/2 (n κ^A_i + m κ^B_j) >= 0` and keeps the cosine
    /// part's maximum as the scale (module doc of `sdr_core::cost::clinical`).
    fn adds_only(&self) -> bool {
        true
    }

    /// A finding added and one omitted weigh the same.
    fn symmetric(&self) -> bool {
        let w = &self.weights;
        w.unmatched == w.omitted && w.unmatched_hedged == w.omitted_hedged
    }

    fn section_cost(
        &self,
        candidate: &Sentences<'_>,
        reference: &Sentences<'_>,
        with_intra: bool,
    ) -> sdr_core::Result<SectionCost> {
        ClinicalCost::section_cost(self, candidate, reference, with_intra)
    }
}

/// The clinical cost's entry in the registry (`crate::costs::FAMILIES`).
pub(crate) const CLINICAL: CostFamily = CostFamily {
    name: "clinical",
    params: "lambda=L,unmatched=U|added=A,omitted=O",
    check: |spec| {
        spec.as_str()
            .parse::<CostKind>()
            .map(|k| k.to_string())
            .map_err(|e| e.to_string())
    },
    open: |spec| {
        let kind = spec
            .as_str()
            .parse::<CostKind>()
            .map_err(|e| e.to_string())?;
        open_clinical(&kind)
    },
};

/// The clinical cost of a clinical spec, with the bundled rules.
pub(crate) fn open_clinical(kind: &CostKind) -> Result<Arc<dyn SentenceCost>, String> {
    let w = kind.weights().ok_or("not a clinical spec")?;
    Ok(Arc::new(ClinicalCost::new(Labeler::default(), w)?))
}

/// One fact in words: "present Pleural Effusion (right, grade 1)".
pub fn fact_text(labeler: &Labeler, f: &Fact) -> String {
    let polarity = match f.polarity {
        Polarity::Present => "present",
        Polarity::Absent => "absent",
        Polarity::Uncertain => "uncertain",
    };
    let mut q = Vec::new();
    if let Some(side) = f.side {
        q.push(
            match side {
                Laterality::Left => "left",
                Laterality::Right => "right",
                Laterality::Bilateral => "bilateral",
            }
            .to_string(),
        );
    }
    if let Some(g) = f.grade {
        q.push(format!("grade {g}"));
    }
    let name = labeler.fact_name(f.observation);
    if q.is_empty() {
        format!("{polarity} {name}")
    } else {
        format!("{polarity} {name} ({})", q.join(", "))
    }
}

impl ClinicalCost {
    /// A sentence's conflict in words, for explanations: its kind, the
    /// sentence's fact and the other set's fact (sentence `j`) it conflicts
    /// with, e.g. `"side: present Atelectasis (left) vs present Atelectasis
    /// (right) in sentence 0"`, or `"unmatched: present Granuloma (right),
    /// not named by the other report"`.
    pub fn describe<F: FactList>(&self, c: &Conflict, own: &[Fact], other: &[F]) -> String {
        let mine = own
            .get(c.fact)
            .map_or_else(|| "?".to_string(), |f| fact_text(&self.labeler, f));
        match c
            .other
            .and_then(|(j, k)| other.get(j).and_then(|s| s.facts().get(k)).map(|g| (j, g)))
        {
            Some((j, g)) => format!(
                "{}: {mine} vs {} in sentence {j}",
                c.kind.name(),
                fact_text(&self.labeler, g)
            ),
            None => format!("{}: {mine}, not named by the other report", c.kind.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sdr_core::Metric;

    #[test]
    fn facts_are_cached_by_normalised_text() {
        let c = ClinicalCost::default();
        let f = c.facts(&["No pneumothorax.", "no   PNEUMOTHORAX."]);
        assert!(Arc::ptr_eq(&f[0], &f[1]));
        assert_eq!(c.cache.read().unwrap().len(), 1);
    }

    #[test]
    fn wrong_text_count_is_an_error_and_weights_are_checked() {
        let c = ClinicalCost::default();
        let a = [1.0f32, 0.0];
        let v = SetView::new(&a[..], 2);
        let err = c
            .pair_cost(&v, &["A.", "B."], &v, &["A."], false)
            .unwrap_err();
        assert!(err.to_string().contains("2 x 1 sentences"), "{err}");
        let bad = ClinicalWeights {
            side: -1.0,
            ..Default::default()
        };
        assert!(ClinicalCost::new(Labeler::default(), bad)
            .unwrap_err()
            .contains("side"));
    }

    #[test]
    fn conflicts_are_described_in_words() {
        let c = ClinicalCost::default();
        let a = c.facts(&["Left basilar atelectasis."]);
        let b = c.facts(&["Right basilar atelectasis."]);
        let (fa, fb): (Vec<Vec<Fact>>, Vec<Vec<Fact>>) = (vec![a[0].to_vec()], vec![b[0].to_vec()]);
        let conflicts = PairConflicts::of(&fa, &fb, c.weights());
        let text = c.describe(&conflicts.a[0].unwrap(), &fa[0], &fb);
        assert_eq!(
            text,
            "side: present Atelectasis (left) vs present Atelectasis (right) in sentence 0"
        );
        let g = c.facts(&["Calcified granuloma in the right upper lobe."]);
        let gs = vec![g[0].to_vec()];
        let conflicts = PairConflicts::of(&gs, &fb, c.weights());
        assert_eq!(
            c.describe(&conflicts.a[0].unwrap(), &gs[0], &fb),
            "unmatched: present Granuloma (right), not named by the other report"
        );
    }

    #[test]
    fn a_side_swap_costs_under_every_averaging_metric() {
        let c = ClinicalCost::default();
        // Nearly identical embeddings, as an encoder gives a side swap.
        let a = [1.0f32, 0.0, 0.2, 0.0, 1.0, 0.0];
        let b = [1.0f32, 0.01, 0.2, 0.0, 1.0, 0.0];
        let (va, vb) = (SetView::new(&a[..], 3), SetView::new(&b[..], 3));
        let ta = ["Left basilar atelectasis.", "The heart is normal in size."];
        let tb = ["Right basilar atelectasis.", "The heart is normal in size."];
        let cos = PairCost::between(&va, &vb, true).unwrap();
        let (clin, _) = c.pair_cost(&va, &ta, &vb, &tb, true).unwrap();
        for m in [
            Metric::Chamfer,
            Metric::Hausdorff,
            Metric::Ot,
            "hung-nn".parse().unwrap(),
        ] {
            let (v0, v1) = (
                m.evaluate(&cos).unwrap().value,
                m.evaluate(&clin).unwrap().value,
            );
            assert!(v1 > v0 + 0.2, "{m}: {v1} vs {v0}");
        }
    }
}
