//! The rule-based labeler: phrase mentions, cue scopes, aggregation.
//!
//! Per sentence (SPEC §8):
//! 1. Normalise (ASCII lower case, `-` and whitespace to one space).
//! 2. Find every phrase of the mention automaton and of the cue automaton
//!    (both Aho-Corasick over all phrases at once) and keep matches on word
//!    boundaries. Unmention phrases veto the mentions of their observation
//!    that they overlap; the rest resolve overlaps leftmost-longest, mentions
//!    within their observation only (so one phrase can feed two
//!    observations), cues among all cues.
//! 3. Split the sentence into clauses at `;` and at clause-break cues.
//! 4. Each mention takes the nearest "before" cue that ends before it ends
//!    and the nearest "after" cue that starts after it, both in its clause.
//!    Uncertainty from either side makes it uncertain, else negation from
//!    either side makes it negative, else it is positive. Pseudo cues are
//!    transparent: they only hide the cue words inside them.
//! 5. Anatomy mentions ("heart size") take the nearest attribute of their
//!    rule in the clause within `max_gap` words (ties go to the one after),
//!    leaving out an attribute before the anatomy that another anatomy
//!    precedes at least as closely (it is that one's predicate) and an
//!    abnormal attribute before the anatomy across a comma. A normal
//!    attribute makes a negative mention, an abnormal one a mention judged
//!    as in 4 at the later of the two phrases; no attribute, no mention.
//!
//! Mentions of one observation aggregate as CheXpert does (positive beats
//! uncertain beats negative); `No Finding` is then set from the others.

use std::collections::HashMap;
use std::path::Path;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use sdr_core::report::{has_template_tag, parse_template, plain_units};

use crate::error::{ClinicalError, Result};
use crate::extras::{ExtrasFile, BUNDLED_EXTRAS};
use crate::observation::{Label, Labels, Observation};
use crate::rules::{normalize_into, Phrase, RulesFile};

/// The bundled rules, `data/clinical/chexpert_rules.json`.
pub const BUNDLED_RULES: &str = include_str!("../../../data/clinical/chexpert_rules.json");

const NEG_BEFORE: u8 = 1;
const NEG_AFTER: u8 = 2;
const UNC_BEFORE: u8 = 4;
const UNC_AFTER: u8 = 8;
const PSEUDO: u8 = 16;
const BREAK: u8 = 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Mention(Observation),
    Unmention(Observation),
    /// Anatomy phrase of rule `n`.
    Anatomy(u16),
    /// Attribute of rule `n`; `true` when abnormal.
    Attribute(u16, bool),
    /// A finding beyond CheXpert's 14 (`data/clinical/sentence_facts.json`),
    /// read by [`Labeler::sentence_facts`] only: labels never see it.
    Extra(u16),
}

/// Phrases compiled into one automaton, with per-phrase payload.
#[derive(Debug, Clone)]
struct PhraseSet<T> {
    ac: AhoCorasick,
    prefix: Vec<bool>,
    check_start: Vec<bool>,
    check_end: Vec<bool>,
    payload: Vec<T>,
}

struct SetBuilder<T> {
    index: HashMap<Phrase, usize>,
    phrases: Vec<Phrase>,
    payload: Vec<T>,
}

impl<T: Default> SetBuilder<T> {
    fn new() -> Self {
        SetBuilder {
            index: HashMap::new(),
            phrases: Vec::new(),
            payload: Vec::new(),
        }
    }

    fn slot(&mut self, list: &str, raw: &str) -> Result<&mut T> {
        let phrase = Phrase::parse(list, raw)?;
        let i = match self.index.get(&phrase) {
            Some(&i) => i,
            None => {
                self.index.insert(phrase.clone(), self.phrases.len());
                self.phrases.push(phrase);
                self.payload.push(T::default());
                self.phrases.len() - 1
            }
        };
        Ok(&mut self.payload[i])
    }

    fn build(self) -> Result<PhraseSet<T>> {
        let ac = AhoCorasickBuilder::new()
            .match_kind(MatchKind::Standard)
            .build(self.phrases.iter().map(|p| p.text.as_bytes()))
            .map_err(|e| ClinicalError::Automaton(e.to_string()))?;
        let first_word = |p: &Phrase| p.text.as_bytes().first().is_some_and(|&b| is_word(b));
        let last_word = |p: &Phrase| p.text.as_bytes().last().is_some_and(|&b| is_word(b));
        Ok(PhraseSet {
            ac,
            prefix: self.phrases.iter().map(|p| p.prefix).collect(),
            check_start: self.phrases.iter().map(first_word).collect(),
            check_end: self.phrases.iter().map(last_word).collect(),
            payload: self.payload,
        })
    }
}

/// A phrase match: byte span in the normalised sentence and the phrase id.
#[derive(Debug, Clone, Copy)]
struct Hit {
    start: usize,
    end: usize,
    phrase: usize,
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

impl<T> PhraseSet<T> {
    /// All matches on word boundaries, in no particular order; a `*` phrase
    /// runs to the end of its word.
    fn hits(&self, text: &str, out: &mut Vec<Hit>) {
        out.clear();
        let b = text.as_bytes();
        for m in self.ac.find_overlapping_iter(text) {
            let p = m.pattern().as_usize();
            let (s, mut e) = (m.start(), m.end());
            if self.check_start[p] && s > 0 && is_word(b[s - 1]) {
                continue;
            }
            if self.prefix[p] {
                while e < b.len() && is_word(b[e]) {
                    e += 1;
                }
            } else if self.check_end[p] && e < b.len() && is_word(b[e]) {
                continue;
            }
            out.push(Hit {
                start: s,
                end: e,
                phrase: p,
            });
        }
    }
}

/// Keeps the leftmost-longest non-overlapping spans among those with the
/// same key, and sorts by key, then position.
fn select_longest<T>(v: &mut Vec<T>, key: impl Fn(&T) -> (usize, usize, usize)) {
    v.sort_unstable_by(|a, b| {
        let (ka, sa, ea) = key(a);
        let (kb, sb, eb) = key(b);
        ka.cmp(&kb).then(sa.cmp(&sb)).then(eb.cmp(&ea))
    });
    let mut last: Option<(usize, usize)> = None;
    v.retain(|x| {
        let (k, s, e) = key(x);
        let keep = last.is_none_or(|(lk, le)| lk != k || s >= le);
        if keep {
            last = Some((k, e));
        }
        keep
    });
}

/// CheXpert-14 labels from report text by phrase rules (no model weights).
///
/// Build once ([`Labeler::default`] for the bundled rules,
/// [`Labeler::from_rules_json`] / [`Labeler::from_rules_path`] for your
/// own), then call [`Labeler::label`] from any number of threads.
///
/// # Examples
/// ```
/// use sdr_clinical::{Label, Labeler, Observation};
///
/// let labeler = Labeler::default();
/// let l = labeler.label("Findings: Heart size normal. No pneumothorax or pleural effusion.\n\
///                        Impression: Possible left lower lobe pneumonia.");
/// assert_eq!(l[Observation::Cardiomegaly], Some(Label::Negative));
/// assert_eq!(l[Observation::PleuralEffusion], Some(Label::Negative));
/// assert_eq!(l[Observation::Pneumonia], Some(Label::Uncertain));
/// assert_eq!(l[Observation::NoFinding], None);
/// assert_eq!(l[Observation::Fracture], None);
/// ```
#[derive(Debug, Clone)]
pub struct Labeler {
    mentions: PhraseSet<Vec<Target>>,
    cues: PhraseSet<u8>,
    /// Observation and `max_gap` of each anatomy rule.
    anatomy: Vec<(Observation, usize)>,
    /// Names of the findings beyond CheXpert's 14, fact ids 14, 15, ...
    pub(crate) extras: Vec<String>,
}

impl Default for Labeler {
    /// The bundled rules ([`BUNDLED_RULES`]).
    fn default() -> Self {
        Labeler::from_rules_json(BUNDLED_RULES).expect("the bundled rules compile (tested)")
    }
}

/// A mention-side match with one of its phrase's targets.
#[derive(Debug, Clone, Copy)]
struct Item {
    start: usize,
    end: usize,
    target: Target,
    /// Index of the target's observation: overlaps resolve within it.
    key: usize,
}

/// Scratch buffers reused across the sentences of one report.
#[derive(Default)]
pub(crate) struct Scratch {
    pub(crate) text: String,
    hits: Vec<Hit>,
    items: Vec<Item>,
    cues: Vec<Hit>,
    unmentions: Vec<(Observation, usize, usize)>,
    pub(crate) breaks: Vec<usize>,
    /// Per cue (in text order): its clause; the flags of the nearest cue at
    /// or before it in its clause that negates or hedges what follows; of the
    /// nearest at or after it that negates or hedges what precedes (0: none).
    /// `judge` then costs two binary searches, not a scan of every cue, which
    /// was quadratic in one long clause.
    cue_clause: Vec<usize>,
    last_before: Vec<u8>,
    next_after: Vec<u8>,
    /// Indices of `items` by start, and the longest item in bytes:
    /// `describe` reads only the items a few words from an anatomy mention
    /// (every item for every anatomy was quadratic in one long clause).
    by_start: Vec<usize>,
    longest: usize,
    /// Per unmention (sorted by observation and start): the furthest end of
    /// its observation's unmentions up to it.
    reach: Vec<usize>,
}

impl Labeler {
    /// Compiles rules in the format of `data/clinical/chexpert_rules.json`
    /// (SPEC §8).
    pub fn from_rules_json(json: &str) -> Result<Labeler> {
        let rules = RulesFile::parse(json)?;
        let mut mentions: SetBuilder<Vec<Target>> = SetBuilder::new();
        let mut anatomy = Vec::new();
        check_attributes(&rules)?;
        for (name, obs_rules) in &rules.observations {
            let o = Observation::from_name(name).expect("checked by RulesFile::parse");
            for raw in &obs_rules.mentions {
                push_unique(
                    mentions.slot(&format!("{name}.mentions"), raw)?,
                    Target::Mention(o),
                );
            }
            for raw in &obs_rules.unmentions {
                push_unique(
                    mentions.slot(&format!("{name}.unmentions"), raw)?,
                    Target::Unmention(o),
                );
            }
            for a in &obs_rules.anatomy {
                let id = u16::try_from(anatomy.len())
                    .map_err(|_| ClinicalError::RulesJson("too many anatomy rules".into()))?;
                anatomy.push((o, a.max_gap));
                let list = format!("{name}.anatomy");
                for raw in &a.phrases {
                    push_unique(mentions.slot(&list, raw)?, Target::Anatomy(id));
                }
                for raw in &a.abnormal {
                    push_unique(mentions.slot(&list, raw)?, Target::Attribute(id, true));
                }
                for raw in &a.normal {
                    push_unique(mentions.slot(&list, raw)?, Target::Attribute(id, false));
                }
            }
        }
        let mut cues: SetBuilder<u8> = SetBuilder::new();
        let c = &rules.cues;
        for (list, phrases, flag) in [
            ("cues.negation_before", &c.negation_before, NEG_BEFORE),
            ("cues.negation_after", &c.negation_after, NEG_AFTER),
            ("cues.uncertainty_before", &c.uncertainty_before, UNC_BEFORE),
            ("cues.uncertainty_after", &c.uncertainty_after, UNC_AFTER),
            ("cues.pseudo", &c.pseudo, PSEUDO),
            ("cues.clause_breaks", &c.clause_breaks, BREAK),
        ] {
            for raw in phrases {
                let slot = cues.slot(list, raw)?;
                *slot |= flag;
                let neg = *slot & (NEG_BEFORE | NEG_AFTER) != 0;
                let unc = *slot & (UNC_BEFORE | UNC_AFTER) != 0;
                let other = *slot & (PSEUDO | BREAK);
                if (neg && unc) || (other != 0 && *slot != other) || other == PSEUDO | BREAK {
                    return Err(ClinicalError::BadPhrase {
                        list: list.to_string(),
                        phrase: raw.clone(),
                        reason: "also in a cue list of another kind",
                    });
                }
            }
        }
        check_complete(&rules)?;
        // The findings beyond CheXpert's 14 share the automaton under keys
        // of their own (14 + id): overlaps resolve within a key, so the 14
        // labels are what they were without them.
        let extras = ExtrasFile::parse(BUNDLED_EXTRAS)?;
        let mut names = Vec::with_capacity(extras.findings.len());
        for (id, finding) in extras.findings.iter().enumerate() {
            let list = format!("sentence_facts.{}", finding.name);
            for raw in &finding.mentions {
                push_unique(mentions.slot(&list, raw)?, Target::Extra(id as u16));
            }
            names.push(finding.name.clone());
        }
        Ok(Labeler {
            mentions: mentions.build()?,
            cues: cues.build()?,
            anatomy,
            extras: names,
        })
    }

    /// [`Labeler::from_rules_json`] on the file at `path`.
    pub fn from_rules_path(path: &Path) -> Result<Labeler> {
        let json = std::fs::read_to_string(path).map_err(|source| ClinicalError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Labeler::from_rules_json(&json)
    }

    /// Labels one report.
    ///
    /// Text with template tags is labelled on its Findings and Impression
    /// (as [`sdr_core::report::parse_template`] extracts them, valid or not);
    /// plain text on its `Findings:` and `Impression:` sections when it has
    /// either, otherwise on all of it (bare sentences). Text with no sentence
    /// gets no label at all, not even `No Finding`.
    pub fn label(&self, text: &str) -> Labels {
        let sentences = report_sentences(text);
        let mut labels = Labels::default();
        if sentences.is_empty() {
            return labels;
        }
        let mut scratch = Scratch::default();
        for s in &sentences {
            self.label_sentence(s, &mut labels, &mut scratch);
        }
        labels.no_finding_from_others();
        labels
    }

    fn label_sentence(&self, sentence: &str, labels: &mut Labels, sc: &mut Scratch) {
        self.each_mention(sentence, sc, |key, l, _, _| {
            if let Some(&o) = Observation::ALL.get(key) {
                labels[o] = Some(Label::merge(labels[o], l));
            }
        });
    }

    /// Calls `found(key, label, start, end)` for every judged mention of one
    /// sentence, with `key` the observation's index (14 + id for a finding
    /// beyond CheXpert's) and its span in `sc.text`, the normalised sentence.
    pub(crate) fn each_mention(
        &self,
        sentence: &str,
        sc: &mut Scratch,
        mut found: impl FnMut(usize, Label, usize, usize),
    ) {
        normalize_into(sentence, &mut sc.text);
        let text = sc.text.as_str();
        self.mentions.hits(text, &mut sc.hits);
        if sc.hits.is_empty() {
            return;
        }
        sc.items.clear();
        sc.unmentions.clear();
        for h in &sc.hits {
            for &target in &self.mentions.payload[h.phrase] {
                let o = match target {
                    Target::Unmention(o) => {
                        sc.unmentions.push((o, h.start, h.end));
                        continue;
                    }
                    Target::Mention(o) => o.index(),
                    Target::Anatomy(r) | Target::Attribute(r, _) => {
                        self.anatomy[r as usize].0.index()
                    }
                    Target::Extra(x) => Observation::ALL.len() + x as usize,
                };
                sc.items.push(Item {
                    start: h.start,
                    end: h.end,
                    target,
                    key: o,
                });
            }
        }
        // Unmentions veto the mentions of their observation that they overlap.
        // By observation and start, with the furthest end reached so far,
        // each mention is one binary search (a scan of every unmention was
        // quadratic in a long text).
        sc.unmentions
            .sort_unstable_by_key(|&(u, s, _)| (u.index(), s));
        sc.reach.clear();
        let mut prev: Option<(usize, usize)> = None;
        for &(u, _, e) in &sc.unmentions {
            let r = match prev {
                Some((k, furthest)) if k == u.index() => furthest.max(e),
                _ => e,
            };
            sc.reach.push(r);
            prev = Some((u.index(), r));
        }
        let (unmentions, reach) = (&sc.unmentions, &sc.reach);
        sc.items.retain(|it| {
            // The unmentions of its observation that start before it ends.
            let first = unmentions.partition_point(|&(u, _, _)| u.index() < it.key);
            let past = unmentions.partition_point(|&(u, s, _)| (u.index(), s) < (it.key, it.end));
            !(past > first && reach[past - 1] > it.start)
        });
        select_longest(&mut sc.items, |it| (it.key, it.start, it.end));
        if sc.items.is_empty() {
            return;
        }
        self.scan_cues(sc);
        let text = sc.text.as_str();
        let (items, by_start) = (&sc.items, &mut sc.by_start);
        by_start.clear();
        by_start.extend(0..items.len());
        by_start.sort_unstable_by_key(|&i| (items[i].start, i));
        sc.longest = items.iter().map(|it| it.end - it.start).max().unwrap_or(0);
        let sc = &*sc;
        for it in &sc.items {
            let label = match it.target {
                Target::Mention(_) | Target::Extra(_) => Some(self.judge(it.start, it.end, sc)),
                Target::Anatomy(rule) => self.describe(it, rule, text, sc),
                _ => None,
            };
            if let Some(l) = label {
                found(it.key, l, it.start, it.end);
            }
        }
    }

    /// Finds the cues of `sc.text` (the normalised sentence) and the clauses
    /// they make, and prepares [`Labeler::judge`]'s lookups.
    fn scan_cues(&self, sc: &mut Scratch) {
        self.cues.hits(&sc.text, &mut sc.cues);
        select_longest(&mut sc.cues, |c| (0, c.start, c.end));
        sc.breaks.clear();
        sc.breaks.extend(
            sc.text
                .bytes()
                .enumerate()
                .filter(|&(_, b)| b == b';')
                .map(|(i, _)| i),
        );
        sc.breaks.extend(
            sc.cues
                .iter()
                .filter(|c| self.cues.payload[c.phrase] & BREAK != 0)
                .map(|c| c.start),
        );
        sc.breaks.sort_unstable();
        sc.cue_clause.clear();
        sc.cue_clause
            .extend(sc.cues.iter().map(|c| clause_of(&sc.breaks, c.start)));
        let n = sc.cues.len();
        let flags = |i: usize| {
            let f = self.cues.payload[sc.cues[i].phrase];
            if f & (PSEUDO | BREAK) != 0 {
                0
            } else {
                f
            }
        };
        sc.last_before.clear();
        for i in 0..n {
            let f = flags(i);
            let carried = match i {
                0 => 0,
                _ if sc.cue_clause[i - 1] == sc.cue_clause[i] => sc.last_before[i - 1],
                _ => 0,
            };
            sc.last_before.push(if f & (NEG_BEFORE | UNC_BEFORE) != 0 {
                f
            } else {
                carried
            });
        }
        sc.next_after.clear();
        sc.next_after.resize(n, 0);
        for i in (0..n).rev() {
            let f = flags(i);
            let carried = if i + 1 < n && sc.cue_clause[i + 1] == sc.cue_clause[i] {
                sc.next_after[i + 1]
            } else {
                0
            };
            sc.next_after[i] = if f & (NEG_AFTER | UNC_AFTER) != 0 {
                f
            } else {
                carried
            };
        }
    }

    /// The labels of spans of one sentence (byte ranges of its normalised text, as
    /// [`normalize_into`] writes it into `sc.text`) by the cues of their clauses, as a
    /// mention there would be judged: a side word of a finding outside the vocabulary.
    pub(crate) fn judge_spans(
        &self,
        sentence: &str,
        sc: &mut Scratch,
        spans: impl Fn(&str) -> Vec<(usize, usize)>,
    ) -> Vec<((usize, usize), Label)> {
        normalize_into(sentence, &mut sc.text);
        let spans = spans(&sc.text);
        if spans.is_empty() {
            return Vec::new();
        }
        self.scan_cues(sc);
        spans
            .into_iter()
            .map(|(st, en)| ((st, en), self.judge(st, en, sc)))
            .collect()
    }

    /// The label of an anatomy mention from its nearest attribute, if any.
    fn describe(&self, anat: &Item, rule: u16, text: &str, sc: &Scratch) -> Option<Label> {
        let max_gap = self.anatomy[rule as usize].1;
        let clause = clause_of(&sc.breaks, anat.start);
        let mut best: Option<(usize, bool, &Item)> = None;
        // Only items within max_gap words of the anatomy can qualify: those
        // starting in the few words after it, and those ending in the few
        // words before it. Visited in `items` order, as a scan of all would.
        let bytes = text.as_bytes();
        let after = starting_in(sc, anat.end, words_end(bytes, anat.end, max_gap));
        let ends_from = words_start(bytes, anat.start, max_gap);
        let before = starting_in(sc, ends_from.saturating_sub(sc.longest), anat.start);
        let mut near: Vec<usize> = before.iter().chain(after).copied().collect();
        near.sort_unstable();
        for it in near.iter().map(|&i| &sc.items[i]) {
            let Target::Attribute(r, abnormal) = it.target else {
                continue;
            };
            if r != rule || clause_of(&sc.breaks, it.start) != clause {
                continue;
            }
            let between = if it.start >= anat.end {
                &text[anat.end..it.start]
            } else if anat.start >= it.end {
                &text[it.end..anat.start]
            } else {
                continue;
            };
            let gap = word_count(between);
            // On a tie the attribute after the anatomy wins ("heart size normal").
            let better = best.is_none_or(|(g, _, b)| gap < g || (gap == g && it.start > b.start));
            if gap > max_gap || !better {
                continue;
            }
            // An abnormal attribute does not reach forward across a comma
            // ("enlargement of the cardiac silhouette, stable mediastinal
            // contours"); a normal one may ("normal heart size, mediastinum
            // and vasculature").
            let comma = it.end <= anat.start && between.contains(',');
            if abnormal && comma {
                continue;
            }
            // An attribute that follows another anatomy at least as closely
            // is that one's predicate: in "heart size mildly enlarged, stable
            // mediastinal contours" "enlarged" describes the heart only.
            if it.end <= anat.start && (gap > 0 || comma) {
                let ends_from = words_start(bytes, it.start, gap);
                let taken = starting_in(sc, ends_from.saturating_sub(sc.longest), it.start + 1)
                    .iter()
                    .map(|&i| &sc.items[i])
                    .any(|b| {
                        matches!(b.target, Target::Anatomy(_))
                            && b.end <= it.start
                            && clause_of(&sc.breaks, b.start) == clause
                            && word_count(&text[b.end..it.start]) <= gap
                    });
                if taken {
                    continue;
                }
            }
            best = Some((gap, abnormal, it));
        }
        let (_, abnormal, attr) = best?;
        if !abnormal {
            return Some(Label::Negative);
        }
        let later = if attr.start > anat.start { attr } else { anat };
        Some(self.judge(later.start, later.end, sc))
    }

    /// Negation and uncertainty of a mention spanning `start..end`.
    ///
    /// The nearest negation or hedge cue of the mention's clause that ends
    /// by the mention's end ("no ... effusion"), and the nearest one that
    /// starts after it ("effusion is absent"); a cue overlapping the mention's
    /// end counts as neither. Cues are non-overlapping and in text order, so
    /// both are found by binary search in `Scratch::last_before` and
    /// `Scratch::next_after`.
    fn judge(&self, start: usize, end: usize, sc: &Scratch) -> Label {
        let clause = clause_of(&sc.breaks, start);
        // The cues of this clause are sc.cues[a..b].
        let a = sc.cue_clause.partition_point(|&c| c < clause);
        let b = sc.cue_clause.partition_point(|&c| c <= clause);
        let ended = sc.cues.partition_point(|c| c.end <= end);
        let after_start = sc.cues.partition_point(|c| c.start < end);
        let q = ended.min(b);
        let before = if q > a { sc.last_before[q - 1] } else { 0 };
        let r = after_start.max(a);
        let after = if r < b { sc.next_after[r] } else { 0 };
        if before & UNC_BEFORE != 0 || after & UNC_AFTER != 0 {
            Label::Uncertain
        } else if before & NEG_BEFORE != 0 || after & NEG_AFTER != 0 {
            Label::Negative
        } else {
            Label::Positive
        }
    }
}

/// Rejects rules that leave an observation (No Finding aside, which is set
/// from the others) without a phrase that names it: it would be `null` in
/// every report, and No Finding 1 where it is present.
fn check_complete(rules: &RulesFile) -> Result<()> {
    let missing: Vec<&str> = Observation::ALL[1..]
        .iter()
        .map(|o| o.name())
        .filter(|name| {
            rules
                .observations
                .get(*name)
                .is_none_or(|r| r.mentions.is_empty() && r.anatomy.is_empty())
        })
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(ClinicalError::RulesJson(format!(
        "no mentions or anatomy phrases for {} of the 13 observations (all but No Finding need some): {}",
        missing.len(),
        missing.join(", ")
    )))
}

/// Rejects an attribute phrase that contains an anatomy phrase of its
/// observation: overlaps resolve leftmost-longest within an observation, so
/// the attribute would hide the anatomy it should describe.
fn check_attributes(rules: &RulesFile) -> Result<()> {
    for (name, obs) in &rules.observations {
        let list = format!("{name}.anatomy");
        let mut anatomy = Vec::new();
        for a in &obs.anatomy {
            for raw in &a.phrases {
                anatomy.push(format!(" {} ", Phrase::parse(&list, raw)?.text));
            }
        }
        for a in &obs.anatomy {
            for raw in a.abnormal.iter().chain(&a.normal) {
                let padded = format!(" {} ", Phrase::parse(&list, raw)?.text);
                if anatomy.iter().any(|p| padded.contains(p.as_str())) {
                    return Err(ClinicalError::BadPhrase {
                        list,
                        phrase: raw.clone(),
                        reason:
                            "an attribute must not contain an anatomy phrase of its observation",
                    });
                }
            }
        }
    }
    Ok(())
}

fn push_unique(v: &mut Vec<Target>, t: Target) {
    if !v.contains(&t) {
        v.push(t);
    }
}

/// Words in `s` (tokens with a letter or digit; a lone comma is no word).
fn word_count(s: &str) -> usize {
    s.split(' ').filter(|w| w.bytes().any(is_word)).count()
}

/// Indices of the items that start in `from..to`, in start order.
fn starting_in(sc: &Scratch, from: usize, to: usize) -> &[usize] {
    let at = |pos: usize| sc.by_start.partition_point(|&i| sc.items[i].start < pos);
    let (a, b) = (at(from), at(to));
    &sc.by_start[a..b.max(a)]
}

/// The first `p >= from` with `word_count(&text[from..p]) > limit`
/// (`text.len() + 1` if there is none): what starts before it is at most
/// `limit` words after `from`.
fn words_end(text: &[u8], from: usize, limit: usize) -> usize {
    let (mut count, mut counted) = (0, false);
    for (i, &b) in text[from..].iter().enumerate() {
        if b == b' ' {
            counted = false;
        } else if !counted && is_word(b) {
            (count, counted) = (count + 1, true);
            if count > limit {
                return from + i + 1;
            }
        }
    }
    text.len() + 1
}

/// The least `q <= to` with `word_count(&text[q..to]) <= limit`: what ends
/// at or after it is at most `limit` words before `to`.
fn words_start(text: &[u8], to: usize, limit: usize) -> usize {
    let (mut count, mut counted) = (0, false);
    for i in (0..to).rev() {
        let b = text[i];
        if b == b' ' {
            counted = false;
        } else if !counted && is_word(b) {
            (count, counted) = (count + 1, true);
            if count > limit {
                return i + 1;
            }
        }
    }
    0
}

/// Index of the clause holding byte `pos`: the number of breaks at or before it.
pub(crate) fn clause_of(breaks: &[usize], pos: usize) -> usize {
    breaks.partition_point(|&b| b <= pos)
}

/// The sentences a labeler reads in a report: a template's Findings and
/// Impression, the sections of a report with `Findings:` / `Impression:`
/// headers, or else the whole text (bare text, one section alone). Both
/// labelers (the rules and the judge) read these.
pub fn report_sentences(text: &str) -> Vec<String> {
    if has_template_tag(text) {
        let r = parse_template(text);
        r.findings.into_iter().chain(r.impression).collect()
    } else {
        let units = plain_units(text);
        if units.iter().any(|u| u.section.is_some()) {
            units
                .into_iter()
                .filter(|u| u.section.is_some())
                .map(|u| u.text)
                .collect()
        } else {
            units.into_iter().map(|u| u.text).collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Label::*;
    use Observation::*;

    fn lab(text: &str) -> Labels {
        static L: std::sync::OnceLock<Labeler> = std::sync::OnceLock::new();
        L.get_or_init(Labeler::default).label(text)
    }

    fn check(text: &str, expected: &[(Observation, Option<Label>)]) {
        let l = lab(text);
        for &(o, want) in expected {
            assert_eq!(l[o], want, "{o} in {text:?}: got {l:?}");
        }
    }

    #[test]
    fn bundled_rules_compile() {
        let l = Labeler::default();
        assert!(l.mentions.payload.len() > 100);
        assert!(!l.anatomy.is_empty());
    }

    #[test]
    fn pre_negation_and_lists() {
        check(
            "No pneumothorax, pleural effusion, or focal consolidation.",
            &[
                (Pneumothorax, Some(Negative)),
                (PleuralEffusion, Some(Negative)),
                (Consolidation, Some(Negative)),
                (NoFinding, Some(Positive)),
            ],
        );
        check(
            "There is no pleural effusion or pneumothorax.",
            &[
                (PleuralEffusion, Some(Negative)),
                (Pneumothorax, Some(Negative)),
            ],
        );
        check(
            "No pneumonia, effusions, edema, pneumothorax, adenopathy, nodules or masses.",
            &[
                (Pneumonia, Some(Negative)),
                (PleuralEffusion, Some(Negative)),
                (Edema, Some(Negative)),
                (Pneumothorax, Some(Negative)),
                (LungLesion, Some(Negative)),
            ],
        );
        check(
            "The lungs are normally inflated without evidence of focal airspace disease, pleural effusion, or pneumothorax.",
            &[
                (LungOpacity, Some(Negative)),
                (PleuralEffusion, Some(Negative)),
                (Pneumothorax, Some(Negative)),
            ],
        );
        check(
            "Negative for focal pulmonary consolidation, pleural effusion, or pneumothorax.",
            &[
                (Consolidation, Some(Negative)),
                (Pneumothorax, Some(Negative)),
            ],
        );
        check(
            "The lungs are free of any focal infiltrates.",
            &[(LungOpacity, Some(Negative))],
        );
    }

    #[test]
    fn negation_does_not_cross_a_clause_break() {
        check(
            "No focal consolidation, but there is a small left pleural effusion.",
            &[
                (Consolidation, Some(Negative)),
                (PleuralEffusion, Some(Positive)),
                (NoFinding, None),
            ],
        );
        check(
            "No pneumothorax; small right pleural effusion.",
            &[
                (Pneumothorax, Some(Negative)),
                (PleuralEffusion, Some(Positive)),
            ],
        );
    }

    #[test]
    fn post_negation() {
        check(
            "Cardiomegaly is not present.",
            &[(Cardiomegaly, Some(Negative))],
        );
        check(
            "Pneumothorax is not seen.",
            &[(Pneumothorax, Some(Negative))],
        );
        check(
            "No focal consolidation, pneumothorax or pleural effusion is identified.",
            &[
                (Consolidation, Some(Negative)),
                (PleuralEffusion, Some(Negative)),
            ],
        );
        check(
            "The previously seen right pleural effusion has resolved.",
            &[(PleuralEffusion, Some(Negative))],
        );
    }

    #[test]
    fn uncertainty() {
        check(
            "Left basilar opacity may represent atelectasis or pneumonia.",
            &[
                (LungOpacity, Some(Positive)),
                (Atelectasis, Some(Uncertain)),
                (Pneumonia, Some(Uncertain)),
            ],
        );
        check(
            "Early infiltrate cannot be excluded.",
            &[(LungOpacity, Some(Uncertain))],
        );
        check(
            "Findings suggesting pulmonary edema.",
            &[(Edema, Some(Uncertain))],
        );
        check(
            "Right lower lobe opacity concerning for pneumonia.",
            &[(LungOpacity, Some(Positive)), (Pneumonia, Some(Uncertain))],
        );
        check(
            "Possible small left pleural effusion.",
            &[(PleuralEffusion, Some(Uncertain)), (NoFinding, None)],
        );
        check(
            "Streaky opacities likely atelectasis.",
            &[(Atelectasis, Some(Uncertain))],
        );
        // "to suggest" after a negation is no uncertainty cue.
        check(
            "There is no focal air space opacity to suggest a pneumonia.",
            &[(LungOpacity, Some(Negative)), (Pneumonia, Some(Negative))],
        );
    }

    #[test]
    fn heart_size_is_a_cardiomegaly_mention() {
        for negative in [
            "Heart size normal.",
            "The heart is normal in size.",
            "Normal heart size.",
            "Heart size is within normal limits.",
            "The heart is not enlarged.",
            "The cardiac silhouette is normal in size and contour.",
        ] {
            check(negative, &[(Cardiomegaly, Some(Negative))]);
        }
        for positive in [
            "The heart is enlarged.",
            "Heart size is mildly enlarged.",
            "Stable enlarged cardiac silhouette.",
            "Mild cardiomegaly.",
        ] {
            check(positive, &[(Cardiomegaly, Some(Positive))]);
        }
        // "Borderline" grades the size; it does not hedge the finding.
        check(
            "Borderline cardiomegaly.",
            &[(Cardiomegaly, Some(Positive))],
        );
        check(
            "Heart size is borderline.",
            &[(Cardiomegaly, Some(Positive))],
        );
        // The attribute after an anatomy is that anatomy's.
        check(
            "Heart size mildly enlarged, stable mediastinal contours.",
            &[
                (Cardiomegaly, Some(Positive)),
                (EnlargedCardiomediastinum, None),
            ],
        );
        check(
            "Normal heart size and mediastinal contours.",
            &[
                (Cardiomegaly, Some(Negative)),
                (EnlargedCardiomediastinum, Some(Negative)),
            ],
        );
        // No attribute, no mention.
        check(
            "The heart and lungs have XXXX XXXX in the interval.",
            &[(Cardiomegaly, None), (NoFinding, Some(Positive))],
        );
    }

    #[test]
    fn deidentified_text() {
        check(
            "There are no XXXX of a pleural effusion.",
            &[(PleuralEffusion, Some(Negative))],
        );
        check("Normal chest x-XXXX.", &[(NoFinding, Some(Positive))]);
    }

    #[test]
    fn devices() {
        check(
            "Midline sternotomy wires and mediastinal clips are again noted.",
            &[
                (SupportDevices, Some(Positive)),
                (NoFinding, Some(Positive)),
            ],
        );
        check(
            "Left-sided pacemaker with leads in the right atrium and right ventricle.",
            &[(SupportDevices, Some(Positive))],
        );
        check(
            "Right IJ central venous catheter tip in the SVC.",
            &[(SupportDevices, Some(Positive))],
        );
        check(
            "Surgical instruments in the right upper quadrant.",
            &[(SupportDevices, Some(Positive))],
        );
        check(
            "Interval removal of the right chest tube.",
            &[(SupportDevices, Some(Negative))],
        );
    }

    /// Sentences from IU X-ray behind the changes in docs/results/labeler.md.
    #[test]
    fn iu_regressions() {
        // "Suspicious" is an adjective in a negated list, not a hedge.
        check(
            "No focal consolidation, suspicious pulmonary opacity, large pleural effusion, or pneumothorax is identified.",
            &[
                (Consolidation, Some(Negative)),
                (LungOpacity, Some(Negative)),
                (PleuralEffusion, Some(Negative)),
                (Pneumothorax, Some(Negative)),
            ],
        );
        check(
            "Heart size upper limits of normal.",
            &[(Cardiomegaly, Some(Negative))],
        );
        check(
            "Please note that fractures may not be demonstrated and consider additional imaging as clinically warranted.",
            &[(Fracture, Some(Negative))],
        );
        check(
            "Age-indeterminate fracture of the right lateral 9th rib.",
            &[(Fracture, Some(Positive))],
        );
        check(
            "Right chest XXXX tip in the low SVC.",
            &[
                (SupportDevices, Some(Positive)),
                (NoFinding, Some(Positive)),
            ],
        );
        check(
            "Evidence of previous granulomatous infection.",
            &[(Pneumonia, None)],
        );
        check(
            "Nodular densities projecting over the posterior 9th ribs bilaterally.",
            &[(LungLesion, Some(Positive)), (LungOpacity, None)],
        );
        check(
            "Increasing density in the superior segment of the left lower lobe.",
            &[(LungOpacity, Some(Positive))],
        );
        check(
            "Stable enlarged cardiomediastinal silhouette.",
            &[
                (Cardiomegaly, Some(Positive)),
                (EnlargedCardiomediastinum, None),
            ],
        );
        check(
            "The mediastinum is unremarkable.",
            &[(EnlargedCardiomediastinum, Some(Negative))],
        );
        check(
            "XXXX opacities in the left base may be compatible with scarring or subsegmental atelectasis.",
            &[(LungOpacity, Some(Positive)), (Atelectasis, Some(Uncertain))],
        );
        check(
            "Pulmonary vascularity is within normal limits.",
            &[(Edema, Some(Negative))],
        );
    }

    #[test]
    fn a_long_clause_keeps_each_mentions_nearest_cues() {
        // One clause repeated a thousand times (no period, no semicolon): each
        // mention is judged by its own neighbours, as in a single copy.
        let one = "no pleural effusion or pneumothorax, possible mild cardiomegaly without edema, ";
        let expected = [
            (PleuralEffusion, Some(Negative)),
            (Pneumothorax, Some(Negative)),
            (Cardiomegaly, Some(Uncertain)),
            (Edema, Some(Negative)),
        ];
        check(one, &expected);
        check(&one.repeat(1000), &expected);
    }

    #[test]
    fn a_long_clause_keeps_each_anatomys_nearest_attribute() {
        // Anatomy rules over a clause repeated a thousand times: each
        // anatomy is described by the attributes a few words from it, as in
        // a single copy (and not in time quadratic in the clause).
        let one = "the heart size is normal and the mediastinal contours are stable, \
                   cardiac silhouette is enlarged, ";
        let expected = lab(one);
        assert_eq!(lab(&one.repeat(1000)), expected);
        assert_eq!(expected[Cardiomegaly], Some(Positive), "{expected:?}");
    }

    #[test]
    fn unmentions_veto() {
        check("Small pericardial effusion.", &[(PleuralEffusion, None)]);
    }

    #[test]
    fn sections_and_empty_text() {
        let tagged = lab("<think>Large right pleural effusion.</think><answer>Effusion.</answer>");
        assert_eq!(tagged[PleuralEffusion], Some(Positive));
        // Indication is not labelled when the report has sections.
        let plain = lab("INDICATION: pneumonia?\nFINDINGS: Lungs are clear.\nIMPRESSION: Normal.");
        assert_eq!(plain[Pneumonia], None);
        assert_eq!(plain[NoFinding], Some(Positive));
        assert_eq!(lab("   "), Labels::default());
    }

    #[test]
    fn attribute_hiding_its_anatomy_is_rejected() {
        let json = r#"{"version":1,"observations":{"Cardiomegaly":{"anatomy":[
            {"phrases":["heart size"],"normal":["normal heart size"]}]}},"cues":{}}"#;
        let e = Labeler::from_rules_json(json).unwrap_err();
        assert!(e.to_string().contains("`normal heart size`"), "{e}");
    }

    #[test]
    fn cue_kind_conflicts_are_rejected() {
        let json = r#"{"version":1,"observations":{},"cues":{"negation_before":["no"],"uncertainty_after":["no"]}}"#;
        let e = Labeler::from_rules_json(json).unwrap_err();
        assert!(e.to_string().contains("`no`"), "{e}");
        let json = rules_with(
            r#""Edema":{"mentions":["edema"]}"#,
            r#""negation_before":["no"]"#,
        );
        let l = Labeler::from_rules_json(&json).unwrap();
        assert_eq!(l.label("No edema.")[Edema], Some(Negative));
        assert_eq!(l.label("Edema.")[Edema], Some(Positive));
    }

    /// Rules with `edema` (the JSON of Edema's entry), and a placeholder
    /// mention for each other observation; `cues` is the cues object's body.
    fn rules_with(edema: &str, cues: &str) -> String {
        let others: Vec<String> = Observation::ALL[1..]
            .iter()
            .filter(|o| **o != Edema)
            .map(|o| format!(r#""{}":{{"mentions":["zz{}"]}}"#, o.name(), o.index()))
            .collect();
        format!(
            r#"{{"version":1,"observations":{{{edema},{}}},"cues":{{{cues}}}}}"#,
            others.join(",")
        )
    }

    #[test]
    fn rules_missing_an_observation_are_refused_naming_it() {
        let e = Labeler::from_rules_json(r#"{"version":1,"observations":{},"cues":{}}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("for 13 of the 13 observations"), "{e}");
        assert!(!e.contains('\n'), "{e}");
        // One left out, and one with no phrase that names it.
        let json = rules_with(r#""Fracture":{"mentions":["fracture"]}"#, "")
            .replace(r#""Fracture":{"mentions":["zz12"]},"#, "");
        let e = Labeler::from_rules_json(&json).unwrap_err().to_string();
        assert!(
            e.ends_with("for 1 of the 13 observations (all but No Finding need some): Edema"),
            "{e}"
        );
        let json = rules_with(r#""Edema":{"unmentions":["edema fluid"]}"#, "");
        let e = Labeler::from_rules_json(&json).unwrap_err().to_string();
        assert!(e.ends_with(": Edema"), "{e}");
        assert!(Labeler::from_rules_json(BUNDLED_RULES).is_ok());
    }
}
