//! Distance-guided pruning (paper Alg. 1, SPEC §6): the algorithm over one
//! study's candidates (`alg1.rs`), the record a pruned study becomes
//! (`record.rs`), and the replay and live runs over many studies (`run.rs`).

mod alg1;
mod record;
mod run;

pub use alg1::{prune, PartialScorer, PruneConfig, PruneOutcome, Round};
pub use record::{Distances, Generation, KeptCounts, PruneRecord, Sampling};
pub use run::{LiveStudy, Pruner, ReplayStudy, StudyScorer, Totals};
