//! The argument groups and record that `generate` and `prune` share: where
//! the studies come from, the back-end and its sampling settings, and the
//! JSON Lines record of one study's candidates.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Result};
use sdr_corpus::{CsvTable, Split};
use sdr_gen::replay::ReplayRecord;
use sdr_gen::{Backend, Image, PromptTemplate, Request};
use serde::Deserialize;

use crate::jsonl::{id_text, parse_json};

/// `--studies` when not given: relative to the current folder.
pub const DEFAULT_STUDIES: &str = "data/iu-xray/indiana_reports.csv";

/// The most candidates per study `-k` takes.
pub const MAX_K: usize = 1024;

/// Where the studies come from and how each prompt is made.
#[derive(clap::Args, Debug, Clone)]
pub struct StudyArgs {
    /// Studies: an IU X-ray style CSV (uid, indication, findings, impression
    /// columns) or JSON Lines with {"id", "context"?, "images"?: [paths]} per line.
    #[arg(long, default_value = DEFAULT_STUDIES, value_name = "FILE")]
    pub studies: PathBuf,
    /// CSV only: keep this split (test: uid % 10 == 0, validation: 1, train: the rest, all).
    #[arg(long, default_value = "test", value_name = "SPLIT")]
    pub split: String,
    /// Keep the first N studies (after the split, in file order); CSV rows
    /// without both reference sections are skipped.
    #[arg(allow_negative_numbers = true, long, value_name = "N")]
    pub limit: Option<usize>,
    /// Prompt: p1 (the paper's zero-shot prompt), p2 (five-shot), or a prompt file.
    #[arg(long, default_value = "p2", value_name = "P")]
    pub prompt: String,
    /// Study context added before the prompt's final `Output:` line. A
    /// text-only model sees no image, so `indication` gives it the study's
    /// clinical indication (CSV column); `none` sends the prompt verbatim.
    #[arg(long, default_value = "none", value_name = "WHAT")]
    pub context: String,
}

/// The back-end and its sampling settings.
#[derive(clap::Args, Debug, Clone)]
pub struct BackendArgs {
    /// `local` (a GGUF llama-family or Gemma 3 model in-process, K candidates
    /// as one batch) or `openai` (an OpenAI-compatible chat-completions server: vLLM,
    /// llama.cpp, OpenAI, Gemini, Mistral).
    #[arg(long, default_value = "local", value_name = "NAME")]
    pub backend: String,
    /// local: the GGUF file (default: $SDR_GGUF, then the SmolLM2-135M-Instruct
    /// file that scripts/fetch-smollm2.sh puts in ~/.cache/sdr/models;
    /// scripts/fetch-gemma3.sh fetches Gemma 3 270M and prints its path).
    #[arg(long, value_name = "FILE")]
    pub gguf: Option<PathBuf>,
    /// openai: the API base URL (default: $OPENAI_BASE_URL, then http://127.0.0.1:8080/v1).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// openai: the model name sent to the server.
    #[arg(long, default_value = "default", value_name = "NAME")]
    pub api_model: String,
    /// openai: the environment variable holding the API key (sent as a bearer token; never printed).
    #[arg(long, default_value = "OPENAI_API_KEY", value_name = "VAR")]
    pub api_key_env: String,
    /// openai: seconds without a response or a streamed chunk before a candidate fails.
    #[arg(
        allow_negative_numbers = true,
        long,
        default_value_t = 60.0,
        value_name = "SECS"
    )]
    pub timeout: f64,
    /// openai: retries on connection errors, 429 and 5xx, with exponential backoff.
    #[arg(
        allow_negative_numbers = true,
        long,
        default_value_t = 4,
        value_name = "N"
    )]
    pub retries: u32,
    /// Candidates per study (1 to 1024).
    #[arg(
        allow_negative_numbers = true,
        long,
        short = 'k',
        default_value_t = 8,
        value_name = "K"
    )]
    pub k: usize,
    /// Sampling temperature (0 = greedy).
    #[arg(
        allow_negative_numbers = true,
        long,
        default_value_t = 0.7,
        value_name = "T"
    )]
    pub temperature: f64,
    /// Nucleus sampling mass (1 = off).
    #[arg(
        allow_negative_numbers = true,
        long,
        default_value_t = 0.95,
        value_name = "P"
    )]
    pub top_p: f64,
    /// Tokens per candidate at most.
    #[arg(
        allow_negative_numbers = true,
        long,
        default_value_t = 256,
        value_name = "N"
    )]
    pub max_tokens: usize,
    /// Base seed: candidate i of study s samples with seed + 1000 * s + i, so
    /// a candidate does not depend on K, on pruning or on the other studies.
    #[arg(
        allow_negative_numbers = true,
        long,
        default_value_t = 0,
        value_name = "SEED"
    )]
    pub seed: u64,
    /// Repetition penalty (1 = off; 1.1-1.3 curbs the loops small models fall
    /// into): the local sampler divides the logits of the candidate's last 64
    /// tokens; openai sends it as `repetition_penalty` and `repeat_penalty`
    /// (vLLM, llama.cpp), which the OpenAI service itself does not accept.
    #[arg(
        allow_negative_numbers = true,
        long,
        default_value_t = 1.0,
        value_name = "R"
    )]
    pub repetition_penalty: f64,
    /// local: start every answer with this text, e.g. "Findings:" (kept at
    /// the start of each candidate, not counted as generated tokens).
    #[arg(long, value_name = "TEXT")]
    pub prefill: Option<String>,
}

/// One study to generate for.
#[derive(Debug, Clone)]
pub struct Study {
    pub id: String,
    pub context: Option<String>,
    pub images: Vec<PathBuf>,
}

#[derive(Deserialize)]
struct StudyLine {
    id: serde_json::Value,
    #[serde(default)]
    context: Option<String>,
    #[serde(default)]
    images: Vec<PathBuf>,
}

impl StudyArgs {
    pub fn template(&self) -> PromptTemplate {
        PromptTemplate::parse(&self.prompt)
    }

    /// Refuses, before any work, `--studies` that is not there (naming the
    /// default when it is the default) and a `--context` that is neither value.
    pub fn check(&self) -> Result<()> {
        if !matches!(self.context.as_str(), "none" | "indication") {
            return Err(anyhow!(
                "--context {}: expected indication or none",
                self.context
            ));
        }
        crate::common::check_input("--studies", &self.studies, DEFAULT_STUDIES)
    }

    /// The prompt file, when `--prompt` names one rather than p1 or p2: an
    /// input that no output may replace.
    pub fn prompt_file(&self) -> Option<&Path> {
        matches!(self.template(), PromptTemplate::File(_)).then_some(Path::new(&self.prompt))
    }

    /// The studies, in file order.
    pub fn load(&self) -> Result<Vec<Study>> {
        let with_context = match self.context.as_str() {
            "none" => false,
            "indication" => true,
            other => return Err(anyhow!("--context {other}: expected indication or none")),
        };
        let name = self.studies.display().to_string();
        let is_csv = self
            .studies
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("csv"));
        let mut out = Vec::new();
        if is_csv {
            let split: Split = self
                .split
                .parse()
                .map_err(|e| anyhow!("--split {}: {e}", self.split))?;
            let t = CsvTable::read(&self.studies)?;
            let (uid, ind, fi, im) = (
                t.column("uid")?,
                t.column("indication")?,
                t.column("findings")?,
                t.column("impression")?,
            );
            for row in 0..t.len() {
                let id = t.field(row, uid).to_string();
                let n: u64 = id
                    .parse()
                    .map_err(|_| anyhow!("{name}: row {}: uid {id:?} is not a number", row + 2))?;
                let has_both = !t.field(row, fi).is_empty() && !t.field(row, im).is_empty();
                if !split.contains(n) || !has_both {
                    continue;
                }
                let context = with_context
                    .then(|| t.field(row, ind))
                    .filter(|s| !s.is_empty())
                    .map(|s| format!("Indication: {s}"));
                out.push(Study {
                    id,
                    context,
                    images: Vec::new(),
                });
            }
        } else {
            let text = crate::jsonl::read_text(&self.studies)?;
            for (no, line) in text.lines().enumerate() {
                if line.trim().is_empty() {
                    continue;
                }
                let l: StudyLine =
                    parse_json(line).map_err(|e| anyhow!("{name}:{}: {e}", no + 1))?;
                if !(l.id.is_string() || l.id.is_number()) {
                    return Err(anyhow!(
                        "{name}:{}: \"id\" must be a string or a number, got {}",
                        no + 1,
                        l.id
                    ));
                }
                out.push(Study {
                    id: id_text(&l.id),
                    context: if with_context { l.context } else { None },
                    images: l.images,
                });
            }
        }
        // A repeated study would be generated twice, and every later step
        // (`select`, `eval`) refuses the file then.
        let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::new();
        if let Some(again) = out.iter().find(|s| !seen.insert(s.id.as_str())) {
            return Err(anyhow!("{name}: study {} occurs more than once", again.id));
        }
        if let Some(n) = self.limit {
            out.truncate(n);
        }
        if out.is_empty() {
            return Err(anyhow!("{name}: no studies selected"));
        }
        Ok(out)
    }
}

/// The default local model file.
/// The first candidate of a candidates line that failed in generation
/// ([`ReplayRecord::failed`]: its `finish` entry is an error, `{"error": "..."}`,
/// a request that failed after its retries) as the error of study `id` at `at`
/// (`file:line`). Files written before `sdr generate` left such studies out hold
/// them as cut or empty texts, which no command may score as reports.
pub fn refuse_failed(at: &str, id: &str, record: &ReplayRecord) -> Result<()> {
    match record.failed() {
        Some((k, e)) => Err(anyhow!(
            "{at}: study {id}: candidate {k} failed in generation ({e}); regenerate the study (`sdr generate --resume` redoes failed studies) or drop it"
        )),
        None => Ok(()),
    }
}

pub fn default_gguf() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("SDR_GGUF") {
        return Some(PathBuf::from(p));
    }
    let base = std::env::var_os("SDR_MODELS")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/sdr/models")))?;
    Some(base.join("smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"))
}

impl BackendArgs {
    /// Refuses, before any work (and before `sdr generate` makes FILE.partial),
    /// settings that no request may have, each naming its option. The request of
    /// every study is validated again by [`BackendArgs::request`].
    pub fn check(&self) -> Result<()> {
        let bad = |flag: &str, value: &dyn std::fmt::Display, rule: &str| {
            Err(anyhow!("{flag} {value}: {rule}"))
        };
        if !matches!(self.backend.as_str(), "local" | "openai") {
            return Err(anyhow!(
                "--backend {}: expected local or openai",
                self.backend
            ));
        }
        // Each back-end's own option, given to the other, would be ignored.
        match (self.backend.as_str(), &self.gguf, &self.base_url) {
            ("openai", Some(g), _) => {
                return Err(anyhow!(
                    "--gguf {}: only with --backend local (the openai back-end runs the server's model)",
                    g.display()
                ))
            }
            ("local", _, Some(u)) => {
                return Err(anyhow!("--base-url {u}: only with --backend openai"))
            }
            _ => {}
        }
        if self.k == 0 {
            return bad("-k", &self.k, "must be at least 1");
        }
        if self.k > MAX_K {
            // Each candidate holds a decoding row or a stream: a K in the millions
            // ran out of memory before the first token.
            return bad(
                "-k",
                &self.k,
                &format!("at most {MAX_K} candidates per study"),
            );
        }
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return bad(
                "--temperature",
                &self.temperature,
                "must be finite and >= 0 (0 = greedy)",
            );
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return bad("--top-p", &self.top_p, "must be in (0, 1] (1 = off)");
        }
        if !(self.repetition_penalty.is_finite() && self.repetition_penalty > 0.0) {
            return bad(
                "--repetition-penalty",
                &self.repetition_penalty,
                "must be finite and > 0 (1 = off)",
            );
        }
        if self.max_tokens == 0 {
            return bad("--max-tokens", &self.max_tokens, "must be at least 1");
        }
        if self.prefill.as_deref().is_some_and(|p| p.trim().is_empty()) {
            return Err(anyhow!("--prefill: the text is empty"));
        }
        if self.backend == "openai" && !(self.timeout.is_finite() && self.timeout > 0.0) {
            return bad(
                "--timeout",
                &self.timeout,
                "must be a positive number of seconds",
            );
        }
        Ok(())
    }

    /// Loads the model or configures the client.
    pub fn load(&self) -> Result<Box<dyn Backend>> {
        match self.backend.as_str() {
            "local" => {
                let path = self.gguf.clone().or_else(default_gguf).ok_or_else(|| {
                    anyhow!("--gguf FILE is required (no HOME to find the default)")
                })?;
                if !path.exists() {
                    return Err(anyhow!(
                        "{}: no such GGUF file (run scripts/fetch-smollm2.sh, or pass --gguf FILE)",
                        path.display()
                    ));
                }
                local_backend(&path)
            }
            "openai" => {
                if !(self.timeout.is_finite() && self.timeout > 0.0) {
                    return Err(anyhow!("--timeout must be a positive number of seconds"));
                }
                let base_url = self
                    .base_url
                    .clone()
                    .or_else(|| std::env::var("OPENAI_BASE_URL").ok())
                    .unwrap_or_else(|| "http://127.0.0.1:8080/v1".into());
                self.openai_backend(&base_url)
            }
            other => Err(anyhow!("--backend {other}: expected local or openai")),
        }
    }

    #[cfg(feature = "openai")]
    fn openai_backend(&self, base_url: &str) -> Result<Box<dyn Backend>> {
        let mut cfg = sdr_gen::openai::OpenAiConfig::new(base_url, &self.api_model);
        cfg.api_key_env = self.api_key_env.clone();
        cfg.idle_timeout = std::time::Duration::from_secs_f64(self.timeout);
        cfg.max_retries = self.retries;
        Ok(Box::new(sdr_gen::openai::OpenAiBackend::new(cfg)?))
    }

    #[cfg(not(feature = "openai"))]
    fn openai_backend(&self, _base_url: &str) -> Result<Box<dyn Backend>> {
        Err(anyhow!(
            "--backend openai: this sdr was built without the `openai` feature \
             (cargo build -p sdr-cli --features openai)"
        ))
    }

    /// The request for study number `index`.
    pub fn request(
        &self,
        study: &Study,
        index: usize,
        template: &PromptTemplate,
    ) -> Result<Request> {
        let images = study
            .images
            .iter()
            .map(|p| Image::from_file(p))
            .collect::<Result<Vec<_>, _>>()?;
        let prompt = template.render(study.context.as_deref(), images)?;
        let req = Request {
            prompt,
            k: self.k,
            temperature: self.temperature,
            top_p: self.top_p,
            max_tokens: self.max_tokens,
            seed: sdr_gen::study_seed(self.seed, index),
            repetition_penalty: self.repetition_penalty,
            prefill: self.prefill.clone(),
        };
        req.validate().map_err(|e| anyhow!("{e}"))?;
        Ok(req)
    }
}

/// The in-process GGUF back-end (feature `local`).
#[cfg(feature = "local")]
fn local_backend(path: &std::path::Path) -> Result<Box<dyn Backend>> {
    Ok(Box::new(sdr_gen::local::LocalBackend::load(path)?))
}

#[cfg(not(feature = "local"))]
fn local_backend(_path: &std::path::Path) -> Result<Box<dyn Backend>> {
    Err(anyhow!(
        "--backend local: this sdr was built without the `local` feature \
         (cargo build -p sdr-cli --features local)"
    ))
}
