//! `sdr`: set-distance rewards for radiology report generation.
//!
//! A thin command line over the SDR crates: each subcommand lives in
//! `commands/<name>.rs` and does only I/O and argument handling.

use clap::{Parser, Subcommand};
use sdr_cli::commands;
use sdr_cli::common::log_line;

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
    /// Pick the best of K candidate reports by set distance to a corpus or by consensus, or Impressions by their Findings.
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
    /// Check a training set's references before a run: summary, bad rows, exit status 1 if any.
    CheckData(commands::check_data::Args),
    /// Check an Impression against its own Findings: contradictions, unsupported and omitted findings.
    CheckImpression(commands::check_impression::Args),
    /// List or clean the packed-weights cache: files of model folders that are gone or changed.
    Cache(commands::cache::Args),
}

fn main() {
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Serve(_)) {
        if let Err(err) = sdr_cli::common::interrupt::install() {
            log_line(format_args!("sdr: warning: {}", one_line(&err)));
        }
    }
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
        Command::CheckData(args) => commands::check_data::run(args),
        Command::CheckImpression(args) => commands::check_impression::run(args),
        Command::Cache(args) => commands::cache::run(args),
    };
    if let Err(err) = result {
        if is_broken_pipe(&err) && stdout_reader_gone() {
            // The reader went away (`sdr parse big.jsonl | head -1`): it has what it
            // wanted, so no error line; the status of a process ended by SIGPIPE.
            std::process::exit(141);
        }
        log_line(format_args!("sdr: error: {}", one_line(&err)));
        std::process::exit(1);
    }
}

/// Whether `err` comes from writing to a pipe whose reader has exited (Rust
/// ignores SIGPIPE, so the write fails with EPIPE instead).
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        let kind = cause
            .downcast_ref::<std::io::Error>()
            .map(std::io::Error::kind)
            .or_else(|| {
                cause
                    .downcast_ref::<serde_json::Error>()
                    .and_then(serde_json::Error::io_error_kind)
            });
        kind == Some(std::io::ErrorKind::BrokenPipe)
    })
}

/// Whether standard output is a pipe or socket whose reader has gone: a broken
/// pipe elsewhere (a server's connection) is an error to report, not this.
#[cfg(unix)]
fn stdout_reader_gone() -> bool {
    let mut fd = libc::pollfd {
        fd: libc::STDOUT_FILENO,
        events: 0,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call; timeout 0 never blocks.
    let ready = unsafe { libc::poll(&mut fd, 1, 0) };
    ready == 1 && fd.revents & (libc::POLLERR | libc::POLLHUP) != 0
}

#[cfg(not(unix))]
fn stdout_reader_gone() -> bool {
    true
}

/// The chain of causes as one line, so scripts can grep it. Many errors print
/// their source in their own text as well, and some (candle's) append a
/// backtrace: each text is kept once, and only up to a backtrace.
fn one_line(err: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in err.chain() {
        let text = flatten(&cause.to_string());
        if text.is_empty() || line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

/// The lines of `text` before any backtrace, joined with ": ".
fn flatten(text: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for l in text.lines().map(str::trim) {
        if l == "stack backtrace:" || is_frame(l) {
            break;
        }
        if !l.is_empty() {
            parts.push(l);
        }
    }
    parts.join(": ")
}

/// A line of `std::backtrace::Backtrace`'s text: `N: function`.
fn is_frame(line: &str) -> bool {
    line.split_once(": ")
        .is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_already_in_the_line_is_not_repeated() {
        let io = std::io::Error::from(std::io::ErrorKind::NotFound);
        let text = io.to_string();
        // An error whose own text includes its source, as thiserror's `{source}`.
        #[derive(Debug)]
        struct Wrapper(std::io::Error);
        impl std::fmt::Display for Wrapper {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "/nonexistent: {}", self.0)
            }
        }
        impl std::error::Error for Wrapper {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let err = anyhow::Error::new(Wrapper(io)).context("--rules /nonexistent");
        assert_eq!(format!("{err:#}").matches(&text).count(), 2, "the bug");
        assert_eq!(
            one_line(&err),
            format!("--rules /nonexistent: /nonexistent: {text}")
        );
        // Distinct causes are all kept.
        let err = anyhow::anyhow!("inner").context("outer");
        assert_eq!(one_line(&err), "outer: inner");
    }

    #[test]
    fn a_live_stdout_is_not_a_gone_reader() {
        // The test harness reads this process's stdout (or it is a terminal or file):
        // a broken pipe inside the run would be reported, not swallowed.
        assert!(!stdout_reader_gone());
    }

    #[test]
    fn a_broken_pipe_is_found_under_context_and_in_json_errors() {
        let pipe = || std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        assert!(is_broken_pipe(
            &anyhow::Error::new(pipe()).context("cannot write output")
        ));
        assert!(is_broken_pipe(&serde_json::Error::io(pipe()).into()));
        let full = std::io::Error::from(std::io::ErrorKind::StorageFull);
        assert!(!is_broken_pipe(&anyhow::Error::new(full).context("x")));
    }

    #[test]
    fn a_backtrace_in_an_error_text_is_cut() {
        let bt = std::backtrace::Backtrace::force_capture().to_string();
        let err = anyhow::anyhow!("shape [768, 768], expected [384, 384]\n{bt}").context("model m");
        assert_eq!(
            one_line(&err),
            "model m: shape [768, 768], expected [384, 384]"
        );
        assert_eq!(flatten("context\ninner"), "context: inner");
    }
}
