//! `sdr parse`: split reports into Findings / Impression sentence lists.

use std::path::PathBuf;

use anyhow::Result;

#[derive(clap::Args)]
pub struct Args {
    /// JSON Lines file with one {"text": "..."} object per line; `-` or absent reads stdin.
    pub input: Option<PathBuf>,
}

pub fn run(_args: Args) -> Result<()> {
    anyhow::bail!("parse: report parser not wired yet")
}
