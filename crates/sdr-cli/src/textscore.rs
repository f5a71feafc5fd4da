//! Helpers shared by the commands that score texts against references
//! (`sdr eval`, `sdr score`, `sdr select-eval`): the BERTScore judge (its
//! options, loading it, naming it in tables) and WordNet.
//!
//! The judge is either a RoBERTa / BERT folder cut at a layer, as bert-score
//! computes it (`--bertscore-model`: roberta-large at layer 17 for the
//! literature's number, all-MiniLM-L6-v2 for SDR's tables), or, by default,
//! the reward's own sentence encoder (all-mpnet-base-v2's last layer), which
//! every table then names as such: a policy chosen to be close under the
//! reward's encoder is not independently judged by it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, Result};
use sdr_eval::bertscore::{Baseline, BertScore, BertScorer, TokenEncoder};
use sdr_eval::wordnet::WordNet;

/// The BERTScore options of `sdr score`, `sdr eval` and `sdr select-eval`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct BertScoreArgs {
    /// Skip BERTScore (no model needed; the BERTScore options are refused with it).
    #[arg(long, conflicts_with_all = ["model", "bertscore_model", "bertscore_layer", "rescale_baseline", "idf"])]
    pub no_bertscore: bool,
    /// The reward's sentence-transformers model, used for BERTScore when
    /// --bertscore-model is not given (default: $SDR_MODEL, then
    /// ~/.cache/sdr/models/all-mpnet-base-v2; last layer). Tables label it as the
    /// reward's own encoder.
    #[arg(long, value_name = "DIR")]
    pub model: Option<PathBuf>,
    /// A Hugging Face RoBERTa or BERT folder (config.json, tokenizer.json,
    /// model.safetensors or pytorch_model.bin) for BERTScore, as bert-score's
    /// model_type: a local roberta-large gives the literature's BERTScore (with
    /// --rescale-baseline, the paper's scale); ~/.cache/sdr/models/all-MiniLM-L6-v2
    /// (scripts/fetch-minilm.sh) is the judge of SDR's published tables.
    #[arg(long, value_name = "DIR")]
    pub bertscore_model: Option<PathBuf>,
    /// Layer of --bertscore-model whose token embeddings are compared (bert-score's
    /// num_layers; 0 is the embedding output). Default: bert-score's layer for the
    /// folder's name (roberta-large 17, roberta-base 10, bert-base-uncased 9, ...),
    /// else the last layer.
    #[arg(long, value_name = "N", requires = "bertscore_model")]
    pub bertscore_layer: Option<usize>,
    /// Rescale P, R and F1 with a bert-score baseline file (x -> (x - b) / (1 - b),
    /// b from the file's row for the layer), as bert-score's rescale_with_baseline:
    /// for roberta-large, rescale_baseline/en/roberta-large.tsv from the bert-score
    /// wheel. The file must be for the same model and layer.
    #[arg(long, value_name = "FILE", requires = "bertscore_model")]
    pub rescale_baseline: Option<PathBuf>,
    /// Weight tokens by their inverse document frequency over the references
    /// scored together (bert-score's idf=True; per section).
    #[arg(long)]
    pub idf: bool,
}

/// The encoder behind a [`Judge`].
enum JudgeEncoder {
    /// The reward's sentence encoder (all-mpnet-base-v2), last layer.
    Reward(Arc<sdr_embed::Encoder>),
    /// A RoBERTa / BERT folder cut at a layer.
    Layer(Box<sdr_embed::RobertaEncoder>),
}

/// A loaded BERTScore judge: encoder, idf and baseline.
pub struct Judge {
    encoder: JudgeEncoder,
    idf: bool,
    baseline: Option<Baseline>,
}

impl Judge {
    /// The scorer borrowing this judge.
    pub fn scorer(&self) -> BertScorer<'_> {
        let encoder: &dyn TokenEncoder = match &self.encoder {
            JudgeEncoder::Reward(e) => &**e,
            JudgeEncoder::Layer(e) => &**e,
        };
        BertScorer {
            encoder,
            idf: self.idf,
            baseline: self.baseline,
        }
    }

    /// What a table says about its BERTScore column (see
    /// [`BertScorer::describe`]), e.g. `all-MiniLM-L6-v2 L6 (no idf, not rescaled)`.
    pub fn describe(&self) -> String {
        self.scorer()
            .describe(matches!(self.encoder, JudgeEncoder::Reward(_)))
    }

    /// BERTScore of `units` interleaved lists of pairs (Findings and
    /// Impression of each report), each list scored as one bert-score call.
    pub fn score_units(&self, pairs: &[(&str, &str)], units: usize) -> Result<Vec<BertScore>> {
        Ok(self.scorer().score_units(pairs, units)?)
    }
}

/// The BERTScore judge that `args` ask for, `None` with --no-bertscore; the
/// error says how to get the model.
pub fn load_judge(args: &BertScoreArgs) -> Result<Option<Judge>> {
    if args.no_bertscore {
        return Ok(None);
    }
    let encoder = match &args.bertscore_model {
        Some(dir) => JudgeEncoder::Layer(Box::new(
            sdr_embed::RobertaEncoder::load(dir, args.bertscore_layer)
                .map_err(|e| anyhow!("--bertscore-model {}: {e}", dir.display()))?,
        )),
        None => {
            crate::common::encoder::check_model_arg(args.model.as_deref())?;
            let dir = sdr_embed::resolve_model_dir(args.model.as_deref()).map_err(|e| {
                anyhow!("{e} (run scripts/fetch-model.sh, pass --model DIR, or --no-bertscore)")
            })?;
            // Token vectors only: the sentence cache would stay empty.
            let options = sdr_embed::EncoderOptions {
                cache: false,
                ..Default::default()
            };
            let loaded = sdr_embed::open_encoder("mpnet", Some(&dir), options)?;
            let Some(model) = loaded.model else {
                anyhow::bail!("the mpnet encoder loaded without its model");
            };
            JudgeEncoder::Reward(model)
        }
    };
    let baseline = match (&args.rescale_baseline, &encoder) {
        (Some(path), JudgeEncoder::Layer(e)) => Some(
            Baseline::from_file(path, e.layer())
                .map_err(|err| anyhow!("--rescale-baseline: {err}"))?,
        ),
        _ => None,
    };
    Ok(Some(Judge {
        encoder,
        idf: args.idf,
        baseline,
    }))
}

/// WordNet for METEOR's synonym stage: `dir`, else the default location
/// (`$SDR_WORDNET_DIR`, `/usr/share/wordnet`); `None` when there is none.
pub fn load_wordnet(dir: Option<&Path>) -> Result<Option<WordNet>> {
    if let Some(d) = dir {
        // The folder the user named: say which option it came from.
        return WordNet::load(d)
            .map(Some)
            .map_err(|e| anyhow!("--wordnet {}: {e}", d.display()));
    }
    match WordNet::default_dir() {
        Some(d) => Ok(Some(WordNet::load(&d).map_err(|e| anyhow!("{e}"))?)),
        None => Ok(None),
    }
}
