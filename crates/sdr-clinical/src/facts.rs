//! Sentence-level clinical facts for the clinical cost (SPEC §10): per
//! sentence, each finding it names, with polarity (present, absent,
//! uncertain), side (left, right, bilateral) and size or severity grade.
//!
//! Findings and polarity come from the labeler's own mentions and cues
//! (SPEC §8), per sentence rather than aggregated per report, plus the
//! findings beyond CheXpert's 14 listed in `data/clinical/sentence_facts.json`
//! (granuloma, hyperinflation, ...). Side and grade are the nearest side or
//! grade word to the mention in its clause, at most [`QUALIFIER_GAP`] words
//! away ("left basilar atelectasis", "calcified granuloma in the right upper
//! lobe", "small right pleural effusion").

use std::collections::HashMap;

use sdr_core::cost::clinical::{Fact, Laterality, Polarity, SITE_BASE};

use crate::labeler::{clause_of, Labeler, Scratch};
use crate::observation::{Label, Observation};

/// Most words between a mention and its side or grade word.
pub const QUALIFIER_GAP: usize = 6;

/// The side a word names, if any.
fn side_word(w: &str) -> Option<Laterality> {
    Some(match w {
        "left" | "l" => Laterality::Left,
        "right" | "r" => Laterality::Right,
        "bilateral" | "bilaterally" | "bibasilar" | "bibasal" | "bibasally" | "both" => {
            Laterality::Bilateral
        }
        _ => return None,
    })
}

/// The size or severity grade a word names, if any: 1 small or mild,
/// 2 moderate, 3 large or severe.
fn grade_word(w: &str) -> Option<u8> {
    Some(match w {
        "small" | "tiny" | "trace" | "minimal" | "minimally" | "mild" | "mildly" | "slight"
        | "slightly" | "minor" | "subtle" => 1,
        "moderate" | "moderately" | "medium" => 2,
        "large" | "severe" | "severely" | "marked" | "markedly" | "extensive" | "massive"
        | "significant" | "significantly" | "huge" => 3,
        _ => return None,
    })
}

/// Words a site's key passes over: articles, copulas, prepositions and the
/// position words that a rephrasing adds or drops ("right *upper* quadrant",
/// "left-*sided*").
const SITE_SKIP: [&str; 38] = [
    "a",
    "an",
    "the",
    "of",
    "in",
    "at",
    "on",
    "to",
    "with",
    "and",
    "is",
    "are",
    "was",
    "were",
    "be",
    "been",
    "there",
    "this",
    "these",
    "that",
    "which",
    "seen",
    "noted",
    "again",
    "upper",
    "lower",
    "mid",
    "middle",
    "lateral",
    "medial",
    "anterior",
    "posterior",
    "inferior",
    "superior",
    "side",
    "sided",
    "aspect",
    "portion",
];

/// The site id of a side word at `st..en` of `text` whose finding is outside
/// the vocabulary: a stable hash (FNV-1a) of the word the side points at, the
/// first word after it that is no side, grade, number or [`SITE_SKIP`] word
/// ("left *paratracheal* lymph nodes", "right *hemidiaphragm*"), else the
/// nearest such word before it ("opacity at the *base* on the left").
fn site_id(text: &str, (st, en): (usize, usize)) -> u16 {
    let keep = |w: &&str| {
        side_word(w).is_none()
            && grade_word(w).is_none()
            && !SITE_SKIP.contains(w)
            && !w.bytes().all(|b| b.is_ascii_digit())
    };
    let head = words(text, en, text.len())
        .map(|(_, w)| w)
        .find(keep)
        .or_else(|| {
            let before: Vec<&str> = words(text, 0, st).map(|(_, w)| w).collect();
            before.into_iter().rev().find(keep)
        })
        .unwrap_or("");
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in head.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    SITE_BASE + (h % u64::from(u16::MAX - SITE_BASE + 1)) as u16
}

/// Words of `text[from..to]` with their byte offsets (letters and digits).
fn words(text: &str, from: usize, to: usize) -> impl Iterator<Item = (usize, &str)> {
    let slice = &text[from..to];
    slice
        .split(|c: char| !c.is_ascii_alphanumeric())
        .scan(0usize, move |pos, w| {
            let at = *pos;
            *pos += w.len() + 1;
            Some((from + at, w))
        })
        .filter(|(_, w)| !w.is_empty())
}

/// The nearest qualifier of the mention `start..end` in `clause` by `pick`,
/// at most [`QUALIFIER_GAP`] words from it (ties go to the word before).
fn nearest<T: Copy>(
    text: &str,
    clause: (usize, usize),
    (start, end): (usize, usize),
    pick: impl Fn(&str) -> Option<T>,
) -> Option<T> {
    // A qualifier inside the mention's own phrase ("elevated right
    // hemidiaphragm") is its nearest.
    if let Some(q) = words(text, start, end).find_map(|(_, w)| pick(w)) {
        return Some(q);
    }
    let before: Vec<(usize, &str)> = words(text, clause.0, start).collect();
    let b = before
        .iter()
        .rev()
        .take(QUALIFIER_GAP + 1)
        .enumerate()
        .find_map(|(gap, (_, w))| pick(w).map(|q| (gap, q)));
    let a = words(text, end, clause.1)
        .take(QUALIFIER_GAP + 1)
        .enumerate()
        .find_map(|(gap, (_, w))| pick(w).map(|q| (gap, q)));
    match (b, a) {
        (Some((gb, qb)), Some((ga, qa))) => Some(if ga < gb { qa } else { qb }),
        (b, a) => b.or(a).map(|(_, q)| q),
    }
}

impl Labeler {
    /// The clinical facts of one sentence, in the order its mentions stand,
    /// each distinct fact once. A sentence naming no finding has none.
    ///
    /// ```
    /// use sdr_clinical::Labeler;
    /// use sdr_core::cost::clinical::{Laterality, Polarity};
    ///
    /// let l = Labeler::default();
    /// let f = l.sentence_facts("Small right pleural effusion.");
    /// assert_eq!(l.fact_name(f[0].observation), "Pleural Effusion");
    /// assert_eq!((f[0].polarity, f[0].side, f[0].grade), (Polarity::Present, Some(Laterality::Right), Some(1)));
    /// assert_eq!(l.sentence_facts("No pneumothorax.")[0].polarity, Polarity::Absent);
    /// ```
    pub fn sentence_facts(&self, sentence: &str) -> Vec<Fact> {
        let mut sc = Scratch::default();
        let mut found: Vec<(usize, Label, usize, usize)> = Vec::new();
        self.each_mention(sentence, &mut sc, |key, l, s, e| found.push((key, l, s, e)));
        found.sort_by_key(|&(key, _, s, _)| (s, key));
        let text = sc.text.as_str();
        let mut facts: Vec<Fact> = Vec::with_capacity(found.len());
        for (key, label, s, e) in found {
            if key == Observation::NoFinding.index() {
                continue;
            }
            let polarity = match label {
                Label::Positive => Polarity::Present,
                Label::Negative => Polarity::Absent,
                Label::Uncertain => Polarity::Uncertain,
            };
            let c = clause_of(&sc.breaks, s);
            let clause = (
                if c == 0 { 0 } else { sc.breaks[c - 1] },
                sc.breaks.get(c).copied().unwrap_or(text.len()),
            );
            // A side or grade qualifies what is there, not what is denied:
            // "no left effusion" agrees with "no effusion".
            let (side, grade) = if polarity == Polarity::Absent {
                (None, None)
            } else {
                (
                    nearest(text, clause, (s, e), side_word),
                    nearest(text, clause, (s, e), grade_word),
                )
            };
            let fact = Fact {
                observation: key as u16,
                polarity,
                side,
                grade,
            };
            if !facts.contains(&fact) {
                facts.push(fact);
            }
        }
        // A side word that no stated finding takes: the finding is outside the vocabulary
        // ("the right hemidiaphragm remains elevated", "calcified left paratracheal lymph
        // nodes"), so the anatomy the side word points at names its site.
        if facts
            .iter()
            .all(|f| f.polarity == Polarity::Absent || f.side.is_none())
        {
            let sides = self.judge_spans(sentence, &mut sc, |t| {
                words(t, 0, t.len())
                    .filter(|(_, w)| side_word(w).is_some())
                    .map(|(at, w)| (at, at + w.len()))
                    .collect()
            });
            let text = sc.text.as_str();
            if let Some(((st, en), label)) = sides.into_iter().find(|(_, l)| *l != Label::Negative)
            {
                let fact = Fact {
                    observation: site_id(text, (st, en)),
                    polarity: if label == Label::Uncertain {
                        Polarity::Uncertain
                    } else {
                        Polarity::Present
                    },
                    side: side_word(&text[st..en]),
                    grade: None,
                };
                facts.push(fact);
            }
        }
        facts
    }

    /// The facts of each sentence, each distinct sentence annotated once
    /// (sentences repeat across candidates and references).
    pub fn facts_of<'s>(&self, sentences: impl IntoIterator<Item = &'s str>) -> Vec<Vec<Fact>> {
        let mut seen: HashMap<&'s str, Vec<Fact>> = HashMap::new();
        sentences
            .into_iter()
            .map(|s| {
                seen.entry(s)
                    .or_insert_with(|| self.sentence_facts(s))
                    .clone()
            })
            .collect()
    }

    /// The name of fact observation `id`: CheXpert's spelling for 0..14,
    /// else the finding's name in `sentence_facts.json`; `"?"` if unknown.
    pub fn fact_name(&self, id: u16) -> &str {
        if id >= SITE_BASE {
            return "finding outside the vocabulary";
        }
        let id = id as usize;
        match Observation::ALL.get(id) {
            Some(o) => o.name(),
            None => self
                .extras
                .get(id - Observation::ALL.len())
                .map_or("?", String::as_str),
        }
    }

    /// How many fact observations there are (CheXpert's 14 and the extras).
    pub fn fact_observations(&self) -> usize {
        Observation::ALL.len() + self.extras.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sdr_core::cost::clinical::{ClinicalWeights, ConflictKind};
    use Laterality::*;
    use Polarity::*;

    fn labeler() -> &'static Labeler {
        static L: std::sync::OnceLock<Labeler> = std::sync::OnceLock::new();
        L.get_or_init(Labeler::default)
    }

    /// `(finding, polarity, side, grade)` of every fact of `s`.
    fn facts(s: &str) -> Vec<(String, Polarity, Option<Laterality>, Option<u8>)> {
        let l = labeler();
        l.sentence_facts(s)
            .into_iter()
            .map(|f| {
                (
                    l.fact_name(f.observation).to_string(),
                    f.polarity,
                    f.side,
                    f.grade,
                )
            })
            .collect()
    }

    fn one(s: &str) -> (String, Polarity, Option<Laterality>, Option<u8>) {
        let f = facts(s);
        assert_eq!(f.len(), 1, "{s:?}: {f:?}");
        f.into_iter().next().unwrap()
    }

    fn conflict(a: &str, b: &str) -> Option<ConflictKind> {
        let l = labeler();
        let w = ClinicalWeights::default();
        let c = w.conflicts(&[l.sentence_facts(a)], &[l.sentence_facts(b)]);
        c[0].map(|c| c.kind)
    }

    // Sentences quoted from IU X-ray reports (data/iu-xray/indiana_reports.csv).

    #[test]
    fn sides_and_grades_of_iu_sentences() {
        assert_eq!(
            one("Left basilar atelectasis."),
            ("Atelectasis".into(), Present, Some(Left), None)
        );
        assert_eq!(
            one("Calcified granuloma in the right upper lobe."),
            ("Granuloma".into(), Present, Some(Right), None)
        );
        assert_eq!(
            one("Small right pleural effusion."),
            ("Pleural Effusion".into(), Present, Some(Right), Some(1))
        );
        assert_eq!(
            one("Mild cardiomegaly."),
            ("Cardiomegaly".into(), Present, None, Some(1))
        );
        assert_eq!(
            one("Bibasilar airspace disease."),
            ("Lung Opacity".into(), Present, Some(Bilateral), None)
        );
        assert_eq!(
            one("Elevated right hemidiaphragm."),
            ("Elevated hemidiaphragm".into(), Present, Some(Right), None)
        );
        assert_eq!(
            one("Mild degenerative changes of the thoracic spine."),
            ("Degenerative spine".into(), Present, None, Some(1))
        );
    }

    #[test]
    fn polarity_of_iu_sentences() {
        assert_eq!(one("No pneumothorax.").1, Absent);
        assert_eq!(one("Pneumothorax is not seen.").1, Absent);
        assert_eq!(one("There is a pneumothorax.").1, Present);
        assert_eq!(one("No focal airspace consolidation.").1, Absent);
        assert_eq!(one("Hyperinflated lungs.").1, Present);
        let f = facts("No pneumothorax or pleural effusion.");
        assert_eq!(f.len(), 2);
        assert!(f.iter().all(|f| f.1 == Absent));
        assert_eq!(one("Possible small left pleural effusion.").1, Uncertain);
        // A denied finding takes no side: it agrees with any other denial.
        assert_eq!(one("No left pleural effusion.").2, None);
        assert!(facts("The XXXX are intact.").is_empty());
    }

    #[test]
    fn conflicts_between_iu_sentences() {
        use ConflictKind::*;
        assert_eq!(
            conflict("No pneumothorax.", "There is a pneumothorax."),
            Some(Polarity)
        );
        assert_eq!(
            conflict("No pneumothorax.", "Pneumothorax is not seen."),
            None
        );
        assert_eq!(
            conflict("Left basilar atelectasis.", "Right basilar atelectasis."),
            Some(Side)
        );
        assert_eq!(
            conflict(
                "Small right pleural effusion.",
                "Large right pleural effusion."
            ),
            Some(Grade)
        );
        assert_eq!(
            conflict("Mild cardiomegaly.", "Severe cardiomegaly."),
            Some(Grade)
        );
        assert_eq!(
            conflict(
                "Possible small left pleural effusion.",
                "No pleural effusion."
            ),
            Some(Hedge)
        );
        assert_eq!(
            conflict(
                "Calcified granuloma in the right upper lobe.",
                "No pneumothorax."
            ),
            Some(Unmatched)
        );
        // Rephrasings keep their facts.
        assert_eq!(
            conflict("The heart is normal in size.", "Heart size is normal."),
            None
        );
        assert_eq!(
            conflict("No pleural effusion.", "There is no pleural effusion."),
            None
        );
    }

    /// Side swaps in IU sentences whose finding is outside the vocabulary: the side is a
    /// conflict; the same sentence, a denial, or another finding is not.
    #[test]
    fn sides_of_findings_outside_the_vocabulary() {
        use ConflictKind::*;
        for (a, b) in [
            (
                "The right hemidiaphragm remains mildly elevated.",
                "The left hemidiaphragm remains mildly elevated.",
            ),
            (
                "Calcified left paratracheal lymph nodes are seen.",
                "Calcified right paratracheal lymph nodes are seen.",
            ),
            (
                "Mild blunting of left costophrenic angle.",
                "Mild blunting of right costophrenic angle.",
            ),
            (
                "Mild blunting of left costophrenic angle.",
                "Mild blunting of the right costophrenic angle.",
            ),
            (
                "Surgical clips in the left upper quadrant.",
                "Surgical clips in the right upper quadrant.",
            ),
        ] {
            assert_eq!(conflict(a, b), Some(Side), "{a} / {b}");
            assert_eq!(conflict(a, a), None, "{a}");
        }
        // A site never named by the other set costs nothing: it may be worded otherwise.
        assert_eq!(
            conflict(
                "Calcified left paratracheal lymph nodes are seen.",
                "No pneumothorax."
            ),
            None
        );
        assert_eq!(
            conflict(
                "Calcified left paratracheal lymph nodes are seen.",
                "Left paratracheal nodes are calcified, unchanged."
            ),
            None
        );
        // A denied side word states nothing.
        assert!(facts("No left-sided abnormality.")
            .iter()
            .all(|f| f.2.is_none()));
        // A finding in the vocabulary keeps its own fact and side.
        assert_eq!(
            one("Left basilar atelectasis."),
            ("Atelectasis".into(), Present, Some(Left), None)
        );
        let site = labeler().sentence_facts("The right hemidiaphragm remains mildly elevated.");
        assert_eq!(site.len(), 1, "{site:?}");
        assert_eq!(
            labeler().fact_name(site[0].observation),
            "finding outside the vocabulary"
        );
    }

    #[test]
    fn extras_never_change_labels() {
        let l = labeler();
        let labels =
            l.label("Findings: Calcified granuloma in the right upper lobe. Hyperinflated lungs.");
        assert_eq!(labels[Observation::NoFinding], Some(Label::Positive));
        assert_eq!(l.fact_observations(), 14 + l.extras.len());
        assert_eq!(l.fact_name(14), "Granuloma");
        assert_eq!(l.fact_name(999), "?");
    }

    #[test]
    fn facts_of_annotates_each_distinct_sentence_once() {
        let l = labeler();
        let f = l.facts_of(["No pneumothorax.", "Mild cardiomegaly.", "No pneumothorax."]);
        assert_eq!(f.len(), 3);
        assert_eq!(f[0], f[2]);
        assert_eq!(f[1][0].grade, Some(1));
    }
}
