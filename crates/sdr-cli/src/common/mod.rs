//! What several commands share, so that command files never import each
//! other: argument groups, progress bars and warning lines.

mod candidates;
pub mod encoder;
mod generation;
pub mod interrupt;
mod journal;
mod judge;
mod output;

use std::cell::{Cell, RefCell};
use std::io::IsTerminal;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use sdr_corpus::{Aggregation, CorpusIndex, Section};

pub use candidates::{candidate_tokens, candidates_hash, non_negative_count};
pub use encoder::EncoderArgs;
pub use generation::{default_gguf, refuse_failed, BackendArgs, Study, StudyArgs};
pub use journal::{partial_path, Journal, Kept};
pub use judge::JudgeArgs;
pub use output::{
    check_file_creatable, check_input, check_not_an_input, check_output_dir, check_output_file,
    check_outputs, log_line, or_stdin, print_stdout,
};
#[deprecated(
    since = "0.2.0",
    note = "use sdr_gen::replay::GenRecord; removed in 0.3.0"
)]
pub use sdr_gen::replay::GenRecord;

/// Most seeds `--seeds` takes (`sdr eval`, `sdr select-eval`): the default
/// 1,000 already averages the random baselines' F1 to about 1e-3, and a
/// count near `usize::MAX` would run for ever with no output.
pub const MAX_SEEDS: usize = 100_000;

/// `--seeds N` checked: 1 to [`MAX_SEEDS`].
pub fn check_seeds(n: usize) -> anyhow::Result<()> {
    anyhow::ensure!(n >= 1, "--seeds {n}: must be at least 1");
    anyhow::ensure!(n <= MAX_SEEDS, "--seeds {n}: at most {MAX_SEEDS}");
    Ok(())
}

/// A progress bar over `n` studies, hidden with `quiet`; a line every 10
/// studies when stderr is not a terminal (see [`Progress`]).
pub fn progress_bar(n: usize, quiet: bool, what: &str) -> Progress {
    progress_every(n, quiet, what, 10)
}

/// [`progress_bar`] with a line every `every` studies in logs.
pub fn progress_every(n: usize, quiet: bool, what: &str, every: usize) -> Progress {
    if quiet {
        return Progress::hidden();
    }
    let bar = ProgressBar::new(n as u64);
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{what} {{bar:30}} {{pos}}/{{len}} studies {{msg}} [{{elapsed_precise}}<{{eta_precise}}]"
        ))
        .expect("static template"),
    );
    let lines = (!std::io::stderr().is_terminal()).then(|| Lines {
        what: what.to_string(),
        total: n,
        every: every.max(1),
        done: Cell::new(0),
        t0: Instant::now(),
        message: RefCell::new(String::new()),
    });
    Progress { bar, lines }
}

/// A progress bar for terminals and, where stderr is a file or a pipe (a
/// job's log, where indicatif draws nothing), one line every N studies:
/// `generating: 20/100 studies, 61 s, eta 244 s, 5.1 tok/s`.
pub struct Progress {
    bar: ProgressBar,
    lines: Option<Lines>,
}

struct Lines {
    what: String,
    total: usize,
    every: usize,
    done: Cell<usize>,
    t0: Instant,
    message: RefCell<String>,
}

impl Progress {
    fn hidden() -> Self {
        Progress {
            bar: ProgressBar::hidden(),
            lines: None,
        }
    }

    pub fn inc(&self, delta: u64) {
        self.bar.inc(delta);
        if let Some(l) = &self.lines {
            let before = l.done.get();
            let done = before + delta as usize;
            l.done.set(done);
            if done / l.every > before / l.every || (done == l.total && before < l.total) {
                let secs = l.t0.elapsed().as_secs_f64();
                let eta = secs / done.max(1) as f64 * l.total.saturating_sub(done) as f64;
                let msg = l.message.borrow();
                let sep = if msg.is_empty() { "" } else { ", " };
                log_line(format_args!(
                    "{}: {done}/{} studies, {secs:.0} s, eta {eta:.0} s{sep}{msg}",
                    l.what, l.total
                ));
            }
        }
    }

    /// Prints `line` on stderr above the bar: the bar is cleared first and
    /// drawn again after, so that the line does not land on it. Printed
    /// also where no bar is drawn (a log, `--quiet`), which
    /// `ProgressBar::println` would skip.
    pub fn println(&self, line: impl std::fmt::Display) {
        self.bar.suspend(|| log_line(line));
    }

    pub fn set_message(&self, message: String) {
        if let Some(l) = &self.lines {
            l.message.replace(message.clone());
        }
        self.bar.set_message(message);
    }

    pub fn finish_and_clear(&self) {
        self.bar.finish_and_clear();
    }
}

/// Progress lines for a log (stderr not a terminal, where indicatif draws
/// nothing) of work counted in `unit`s, e.g. `sdr corpus: embedding 4096/20000
/// sentences, 41 s, eta 159 s`: the first update after a second, then at most
/// one every [`LOG_EVERY_SECS`], and then the last count
/// ([`LogProgress::finish`]). Silent on a terminal (the bar is drawn there)
/// and with `--quiet`.
pub struct LogProgress {
    what: String,
    unit: &'static str,
    t0: Instant,
    state: Option<std::sync::Mutex<LogState>>,
}

#[derive(Default)]
struct LogState {
    /// Seconds since `t0` and count of the last line printed.
    printed: Option<(f64, usize)>,
    done: usize,
    total: Option<usize>,
}

/// Seconds between two [`LogProgress`] lines.
pub const LOG_EVERY_SECS: f64 = 10.0;

impl LogProgress {
    /// `what` starts each line (`sdr corpus: embedding`).
    pub fn new(what: &str, unit: &'static str, quiet: bool) -> Self {
        let log = !quiet && !std::io::stderr().is_terminal();
        LogProgress {
            what: what.to_string(),
            unit,
            t0: Instant::now(),
            state: log.then(|| std::sync::Mutex::new(LogState::default())),
        }
    }

    /// `done` of `total` (when known) units are done.
    pub fn update(&self, done: usize, total: Option<usize>) {
        let Some(state) = &self.state else { return };
        let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
        let secs = self.t0.elapsed().as_secs_f64();
        (s.done, s.total) = (done, total);
        // The first line after a second (a short run prints only its summary),
        // and none before anything is done.
        let due = s
            .printed
            .map_or(secs >= 1.0, |(last, _)| secs - last >= LOG_EVERY_SECS);
        if done > 0 && due {
            s.printed = Some((secs, done));
            self.line(done, total, secs);
        }
    }

    /// The last line, with the final count, when earlier ones were printed
    /// (a short run prints none) and it differs from the last.
    pub fn finish(&self) {
        let Some(state) = &self.state else { return };
        let s = state.lock().unwrap_or_else(|e| e.into_inner());
        if s.printed.is_some_and(|(_, n)| n != s.done) {
            self.line(s.done, s.total, self.t0.elapsed().as_secs_f64());
        }
    }

    fn line(&self, done: usize, total: Option<usize>, secs: f64) {
        let (what, unit) = (&self.what, self.unit);
        match total {
            Some(n) => {
                let eta = secs / done.max(1) as f64 * n.saturating_sub(done) as f64;
                log_line(format_args!(
                    "{what} {done}/{n} {unit}, {secs:.0} s, eta {eta:.0} s"
                ));
            }
            None => log_line(format_args!("{what} {done} {unit}, {secs:.0} s")),
        }
    }
}

/// The stderr line that reports unconverged distances (SPEC §3), if any.
pub fn convergence_warning(unconverged: usize, evaluated: usize) -> Option<String> {
    (unconverged > 0).then(|| {
        format!(
            "warning: {unconverged} of {evaluated} distances did not converge \
             (their solver's last iterate is written; SPEC §3)"
        )
    })
}

/// The stderr line that says `--agg knn:k=K` asks for more neighbours than the
/// corpus has reports with a section, if it does: the mean is then over all of
/// them, the same as `--agg avg`, which a user would not expect.
pub fn knn_warning(agg: &Aggregation, index: &CorpusIndex<'_>) -> Option<String> {
    let Aggregation::Knn { k } = agg else {
        return None;
    };
    let f = index.section(Section::Findings).n_reports;
    let i = index.section(Section::Impression).n_reports;
    (*k > f.min(i)).then(|| {
        format!(
            "warning: --agg {agg}: the corpus has {f} reports with findings and {i} with \
             impression; with fewer than K, knn is the mean over all of them, as --agg avg"
        )
    })
}

/// The stderr line that says `corpus` is one shard of a sharded build, if it
/// is: scores against it use only its share of the reports.
pub fn shard_warning(path: &std::path::Path, corpus: &sdr_corpus::Corpus) -> Option<String> {
    let s = corpus.shard()?;
    Some(format!(
        "warning: {} is shard {}/{} of a build of {} reports: scores use only its {} reports; \
         merge the shards first (sdr corpus merge)",
        path.display(),
        s.index,
        s.count,
        s.total,
        corpus.n_reports()
    ))
}

/// The stderr line that reports failed distances (scored NaN, never chosen), if any.
pub fn failure_warning(failed: usize, evaluated: usize) -> Option<String> {
    (failed > 0).then(|| {
        format!("warning: {failed} of {evaluated} distances failed (scored NaN, never chosen)")
    })
}

/// The metric specs for help texts, from the registry of distance families
/// (`metric_families!`): a new family appears with no edit here.
pub fn metric_forms() -> String {
    format!(
        "Metric specs (the defaults shown): {}. Omitted parameters take their defaults.",
        sdr_core::Metric::forms().join(", ")
    )
}

/// `--cost`: `cosine`, `clinical` or `clinical:lambda=L` (SPEC §10), or
/// any cost of the registry (`sdr_clinical::costs`), checked there.
pub fn parse_cost(spec: &str) -> Result<sdr_core::cost::CostKind, String> {
    sdr_clinical::parse_cost(spec).map_err(|e| e.to_string())
}

/// What a policy key starts with under `cost`, so that selections and
/// tables under another cost never share a key with the paper's: nothing
/// for the cosine cost (keys unchanged), `clinical/` for the clinical cost
/// at its default weights, the spec and `/` for any other
/// (`clinical:lambda=L,unmatched=U/`).
pub fn cost_prefix(cost: &sdr_core::cost::CostKind) -> String {
    use sdr_core::cost::CostKind;
    match *cost {
        CostKind::Cosine => String::new(),
        c if c == CostKind::clinical() => "clinical/".into(),
        CostKind::Clinical { .. } | CostKind::Named(_) => format!("{cost}/"),
    }
}

/// The sentence cost of `--cost`, from the registry (`None` for cosine).
pub fn sentence_cost(
    cost: &sdr_core::cost::CostKind,
) -> anyhow::Result<Option<std::sync::Arc<dyn sdr_core::SentenceCost>>> {
    sdr_clinical::open_cost(cost).map_err(|e| anyhow::anyhow!("--cost {cost}: {e}"))
}
