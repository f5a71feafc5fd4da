//! `sdr generate`: K candidate reports per study from a streaming back-end
//! (a local GGUF model or an OpenAI-compatible server), as JSON Lines that
//! `sdr select`, `sdr prune --replay` and `sdr eval` read.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, Result};
use sdr_gen::replay::GenRecord;
use sdr_gen::{
    study_seed, CandidateState, End, KeptError, LockStep, Resume, RunSettings, SamplingSettings,
    Setting,
};

use crate::common::{
    check_outputs, log_line, partial_path, progress_every, BackendArgs, Journal, Kept, Progress,
    Study, StudyArgs,
};
use crate::jsonl::parse_json;

#[derive(clap::Args)]
#[command(after_help = "Output line per study:\n  \
{\"id\": \"10\", \"backend\": \"local:...gguf\", \"prompt\": \"p2\", \"context\": \"Indication: ...\"|null,\n   \
\"seed\": 9000, \"sampling\": {\"k\": 8, \"temperature\": 0.7, \"top_p\": 0.95, \"max_tokens\": 256,\n   \
\"repetition_penalty\": 1.0, \"prefill\": null}, \"candidates\": [\"Findings: ...\", ...], \"tokens\": [87, ...],\n   \
\"finish\": [\"stop\", \"length\", ...], \"token_ends\": [[...], ...], \"sentence_tokens\": [[...], ...],\n   \
\"seconds\": 4.2}\n\
token_ends are byte offsets after each token (for `sdr prune --replay`); sentence_tokens are the\n\
tokens generated when each sentence was seen complete.\n\n\
Each study is written to FILE.partial as soon as it completes; FILE appears when the run ends,\n\
with the studies in input order (those a resumed run generated again included).\n\
A stopped run continues with the same command plus --resume.\n\n\
A candidate whose stream fails (breaks off, times out, sends malformed chunks or no finish_reason)\n\
is reported on stderr and its study is left out, not written with an empty or cut report; the\n\
run goes on, then exits non-zero with FILE.partial kept, and --resume generates the studies left\n\
out. A request the server refuses after the retries stops the run; so do 3 studies in a row whose\n\
every candidate failed.\n\n\
Examples:\n  \
sdr generate --limit 50 -k 8 --prompt p2 --context indication -o gen.jsonl\n  \
sdr generate --limit 50 -k 8 --prompt p2 --context indication -o gen.jsonl --resume\n  \
sdr generate --backend openai --base-url http://127.0.0.1:8080/v1 --api-model smollm2 --limit 5 -o gen.jsonl")]
pub struct Args {
    #[command(flatten)]
    pub studies: StudyArgs,
    #[command(flatten)]
    pub backend: BackendArgs,
    /// Write to this file instead of stdout (through FILE.partial, one study
    /// at a time, renamed to FILE at the end).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Continue a stopped run: keep the studies already in FILE.partial (or
    /// FILE) and generate the rest. The settings must be the same (checked
    /// per study: back-end, prompt, context, seed, K and the sampling options).
    #[arg(long)]
    pub resume: bool,
    /// When stderr is not a terminal (a log), print a progress line every N studies (N >= 1).
    #[arg(
        allow_negative_numbers = true,
        long,
        default_value_t = 10,
        value_name = "N",
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub progress_every: u64,
    /// No progress bar and no summary line on stderr.
    #[arg(long)]
    pub quiet: bool,
}

/// The studies a resumed run already has (their indices, in file order),
/// checked against this run's settings so that one file never mixes two
/// configurations.
fn already_done(
    kept: &[Kept],
    studies: &[Study],
    args: &Args,
    describe: &str,
    prompt: &str,
) -> Result<Vec<usize>> {
    let mut done = Vec::new();
    let mut resume = Resume::new(studies.iter().map(|s| s.id.as_str()));
    for k in kept {
        let rec: GenRecord = parse_json(&k.line).map_err(|e| anyhow!("{}: {e}", k.at))?;
        let mut was =
            RunSettings::generated(&rec.backend, &rec.prompt, rec.seed, rec.candidates.len());
        was.context = rec.context.clone();
        // A record from before 0.2.0 holds no sampling settings: only K is checked.
        let full = rec.sampling.is_some();
        if let Some(s) = &rec.sampling {
            was.sampling = s.clone();
        }
        let now = |index: usize| {
            let seed = study_seed(args.backend.seed, index);
            let mut now = RunSettings::generated(describe, prompt, seed, args.backend.k);
            now.context = studies[index].context.clone();
            if full {
                let b = &args.backend;
                now.sampling = SamplingSettings {
                    k: Some(b.k),
                    temperature: Some(b.temperature),
                    top_p: Some(b.top_p),
                    max_tokens: Some(b.max_tokens),
                    repetition_penalty: Some(b.repetition_penalty),
                    prefill: b.prefill.clone(),
                };
            }
            now
        };
        let index = resume.check(&rec.id, &was, now).map_err(|e| match e {
            KeptError::Differs { id, diff: d } => {
                // This command's messages name the prompt and K as they always have.
                let what = match d.setting {
                    Setting::Prompt => "prompt",
                    Setting::K => "K",
                    other => other.option(),
                };
                anyhow!(
                    "{}: study {id} was generated with {what} {}, this run has {}; \
                     resume with the same settings",
                    k.at,
                    d.was,
                    d.now
                )
            }
            other => anyhow!("{}: {other}", k.at),
        })?;
        // Written by a version that kept failed candidates as reports.
        if let Some((i, msg)) = failures(&rec.finish).into_iter().next() {
            return Err(anyhow!(
                "{}: study {} holds failed candidate {i} ({msg}); delete that line so that \
                 --resume generates the study again",
                k.at,
                rec.id
            ));
        }
        done.push(index);
    }
    Ok(done)
}

/// After this many studies in a row whose every candidate failed, the run
/// stops: the server is broken, and each further study would only wait out
/// its timeout.
const GIVE_UP_AFTER: usize = 3;

/// The candidates that ended in an error, with the error.
fn failures(finish: &[Option<End>]) -> Vec<(usize, &str)> {
    finish
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match e {
            Some(End::Error(m)) => Some((i, m.as_str())),
            _ => None,
        })
        .collect()
}

/// One stderr line per distinct error of a study's failed candidates,
/// printed above the progress bar.
fn report_failures(study: &str, states: &[CandidateState], pb: &Progress) -> usize {
    let ends: Vec<Option<End>> = states.iter().map(|s| s.end.clone()).collect();
    let failed = failures(&ends);
    let mut kinds: Vec<(&str, Vec<String>)> = Vec::new();
    for &(i, msg) in &failed {
        match kinds.iter_mut().find(|(m, _)| *m == msg) {
            Some((_, ids)) => ids.push(i.to_string()),
            None => kinds.push((msg, vec![i.to_string()])),
        }
    }
    for (msg, ids) in kinds {
        let s = if ids.len() == 1 { "" } else { "s" };
        pb.println(format_args!(
            "generate: study {study}: candidate{s} {} failed: {msg}",
            ids.join(", ")
        ));
    }
    failed.len()
}

pub fn run(args: Args) -> Result<()> {
    // Arguments and paths before any work, and before FILE.partial is made:
    // an argument error leaves nothing behind.
    args.backend.check()?;
    args.studies.check()?;
    let dest = args.output.as_deref().filter(|p| *p != Path::new("-"));
    if args.resume && dest.is_none() {
        return Err(anyhow!("--resume needs an output file (-o FILE)"));
    }
    let partial = dest.map(partial_path);
    check_outputs(
        &[("--output", dest), ("--output", partial.as_deref())],
        &[Some(&args.studies.studies), args.studies.prompt_file()],
    )?;
    let studies = args.studies.load()?;
    let template = args.studies.template();
    template.text()?;
    let mut backend = args.backend.load()?;
    let describe = backend.describe();
    // The index of each study in the output, in file order.
    let (mut out, mut order) = Journal::open(args.output.as_deref(), args.resume, |kept| {
        already_done(kept, &studies, &args, &describe, &template.name())
    })?;
    let done: HashSet<usize> = order.iter().copied().collect();
    if args.resume && !args.quiet {
        log_line(format_args!(
            "resume: {} of {} studies already generated",
            done.len(),
            studies.len()
        ));
    }
    let pb = progress_every(
        studies.len(),
        args.quiet,
        "generating",
        usize::try_from(args.progress_every).unwrap_or(usize::MAX),
    );
    pb.inc(done.len() as u64);
    let t0 = Instant::now();
    let mut total_tokens = 0usize;
    let mut generated = 0usize;
    let (mut failed, mut failed_studies, mut all_failed_in_a_row) = (0usize, 0usize, 0usize);
    for (si, study) in studies.iter().enumerate() {
        if done.contains(&si) {
            continue;
        }
        let req = args.backend.request(study, si, &template)?;
        let t = Instant::now();
        let batch = backend
            .start(&req)
            .map_err(|e| anyhow!("study {}: {e}", study.id))?;
        let mut run = LockStep::new(batch);
        let ids: Vec<usize> = (0..req.k).collect();
        let mut tokens = 0usize;
        run.decode_to_end(&ids, |_, _| {
            tokens += 1;
            if tokens.is_multiple_of(16) {
                let secs = t0.elapsed().as_secs_f64();
                pb.set_message(format!(
                    "{:.1} tok/s",
                    (total_tokens + tokens) as f64 / secs.max(1e-9)
                ));
            }
        })
        .map_err(|e| anyhow!("study {}: {e}", study.id))?;
        let states = run.into_states();
        total_tokens += states.iter().map(|s| s.tokens).sum::<usize>();
        // A failed candidate is not a report: the study stays out of the
        // output, so that --resume generates it again.
        let n_failed = report_failures(&study.id, &states, &pb);
        if n_failed > 0 {
            failed += n_failed;
            failed_studies += 1;
            all_failed_in_a_row = if n_failed == states.len() {
                all_failed_in_a_row + 1
            } else {
                0
            };
            pb.inc(1);
            if all_failed_in_a_row == GIVE_UP_AFTER {
                break;
            }
            continue;
        }
        all_failed_in_a_row = 0;
        let mut rec = GenRecord::new(
            study.id.clone(),
            study.context.clone(),
            describe.clone(),
            template.name(),
            req.seed,
            &states,
            t.elapsed().as_secs_f64(),
        );
        rec.sampling = Some(SamplingSettings::of(&req));
        out.append(&serde_json::to_string(&rec)?)?;
        order.push(si);
        generated += 1;
        pb.inc(1);
    }
    if failed == 0 {
        // As a run without failures would have written it.
        out.finish_in_order(&order)?;
    } else {
        // Kept as FILE.partial: FILE appears only for a complete run.
        drop(out);
    }
    pb.finish_and_clear();
    if !args.quiet {
        let secs = t0.elapsed().as_secs_f64();
        log_line(format_args!(
            "generate: {} studies x {} candidates, {} tokens in {:.1} s ({:.1} tokens/s) with {}",
            generated,
            args.backend.k,
            total_tokens,
            secs,
            total_tokens as f64 / secs,
            describe
        ));
    }
    if failed > 0 {
        let stopped = if all_failed_in_a_row == GIVE_UP_AFTER {
            format!("; stopped after {GIVE_UP_AFTER} studies in a row whose every candidate failed")
        } else {
            String::new()
        };
        let count =
            |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        let kept = match args.output.as_deref().filter(|p| *p != Path::new("-")) {
            Some(dest) => format!(
                "{} keeps {}: rerun with --resume to generate the rest",
                partial_path(dest).display(),
                count(done.len() + generated, "complete study", "complete studies")
            ),
            None => "their studies were not written".into(),
        };
        return Err(anyhow!(
            "{} failed in {} (named above){stopped}; {kept}",
            count(failed, "candidate", "candidates"),
            count(failed_studies, "study", "studies"),
        ));
    }
    Ok(())
}
