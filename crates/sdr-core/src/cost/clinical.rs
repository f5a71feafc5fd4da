//! The clinically aware cost (beyond the paper; SPEC §10): the cosine cost
//! plus a penalty on sentences whose findings the other set contradicts or
//! lacks.
//!
//! Each sentence carries its clinical facts ([`Fact`]: an observation, its
//! polarity, side and size/severity grade), annotated once per distinct
//! sentence by a labeler outside this crate (`sdr-clinical`). A fact `f` of
//! sentence `a_i` is checked against the facts of the other set `B` that name
//! the same observation; its conflict is the smallest pair conflict among
//! them (the other report may state a finding twice; one agreeing statement
//! supports it), or the unmatched weight when `B` never names the
//! observation:
//!
//! $$\kappa(f, B) = \begin{cases}\min_{g \in B,\ o(g) = o(f)} c(f, g) & \text{if any}\\
//!   w_{\text{un}}(f) & \text{otherwise}\end{cases}, \qquad
//!   \kappa^A_i = \min\Bigl(1, \max_{f \in a_i} \kappa(f, B)\Bigr)$$
//!
//! with `c(f, g)` the pair conflict of [`ClinicalWeights`] (present against
//! absent 1, hedged against either 1/2, left against right 1, ...) and
//! `w_un(f)` the weight of a present (hedged: half) finding the other set
//! never names: `w_add` for the candidate's (the first set, `A`: a finding
//! it adds, a precision error) and `w_omit` for the reference's (the second
//! set, `B`: a finding the candidate omits, a recall error). The cost
//! adds, to every pair of the conflicting sentence's row (column), a share
//! scaled by its set's size:
//!
//! $$M'_{ij} = M_{ij} + \tfrac{\lambda}{2}\bigl(n\,\kappa^A_i + m\,\kappa^B_j\bigr)$$
//!
//! Why this form. A distance that averages over sentences (Chamfer, OT,
//! Hungarian) moves by `1/n` of a pair's cost change, so a pair penalty of
//! any size is diluted by the section's length, and a nearest-neighbour
//! distance escapes a penalised pair through the next-nearest sentence. A
//! penalty on the whole row cannot be escaped, and its `n` factor cancels the
//! `1/n` mass: every transport plan (OT, Sinkhorn, partial OT scaled by its
//! mass) pays exactly `λ/2 (Σ_i κ^A_i + Σ_j κ^B_j)` more, Chamfer at least
//! half that, whatever the sections' lengths. One contradicted finding
//! (one sentence on each side) costs `λ` under OT and `≥ λ/2` under Chamfer.
//!
//! The OT family divides by `max(M)` (SPEC §3); the penalised matrix keeps
//! the cosine part's maximum as that scale ([`CostMatrix::scale`]), so the
//! penalty is not divided away by itself. Intra-set costs (GW) are left
//! cosine: a conflict is between the two sets, and GW reads only intra-set
//! geometry, so GW does not see the clinical cost.

use super::{CostMatrix, NamedCost, PairCost};
use std::borrow::Cow;

/// Whether a sentence states a finding as present, absent or hedged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Polarity {
    /// "There is a small right pleural effusion."
    Present,
    /// "No pleural effusion."
    Absent,
    /// "Possible small effusion."
    Uncertain,
}

/// The side a finding is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Laterality {
    /// Left.
    Left,
    /// Right.
    Right,
    /// Both sides ("bilateral", "bibasilar").
    Bilateral,
}

/// Fact observation ids from here on are *sites*: a finding outside the
/// labeler's vocabulary that a side word qualifies, known by the anatomy the
/// side word points at ("calcified *left paratracheal* lymph nodes", "the
/// *right hemidiaphragm* remains elevated"). A site conflicts only with the
/// same site on another side; one the other set never names costs nothing
/// (it may be worded otherwise there), so a rephrasing is never penalised
/// for it.
pub const SITE_BASE: u16 = 0x8000;

/// One clinical statement of a sentence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fact {
    /// The labeler's observation id (CheXpert's 14 first, then its own).
    pub observation: u16,
    pub polarity: Polarity,
    /// The side, when the sentence names one for this finding.
    pub side: Option<Laterality>,
    /// Size or severity, 1 (small, mild) to 3 (large, severe), when named.
    pub grade: Option<u8>,
}

/// One sentence's facts, however they are held: owned (`Vec<Fact>`),
/// shared from a cache (`Arc<Vec<Fact>>`) or borrowed (`&[Fact]`), so that
/// no caller copies them to compute conflicts.
pub trait FactList {
    fn facts(&self) -> &[Fact];
}

impl FactList for Vec<Fact> {
    fn facts(&self) -> &[Fact] {
        self
    }
}

impl FactList for &[Fact] {
    fn facts(&self) -> &[Fact] {
        self
    }
}

impl FactList for std::sync::Arc<Vec<Fact>> {
    fn facts(&self) -> &[Fact] {
        self
    }
}

/// A sentence cost's annotation ([`crate::Annotation`]) read as facts: the
/// clinical cost's annotations are `Vec<Fact>`; any other reads as no fact
/// (callers check the type first: `sdr_clinical::ClinicalCost` does).
impl FactList for std::sync::Arc<dyn std::any::Any + Send + Sync> {
    fn facts(&self) -> &[Fact] {
        self.downcast_ref::<Vec<Fact>>().map_or(&[], Vec::as_slice)
    }
}

/// What made a fact conflict with the other set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConflictKind {
    /// Present against absent.
    Polarity,
    /// Hedged against present or absent.
    Hedge,
    /// Left against right.
    Side,
    /// Both sides against one.
    Bilateral,
    /// Size or severity grades apart.
    Grade,
    /// A present or hedged finding the other set never names (an omission
    /// seen from the reference, a hallucination seen from the candidate).
    Unmatched,
}

impl ConflictKind {
    /// A lower-case name for reports and explanations.
    pub fn name(self) -> &'static str {
        match self {
            ConflictKind::Polarity => "polarity",
            ConflictKind::Hedge => "hedge",
            ConflictKind::Side => "side",
            ConflictKind::Bilateral => "bilateral",
            ConflictKind::Grade => "grade",
            ConflictKind::Unmatched => "unmatched",
        }
    }
}

/// A sentence's worst conflict with the other set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Conflict {
    /// Its weight `κ` in `(0, 1]`.
    pub weight: f64,
    pub kind: ConflictKind,
    /// The fact of this sentence (index into its facts).
    pub fact: usize,
    /// The other set's sentence and fact it conflicts with (`None` for
    /// [`ConflictKind::Unmatched`]).
    pub other: Option<(usize, usize)>,
}

/// A fact's conflict weight, kind, and the other set's (sentence, fact).
type FactConflict = (f64, ConflictKind, Option<(usize, usize)>);

/// The strength `λ` and the pair conflicts `c(f, g)` of the clinical cost.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClinicalWeights {
    /// `λ`: what one fully conflicting sentence on each side adds to an
    /// OT-family transport cost (before the family's division by `max M`).
    pub lambda: f64,
    /// Present against absent.
    pub polarity: f64,
    /// Hedged against present or absent.
    pub hedge: f64,
    /// Left against right.
    pub side: f64,
    /// Bilateral against left or right.
    pub bilateral: f64,
    /// Grades two apart (small against large, mild against severe).
    pub grade_far: f64,
    /// Grades one apart (mild against moderate).
    pub grade_near: f64,
    /// A present finding of the first set (the candidate) that the second
    /// never names: a finding the candidate adds.
    pub unmatched: f64,
    /// A hedged finding of the first set that the second never names.
    pub unmatched_hedged: f64,
    /// A present finding of the second set (the reference) that the first
    /// never names: a finding the candidate omits.
    pub omitted: f64,
    /// A hedged finding of the second set that the first never names.
    pub omitted_hedged: f64,
}

/// The default `λ`, chosen with [`DEFAULT_UNMATCHED`] on the validation
/// reports of the faithfulness benchmark (SPEC §10): the smallest `λ` of the
/// grid at which Chamfer meets the three goals (a reversed finding and a
/// side swap cost at least half an unrelated report, a rephrasing at most a
/// quarter of a reversed finding) while an omission still costs more than
/// the report-level CheXpert term makes it cost.
pub const DEFAULT_LAMBDA: f64 = 1.5;

/// The default weight of a present finding the other report never names
/// (a hedged one weighs half): half a contradiction, since a report may
/// leave a finding unsaid without denying it (SPEC §10).
pub const DEFAULT_UNMATCHED: f64 = 0.5;

impl Default for ClinicalWeights {
    fn default() -> Self {
        ClinicalWeights {
            lambda: DEFAULT_LAMBDA,
            polarity: 1.0,
            hedge: 0.5,
            side: 1.0,
            bilateral: 0.5,
            grade_far: 1.0,
            grade_near: 0.5,
            unmatched: DEFAULT_UNMATCHED,
            unmatched_hedged: 0.5 * DEFAULT_UNMATCHED,
            omitted: DEFAULT_UNMATCHED,
            omitted_hedged: 0.5 * DEFAULT_UNMATCHED,
        }
    }
}

impl ClinicalWeights {
    /// Checks that every weight is finite and non-negative and `λ` at most
    /// 1e3 (costs stay far from overflow); the error names the weight.
    pub fn check(&self) -> Result<(), String> {
        let named = [
            ("lambda", self.lambda),
            ("polarity", self.polarity),
            ("hedge", self.hedge),
            ("side", self.side),
            ("bilateral", self.bilateral),
            ("grade_far", self.grade_far),
            ("grade_near", self.grade_near),
            ("unmatched", self.unmatched),
            ("unmatched_hedged", self.unmatched_hedged),
            ("omitted", self.omitted),
            ("omitted_hedged", self.omitted_hedged),
        ];
        for (name, w) in named {
            if !(w.is_finite() && w >= 0.0) {
                return Err(format!(
                    "clinical weight `{name}` must be finite and >= 0, got {w}"
                ));
            }
        }
        if self.lambda > 1e3 {
            return Err(format!(
                "clinical weight `lambda` must be at most 1000, got {}",
                self.lambda
            ));
        }
        Ok(())
    }

    /// The pair conflict `c(f, g)` of two facts of one observation, with its
    /// kind (`None` when they agree).
    pub fn pair(&self, f: &Fact, g: &Fact) -> Option<(f64, ConflictKind)> {
        use Polarity::*;
        match (f.polarity, g.polarity) {
            (Present, Absent) | (Absent, Present) => {
                return Some((self.polarity, ConflictKind::Polarity))
            }
            (Uncertain, Present | Absent) | (Present | Absent, Uncertain) => {
                return Some((self.hedge, ConflictKind::Hedge))
            }
            // Two absent statements agree whatever their sides ("no left
            // effusion" and "no effusion").
            (Absent, Absent) => return None,
            _ => {}
        }
        let side = match (f.side, g.side) {
            (Some(a), Some(b)) if a != b => {
                if a == Laterality::Bilateral || b == Laterality::Bilateral {
                    Some((self.bilateral, ConflictKind::Bilateral))
                } else {
                    Some((self.side, ConflictKind::Side))
                }
            }
            _ => None,
        };
        let grade = match (f.grade, g.grade) {
            (Some(a), Some(b)) => match a.abs_diff(b) {
                0 => None,
                1 => Some((self.grade_near, ConflictKind::Grade)),
                _ => Some((self.grade_far, ConflictKind::Grade)),
            },
            _ => None,
        };
        match (side, grade) {
            (Some(s), Some(g)) => Some(if g.0 > s.0 { g } else { s }),
            (s, g) => s.or(g),
        }
    }

    /// `κ(f, B)` with what caused it; `unmatched` the (present, hedged)
    /// weights of a finding `B` never names.
    fn fact_conflict<F: FactList>(
        &self,
        f: &Fact,
        other: &[F],
        unmatched: (f64, f64),
    ) -> Option<FactConflict> {
        let mut best: Option<FactConflict> = None;
        let mut named = false;
        for (j, facts) in other.iter().enumerate() {
            for (k, g) in facts.facts().iter().enumerate() {
                if g.observation != f.observation {
                    continue;
                }
                named = true;
                // One agreeing statement supports the fact.
                let (w, kind) = self.pair(f, g)?;
                if best.is_none_or(|(b, _, _)| w < b) {
                    best = Some((w, kind, Some((j, k))));
                }
            }
        }
        if named {
            return best.filter(|b| b.0 > 0.0);
        }
        if f.observation >= SITE_BASE {
            return None;
        }
        let w = match f.polarity {
            Polarity::Present => unmatched.0,
            Polarity::Uncertain => unmatched.1,
            Polarity::Absent => 0.0,
        };
        (w > 0.0).then_some((w, ConflictKind::Unmatched, None))
    }

    /// Each sentence of `a`'s worst conflict with the set `b` (`None`: its
    /// facts agree with `b`, or it states none), `a` read as the candidate
    /// (a finding `b` never names weighs `unmatched`). Costs
    /// `O(facts(a) x facts(b))`, no text. Each sentence's facts may be held
    /// any way that lends a slice ([`FactList`]).
    pub fn conflicts<F: FactList, G: FactList>(&self, a: &[F], b: &[G]) -> Vec<Option<Conflict>> {
        self.conflicts_weighing(a, b, (self.unmatched, self.unmatched_hedged))
    }

    /// [`ClinicalWeights::conflicts`] with `a` read as the reference (a
    /// finding `b` never names weighs `omitted`: the candidate `b` omits it).
    pub fn omissions<F: FactList, G: FactList>(&self, a: &[F], b: &[G]) -> Vec<Option<Conflict>> {
        self.conflicts_weighing(a, b, (self.omitted, self.omitted_hedged))
    }

    fn conflicts_weighing<F: FactList, G: FactList>(
        &self,
        a: &[F],
        b: &[G],
        unmatched: (f64, f64),
    ) -> Vec<Option<Conflict>> {
        a.iter()
            .map(|facts| {
                let mut worst: Option<Conflict> = None;
                for (i, f) in facts.facts().iter().enumerate() {
                    if let Some((w, kind, other)) = self.fact_conflict(f, b, unmatched) {
                        if worst.is_none_or(|c| w > c.weight) {
                            worst = Some(Conflict {
                                weight: w.min(1.0),
                                kind,
                                fact: i,
                                other,
                            });
                        }
                    }
                }
                worst
            })
            .collect()
    }
}

/// The sentence weights `κ` of one set (0 without a conflict).
pub fn kappa(conflicts: &[Option<Conflict>]) -> Vec<f64> {
    conflicts
        .iter()
        .map(|c| c.map_or(0.0, |c| c.weight))
        .collect()
}

/// `M'_{ij} = M_{ij} + λ/2 (n κ^A_i + m κ^B_j)` over the cosine cost `m`,
/// keeping `max(M)` as the OT family's scale. Without a conflict the
/// result is `m` itself, bit for bit (scale included).
///
/// # Panics
/// When `ka` / `kb` do not have one weight per row / column.
pub fn penalized(m: &CostMatrix, ka: &[f64], kb: &[f64], lambda: f64) -> CostMatrix {
    assert_eq!(ka.len(), m.n, "one conflict weight per row");
    assert_eq!(kb.len(), m.m, "one conflict weight per column");
    if ka.iter().chain(kb).all(|&k| k == 0.0) || lambda == 0.0 {
        return m.clone();
    }
    let (n, k) = (m.n as f64, m.m as f64);
    let row: Vec<f64> = ka.iter().map(|&x| 0.5 * lambda * n * x).collect();
    let col: Vec<f64> = kb.iter().map(|&x| 0.5 * lambda * k * x).collect();
    let mut data = m.data.clone();
    for (r, line) in data.chunks_exact_mut(m.m.max(1)).enumerate() {
        for (c, x) in line.iter_mut().enumerate() {
            *x += row[r] + col[c];
        }
    }
    CostMatrix {
        n: m.n,
        m: m.m,
        data,
        scale: Some(m.scale()),
    }
}

/// The conflicts of a pair of sets, both ways.
#[derive(Debug, Clone, PartialEq)]
pub struct PairConflicts {
    /// Per sentence of the first set.
    pub a: Vec<Option<Conflict>>,
    /// Per sentence of the second set.
    pub b: Vec<Option<Conflict>>,
}

impl PairConflicts {
    /// Both directions' conflicts of sets with facts `a` (the candidate) and
    /// `b` (the reference).
    pub fn of<F: FactList, G: FactList>(a: &[F], b: &[G], w: &ClinicalWeights) -> Self {
        PairConflicts {
            a: w.conflicts(a, b),
            b: w.omissions(b, a),
        }
    }

    /// Whether any sentence conflicts.
    pub fn any(&self) -> bool {
        self.a.iter().chain(&self.b).any(Option::is_some)
    }
}

impl<'a> PairCost<'a> {
    /// The clinical cost of this pair: the cross cost penalised by
    /// [`penalized`] with the conflicts of `facts_a` against `facts_b`
    /// (one list of facts per sentence, in the sets' row order); intra-set
    /// costs unchanged. Returns the conflicts too (for explanations).
    ///
    /// # Errors
    /// When the fact lists do not have one entry per sentence, or a weight
    /// is out of range ([`ClinicalWeights::check`]).
    pub fn clinical<F: FactList, G: FactList>(
        self,
        facts_a: &[F],
        facts_b: &[G],
        w: &ClinicalWeights,
    ) -> crate::Result<(PairCost<'a>, PairConflicts)> {
        w.check()
            .map_err(|message| crate::SdrError::BadMetricParameter {
                metric: "clinical cost".into(),
                message,
            })?;
        let (n, m) = (self.cross.n, self.cross.m);
        if facts_a.len() != n || facts_b.len() != m {
            return Err(crate::SdrError::BadMetricParameter {
                metric: "clinical cost".into(),
                message: format!(
                    "facts for {} x {} sentences given for a cost of {n} x {m}",
                    facts_a.len(),
                    facts_b.len()
                ),
            });
        }
        let conflicts = PairConflicts::of(facts_a, facts_b, w);
        if !conflicts.any() {
            return Ok((self, conflicts));
        }
        let cross = penalized(
            &self.cross,
            &kappa(&conflicts.a),
            &kappa(&conflicts.b),
            w.lambda,
        );
        Ok((
            PairCost {
                cross: Cow::Owned(cross),
                intra: self.intra,
            },
            conflicts,
        ))
    }
}

/// Which sentence cost a distance reads: the paper's cosine cost (SPEC §3,
/// the default) or the clinically aware cost (SPEC §10) with its strength
/// `λ` and the weights of a finding one report names and the other does not.
/// Written as a spec like a metric: `cosine`, `clinical` (the defaults),
/// `clinical:lambda=0.8`, `clinical:lambda=1,unmatched=0.25` (`unmatched`:
/// both ways), `clinical:added=0.25,omitted=1` (a finding the candidate adds,
/// one it omits, apart).
///
/// ```
/// use sdr_core::cost::CostKind;
/// let c: CostKind = "clinical:lambda=0.8".parse().unwrap();
/// assert_eq!(c, CostKind::Clinical { lambda: 0.8, unmatched: 0.5, omitted: 0.5 });
/// assert_eq!(c.to_string(), "clinical:lambda=0.8");
/// let d: CostKind = "clinical:unmatched=1,lambda=0.41".parse().unwrap();
/// assert_eq!(d.to_string(), "clinical:lambda=0.41,unmatched=1");
/// let e: CostKind = "clinical:omitted=1,added=0.25".parse().unwrap();
/// assert_eq!(e.to_string(), "clinical:lambda=1.5,added=0.25,omitted=1");
/// assert_eq!("cosine".parse::<CostKind>().unwrap(), CostKind::Cosine);
/// assert_eq!(CostKind::default().to_string(), "cosine");
/// assert!("clinical:lambda=-1".parse::<CostKind>().is_err());
/// assert!("clinical:unmatched=1,omitted=1".parse::<CostKind>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum CostKind {
    /// `(1 - cos) / 2` (SPEC §3): the paper's cost, bit for bit.
    #[default]
    Cosine,
    /// The cosine cost plus the conflict penalty of strength `lambda`; a
    /// present finding of the candidate that the reference never names
    /// weighs `unmatched` (spec key `added`), one of the reference that the
    /// candidate never names `omitted` (hedged ones half).
    Clinical {
        lambda: f64,
        unmatched: f64,
        omitted: f64,
    },
    /// Any other cost, by a name the registry knows (`sdr_clinical::costs`,
    /// or one a caller registered): only its syntax is checked at parse;
    /// `sdr_clinical::parse_cost` checks the name and values as well.
    Named(NamedCost),
}

impl CostKind {
    /// The clinical cost with the default weights ([`DEFAULT_LAMBDA`],
    /// [`DEFAULT_UNMATCHED`] both ways).
    pub fn clinical() -> Self {
        CostKind::Clinical {
            lambda: DEFAULT_LAMBDA,
            unmatched: DEFAULT_UNMATCHED,
            omitted: DEFAULT_UNMATCHED,
        }
    }

    /// The spec of clinical weights `w` (only `λ` and the unmatched weights
    /// have spec keys; the others are the defaults').
    pub fn of_weights(w: &ClinicalWeights) -> Self {
        CostKind::Clinical {
            lambda: w.lambda,
            unmatched: w.unmatched,
            omitted: w.omitted,
        }
    }

    /// Whether this is the clinical cost.
    pub fn is_clinical(&self) -> bool {
        matches!(self, CostKind::Clinical { .. })
    }

    /// The clinical weights of this cost (`None` for cosine): the defaults
    /// with its `λ` and unmatched weights.
    pub fn weights(&self) -> Option<ClinicalWeights> {
        match *self {
            CostKind::Cosine | CostKind::Named(_) => None,
            CostKind::Clinical {
                lambda,
                unmatched,
                omitted,
            } => Some(ClinicalWeights {
                lambda,
                unmatched,
                unmatched_hedged: 0.5 * unmatched,
                omitted,
                omitted_hedged: 0.5 * omitted,
                ..ClinicalWeights::default()
            }),
        }
    }
}

impl std::fmt::Display for CostKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            CostKind::Cosine => f.write_str("cosine"),
            CostKind::Named(n) => f.write_str(n.as_str()),
            // The unmatched weights only when they are not the defaults, and
            // apart only when they differ, so that a spec reads back as it
            // was written.
            CostKind::Clinical {
                lambda,
                unmatched,
                omitted,
            } if unmatched == omitted => {
                if unmatched == DEFAULT_UNMATCHED {
                    write!(f, "clinical:lambda={lambda}")
                } else {
                    write!(f, "clinical:lambda={lambda},unmatched={unmatched}")
                }
            }
            CostKind::Clinical {
                lambda,
                unmatched,
                omitted,
            } => write!(
                f,
                "clinical:lambda={lambda},added={unmatched},omitted={omitted}"
            ),
        }
    }
}

impl std::str::FromStr for CostKind {
    type Err = crate::SdrError;

    fn from_str(spec: &str) -> crate::Result<CostKind> {
        let bad = |message: String| crate::SdrError::BadCost {
            spec: spec.to_string(),
            message,
        };
        let s = spec.trim();
        let (name, params) = s.split_once(':').unwrap_or((s, ""));
        match name.trim() {
            "cosine" if params.trim().is_empty() => Ok(CostKind::Cosine),
            "cosine" => Err(bad("the cosine cost takes no parameter".into())),
            "clinical" => {
                let (mut lambda, mut unmatched, mut added, mut omitted) = (None, None, None, None);
                for part in params.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                    let (k, v) = part
                        .split_once('=')
                        .ok_or_else(|| bad(format!("parameter `{part}` is not key=value")))?;
                    let (k, v) = (k.trim(), v.trim());
                    let slot = match k {
                        "lambda" => &mut lambda,
                        "unmatched" => &mut unmatched,
                        "added" => &mut added,
                        "omitted" => &mut omitted,
                        _ => {
                            return Err(bad(format!(
                            "unknown parameter `{k}` (expected: lambda, unmatched, added, omitted)"
                        )))
                        }
                    };
                    if slot.is_some() {
                        return Err(bad(format!("parameter `{k}` given twice")));
                    }
                    let x: f64 = v
                        .parse()
                        .map_err(|_| bad(format!("{k} `{v}` is not a number")))?;
                    *slot = Some(x);
                }
                if unmatched.is_some() && (added.is_some() || omitted.is_some()) {
                    return Err(bad(
                        "give `unmatched` (both ways) or `added` / `omitted`, not both".into(),
                    ));
                }
                for (k, u) in [
                    ("unmatched", unmatched),
                    ("added", added),
                    ("omitted", omitted),
                ] {
                    if let Some(u) = u {
                        if u > 1.0 {
                            return Err(bad(format!("{k} must be at most 1, got {u}")));
                        }
                    }
                }
                let both = unmatched.unwrap_or(DEFAULT_UNMATCHED);
                let cost = CostKind::Clinical {
                    lambda: lambda.unwrap_or(DEFAULT_LAMBDA),
                    unmatched: added.unwrap_or(both),
                    omitted: omitted.unwrap_or(both),
                };
                cost.weights().expect("clinical").check().map_err(bad)?;
                Ok(cost)
            }
            _ => NamedCost::parse(s).map(CostKind::Named).map_err(bad),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distance::Metric;

    fn fact(o: u16, p: Polarity, side: Option<Laterality>, grade: Option<u8>) -> Fact {
        Fact {
            observation: o,
            polarity: p,
            side,
            grade,
        }
    }
    use Laterality::*;
    use Polarity::*;

    /// A finding the candidate adds and one it omits weigh apart; the
    /// default reads both as `unmatched`, so old specs keep their costs.
    #[test]
    fn added_and_omitted_weigh_apart() {
        let cand = vec![vec![fact(3, Present, None, None)], vec![]];
        let reference = vec![
            vec![fact(7, Present, None, None)],
            vec![fact(8, Uncertain, None, None)],
        ];
        let w: ClinicalWeights = "clinical:added=0.25,omitted=1"
            .parse::<CostKind>()
            .unwrap()
            .weights()
            .unwrap();
        let c = PairConflicts::of(&cand, &reference, &w);
        assert_eq!(kappa(&c.a), vec![0.25, 0.0]);
        assert_eq!(kappa(&c.b), vec![1.0, 0.5]);
        let d = PairConflicts::of(&cand, &reference, &ClinicalWeights::default());
        assert_eq!(kappa(&d.a), vec![0.5, 0.0]);
        assert_eq!(kappa(&d.b), vec![0.5, 0.25]);
        // Specs read back as they were written.
        for spec in [
            "clinical:lambda=1.5",
            "clinical:lambda=0.41,unmatched=1",
            "clinical:lambda=1,added=0.25,omitted=1",
        ] {
            assert_eq!(spec.parse::<CostKind>().unwrap().to_string(), spec);
        }
        assert_eq!(
            "clinical:added=0.5,omitted=0.5"
                .parse::<CostKind>()
                .unwrap(),
            CostKind::clinical()
        );
        for bad in [
            "clinical:omitted=2",
            "clinical:added=-1",
            "clinical:unmatched=1,added=1",
        ] {
            assert!(bad.parse::<CostKind>().is_err(), "{bad}");
        }
    }

    #[test]
    fn pair_conflicts_by_kind() {
        let w = ClinicalWeights::default();
        let p = |s, g| fact(9, Present, s, g);
        assert_eq!(
            w.pair(&p(None, None), &fact(9, Absent, None, None))
                .unwrap()
                .1,
            ConflictKind::Polarity
        );
        assert_eq!(
            w.pair(&p(None, None), &fact(9, Uncertain, None, None))
                .unwrap(),
            (0.5, ConflictKind::Hedge)
        );
        assert_eq!(
            w.pair(&p(Some(Left), None), &p(Some(Right), None)).unwrap(),
            (1.0, ConflictKind::Side)
        );
        assert_eq!(
            w.pair(&p(Some(Left), None), &p(Some(Bilateral), None))
                .unwrap(),
            (0.5, ConflictKind::Bilateral)
        );
        assert_eq!(
            w.pair(&p(None, Some(1)), &p(None, Some(3))).unwrap(),
            (1.0, ConflictKind::Grade)
        );
        assert_eq!(
            w.pair(&p(None, Some(1)), &p(None, Some(2))).unwrap(),
            (0.5, ConflictKind::Grade)
        );
        // An unnamed side or grade agrees with any.
        assert_eq!(w.pair(&p(Some(Left), Some(1)), &p(None, None)), None);
        let a = fact(9, Absent, Some(Left), None);
        assert_eq!(w.pair(&a, &fact(9, Absent, Some(Right), None)), None);
    }

    #[test]
    fn one_agreeing_statement_supports_a_fact_and_absence_needs_none() {
        let w = ClinicalWeights::default();
        let a = vec![
            vec![fact(2, Present, None, None)],
            vec![fact(9, Absent, None, None)],
        ];
        let b = vec![
            vec![fact(2, Absent, None, None)],
            vec![fact(2, Present, None, None)],
        ];
        let c = w.conflicts(&a, &b);
        assert_eq!(c[0], None);
        // B never names observation 9; an absent finding is no omission.
        assert_eq!(c[1], None);
        let c = w.conflicts(&b, &a);
        assert_eq!(c[0].unwrap().kind, ConflictKind::Polarity);
        assert_eq!(c[0].unwrap().other, Some((0, 0)));
        let unmatched = w.conflicts(&[vec![fact(5, Present, None, None)]], &b);
        assert_eq!(unmatched[0].unwrap().kind, ConflictKind::Unmatched);
    }

    fn sets() -> (CostMatrix, CostMatrix) {
        // Three sentences against four, costs in (0, 0.5).
        let m = CostMatrix::new(
            3,
            4,
            vec![
                0.05, 0.3, 0.35, 0.4, 0.32, 0.02, 0.3, 0.33, 0.36, 0.31, 0.04, 0.29,
            ],
        );
        let ka = [0.0, 1.0, 0.0];
        let kb = [0.0, 1.0, 0.0, 0.0];
        (m.clone(), penalized(&m, &ka, &kb, 0.4))
    }

    #[test]
    fn transport_pays_exactly_lambda_per_conflicting_pair() {
        let (m, p) = sets();
        assert_eq!(p.scale(), m.max());
        let ot = |c: &CostMatrix| crate::distance::ot::ot_distance(c).value;
        // Row and column shifts change every plan's cost by the same amount,
        // so the optimal plan stays and the value moves by λ/2 (1 + 1) / max M.
        let expected = ot(&m) + 0.4 / m.max();
        assert!(
            (ot(&p) - expected).abs() < 1e-12,
            "{} vs {expected}",
            ot(&p)
        );
        let ch = |c: &CostMatrix| crate::distance::chamfer::chamfer(c);
        assert!(ch(&p) - ch(&m) >= 0.2 - 1e-12);
        for metric in Metric::all() {
            let v0 = metric
                .evaluate(&PairCost::borrowed(&m, None))
                .map(|e| e.value);
            let v1 = metric
                .evaluate(&PairCost::borrowed(&p, None))
                .map(|e| e.value);
            if let (Ok(v0), Ok(v1)) = (v0, v1) {
                assert!(v1 >= v0 - 1e-9, "{metric}: {v1} < {v0}");
            }
        }
    }

    #[test]
    fn no_conflict_leaves_the_cost_bit_for_bit() {
        let (m, _) = sets();
        let same = penalized(&m, &[0.0; 3], &[0.0; 4], 0.4);
        assert_eq!(same, m);
        assert_eq!(same.scale().to_bits(), m.max().to_bits());
    }

    #[test]
    fn clinical_pair_cost_checks_its_input() {
        let (m, _) = sets();
        let pc = PairCost::borrowed(&m, None);
        let facts = vec![vec![]; 3];
        let err = pc
            .clone()
            .clinical(&facts, &facts, &ClinicalWeights::default())
            .unwrap_err();
        assert!(err.to_string().contains("3 x 3 sentences"), "{err}");
        let bad = ClinicalWeights {
            lambda: f64::NAN,
            ..Default::default()
        };
        let err = pc.clinical(&facts, &vec![vec![]; 4], &bad).unwrap_err();
        assert!(err.to_string().contains("lambda"), "{err}");
    }
}
