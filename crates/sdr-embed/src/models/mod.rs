//! The transformers under the pooling layer: MPNet as a candle graph (`mpnet`, the
//! reference) and over packed tokens (`packed`, the CPU path), RoBERTa/BERT for the
//! BERTScore judges (`roberta`), the choice among them from `config.json`
//! (`backbone`), and the packed-weights file that processes share (`pack_cache`, its byte
//! format in `pack_format`).

pub(crate) mod backbone;
pub(crate) mod mpnet;
pub(crate) mod pack_cache;
pub(crate) mod pack_format;
pub(crate) mod packed;
pub(crate) mod profile;
pub(crate) mod roberta;
