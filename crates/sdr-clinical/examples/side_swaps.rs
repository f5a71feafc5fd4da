//! Whether the clinical cost's facts see each side swap of the faithfulness
//! benchmark's `side_any` cases (left and right swapped in any sentence that
//! states something on one side, whatever its finding; issue 57 item 4): a
//! conflict of kind `side` or `bilateral` between the edited sentence and the
//! original.
//!
//! ```text
//! cargo run --release -p sdr-clinical --example side_swaps -- \
//!     bench/faithfulness/cases.jsonl docs/results/faithfulness/sides-conflicts.json
//! ```
//!
//! Uses only the labeler's public API of the release before site facts, so
//! the same file run there gives the "before" figure.

use std::io::BufRead;

use sdr_clinical::Labeler;
use sdr_core::cost::clinical::{ClinicalWeights, ConflictKind};
use serde_json::{json, Value};

fn main() {
    if let Err(e) = run() {
        eprintln!("side_swaps: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [cases, out] = args.as_slice() else {
        return Err("usage: side_swaps CASES.jsonl OUT.json".into());
    };
    let file = std::fs::File::open(cases).map_err(|e| format!("{cases}: {e}"))?;
    let (labeler, w) = (Labeler::default(), ClinicalWeights::default());
    let (mut per, mut seen, mut unseen) = (Vec::new(), 0usize, Vec::new());
    for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| format!("{cases}: {e}"))?;
        let c: Value =
            serde_json::from_str(&line).map_err(|e| format!("{cases}:{}: {e}", n + 1))?;
        if c["kind"] != "side_any" {
            continue;
        }
        let field = |k: &str| {
            c[k].as_str()
                .map(str::to_owned)
                .ok_or_else(|| format!("{cases}:{}: no string `{k}`", n + 1))
        };
        let (before, after) = (field("before")?, field("after")?);
        let a = [labeler.sentence_facts(&after)];
        let b = [labeler.sentence_facts(&before)];
        let side = w
            .conflicts(&a, &b)
            .into_iter()
            .chain(w.conflicts(&b, &a))
            .flatten()
            .any(|x| matches!(x.kind, ConflictKind::Side | ConflictKind::Bilateral));
        if side {
            seen += 1;
        } else {
            unseen.push(before.clone());
        }
        per.push(json!({"id": c["id"], "seen": side}));
    }
    if per.is_empty() {
        return Err(format!(
            "{cases}: no side_any case (run bench/faithfulness/make_cases.py)"
        ));
    }
    let res = json!({
        "cases": per.len(),
        "side_conflict_seen": seen,
        "share": seen as f64 / per.len() as f64,
        "unseen_examples": unseen.iter().take(12).collect::<Vec<_>>(),
        "per_case": per,
    });
    let tmp = format!("{out}.tmp");
    std::fs::write(
        &tmp,
        serde_json::to_string_pretty(&res).expect("json") + "\n",
    )
    .map_err(|e| format!("{tmp}: {e}"))?;
    std::fs::rename(&tmp, out).map_err(|e| format!("{out}: {e}"))?;
    println!(
        "the facts see {seen} of {} side swaps ({:.1} %)",
        per.len(),
        100.0 * seen as f64 / per.len() as f64
    );
    Ok(())
}
