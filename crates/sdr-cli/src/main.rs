//! `sdr`: set-distance rewards for radiology report generation.
//!
//! A thin command line over the SDR crates: each subcommand lives in
//! `commands/<name>.rs` and does only I/O and argument handling.

use clap::{Parser, Subcommand};
use sdr_cli::commands;

#[derive(Parser)]
#[command(
    name = "sdr",
    version,
    about = "Set-distance rewards for radiology report generation",
    long_about = "Set-distance rewards for radiology report generation.\n\n\
        Reports are split into Findings and Impression sentence sets, embedded, \
        and compared with set-to-set distances (Chamfer, Hausdorff, OT, Sinkhorn, \
        unbalanced OT, Gromov-Wasserstein, Hungarian variants, partial OT).\n\
        Input and output are JSON Lines unless a subcommand says otherwise; errors \
        are one line on stderr naming the input line, with a non-zero exit."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Set-to-set distances between pairs of vector sets (JSON Lines in/out).
    Distances(commands::distances::Args),
    /// Split reports into Findings / Impression sentence lists (JSON Lines in/out).
    Parse(commands::parse::Args),
    /// CheXpert-14 labels of reports by phrase rules, no model weights (JSON Lines in/out).
    Label(commands::label::Args),
    /// Sentence embeddings (all-mpnet-base-v2), one sentence per line in; JSON Lines or .npy out.
    Embed(commands::embed::Args),
    /// Build or inspect a reference corpus of embedded reports (.safetensors).
    Corpus(commands::corpus::Args),
    /// Pick the best of K candidate reports by set distance to a corpus, or by consensus.
    Select(commands::select::Args),
    /// Score `sdr select`'s choices against references and the two random baselines (tables, heatmaps).
    SelectEval(commands::select_eval::Args),
    /// Generate K candidate reports per study (local GGUF model or OpenAI-compatible server).
    Generate(commands::generate::Args),
    /// Distance-guided pruning of candidates, live while generating or replayed (paper Alg. 1).
    Prune(Box<commands::prune::Args>),
    /// Compare selection runs (random, standard, pruning) on BLEU-4 / ROUGE-L / BERTScore-F1.
    Eval(commands::eval::Args),
    /// Why a candidate got its reward: sentence pairs, costs, missing and unsupported findings (JSON Lines, HTML).
    Explain(commands::explain::Args),
    /// Every text metric (BLEU, ROUGE, METEOR, chrF++, BERTScore) of hypothesis/reference pairs, per section.
    Score(commands::score::Args),
    /// Serve SDR rewards over HTTP (OpenRLHF remote reward protocol, JSON batch endpoint).
    Serve(commands::serve::Args),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Distances(args) => commands::distances::run(args),
        Command::Parse(args) => commands::parse::run(args),
        Command::Label(args) => commands::label::run(args),
        Command::Embed(args) => commands::embed::run(args),
        Command::Corpus(args) => commands::corpus::run(args),
        Command::Select(args) => commands::select::run(args),
        Command::SelectEval(args) => commands::select_eval::run(args),
        Command::Generate(args) => commands::generate::run(args),
        Command::Prune(args) => commands::prune::run(*args),
        Command::Eval(args) => commands::eval::run(args),
        Command::Score(args) => commands::score::run(args),
        Command::Explain(args) => commands::explain::run(args),
        Command::Serve(args) => commands::serve::run(args),
    };
    if let Err(err) = result {
        // One line: the chain of causes joined, so scripts can grep it.
        eprintln!("sdr: error: {err:#}");
        std::process::exit(1);
    }
}
