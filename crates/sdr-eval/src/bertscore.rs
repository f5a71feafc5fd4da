//! BERTScore (precision, recall, F1) over caller-supplied token embeddings,
//! following bert-score's `greedy_cos_idf` and `score` (bert-score 0.3.13,
//! `bert_score/utils.py`, `bert_score/score.py`), with its two options: idf
//! weighting and baseline rescaling ([`BertScorer`]).
//!
//! $$ P = \frac{\sum_{i} w^h_i \max_j \cos(h_i, r_j)}{\sum_i w^h_i}, \quad
//!    R = \frac{\sum_{j} w^r_j \max_i \cos(h_i, r_j)}{\sum_j w^r_j}, \quad
//!    F = \frac{2PR}{P+R} $$
//!
//! where
//! - `h_i` and `r_j` run over *all* tokens of the hypothesis and the
//!   reference, special tokens (`<s>`, `</s>`, `[CLS]`, `[SEP]`) included, so
//!   a content token may match a special token of the other side;
//! - the weight `w` of a special token is 0; of any other token it is 1, or
//!   with idf weighting `log((N + 1) / (df + 1))`, `df` being the number of
//!   the `N` references that contain that token id (bert-score
//!   `get_idf_dict`; an unseen token gets `log(N + 1)`);
//! - a side with no non-special token gets `P = R = 0`, and an undefined `F`
//!   (`P + R = 0`, or an all-zero idf weight sum) becomes 0, as in bert-score.
//!   With idf weighting, a side whose tokens all occur in every reference has
//!   only zero weights: bert-score then returns NaN for `P` (or `R`) and 0
//!   for `F`, and so does this port (use more than one reference for idf).
//! - the maximum runs over the tokens of the pair only. bert-score pads a
//!   batch and its masked similarity is 0 at padded positions, so a token
//!   whose cosines are all negative scores 0 there in a padded batch; with
//!   real encoders cosines are positive and the two agree.
//!
//! Baseline rescaling (`rescale_with_baseline`) maps each of P, R and F
//! through its layer's baseline `b` (the mean score of random sentence pairs,
//! bert-score's `rescale_baseline/<lang>/<model>.tsv`):
//!
//! $$ \hat{x} = \frac{x - b}{1 - b} $$
//!
//! after F is computed from the raw P and R, as bert-score does; an empty side
//! (raw 0) is rescaled too.
//!
//! The encoder is the caller's: bert-score's roberta-large at layer 17 through
//! `sdr_embed::RobertaEncoder` gives the literature's number; SDR's own tables
//! use all-MiniLM-L6-v2, a judge independent of the reward's all-mpnet-base-v2.
//! Every table must name it: see [`TokenEncoder::name`] and [`BertScorer::label`].
//!
//! Reference: T. Zhang, V. Kishore, F. Wu, K. Q. Weinberger, Y. Artzi,
//! "BERTScore: Evaluating Text Generation with BERT", ICLR 2020.

use std::collections::{HashMap, HashSet};

use crate::error::{EvalError, Result};

/// The token embeddings of one sentence: `n` tokens of dimension `dim`,
/// row-major in `data` (`n * dim` values), special tokens flagged.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenEmbeddings {
    pub token_ids: Vec<u32>,
    pub special: Vec<bool>,
    pub dim: usize,
    pub data: Vec<f32>,
}

/// The ids bert-score zero-weights for all-mpnet-base-v2 (and RoBERTa-style
/// tokenizers): `<s>` = 0 (cls) and `</s>` = 2 (sep), from the model's
/// `tokenizer.json` post-processor.
pub const MPNET_SPECIAL_IDS: [u32; 2] = [0, 2];

impl TokenEmbeddings {
    /// Builds the embeddings of one sentence from an encoder's output (token
    /// ids and `ids.len() × dim` row-major vectors), flagging as special the
    /// tokens whose id is in `special_ids` (bert-score zero-weights exactly
    /// the tokenizer's cls and sep ids, e.g. [`MPNET_SPECIAL_IDS`]).
    pub fn with_special_ids(
        token_ids: Vec<u32>,
        data: Vec<f32>,
        dim: usize,
        special_ids: &[u32],
    ) -> Self {
        let special = token_ids.iter().map(|t| special_ids.contains(t)).collect();
        TokenEmbeddings {
            token_ids,
            special,
            dim,
            data,
        }
    }

    /// Number of tokens (special ones included).
    pub fn len(&self) -> usize {
        self.token_ids.len()
    }

    /// True when there is no token at all.
    pub fn is_empty(&self) -> bool {
        self.token_ids.is_empty()
    }

    fn row(&self, i: usize) -> &[f32] {
        &self.data[i * self.dim..(i + 1) * self.dim]
    }

    /// Checks shapes and values; `sentence` only labels errors.
    ///
    /// # Errors
    /// [`EvalError::BadEmbeddings`] for inconsistent lengths,
    /// [`EvalError::NonFinite`] / [`EvalError::ZeroVector`] for bad rows.
    pub fn validate(&self, sentence: usize) -> Result<()> {
        let n = self.token_ids.len();
        if self.special.len() != n {
            return Err(EvalError::BadEmbeddings {
                sentence,
                message: "special flags per token",
                expected: n,
                got: self.special.len(),
            });
        }
        if self.dim == 0 && n > 0 {
            return Err(EvalError::BadEmbeddings {
                sentence,
                message: "embedding dimension",
                expected: 1,
                got: 0,
            });
        }
        if self.data.len() != n * self.dim {
            return Err(EvalError::BadEmbeddings {
                sentence,
                message: "embedding values (tokens x dim)",
                expected: n * self.dim,
                got: self.data.len(),
            });
        }
        for i in 0..n {
            let row = self.row(i);
            if let Some(&v) = row.iter().find(|v| !v.is_finite()) {
                return Err(EvalError::NonFinite {
                    what: "token embedding",
                    index: i,
                    value: f64::from(v),
                });
            }
            if row.iter().all(|&v| v == 0.0) {
                return Err(EvalError::ZeroVector { sentence, token: i });
            }
        }
        Ok(())
    }
}

/// Turns sentences into per-token embeddings (the encoder's last layer).
pub trait TokenEncoder {
    /// The encoder's name, printed in every table that reports BERTScore.
    fn name(&self) -> &str;
    /// One [`TokenEmbeddings`] per input text, in order.
    ///
    /// # Errors
    /// Any encoder failure, as [`EvalError::Encoder`].
    fn encode_tokens(&self, texts: &[&str]) -> Result<Vec<TokenEmbeddings>>;
}

/// A [`TokenEncoder`] from a name and a closure.
pub struct FnEncoder<F> {
    pub name: String,
    pub encode: F,
}

impl<F> TokenEncoder for FnEncoder<F>
where
    F: Fn(&[&str]) -> Result<Vec<TokenEmbeddings>>,
{
    fn name(&self) -> &str {
        &self.name
    }
    fn encode_tokens(&self, texts: &[&str]) -> Result<Vec<TokenEmbeddings>> {
        (self.encode)(texts)
    }
}

/// Inverse document frequencies of token ids over a reference set
/// (bert-score `get_idf_dict`).
#[derive(Debug, Clone, PartialEq)]
pub struct IdfWeights {
    idf: HashMap<u32, f64>,
    unseen: f64,
}

impl IdfWeights {
    /// `idf(t) = log((N + 1) / (df(t) + 1))` over the token-id lists of the
    /// `N` references (each counted once per reference).
    pub fn from_references<'a>(references: impl IntoIterator<Item = &'a [u32]>) -> Self {
        let mut df: HashMap<u32, u64> = HashMap::new();
        let mut n = 0u64;
        for r in references {
            n += 1;
            for &t in r.iter().collect::<HashSet<_>>() {
                *df.entry(t).or_default() += 1;
            }
        }
        let num = (n + 1) as f64;
        IdfWeights {
            idf: df
                .into_iter()
                .map(|(t, c)| (t, (num / (c + 1) as f64).ln()))
                .collect(),
            unseen: num.ln(),
        }
    }

    /// The idf of token id `t`.
    pub fn get(&self, t: u32) -> f64 {
        self.idf.get(&t).copied().unwrap_or(self.unseen)
    }
}

/// BERTScore of one pair.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct BertScore {
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
}

fn weights(s: &TokenEmbeddings, idf: Option<&IdfWeights>) -> Vec<f64> {
    let w: Vec<f64> = s
        .token_ids
        .iter()
        .zip(&s.special)
        .map(|(&t, &sp)| match (sp, idf) {
            (true, _) => 0.0,
            (false, None) => 1.0,
            (false, Some(idf)) => idf.get(t),
        })
        .collect();
    let total: f64 = w.iter().sum();
    w.into_iter().map(|x| x / total).collect()
}

fn unit_rows(s: &TokenEmbeddings) -> Vec<Vec<f64>> {
    (0..s.len())
        .map(|i| {
            let r: Vec<f64> = s.row(i).iter().map(|&v| f64::from(v)).collect();
            let norm = r.iter().map(|v| v * v).sum::<f64>().sqrt();
            r.into_iter().map(|v| v / norm).collect()
        })
        .collect()
}

/// bert-score `greedy_cos_idf` for one (hypothesis, reference) pair.
///
/// # Errors
/// As [`TokenEmbeddings::validate`], plus [`EvalError::BadEmbeddings`] when
/// the two sides differ in dimension.
///
/// ```
/// use sdr_eval::bertscore::{bert_score_pair, TokenEmbeddings};
/// let s = TokenEmbeddings { token_ids: vec![0, 7, 2], special: vec![true, false, true],
///                           dim: 2, data: vec![1.0, 0.0, 0.6, 0.8, 0.0, 1.0] };
/// let b = bert_score_pair(&s, &s, None).unwrap();
/// assert!((b.f1 - 1.0).abs() < 1e-12);
/// ```
pub fn bert_score_pair(
    hypothesis: &TokenEmbeddings,
    reference: &TokenEmbeddings,
    idf: Option<&IdfWeights>,
) -> Result<BertScore> {
    hypothesis.validate(0)?;
    reference.validate(1)?;
    if hypothesis.dim != reference.dim && !hypothesis.is_empty() && !reference.is_empty() {
        return Err(EvalError::BadEmbeddings {
            sentence: 1,
            message: "embedding dimension (same as the hypothesis)",
            expected: hypothesis.dim,
            got: reference.dim,
        });
    }
    let hyp_empty = hypothesis.special.iter().all(|&s| s);
    let ref_empty = reference.special.iter().all(|&s| s);
    let (h, r) = (unit_rows(hypothesis), unit_rows(reference));
    let sim: Vec<Vec<f64>> = h
        .iter()
        .map(|a| {
            r.iter()
                .map(|b| a.iter().zip(b).map(|(x, y)| x * y).sum())
                .collect()
        })
        .collect();
    let (wh, wr) = (weights(hypothesis, idf), weights(reference, idf));
    let max_or_zero = |it: &mut dyn Iterator<Item = f64>| it.fold(f64::NEG_INFINITY, f64::max);
    let mut precision = 0.0;
    for (i, row) in sim.iter().enumerate() {
        let best = if r.is_empty() {
            0.0
        } else {
            max_or_zero(&mut row.iter().copied())
        };
        precision += best * wh[i];
    }
    let mut recall = 0.0;
    for (j, w) in wr.iter().enumerate() {
        let best = if h.is_empty() {
            0.0
        } else {
            max_or_zero(&mut sim.iter().map(|row| row[j]))
        };
        recall += best * w;
    }
    let mut f1 = 2.0 * precision * recall / (precision + recall);
    if hyp_empty || ref_empty {
        precision = 0.0;
        recall = 0.0;
    }
    if f1.is_nan() {
        f1 = 0.0;
    }
    // Cosines are in [-1, 1]; rounding of unit rows and weights must not put
    // an identical pair at 1.0000000000000013.
    let bounded = |x: f64| x.clamp(-1.0, 1.0);
    Ok(BertScore {
        precision: bounded(precision),
        recall: bounded(recall),
        f1: bounded(f1),
    })
}

/// BERTScore of each `hypotheses[i]` against `references[i]`, encoding both
/// with `encoder`; with `use_idf`, idf weights come from `references`.
///
/// # Errors
/// [`EvalError::LengthMismatch`] for lists of different lengths or an
/// encoder returning the wrong number of sentences, plus the errors of
/// [`bert_score_pair`] and of the encoder.
pub fn bert_score(
    encoder: &dyn TokenEncoder,
    hypotheses: &[&str],
    references: &[&str],
    use_idf: bool,
) -> Result<Vec<BertScore>> {
    if hypotheses.len() != references.len() {
        return Err(EvalError::LengthMismatch {
            what: "references",
            expected: hypotheses.len(),
            got: references.len(),
        });
    }
    let h = encoder.encode_tokens(hypotheses)?;
    let r = encoder.encode_tokens(references)?;
    for (got, want) in [(h.len(), hypotheses.len()), (r.len(), references.len())] {
        if got != want {
            return Err(EvalError::LengthMismatch {
                what: "encoder output",
                expected: want,
                got,
            });
        }
    }
    let idf =
        use_idf.then(|| IdfWeights::from_references(r.iter().map(|e| e.token_ids.as_slice())));
    h.iter()
        .zip(&r)
        .enumerate()
        .map(|(i, (a, b))| {
            a.validate(i)?;
            b.validate(i)?;
            bert_score_pair(a, b, idf.as_ref())
        })
        .collect()
}

/// One layer's row of a bert-score baseline file: the expected P, R and F of
/// unrelated sentence pairs, which rescaling maps to 0.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Baseline {
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
}

impl Baseline {
    /// Reads `layer`'s row from a bert-score baseline file
    /// (`bert_score/rescale_baseline/<lang>/<model>.tsv` in its wheel: despite
    /// the name, comma-separated, header `LAYER,P,R,F`, then one row per layer
    /// from 0). As bert-score (`pd.read_csv(path).iloc[num_layers]`) the row is
    /// taken by position; its `LAYER` value must agree.
    ///
    /// # Errors
    /// [`EvalError::Io`] when unreadable; [`EvalError::Baseline`] naming the
    /// file for a wrong header, a missing row or a value that is not a number
    /// below 1.
    pub fn from_file(path: &std::path::Path, layer: usize) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|source| EvalError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, layer).map_err(|message| EvalError::Baseline {
            path: path.to_path_buf(),
            message,
        })
    }

    /// [`Baseline::from_file`] on the file's text; the error is the message.
    ///
    /// ```
    /// use sdr_eval::bertscore::Baseline;
    /// let b = Baseline::parse("LAYER,P,R,F\n0,0.5,0.6,0.55\n1,0.8,0.9,0.85\n", 1).unwrap();
    /// assert_eq!((b.precision, b.recall, b.f1), (0.8, 0.9, 0.85));
    /// assert!(Baseline::parse("LAYER,P,R,F\n0,0.5,0.6,0.55\n", 3).is_err());
    /// ```
    pub fn parse(text: &str, layer: usize) -> std::result::Result<Self, String> {
        let mut lines = text.lines().filter(|l| !l.trim().is_empty());
        let header: Vec<String> = lines
            .next()
            .ok_or("empty file")?
            .split(',')
            .map(|c| c.trim().to_ascii_uppercase())
            .collect();
        if header != ["LAYER", "P", "R", "F"] {
            return Err(format!(
                "header is `{}`, expected `LAYER,P,R,F` (bert-score's rescale_baseline format)",
                header.join(",")
            ));
        }
        let rows: Vec<&str> = lines.collect();
        let row = rows.get(layer).ok_or_else(|| {
            format!(
                "no row for layer {layer} ({} rows: layers 0 to {})",
                rows.len(),
                rows.len().saturating_sub(1)
            )
        })?;
        let cells: Vec<&str> = row.split(',').map(str::trim).collect();
        if cells.len() != 4 {
            return Err(format!(
                "row {} has {} columns, expected 4",
                layer + 2,
                cells.len()
            ));
        }
        match cells[0].parse::<f64>() {
            Ok(l) if l == layer as f64 => {}
            _ => {
                return Err(format!(
                    "row {} is for LAYER {}, expected {layer}",
                    layer + 2,
                    cells[0]
                ))
            }
        }
        let mut v = [0.0; 3];
        for (k, c) in cells[1..].iter().enumerate() {
            v[k] = match c.parse::<f64>() {
                Ok(x) if x.is_finite() && x < 1.0 => x,
                _ => {
                    return Err(format!(
                        "layer {layer}: {} = `{c}` is not a number below 1",
                        ["P", "R", "F"][k]
                    ))
                }
            };
        }
        Ok(Baseline {
            precision: v[0],
            recall: v[1],
            f1: v[2],
        })
    }

    /// `(x - b) / (1 - b)` for each of P, R and F.
    pub fn rescale(&self, s: BertScore) -> BertScore {
        let r = |x: f64, b: f64| (x - b) / (1.0 - b);
        BertScore {
            precision: r(s.precision, self.precision),
            recall: r(s.recall, self.recall),
            f1: r(s.f1, self.f1),
        }
    }
}

/// A BERTScore judge: the encoder and bert-score's options (`idf`,
/// `rescale_with_baseline`).
pub struct BertScorer<'a> {
    pub encoder: &'a dyn TokenEncoder,
    /// Weight tokens by their idf over the references scored together.
    pub idf: bool,
    /// Rescale P, R and F with this baseline.
    pub baseline: Option<Baseline>,
}

impl<'a> BertScorer<'a> {
    /// The plain judge: no idf, no rescaling.
    pub fn new(encoder: &'a dyn TokenEncoder) -> Self {
        BertScorer {
            encoder,
            idf: false,
            baseline: None,
        }
    }

    /// What every table prints: the encoder's name and the options that are
    /// on, e.g. `roberta-large L17, idf, rescaled with baseline` (the plain
    /// judge is its encoder's name alone).
    pub fn label(&self) -> String {
        let mut s = self.encoder.name().to_string();
        if self.idf {
            s.push_str(", idf");
        }
        if self.baseline.is_some() {
            s.push_str(", rescaled with baseline");
        }
        s
    }

    /// What a table says about its BERTScore column: the encoder, the options,
    /// and, when `reward_encoder`, that it is the reward's own encoder (whose
    /// BERTScore is not an independent judgement of policies chosen under it).
    ///
    /// ```
    /// use sdr_eval::bertscore::{BertScorer, FnEncoder, TokenEmbeddings};
    /// let enc = FnEncoder { name: "roberta-large L17".to_string(),
    ///     encode: |_: &[&str]| -> sdr_eval::Result<Vec<TokenEmbeddings>> { Ok(vec![]) } };
    /// assert_eq!(BertScorer::new(&enc).describe(false), "roberta-large L17 (no idf, not rescaled)");
    /// ```
    pub fn describe(&self, reward_encoder: bool) -> String {
        let opts = format!(
            "{}, {}",
            if self.idf { "idf" } else { "no idf" },
            if self.baseline.is_some() {
                "rescaled with baseline"
            } else {
                "not rescaled"
            }
        );
        if reward_encoder {
            format!(
                "{}, last layer: the reward's own encoder ({opts})",
                self.encoder.name()
            )
        } else {
            format!("{} ({opts})", self.encoder.name())
        }
    }

    /// BERTScore of every `(hypothesis, reference)` pair, as bert-score's
    /// `score(hyps, refs, idf=..., rescale_with_baseline=...)` on the same
    /// lists: idf weights from the references of `pairs` (each occurrence
    /// counted), each distinct string encoded once in one encoder call, a
    /// pair with an empty (whitespace-only) side scoring 0 before rescaling.
    ///
    /// # Errors
    /// The encoder's errors, an encoder returning the wrong number of texts,
    /// and the errors of [`bert_score_pair`].
    pub fn score_pairs(&self, pairs: &[(&str, &str)]) -> Result<Vec<BertScore>> {
        let mut uniq: Vec<&str> = pairs
            .iter()
            .flat_map(|&(h, r)| [h, r])
            .filter(|s| !s.trim().is_empty())
            .collect();
        uniq.sort_unstable();
        uniq.dedup();
        let toks = if uniq.is_empty() {
            Vec::new()
        } else {
            self.encoder.encode_tokens(&uniq)?
        };
        if toks.len() != uniq.len() {
            return Err(EvalError::LengthMismatch {
                what: "encoder output",
                expected: uniq.len(),
                got: toks.len(),
            });
        }
        let emb: HashMap<&str, TokenEmbeddings> = uniq.iter().copied().zip(toks).collect();
        // An empty reference holds special tokens only, which weigh 0: it
        // counts in N and adds to no document frequency.
        let idf = self.idf.then(|| {
            IdfWeights::from_references(pairs.iter().map(|(_, r)| {
                emb.get(r)
                    .map_or(&[][..], |e: &TokenEmbeddings| e.token_ids.as_slice())
            }))
        });
        pairs
            .iter()
            .map(|(h, r)| {
                let raw = match (emb.get(h), emb.get(r)) {
                    (Some(he), Some(re)) => bert_score_pair(he, re, idf.as_ref())?,
                    _ => BertScore::default(),
                };
                Ok(match &self.baseline {
                    Some(b) => b.rescale(raw),
                    None => raw,
                })
            })
            .collect()
    }
}

impl BertScorer<'_> {
    /// [`BertScorer::score_pairs`] on `units` interleaved lists (pair `k` of
    /// list `s` at `k * units + s`, e.g. Findings and Impression of each
    /// report): each list is scored as its own bert-score call, so idf
    /// weights come from that list's references.
    ///
    /// # Errors
    /// As [`BertScorer::score_pairs`]; `units` of 0 or not dividing the
    /// number of pairs is [`EvalError::LengthMismatch`].
    pub fn score_units(&self, pairs: &[(&str, &str)], units: usize) -> Result<Vec<BertScore>> {
        if units == 0 || !pairs.len().is_multiple_of(units) {
            return Err(EvalError::LengthMismatch {
                what: "pairs (a multiple of the units per report)",
                expected: units.max(1) * pairs.len().div_ceil(units.max(1)),
                got: pairs.len(),
            });
        }
        let mut out = vec![BertScore::default(); pairs.len()];
        for s in 0..units {
            let list: Vec<(&str, &str)> = pairs.iter().skip(s).step_by(units).copied().collect();
            for (k, b) in self.score_pairs(&list)?.into_iter().enumerate() {
                out[k * units + s] = b;
            }
        }
        Ok(out)
    }
}

/// A RoBERTa or BERT checkpoint cut at one layer (`sdr_embed::RobertaEncoder`)
/// as a BERTScore [`TokenEncoder`]: bert-score's tokenisation, the
/// tokenizer's cls and sep zero-weighted.
#[cfg(feature = "embed")]
impl TokenEncoder for sdr_embed::RobertaEncoder {
    fn name(&self) -> &str {
        sdr_embed::RobertaEncoder::name(self)
    }
    fn encode_tokens(&self, texts: &[&str]) -> Result<Vec<TokenEmbeddings>> {
        let toks = self.embed_tokens(texts).map_err(|e| EvalError::Encoder {
            encoder: sdr_embed::RobertaEncoder::name(self).to_string(),
            message: e.to_string(),
        })?;
        let special = self.special_ids().to_vec();
        Ok(toks
            .into_iter()
            .map(|t| TokenEmbeddings::with_special_ids(t.ids, t.vectors, t.dim, &special))
            .collect())
    }
}

/// sdr-embed's encoder as a BERTScore [`TokenEncoder`]: last-layer token
/// embeddings, `<s>`/`</s>` zero-weighted ([`MPNET_SPECIAL_IDS`]).
#[cfg(feature = "embed")]
impl TokenEncoder for sdr_embed::Encoder {
    fn name(&self) -> &str {
        sdr_embed::Encoder::name(self)
    }
    fn encode_tokens(&self, texts: &[&str]) -> Result<Vec<TokenEmbeddings>> {
        let toks = self.embed_tokens(texts).map_err(|e| EvalError::Encoder {
            encoder: sdr_embed::Encoder::name(self).to_string(),
            message: e.to_string(),
        })?;
        Ok(toks
            .into_iter()
            .map(|t| TokenEmbeddings::with_special_ids(t.ids, t.vectors, t.dim, &MPNET_SPECIAL_IDS))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn emb(ids: &[u32], special: &[bool], rows: &[[f32; 2]]) -> TokenEmbeddings {
        TokenEmbeddings {
            token_ids: ids.to_vec(),
            special: special.to_vec(),
            dim: 2,
            data: rows.iter().flatten().copied().collect(),
        }
    }

    #[test]
    fn special_ids_are_flagged() {
        let e =
            TokenEmbeddings::with_special_ids(vec![0, 9, 2], vec![1.0; 6], 2, &MPNET_SPECIAL_IDS);
        assert_eq!(e.special, vec![true, false, true]);
        assert!(e.validate(0).is_ok());
    }

    #[test]
    fn empty_hypothesis_scores_zero() {
        let h = emb(&[0, 2], &[true, true], &[[1.0, 0.0], [0.0, 1.0]]);
        let r = emb(
            &[0, 5, 2],
            &[true, false, true],
            &[[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]],
        );
        let s = bert_score_pair(&h, &r, None).unwrap();
        assert_eq!(s, BertScore::default());
    }

    #[test]
    fn bad_embeddings_are_errors() {
        let z = emb(&[1], &[false], &[[0.0, 0.0]]);
        assert!(matches!(
            bert_score_pair(&z, &z, None),
            Err(EvalError::ZeroVector { .. })
        ));
        let nan = emb(&[1], &[false], &[[f32::NAN, 0.0]]);
        assert!(bert_score_pair(&nan, &nan, None).is_err());
        let mut bad = emb(&[1], &[false], &[[1.0, 0.0]]);
        bad.special.clear();
        assert!(bert_score_pair(&bad, &bad, None).is_err());
    }

    #[test]
    fn encoder_closure_and_idf() {
        let enc = FnEncoder {
            name: "toy".to_string(),
            encode: |texts: &[&str]| -> Result<Vec<TokenEmbeddings>> {
                Ok(texts
                    .iter()
                    .map(|t| {
                        let ids: Vec<u32> = t.bytes().map(u32::from).collect();
                        let rows: Vec<[f32; 2]> =
                            t.bytes().map(|b| [1.0, f32::from(b) / 100.0]).collect();
                        emb(&ids, &vec![false; ids.len()], &rows)
                    })
                    .collect())
            },
        };
        assert_eq!(enc.name(), "toy");
        let s = bert_score(&enc, &["ab", "b"], &["ab", "cd"], true).unwrap();
        assert!((s[0].f1 - 1.0).abs() < 1e-12);
        assert!(s[0].f1 <= 1.0 && s[0].precision <= 1.0 && s[0].recall <= 1.0);
        assert!(s[1].f1 < 1.0);
        // Every token in every reference: all idf weights are 0, and as in
        // bert-score the weighted means are 0/0 and F1 falls back to 0.
        let s = bert_score(&enc, &["ab"], &["ab"], true).unwrap();
        assert!(s[0].precision.is_nan() && s[0].recall.is_nan());
        assert_eq!(s[0].f1, 0.0);
        assert!(bert_score(&enc, &["a"], &[], false).is_err());
        let idf = IdfWeights::from_references([[1u32, 1, 2].as_slice(), [2u32].as_slice()]);
        assert!((idf.get(1) - (3.0f64 / 2.0).ln()).abs() < 1e-15);
        assert_eq!(idf.get(2), 0.0);
        assert!((idf.get(9) - 3.0f64.ln()).abs() < 1e-15);
    }
}
