//! `sdr generate`: K candidate reports per study from a streaming back-end
//! (a local GGUF model or an OpenAI-compatible server), as JSON Lines that
//! `sdr select`, `sdr prune --replay` and `sdr eval` read.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{anyhow, Result};
use sdr_gen::LockStep;

use crate::common::{progress_bar, BackendArgs, GenRecord, StudyArgs};
use crate::jsonl::Output;

#[derive(clap::Args)]
#[command(after_help = "Output line per study:\n  \
{\"id\": \"10\", \"backend\": \"local:...gguf\", \"prompt\": \"p2\", \"context\": \"Indication: ...\"|null,\n   \
\"seed\": 9000, \"candidates\": [\"Findings: ...\", ...], \"tokens\": [87, ...],\n   \
\"finish\": [\"stop\", \"length\", ...], \"token_ends\": [[...], ...], \"sentence_tokens\": [[...], ...],\n   \
\"seconds\": 4.2}\n\
token_ends are byte offsets after each token (for `sdr prune --replay`); sentence_tokens are the\n\
tokens generated when each sentence was seen complete.\n\n\
Examples:\n  \
sdr generate --limit 50 -k 8 --prompt p2 --context indication -o gen.jsonl\n  \
sdr generate --backend openai --base-url http://127.0.0.1:8080/v1 --api-model smollm2 --limit 5 -o gen.jsonl")]
pub struct Args {
    #[command(flatten)]
    pub studies: StudyArgs,
    #[command(flatten)]
    pub backend: BackendArgs,
    /// Write to this file (atomically) instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// No progress bar and no summary line on stderr.
    #[arg(long)]
    pub quiet: bool,
}

pub fn run(args: Args) -> Result<()> {
    let studies = args.studies.load()?;
    let template = args.studies.template();
    template.text()?;
    let mut backend = args.backend.load()?;
    let describe = backend.describe();
    let mut out = Output::create(args.output.as_deref())?;
    let pb = progress_bar(studies.len(), args.quiet, "generating");
    let t0 = Instant::now();
    let mut total_tokens = 0usize;
    for (si, study) in studies.iter().enumerate() {
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
        let rec = GenRecord::new(
            study,
            describe.clone(),
            template.name(),
            req.seed,
            &states,
            t.elapsed().as_secs_f64(),
        );
        serde_json::to_writer(out.writer(), &rec)?;
        out.writer().write_all(b"\n")?;
        pb.inc(1);
    }
    out.finish()?;
    pb.finish_and_clear();
    if !args.quiet {
        let secs = t0.elapsed().as_secs_f64();
        eprintln!(
            "generate: {} studies x {} candidates, {} tokens in {:.1} s ({:.1} tokens/s) with {}",
            studies.len(),
            args.backend.k,
            total_tokens,
            secs,
            total_tokens as f64 / secs,
            describe
        );
    }
    Ok(())
}
