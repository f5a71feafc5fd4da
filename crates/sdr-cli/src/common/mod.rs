//! What several commands share, so that command files never import each
//! other: argument groups, progress bars and warning lines.

mod encoder;
mod generation;

use indicatif::{ProgressBar, ProgressStyle};

pub use encoder::EncoderArgs;
pub use generation::{default_gguf, BackendArgs, GenRecord, Study, StudyArgs};

/// A progress bar over `n` studies, hidden with `quiet`.
pub fn progress_bar(n: usize, quiet: bool, what: &str) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(n as u64);
    pb.set_style(
        ProgressStyle::with_template(&format!(
            "{what} {{bar:30}} {{pos}}/{{len}} studies {{msg}} [{{elapsed_precise}}<{{eta_precise}}]"
        ))
        .expect("static template"),
    );
    pb
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

/// The stderr line that reports failed distances (scored NaN, never chosen), if any.
pub fn failure_warning(failed: usize, evaluated: usize) -> Option<String> {
    (failed > 0).then(|| {
        format!("warning: {failed} of {evaluated} distances failed (scored NaN, never chosen)")
    })
}
