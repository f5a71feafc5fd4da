//! The `sdr` command line as a library: the binary in `main.rs` only
//! dispatches, and fuzz targets and tests reach the same parsing code.

pub mod commands;
pub mod common;
pub mod jsonl;
pub mod textscore;
