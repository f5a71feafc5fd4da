//! The judge (SPEC §8a) against IU X-ray's human coding on the held-out test studies, beside
//! the rule labeler on the same studies, and on the faithfulness benchmark's reversed findings.
//! Writes `docs/results/judge/accuracy.json` (every figure of `docs/results/judge.md`) and
//! prints the tables.
//!
//! ```sh
//! cargo run --release -p sdr-eval --features embed --example judge_validate
//! ```
//!
//! Reads `data/judge/iu_human_labels.jsonl` (the human positives and each section's
//! sentences, `cargo run --release -p sdr-clinical --example iu_labels`) and
//! `bench/faithfulness/cases.jsonl`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use sdr_clinical::{Labeler, Labels, Observation};
use sdr_eval::bootstrap::{resample_indices, RESAMPLES, SEED};
use sdr_eval::judge::Judge;
use serde_json::{json, Value};

/// Observations with at least this many positive test studies enter the macro average.
const MIN_TEST_POSITIVES: usize = 10;

fn root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .ancestors()
        .nth(2)
        .unwrap_or(manifest)
        .to_path_buf()
}

/// The studies that have a section, and the judge's and the rules' labels of it alone.
type SectionView = (Vec<usize>, Vec<Labels>, Vec<Labels>);

struct Study {
    uid: u64,
    human: Labels,
    findings: Vec<String>,
    impression: Vec<String>,
}

fn read_studies(path: &Path, split: &str) -> Result<Vec<Study>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let v: Value =
            serde_json::from_str(line).map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))?;
        if v["split"] != split || v["human"].is_null() {
            continue;
        }
        let mut human = Labels::default();
        for name in v["human"].as_array().into_iter().flatten() {
            let name = name.as_str().unwrap_or_default();
            let o = Observation::from_name(name).ok_or_else(|| {
                format!("{}:{}: unknown observation {name:?}", path.display(), i + 1)
            })?;
            human[o] = Some(sdr_clinical::Label::Positive);
        }
        let list = |k: &str| -> Vec<String> {
            v[k].as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        };
        let (findings, impression) = (list("findings"), list("impression"));
        if findings.is_empty() && impression.is_empty() {
            continue;
        }
        out.push(Study {
            uid: v["uid"].as_u64().unwrap_or_default(),
            human,
            findings,
            impression,
        });
    }
    Ok(out)
}

fn text(findings: &[String], impression: &[String]) -> String {
    format!(
        "FINDINGS: {}\nIMPRESSION: {}",
        findings.join(" "),
        impression.join(" ")
    )
}

/// Per-observation (tp, fp, fn) of `pred` against `gold` over the studies in `idx`.
fn counts(
    pred: &[Labels],
    gold: &[Labels],
    idx: &[usize],
    o: Observation,
    u: bool,
) -> (usize, usize, usize) {
    let (mut tp, mut fp, mut fn_) = (0, 0, 0);
    for &i in idx {
        match (pred[i].is_positive(o, u), gold[i].is_positive(o, false)) {
            (true, true) => tp += 1,
            (true, false) => fp += 1,
            (false, true) => fn_ += 1,
            _ => {}
        }
    }
    (tp, fp, fn_)
}

fn f1((tp, fp, fn_): (usize, usize, usize)) -> f64 {
    if tp == 0 {
        0.0
    } else {
        2.0 * tp as f64 / (2 * tp + fp + fn_) as f64
    }
}

fn macro_f1(pred: &[Labels], gold: &[Labels], idx: &[usize], obs: &[Observation], u: bool) -> f64 {
    obs.iter()
        .map(|&o| f1(counts(pred, gold, idx, o, u)))
        .sum::<f64>()
        / obs.len() as f64
}

/// Cohen's kappa of two labelers' present/absent decisions on one observation.
fn kappa(a: &[Labels], b: &[Labels], o: Observation, u: bool) -> (f64, f64) {
    let n = a.len() as f64;
    let (mut agree, mut pa, mut pb) = (0.0, 0.0, 0.0);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (x.is_positive(o, false), y.is_positive(o, u));
        agree += f64::from(u8::from(x == y));
        pa += f64::from(u8::from(x));
        pb += f64::from(u8::from(y));
    }
    let po = agree / n;
    let pe = (pa / n) * (pb / n) + (1.0 - pa / n) * (1.0 - pb / n);
    let k = if (1.0 - pe).abs() < 1e-12 {
        1.0
    } else {
        (po - pe) / (1.0 - pe)
    };
    (po, k)
}

fn run() -> Result<(), String> {
    let root = root();
    let studies = read_studies(&root.join("data/judge/iu_human_labels.jsonl"), "test")?;
    let judge = Judge::load(None, None).map_err(|e| e.to_string())?;
    let rules = Labeler::default();
    let whole: Vec<String> = studies
        .iter()
        .map(|s| text(&s.findings, &s.impression))
        .collect();
    fn refs(v: &[String]) -> Vec<&str> {
        v.iter().map(String::as_str).collect()
    }
    let gold: Vec<Labels> = studies.iter().map(|s| s.human).collect();
    let j_whole = judge.label_many(&refs(&whole)).map_err(|e| e.to_string())?;
    let r_whole: Vec<Labels> = whole.iter().map(|t| rules.label(t)).collect();
    // Sections alone: only studies that have the section.
    let section = |pick: fn(&Study) -> &Vec<String>, header: &str| -> Result<SectionView, String> {
        let idx: Vec<usize> = (0..studies.len())
            .filter(|&i| !pick(&studies[i]).is_empty())
            .collect();
        let texts: Vec<String> = idx
            .iter()
            .map(|&i| format!("{header}: {}", pick(&studies[i]).join(" ")))
            .collect();
        let j = judge.label_many(&refs(&texts)).map_err(|e| e.to_string())?;
        let r = texts.iter().map(|t| rules.label(t)).collect();
        Ok((idx, j, r))
    };
    let (f_idx, j_f, r_f) = section(|s| &s.findings, "FINDINGS")?;
    let (i_idx, j_i, r_i) = section(|s| &s.impression, "IMPRESSION")?;

    let all: Vec<usize> = (0..studies.len()).collect();
    let support: BTreeMap<&str, usize> = Observation::ALL
        .iter()
        .map(|&o| {
            (
                o.name(),
                gold.iter().filter(|g| g.is_positive(o, false)).count(),
            )
        })
        .collect();
    let kept: Vec<Observation> = Observation::ALL
        .into_iter()
        .filter(|o| support[o.name()] >= MIN_TEST_POSITIVES)
        .collect();
    let mut per = Vec::new();
    for o in Observation::ALL {
        let row = |pred: &[Labels], u: bool| {
            let c = counts(pred, &gold, &all, o, u);
            json!({"tp": c.0, "fp": c.1, "fn": c.2, "f1": f1(c)})
        };
        let (agree, k) = kappa(&j_whole, &r_whole, o, true);
        per.push(json!({
            "observation": o.name(),
            "support": support[o.name()],
            "in_macro": support[o.name()] >= MIN_TEST_POSITIVES,
            "judge": row(&j_whole, false),
            "rules_uncertain_present": row(&r_whole, true),
            "rules_uncertain_absent": row(&r_whole, false),
            "agreement": agree,
            "kappa": k,
        }));
    }
    // Paired bootstrap over studies of the macro F1 difference, judge minus rules (tables' convention).
    let draws = resample_indices(all.len(), RESAMPLES, SEED);
    let mut diffs: Vec<f64> = draws
        .iter()
        .map(|idx| {
            macro_f1(&j_whole, &gold, idx, &kept, false)
                - macro_f1(&r_whole, &gold, idx, &kept, true)
        })
        .collect();
    diffs.sort_by(f64::total_cmp);
    let pct = |q: f64| {
        let pos = q * (diffs.len() - 1) as f64;
        let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
        diffs[lo] + (diffs[hi] - diffs[lo]) * (pos - lo as f64)
    };
    // `j` and `r` label the studies listed in `idx`, in that order.
    let view = |idx: &[usize], j: &[Labels], r: &[Labels]| {
        let g: Vec<Labels> = idx.iter().map(|&i| gold[i]).collect();
        let local: Vec<usize> = (0..idx.len()).collect();
        json!({
            "studies": idx.len(),
            "judge_macro": macro_f1(j, &g, &local, &kept, false),
            "rules_macro_uncertain_present": macro_f1(r, &g, &local, &kept, true),
            "rules_macro_uncertain_absent": macro_f1(r, &g, &local, &kept, false),
        })
    };

    // Reversed findings of the faithfulness benchmark.
    let cases_path = root.join("bench/faithfulness/cases.jsonl");
    let cases = std::fs::read_to_string(&cases_path)
        .map_err(|e| format!("{}: {e}", cases_path.display()))?;
    let (mut n_sent, mut changed_sent, mut n_rep, mut changed_rep) =
        (0usize, 0usize, 0usize, 0usize);
    let (mut n_test, mut changed_test) = (0usize, 0usize);
    let mut misses = Vec::new();
    for line in cases.lines() {
        let c: Value =
            serde_json::from_str(line).map_err(|e| format!("{}: {e}", cases_path.display()))?;
        let kind = c["kind"].as_str().unwrap_or_default();
        if kind != "absent_to_present" && kind != "present_to_absent" {
            continue;
        }
        let (before, after) = (
            c["before"].as_str().unwrap_or_default(),
            c["after"].as_str().unwrap_or_default(),
        );
        let Some((edited, flips)) = judge
            .reversal(&rules, before, after)
            .map_err(|e| e.to_string())?
        else {
            continue;
        };
        n_sent += 1;
        changed_sent += usize::from(flips);
        if c["uid"].as_u64().is_some_and(|u| u % 10 == 0) {
            n_test += 1;
            changed_test += usize::from(flips);
        }
        if !flips && misses.len() < 12 {
            misses.push(json!({"kind": kind, "before": before, "after": after,
                "observations": edited.iter().map(|o| o.name()).collect::<Vec<_>>()}));
        }
        let (cr, cc) = (
            c["reference"].as_str().unwrap_or_default(),
            c["candidate"].as_str().unwrap_or_default(),
        );
        let jr = judge.label_many(&[cr, cc]).map_err(|e| e.to_string())?;
        n_rep += 1;
        changed_rep += usize::from(
            edited
                .iter()
                .any(|&o| jr[0].is_positive(o, false) != jr[1].is_positive(o, false)),
        );
    }

    let result = json!({
        "judge": judge.name(),
        "test_studies": studies.len(),
        "min_test_positives": MIN_TEST_POSITIVES,
        "macro_observations": kept.iter().map(|o| o.name()).collect::<Vec<_>>(),
        "whole_report": view(&all, &j_whole, &r_whole),
        "findings_alone": view(&f_idx, &j_f, &r_f),
        "impression_alone": view(&i_idx, &j_i, &r_i),
        "macro_difference_judge_minus_rules": {
            "value": macro_f1(&j_whole, &gold, &all, &kept, false) - macro_f1(&r_whole, &gold, &all, &kept, true),
            "low": pct(0.025), "high": pct(0.975), "resamples": RESAMPLES, "seed": SEED,
        },
        "per_observation": per,
        "reversed_findings": {
            "cases": n_sent, "edited_sentence_label_changes": changed_sent,
            "test_cases": n_test, "test_changes": changed_test,
            "report_cases": n_rep, "report_label_changes": changed_rep,
            "misses": misses,
        },
        "uids": studies.iter().map(|s| s.uid).collect::<Vec<_>>(),
    });
    let out = root.join("docs/results/judge/accuracy.json");
    std::fs::create_dir_all(out.parent().unwrap_or(&root)).map_err(|e| e.to_string())?;
    let tmp = out.with_extension("json.tmp");
    std::fs::write(
        &tmp,
        serde_json::to_string_pretty(&result).map_err(|e| e.to_string())? + "\n",
    )
    .and_then(|()| std::fs::rename(&tmp, &out))
    .map_err(|e| format!("{}: {e}", out.display()))?;
    println!(
        "{}",
        serde_json::to_string_pretty(&json!({
            "whole_report": result["whole_report"], "findings_alone": result["findings_alone"],
            "impression_alone": result["impression_alone"],
            "macro_difference_judge_minus_rules": result["macro_difference_judge_minus_rules"],
            "reversed": {"cases": n_sent, "changed": changed_sent, "report_changed": changed_rep}
        }))
        .unwrap_or_default()
    );
    for p in &per {
        println!(
            "{:28} support {:3}  judge {:.3}  rules(u=present) {:.3}  rules(u=absent) {:.3}  kappa {:.3}",
            p["observation"].as_str().unwrap_or_default(),
            p["support"], p["judge"]["f1"].as_f64().unwrap_or(0.0),
            p["rules_uncertain_present"]["f1"].as_f64().unwrap_or(0.0),
            p["rules_uncertain_absent"]["f1"].as_f64().unwrap_or(0.0),
            p["kappa"].as_f64().unwrap_or(0.0)
        );
    }
    println!("wrote {}", out.display());
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("judge_validate: {e}");
            ExitCode::FAILURE
        }
    }
}
