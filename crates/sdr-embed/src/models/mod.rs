//! The transformers under the pooling layer: MPNet as a candle graph (`mpnet`, the
//! reference) and over packed tokens (`packed`, the CPU path), RoBERTa/BERT for the
//! BERTScore judges (`roberta`), and the choice among them from `config.json`
//! (`backbone`).

pub(crate) mod backbone;
pub(crate) mod mpnet;
pub(crate) mod packed;
pub(crate) mod roberta;
