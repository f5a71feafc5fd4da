//! Per-section structure of a corpus prepared for scoring: the distinct
//! sentence multisets ("sets") with their multiplicities, the sentences a
//! section uses, inverse norms, and (lazily) each set's intra-set costs.
//!
//! Reports whose section is the same multiset of sentences have the same
//! distance to any candidate, so each distinct set is scored once and
//! counted with its multiplicity (exact for min, avg and kNN alike).

use std::collections::HashMap;
use std::sync::OnceLock;

use sdr_core::CostMatrix;

use crate::error::{CorpusError, Result};
use crate::gram::{intra_cost, inverse_norms};
use crate::store::{Corpus, CorpusView, Section};

/// The distinct sets of one section.
#[derive(Debug)]
pub struct SectionSets {
    pub section: Section,
    /// CSR: rows of set `s` are `rows[offsets[s]..offsets[s + 1]]` (sorted).
    pub offsets: Vec<usize>,
    pub rows: Vec<u32>,
    /// How many reports have exactly this set.
    pub mult: Vec<u32>,
    /// Set of each report (`None`: the report lacks this section).
    pub set_of_report: Vec<Option<u32>>,
    /// Reports that have this section (the sum of `mult`).
    pub n_reports: usize,
    /// Distinct embedding rows used by this section, ascending.
    pub universe: Vec<u32>,
    intra: Vec<OnceLock<CostMatrix>>,
}

impl SectionSets {
    pub fn len(&self) -> usize {
        self.mult.len()
    }
    pub fn is_empty(&self) -> bool {
        self.mult.is_empty()
    }
    pub fn set(&self, s: usize) -> &[u32] {
        &self.rows[self.offsets[s]..self.offsets[s + 1]]
    }
}

/// A corpus ready for scoring.
pub struct CorpusIndex<'a> {
    pub view: CorpusView<'a>,
    pub inv_norm: Vec<f64>,
    pub sections: [SectionSets; 2],
}

impl<'a> CorpusIndex<'a> {
    /// Groups reports into distinct sets per section. A section no report has
    /// is an error (nothing to aggregate over); [`crate::Corpus::index`]
    /// names the file in it.
    pub fn new(view: CorpusView<'a>) -> Result<Self> {
        let inv_norm = inverse_norms(view.embeddings, view.dim, "the corpus")?;
        let build = |sec: Section| -> Result<SectionSets> {
            let idx = view.section(sec);
            let n = idx.n_reports();
            let mut map: HashMap<Vec<u32>, u32> = HashMap::new();
            let mut offsets = vec![0usize];
            let mut rows = Vec::new();
            let mut mult = Vec::new();
            let mut set_of_report = Vec::with_capacity(n);
            let mut used = vec![false; view.n_sentences()];
            for t in 0..n {
                let r = idx.rows(t);
                if r.is_empty() {
                    set_of_report.push(None);
                    continue;
                }
                let mut key = r.to_vec();
                key.sort_unstable();
                let id = match map.get(&key) {
                    Some(&id) => id,
                    None => {
                        let id = mult.len() as u32;
                        for &x in &key {
                            used[x as usize] = true;
                        }
                        rows.extend_from_slice(&key);
                        offsets.push(rows.len());
                        mult.push(0);
                        map.insert(key, id);
                        id
                    }
                };
                mult[id as usize] += 1;
                set_of_report.push(Some(id));
            }
            let n_reports = mult.iter().map(|&m| m as usize).sum();
            if n_reports == 0 {
                return Err(CorpusError::MissingSection {
                    path: None,
                    section: sec.key(),
                });
            }
            let universe = (0..used.len() as u32)
                .filter(|&i| used[i as usize])
                .collect();
            let intra = (0..mult.len()).map(|_| OnceLock::new()).collect();
            Ok(SectionSets {
                section: sec,
                offsets,
                rows,
                mult,
                set_of_report,
                n_reports,
                universe,
                intra,
            })
        };
        Ok(CorpusIndex {
            view,
            inv_norm,
            sections: [build(Section::Findings)?, build(Section::Impression)?],
        })
    }

    pub fn section(&self, s: Section) -> &SectionSets {
        match s {
            Section::Findings => &self.sections[0],
            Section::Impression => &self.sections[1],
        }
    }

    fn row(&self, r: u32) -> &[f32] {
        let d = self.view.dim;
        &self.view.embeddings[r as usize * d..(r as usize + 1) * d]
    }

    /// Intra-set cost `d(B, B)` of set `s` (for GW), computed once from the
    /// same dot products as the cross costs.
    pub fn intra(&self, sec: Section, s: usize) -> &CostMatrix {
        let ss = self.section(sec);
        ss.intra[s].get_or_init(|| {
            let rows = ss.set(s);
            let inv: Vec<f64> = rows.iter().map(|&r| self.inv_norm[r as usize]).collect();
            intra_cost(rows.len(), &inv, |i, j| {
                self.row(rows[i])
                    .iter()
                    .zip(self.row(rows[j]))
                    .map(|(a, b)| a * b)
                    .sum()
            })
        })
    }
}

// Here rather than in `store.rs`, which the index reads.
impl Corpus {
    /// [`CorpusIndex::new`] of this corpus, whose errors name the file.
    pub fn index(&self) -> Result<CorpusIndex<'_>> {
        CorpusIndex::new(self.view()).map_err(|e| match e {
            CorpusError::MissingSection {
                path: None,
                section,
            } => CorpusError::MissingSection {
                path: Some(self.path().to_path_buf()),
                section,
            },
            other => other,
        })
    }
}
