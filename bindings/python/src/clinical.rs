//! `sdr_rewards.label`, `sdr_rewards.chexpert_f1`: CheXpert labels and F1 by the rule-based
//! labeler (SPEC §8) or the judge trained on human labels (SPEC §8a).

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use pyo3::exceptions::{PyFileNotFoundError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use sdr_clinical::{chexpert_f1 as f1, Labeler, Labels, Observation, UncertainPolicy};

/// The bundled rules, compiled once per process.
fn labeler() -> &'static Labeler {
    static L: OnceLock<Labeler> = OnceLock::new();
    L.get_or_init(Labeler::default)
}

/// The judge, loaded once per process (per base folder).
fn judge(base: Option<PathBuf>) -> PyResult<Arc<sdr_eval::judge::Judge>> {
    static J: Mutex<Option<(Option<PathBuf>, Arc<sdr_eval::judge::Judge>)>> = Mutex::new(None);
    let mut slot = J.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((b, j)) = slot.as_ref() {
        if *b == base {
            return Ok(j.clone());
        }
    }
    let j = Arc::new(
        sdr_eval::judge::Judge::load(base.as_deref(), None)
            .map_err(|e| PyFileNotFoundError::new_err(format!("labeler=\"judge\": {e}")))?,
    );
    *slot = Some((base, j.clone()));
    Ok(j)
}

/// Labels of `texts` by the labeler named `which` (`rules` or `judge`).
pub(crate) fn label_all(
    py: Python<'_>,
    which: &str,
    judge_base: Option<PathBuf>,
    texts: &[&str],
) -> PyResult<Vec<Labels>> {
    match which {
        "rules" => Ok(py.detach(|| texts.iter().map(|t| labeler().label(t)).collect())),
        "judge" => {
            let j = judge(judge_base)?;
            py.detach(|| j.label_many(texts))
                .map_err(|e| PyValueError::new_err(format!("labeler=\"judge\": {e}")))
        }
        other => Err(PyValueError::new_err(format!(
            "labeler={other:?}: expected \"rules\" or \"judge\""
        ))),
    }
}

fn labels_dict<'py>(py: Python<'py>, l: &Labels) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (o, v) in l.iter() {
        d.set_item(o.name(), v.map(|x| x.code()))?;
    }
    Ok(d)
}

/// CheXpert-14 labels of one report. ``labeler="rules"`` (the default): the
/// bundled phrase rules (no model weights); ``{observation: 1 | 0 | -1 |
/// None}`` for all 14 observations in CheXpert's order (positive, negative,
/// uncertain, not mentioned). ``labeler="judge"``: the classifier trained on
/// IU X-ray's human labels (all-MiniLM-L6-v2 from ``judge_base``, default
/// ``$SDR_JUDGE_BASE`` then ``~/.cache/sdr/models/all-MiniLM-L6-v2``); each
/// observation 1 (present) or 0 (not present). Template and
/// ``Findings:``/``Impression:`` reports are labelled on those two sections,
/// bare text whole.
#[pyfunction]
#[pyo3(signature = (text, labeler = "rules", judge_base = None))]
pub fn label<'py>(
    py: Python<'py>,
    text: &str,
    labeler: &str,
    judge_base: Option<PathBuf>,
) -> PyResult<Bound<'py, PyDict>> {
    let l = label_all(py, labeler, judge_base, &[text])?;
    labels_dict(py, &l[0])
}

/// CheXpert-rule F1 of candidate reports ``hyps`` against references
/// ``refs`` (paired by position; both labelled with the bundled rules, or
/// with the judge when ``labeler="judge"``, see ``label``).
/// Per observation: present vs not, uncertain counted as present unless
/// ``uncertain_as_positive=False``; scikit-learn's ``zero_division=0``.
/// Returns ``macro_f1_14``, ``micro_f1_14``, ``macro_f1_5``, ``micro_f1_5``
/// (5 = Atelectasis, Cardiomegaly, Consolidation, Edema, Pleural Effusion),
/// ``per_observation`` (name -> F1), ``support`` (name -> reference
/// positives) and ``n``. Empty lists raise ValueError (no studies).
#[pyfunction]
#[pyo3(signature = (hyps, refs, uncertain_as_positive = true, labeler = "rules", judge_base = None))]
pub fn chexpert_f1<'py>(
    py: Python<'py>,
    hyps: Vec<String>,
    refs: Vec<String>,
    uncertain_as_positive: bool,
    labeler: &str,
    judge_base: Option<PathBuf>,
) -> PyResult<Bound<'py, PyDict>> {
    if hyps.len() != refs.len() {
        return Err(PyValueError::new_err(format!(
            "{} hyps but {} refs: they are paired by position",
            hyps.len(),
            refs.len()
        )));
    }
    if refs.is_empty() {
        // As chexpert_f1_bootstrap: an F1 over no studies is not 0, it is undefined.
        return Err(PyValueError::new_err(
            "no studies (hyps and refs are empty)",
        ));
    }
    let policy = if uncertain_as_positive {
        UncertainPolicy::Positive
    } else {
        UncertainPolicy::Negative
    };
    let (hs, rs): (Vec<&str>, Vec<&str>) = (
        hyps.iter().map(String::as_str).collect(),
        refs.iter().map(String::as_str).collect(),
    );
    let h = label_all(py, labeler, judge_base.clone(), &hs)?;
    let r = label_all(py, labeler, judge_base, &rs)?;
    let report = f1(&h, &r, policy).map_err(|e| PyValueError::new_err(e.to_string()))?;
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
/// "b": [...]}``. Sentences are as the reward splits them (``sdr_rewards.parse_report``).
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

/// The Findings-consistency checker with the bundled weights and expectations,
/// sharing the clinical cost's fact cache; built once per process.
fn consistency() -> &'static sdr_clinical::Consistency {
    static C: OnceLock<sdr_clinical::Consistency> = OnceLock::new();
    C.get_or_init(sdr_clinical::Consistency::default)
}

/// A check as Python objects (dicts, lists, floats, strings, None).
fn to_py<'py>(py: Python<'py>, v: &sdr_clinical::ConsistencyReport) -> PyResult<Bound<'py, PyAny>> {
    let text = serde_json::to_string(v).map_err(|e| PyValueError::new_err(e.to_string()))?;
    py.import("json")?.call_method1("loads", (text,))
}

/// An Impression checked against its own Findings, with no reference (SPEC
/// §10a). Each finding is checked once: a **contradiction** (the Impression
/// states it otherwise: ``polarity``, ``hedge``, ``side``, ``bilateral``,
/// ``grade``; weight 1, or 1/2 for hedge, bilateral and one grade apart), an
/// **unsupported** finding (stated present, 1, or hedged, 1/2, and never named
/// by the Findings, nor a related finding in CheXpert's hierarchy) or an
/// **omission** (stated present by the Findings, never named by the
/// Impression; weighed by how often radiologists' Impressions name that
/// finding, e.g. 0.82 for a pleural effusion, 0.14 for a device). The
/// Findings' normal statements ("No pneumothorax.") are not expected.
///
/// Returns ``{"score", "contradiction", "unsupported", "omission",
/// "contradictions", "unsupported_findings", "omissions",
/// "impression_sentences", "findings_sentences"}``: ``score = 1 x
/// contradiction + 0.5 x unsupported + 0.5 x omission`` (lower is better, 0
/// consistent); each list holds ``{"finding", "kind", "weight", "impression",
/// "findings"}`` with ``impression`` / ``findings`` ``{"sentence", "text",
/// "fact"}`` (0-based sentence index, the sentence, the fact in words) or
/// ``None``. Sentences are split as everywhere in SDR (``split_sentences``).
#[pyfunction]
pub fn findings_consistency<'py>(
    py: Python<'py>,
    impression: &str,
    findings: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let r = py.detach(|| consistency().check(impression, findings));
    to_py(py, &r)
}

/// Encoders of ``select_by_findings``, loaded once per process per (name, folder).
fn select_encoder(
    py: Python<'_>,
    name: &str,
    model_dir: Option<PathBuf>,
) -> PyResult<Arc<dyn sdr_embed::SentenceEncoder>> {
    type Slot = Vec<(
        (String, Option<PathBuf>),
        Arc<dyn sdr_embed::SentenceEncoder>,
    )>;
    static E: Mutex<Slot> = Mutex::new(Vec::new());
    let key = (name.to_string(), model_dir.clone());
    if let Some((_, e)) = E
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|(k, _)| *k == key)
    {
        return Ok(e.clone());
    }
    let loaded = crate::encoder::open_encoder(py, name, model_dir, "cpu", "f32", false)?;
    E.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((key, loaded.encoder.clone()));
    Ok(loaded.encoder)
}

/// Best of K candidate Impressions by their own Findings (SPEC §10a; ``sdr
/// select --findings-consistency``): the candidate with the lowest
/// ``findings_consistency`` score; ties go to the one whose sentences are
/// closest to the Findings' (``semantic``: the mean over its sentences of the
/// smallest cosine cost ``(1 - cos) / 2`` to a Findings sentence, embedded by
/// ``encoder``: ``"mpnet"``, the model of ``model_dir`` / ``$SDR_MODEL`` /
/// ``~/.cache/sdr/models/all-mpnet-base-v2``, or ``"hash-DIM"``, a stand-in
/// with no semantics), then to the lowest index. A candidate with no sentence
/// scores ``None`` and is kept only when every candidate has none (the first).
///
/// Returns ``{"chosen", "all_malformed", "scores", "semantic", "checks"}``:
/// per candidate its score and semantic distance (``None`` without a
/// sentence) and its ``findings_consistency`` dict (``None`` likewise).
/// Raises ValueError for no candidate or Findings with no sentence.
#[pyfunction]
#[pyo3(signature = (candidates, findings, encoder = "mpnet", model_dir = None))]
pub fn select_by_findings<'py>(
    py: Python<'py>,
    candidates: Vec<String>,
    findings: &str,
    encoder: &str,
    model_dir: Option<PathBuf>,
) -> PyResult<Bound<'py, PyDict>> {
    if candidates.is_empty() {
        return Err(PyValueError::new_err("candidates: no candidate Impression"));
    }
    if sdr_core::report::split_sentences(findings).is_empty() {
        return Err(PyValueError::new_err("findings: no sentence"));
    }
    let enc = select_encoder(py, encoder, model_dir)?;
    let texts: Vec<&str> = candidates.iter().map(String::as_str).collect();
    let sel = py
        .detach(|| {
            let embedder = sdr_embed::SectionEmbedder::transient(enc.as_ref());
            let study = sdr_corpus::FindingsStudy {
                candidates: &texts,
                findings,
            };
            sdr_corpus::select_by_findings(&[study], &embedder, consistency())
        })
        .map_err(crate::error::corpus_err)?
        .remove(0);
    let finite = |x: f64| x.is_finite().then_some(x);
    let out = PyDict::new(py);
    out.set_item("chosen", sel.selection.index)?;
    out.set_item("all_malformed", sel.selection.all_malformed)?;
    let scores: Vec<Option<f64>> = sel.candidates.iter().map(|c| finite(c.score())).collect();
    let semantic: Vec<Option<f64>> = sel.candidates.iter().map(|c| finite(c.semantic)).collect();
    out.set_item("scores", scores)?;
    out.set_item("semantic", semantic)?;
    let checks = pyo3::types::PyList::empty(py);
    for c in &sel.candidates {
        match &c.report {
            Some(r) => checks.append(to_py(py, r)?)?,
            None => checks.append(py.None())?,
        }
    }
    out.set_item("checks", checks)?;
    Ok(out)
}
