//! `--judge-f1`: the judge of SPEC §8a beside the rule labeler in evaluation tables.

use std::path::PathBuf;

use anyhow::{Context, Result};
use sdr_eval::judge::Judge;

/// Adds judge-F1 columns (labels learnt from IU X-ray's human coding) beside CheXpert-rule F1.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct JudgeArgs {
    /// Add judge-F1 columns: the same F1 with labels from the judge trained on IU X-ray's human
    /// coding (all-MiniLM-L6-v2 + LoRA; docs/SPEC.md section 8a) instead of the rules. Needs
    /// all-MiniLM-L6-v2 (scripts/fetch-minilm.sh).
    #[arg(long)]
    pub judge_f1: bool,
    /// The judge's base model folder (default $SDR_JUDGE_BASE, then
    /// ~/.cache/sdr/models/all-MiniLM-L6-v2).
    #[arg(long, value_name = "DIR", requires = "judge_f1")]
    pub judge_base: Option<PathBuf>,
}

impl JudgeArgs {
    /// The judge when `--judge-f1` is given.
    pub fn load(&self) -> Result<Option<Judge>> {
        if !self.judge_f1 {
            return Ok(None);
        }
        Judge::load(self.judge_base.as_deref(), None)
            .map(Some)
            .context("--judge-f1")
    }
}
