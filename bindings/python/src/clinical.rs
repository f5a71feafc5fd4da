//! `sdr.label`, `sdr.chexpert_f1`: the rule-based CheXpert labeler and
//! CheXpert-rule F1 (SPEC §8).

use std::sync::OnceLock;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use sdr_clinical::{chexpert_f1 as f1, Labeler, Labels, Observation, UncertainPolicy};

/// The bundled rules, compiled once per process.
fn labeler() -> &'static Labeler {
    static L: OnceLock<Labeler> = OnceLock::new();
    L.get_or_init(Labeler::default)
}

fn labels_dict<'py>(py: Python<'py>, l: &Labels) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (o, v) in l.iter() {
        d.set_item(o.name(), v.map(|x| x.code()))?;
    }
    Ok(d)
}

/// CheXpert-14 labels of one report by the bundled phrase rules (no model
/// weights). Returns ``{observation: 1 | 0 | -1 | None}`` for all 14
/// observations in CheXpert's order (positive, negative, uncertain, not
/// mentioned). Template and ``Findings:``/``Impression:`` reports are
/// labelled on those two sections, bare text whole.
#[pyfunction]
pub fn label<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyDict>> {
    let l = py.detach(|| labeler().label(text));
    labels_dict(py, &l)
}

/// CheXpert-rule F1 of candidate reports ``hyps`` against references
/// ``refs`` (paired by position; both labelled with the bundled rules).
/// Per observation: present vs not, uncertain counted as present unless
/// ``uncertain_as_positive=False``; scikit-learn's ``zero_division=0``.
/// Returns ``macro_f1_14``, ``micro_f1_14``, ``macro_f1_5``, ``micro_f1_5``
/// (5 = Atelectasis, Cardiomegaly, Consolidation, Edema, Pleural Effusion),
/// ``per_observation`` (name -> F1), ``support`` (name -> reference
/// positives) and ``n``.
#[pyfunction]
#[pyo3(signature = (hyps, refs, uncertain_as_positive = true))]
pub fn chexpert_f1<'py>(
    py: Python<'py>,
    hyps: Vec<String>,
    refs: Vec<String>,
    uncertain_as_positive: bool,
) -> PyResult<Bound<'py, PyDict>> {
    if hyps.len() != refs.len() {
        return Err(PyValueError::new_err(format!(
            "{} hyps but {} refs: they are paired by position",
            hyps.len(),
            refs.len()
        )));
    }
    let policy = if uncertain_as_positive {
        UncertainPolicy::Positive
    } else {
        UncertainPolicy::Negative
    };
    let report = py
        .detach(|| {
            let l = labeler();
            let h: Vec<Labels> = hyps.iter().map(|t| l.label(t)).collect();
            let r: Vec<Labels> = refs.iter().map(|t| l.label(t)).collect();
            f1(&h, &r, policy)
        })
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let out = PyDict::new(py);
    out.set_item("macro_f1_14", report.macro_14.f1)?;
    out.set_item("micro_f1_14", report.micro_14.f1)?;
    out.set_item("macro_f1_5", report.macro_5.f1)?;
    out.set_item("micro_f1_5", report.micro_5.f1)?;
    let per = PyDict::new(py);
    let support = PyDict::new(py);
    for o in Observation::ALL {
        let s = report.observation(o);
        per.set_item(o.name(), s.scores.f1)?;
        support.set_item(o.name(), s.support)?;
    }
    out.set_item("per_observation", per)?;
    out.set_item("support", support)?;
    out.set_item("n", report.n)?;
    Ok(out)
}

/// The clinical cost at its default strength, built once per process (its
/// fact cache is shared by every call).
fn clinical_cost() -> &'static sdr_clinical::ClinicalCost {
    static C: OnceLock<sdr_clinical::ClinicalCost> = OnceLock::new();
    C.get_or_init(sdr_clinical::ClinicalCost::default)
}

/// The clinical cost's conflicts between two lists of sentences (SPEC §10):
/// for each sentence of ``a`` (and of ``b``), ``None`` or its worst conflict
/// with the other list, ``{"kind", "weight", "other", "text"}``: ``kind`` is
/// ``polarity`` (present against absent), ``hedge``, ``side``, ``bilateral``,
/// ``grade`` or ``unmatched`` (a present finding the other list never names),
/// ``other`` the index of the other list's sentence (``None`` for
/// ``unmatched``), ``text`` the conflict in words. Returns ``{"a": [...],
/// "b": [...]}``. Sentences are as the reward splits them (``sdr.parse_report``).
#[pyfunction]
pub fn clinical_conflicts<'py>(
    py: Python<'py>,
    a: Vec<String>,
    b: Vec<String>,
) -> PyResult<Bound<'py, PyDict>> {
    let c = clinical_cost();
    type Row = Option<(&'static str, f64, Option<usize>, String)>;
    let (ra, rb): (Vec<Row>, Vec<Row>) = py.detach(|| {
        type Facts = std::sync::Arc<Vec<sdr_core::cost::clinical::Fact>>;
        let facts = |s: &[String]| -> Vec<Facts> {
            let t: Vec<&str> = s.iter().map(String::as_str).collect();
            c.facts(&t)
        };
        let (fa, fb) = (facts(&a), facts(&b));
        let pc = sdr_core::cost::clinical::PairConflicts::of(&fa, &fb, c.weights());
        let rows = |own: &[Option<sdr_core::cost::clinical::Conflict>],
                    facts: &[Facts],
                    other: &[Facts]| {
            own.iter()
                .zip(facts)
                .map(|(k, f)| {
                    k.as_ref().map(|k| {
                        (
                            k.kind.name(),
                            k.weight,
                            k.other.map(|(j, _)| j),
                            c.describe(k, f, other),
                        )
                    })
                })
                .collect::<Vec<_>>()
        };
        (rows(&pc.a, &fa, &fb), rows(&pc.b, &fb, &fa))
    });
    let out = PyDict::new(py);
    for (key, rows) in [("a", ra), ("b", rb)] {
        let list = pyo3::types::PyList::empty(py);
        for r in rows {
            match r {
                None => list.append(py.None())?,
                Some((kind, weight, other, text)) => {
                    let d = PyDict::new(py);
                    d.set_item("kind", kind)?;
                    d.set_item("weight", weight)?;
                    d.set_item("other", other)?;
                    d.set_item("text", text)?;
                    list.append(d)?;
                }
            }
        }
        out.set_item(key, list)?;
    }
    Ok(out)
}
