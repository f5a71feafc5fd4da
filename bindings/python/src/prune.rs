//! `sdr_rewards.PruneScorer`: the partial score of distance-guided pruning (SPEC §6,
//! `sdr_corpus::partial`) against a corpus file, for Python-side generation
//! loops (the CLI's `sdr prune` uses the same rule).

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use sdr_core::report::SEGMENTER_VERSION;
use sdr_core::Metric;
use sdr_corpus::{
    Aggregation, Corpus, CorpusError, CorpusScorer, PartialScores, PartialSections, Policy,
    SectionEmbedder,
};

use crate::encoder::open_encoder;
use crate::error::{corpus_err, ToPy};

/// Scores partial reports against a corpus built by ``sdr corpus build``.
///
/// ``PruneScorer(corpus, metric="chamfer", agg="min", *, encoder="mpnet",
/// model_dir=None, device="cpu", precision="f32")`` (`precision` must be the one the
/// corpus was built at: ValueError otherwise); ``score(partials)`` takes one ``(findings,
/// impression)`` pair of complete-sentence lists per candidate and returns
/// ``{"scores", "evaluated", "unconverged", "failed"}``: per candidate the
/// mean of the aggregated corpus distances over the sections that hold a
/// sentence (``inf`` when neither does); lower is better, so a pruning round
/// drops the highest scores.
#[pyclass(name = "PruneScorer", module = "sdr_rewards._sdr")]
pub(crate) struct PyPruneScorer {
    corpus: Corpus,
    /// The encoder and a sentence cache of [`sdr_reward::DEFAULT_CACHE_MIB`]:
    /// a generation loop scores the same complete sentences round after round.
    embedder: SectionEmbedder<'static>,
    policy: Policy,
}

#[pymethods]
impl PyPruneScorer {
    #[new]
    #[pyo3(signature = (corpus, metric = "chamfer", agg = "min", *, encoder = "mpnet", model_dir = None, device = "cpu", precision = "f32"))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        corpus: PathBuf,
        metric: &str,
        agg: &str,
        encoder: &str,
        model_dir: Option<PathBuf>,
        device: &str,
        precision: &str,
    ) -> PyResult<Self> {
        // The error names the spec already.
        let metric: Metric = metric.parse::<Metric>().py()?;
        let agg: Aggregation = agg.parse().map_err(corpus_err)?;
        let encoder = open_encoder(py, encoder, model_dir, device, precision, false)?.encoder;
        let corpus = Corpus::open(&corpus).map_err(corpus_err)?;
        corpus
            .check_encoder(encoder.as_ref(), SEGMENTER_VERSION)
            .map_err(corpus_err)?;
        let embedder = SectionEmbedder::bounded(encoder, sdr_reward::DEFAULT_CACHE_MIB).py()?;
        Ok(PyPruneScorer {
            corpus,
            embedder,
            policy: Policy { metric, agg },
        })
    }

    /// The policy key, e.g. ``chamfer@min``.
    #[getter]
    fn policy(&self) -> String {
        self.policy.to_string()
    }

    fn score<'py>(
        &self,
        py: Python<'py>,
        partials: Vec<(Vec<String>, Vec<String>)>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let scored = py
            .detach(|| -> Result<PartialScores, CorpusError> {
                // Indexing is linear in the corpus; the index borrows the map.
                let index = self.corpus.index()?;
                let scorer =
                    CorpusScorer::with_embedder(&index, self.embedder.clone(), self.policy);
                let parts: Vec<PartialSections<'_, String>> = partials
                    .iter()
                    .map(|(f, i)| PartialSections {
                        findings: f,
                        impression: i,
                    })
                    .collect();
                sdr_reward::install(|| scorer.score(&parts))
            })
            .map_err(corpus_err)?;
        let d = PyDict::new(py);
        d.set_item("scores", scored.scores)?;
        d.set_item("evaluated", scored.evaluated)?;
        d.set_item("unconverged", scored.convergence.unconverged)?;
        d.set_item("failed", scored.convergence.failed)?;
        Ok(d)
    }
}
