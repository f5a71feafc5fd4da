//! `sdr distances`: set-to-set distances for JSON Lines of vector-set pairs.

use std::path::PathBuf;

use anyhow::{anyhow, Result};
use rayon::prelude::*;
use sdr_core::distance::{evaluate_all, evaluate_pairs, Evaluation};
use sdr_core::{EmbeddingSet, Metric, Side};
use serde::Deserialize;

use crate::common::{check_outputs, convergence_warning, log_line, or_stdin};
use crate::jsonl::{parse_json, Input, Output};

#[derive(clap::Args)]
#[command(
    after_help = format!("Input line:  {{\"a\": [[0.1, 0.2], [0.3, 0.1]], \"b\": [[0.2, 0.2]]}}\n\
Output line: {{\"chamfer\": 0.0123, \"hausdorff\": 0.02, ...}}, one key per --metric, plus\n\
\"unconverged\": [SPEC, ...] on a line where a solver stopped at its budget before its\n\
stopping rule (its last iterate is written; SPEC §3); stderr counts them at the end.\n\n\
{}", crate::common::metric_forms())
)]
pub struct Args {
    /// JSON Lines file with one {"a": [[...]], "b": [[...]]} object per line; `-` or absent reads stdin.
    pub input: Option<PathBuf>,
    /// Metric spec to compute; repeat for several. Default: all fifteen of SPEC §3.
    #[arg(long = "metric", short = 'm', value_name = "SPEC")]
    pub metrics: Vec<String>,
    /// Write to this file (atomically) instead of stdout.
    #[arg(long, short = 'o')]
    pub output: Option<PathBuf>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Pair {
    a: Vec<Vec<f64>>,
    b: Vec<Vec<f64>>,
}

/// Lines processed in parallel at a time; results are written in input order.
const CHUNK: usize = 1024;

pub fn run(args: Args) -> Result<()> {
    let metrics: Vec<Metric> = if args.metrics.is_empty() {
        Metric::all()
    } else {
        args.metrics
            .iter()
            .map(|s| {
                s.parse::<Metric>()
                    .map_err(|e| anyhow!("--metric {s}: {e}"))
            })
            .collect::<Result<_>>()?
    };
    // One key per metric: two specs of one configuration (`sinkhorn` and
    // `sinkhorn:eps=0.1`) would write the same key twice.
    for (i, m) in metrics.iter().enumerate() {
        if let Some(j) = metrics[..i].iter().position(|x| x == m) {
            return Err(anyhow!(
                "--metric {} and --metric {} are the same configuration ({m}): give it once",
                args.metrics[j],
                args.metrics[i]
            ));
        }
    }
    let keys: Vec<String> = metrics
        .iter()
        .map(|m| serde_json::to_string(&m.to_string()).expect("string serialises"))
        .collect();
    check_outputs(
        &[("--output", args.output.as_deref())],
        &[or_stdin(args.input.as_deref())],
    )?;
    let mut input = Input::open(args.input.as_deref())?;
    let mut output = Output::create(args.output.as_deref())?;
    let mut line_no = 0;
    let (mut evaluated, mut unconverged) = (0usize, 0usize);
    loop {
        let chunk = input.next_chunk(CHUNK, &mut line_no)?;
        if chunk.is_empty() {
            break;
        }
        let parsed: Vec<Result<(EmbeddingSet, EmbeddingSet)>> =
            chunk.par_iter().map(|(_, text)| parse_line(text)).collect();
        // Lines before a bad one are kept: the error stops the run there.
        let good = parsed.iter().take_while(|p| p.is_ok()).count();
        let sets: Vec<_> = parsed[..good]
            .iter()
            .map(|p| p.as_ref().expect("counted as parsed"))
            .collect();
        let views: Vec<_> = sets.iter().map(|(a, b)| (a.view(), b.view())).collect();
        // One batch: each pair's products bring the next pair's rows into cache.
        let results = evaluate_pairs(&metrics, &views);
        let w = output.writer();
        let name = |k: usize| format!("{}:{}", input.name, chunk[k].0);
        for (k, r) in results.into_iter().enumerate() {
            let values = r.map_err(|e| anyhow!("{}: {e}", name(k)))?;
            evaluated += values.len();
            unconverged += values.iter().filter(|e| !e.converged).count();
            let line = format_object(&keys, &values).map_err(|e| anyhow!("{}: {e}", name(k)))?;
            w.write_all(line.as_bytes())?;
        }
        if let Some(Err(e)) = parsed.into_iter().nth(good) {
            return Err(anyhow!("{}: {e}", name(good)));
        }
    }
    output.finish()?;
    if let Some(line) = convergence_warning(unconverged, evaluated) {
        log_line(line);
    }
    Ok(())
}

/// Parse one input line and compute `metrics`; the error names the fault
/// (the caller adds the input name and line number).
pub fn compute_line(text: &str, metrics: &[Metric]) -> Result<Vec<Evaluation>> {
    let (a, b) = parse_line(text)?;
    Ok(evaluate_all(metrics, &a.view(), &b.view())?)
}

/// One input line as two validated sets of the same dimension.
fn parse_line(text: &str) -> Result<(EmbeddingSet, EmbeddingSet)> {
    let pair: Pair = parse_json(text)?;
    let a = EmbeddingSet::from_rows(&pair.a, Side::A)?;
    let b = EmbeddingSet::from_rows(&pair.b, Side::B)?;
    if a.dim() != b.dim() {
        return Err(anyhow!(
            "sets have different dimensions: a is {}-d, b is {}-d",
            a.dim(),
            b.dim()
        ));
    }
    Ok((a, b))
}

/// One output line: every metric's value, and the metrics whose solver did
/// not converge. Nothing is written for a line with a non-finite value.
fn format_object(keys: &[String], values: &[Evaluation]) -> Result<String> {
    let mut line = String::from("{");
    let mut late = Vec::new();
    for (i, (k, v)) in keys.iter().zip(values).enumerate() {
        let number = serde_json::Number::from_f64(v.value)
            .ok_or_else(|| anyhow!("metric {k} gave a non-finite value {}", v.value))?;
        if i > 0 {
            line.push_str(", ");
        }
        line.push_str(&format!("{k}: {number}"));
        if !v.converged {
            late.push(k.as_str());
        }
    }
    if !late.is_empty() {
        line.push_str(&format!(", \"unconverged\": [{}]", late.join(", ")));
    }
    line.push_str("}\n");
    Ok(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_gives_every_metric_with_its_convergence() {
        let line = r#"{"a": [[1, 0], [0.6, 0.8]], "b": [[1, 1], [0.5, -1], [0, 1]]}"#;
        let out = compute_line(line, &Metric::all()).unwrap();
        assert_eq!(out.len(), 15);
        assert!(out.iter().all(|e| e.converged && e.value.is_finite()));
        let keys = vec!["\"chamfer\"".to_string(), "\"ot\"".to_string()];
        let text = format_object(&keys, &out[..2]).unwrap();
        assert!(
            text.starts_with("{\"chamfer\": 0.") && text.ends_with("}\n"),
            "{text}"
        );
        assert!(!text.contains("unconverged"), "{text}");
        // A solver stopped at its budget is named on its line.
        let mut late = out[..2].to_vec();
        late[1].converged = false;
        let text = format_object(&keys, &late).unwrap();
        assert!(text.ends_with(", \"unconverged\": [\"ot\"]}\n"), "{text}");
        // A non-finite value writes nothing and names the metric.
        late[0].value = f64::INFINITY;
        let e = format_object(&keys, &late).unwrap_err().to_string();
        assert_eq!(e, "metric \"chamfer\" gave a non-finite value inf");
    }

    #[test]
    fn bad_lines_name_their_fault() {
        let e = |l: &str| compute_line(l, &[Metric::Chamfer]).unwrap_err().to_string();
        assert!(e(r#"{"a": [[1, 0]], "b": [[1, 0, 0]]}"#).contains("different dimensions"));
        assert!(e(r#"{"a": [[0, 0]], "b": [[1, 0]]}"#).contains("zero vector"));
        assert!(e(r#"{"a": [], "b": [[1, 0]]}"#).contains("empty"));
    }

    #[test]
    fn warning_only_when_something_did_not_converge() {
        assert_eq!(convergence_warning(0, 30), None);
        let w = convergence_warning(2, 30).unwrap();
        assert!(
            w.starts_with("warning: 2 of 30 distances did not converge"),
            "{w}"
        );
    }
}
