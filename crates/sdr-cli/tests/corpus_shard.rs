//! `sdr corpus build --shard I/N` and `sdr corpus merge` with the stand-in
//! encoder: three shards merged equal one build; missing, repeated and
//! mismatched shards are refused with one line naming the file.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn sdr() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sdr"))
}

fn csv(dir: &Path) -> PathBuf {
    let p = dir.join("r.csv");
    let mut s = String::from("uid,findings,impression\n");
    let f = [
        "Heart size normal. Lungs are clear.",
        "Large left pleural effusion. Heart size normal.",
        "Lungs are clear.",
        "Mild cardiomegaly. No pneumothorax.",
        "",
        "Degenerative changes of the spine. Lungs are clear.",
    ];
    let i = ["No acute disease.", "Left effusion.", "", "Cardiomegaly."];
    for uid in 2..40 {
        s += &format!("{uid},\"{}\",\"{}\"\n", f[uid % f.len()], i[uid % i.len()]);
    }
    std::fs::write(&p, s).unwrap();
    p
}

fn build(input: &Path, out: &Path, extra: &[&str]) -> Output {
    sdr()
        .args(["corpus", "build", "--format", "csv", "--split", "train"])
        .args(["--sample", "20", "--seed", "3", "--quiet"])
        .args(extra)
        .arg("--input")
        .arg(input)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

fn ok(o: Output) -> Output {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    o
}

fn merge(parts: &[&Path], out: &Path) -> Output {
    sdr()
        .args(["corpus", "merge", "--quiet", "--out"])
        .arg(out)
        .args(parts)
        .output()
        .unwrap()
}

/// The one-line error of a failed command.
fn err(o: Output) -> String {
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr).trim().to_string();
    assert_eq!(e.lines().count(), 1, "{e}");
    e
}

fn header(p: &Path) -> serde_json::Value {
    let b = std::fs::read(p).unwrap();
    let n = u64::from_le_bytes(b[..8].try_into().unwrap()) as usize;
    let v: serde_json::Value = serde_json::from_slice(&b[8..8 + n]).unwrap();
    v["__metadata__"].clone()
}

#[test]
fn three_shards_merged_equal_one_build() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = csv(d);
    let single = d.join("single.safetensors");
    ok(build(&input, &single, &["--encoder", "hash-24"]));
    let parts: Vec<PathBuf> = (0..3)
        .map(|i| d.join(format!("p{i}.safetensors")))
        .collect();
    for (i, p) in parts.iter().enumerate() {
        ok(build(
            &input,
            p,
            &["--encoder", "hash-24", "--shard", &format!("{i}/3")],
        ));
    }
    let info = ok(sdr()
        .args(["corpus", "info", "--json"])
        .arg(&parts[1])
        .output()
        .unwrap());
    let v: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
    assert_eq!(v["shard"]["index"], 1);
    assert_eq!(v["shard"]["total"], 20);
    assert_eq!(v["n_reports"], 7);

    let merged = d.join("merged.safetensors");
    ok(merge(&[&parts[2], &parts[0], &parts[1]], &merged));
    assert_eq!(header(&merged), header(&single));
    assert!(header(&merged).get("shard_index").is_none());
    ok(sdr()
        .args(["corpus", "info"])
        .arg(&merged)
        .output()
        .unwrap());

    // Selecting against one shard says so; against the merged corpus, not.
    let cands = d.join("c.jsonl");
    let c = "<think>Lungs are clear.</think><answer>No acute disease.</answer>";
    std::fs::write(
        &cands,
        serde_json::json!({"id": "s1", "candidates": [c, c]}).to_string() + "\n",
    )
    .unwrap();
    let select = |corpus: &Path| {
        let o = ok(sdr()
            .args(["select", "--quiet", "--encoder", "hash-24", "--corpus"])
            .arg(corpus)
            .arg(&cands)
            .output()
            .unwrap());
        String::from_utf8_lossy(&o.stderr).to_string()
    };
    let e = select(&parts[1]);
    assert!(
        e.contains("is shard 1/3 of a build of 20 reports: scores use only its 7 reports"),
        "{e}"
    );
    assert!(!select(&merged).contains("shard"));
}

#[test]
fn merge_refuses_missing_repeated_and_mismatched_shards() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = csv(d);
    let parts: Vec<PathBuf> = (0..3)
        .map(|i| d.join(format!("p{i}.safetensors")))
        .collect();
    for (i, p) in parts.iter().enumerate() {
        ok(build(
            &input,
            p,
            &["--encoder", "hash-24", "--shard", &format!("{i}/3")],
        ));
    }
    let out = d.join("m.safetensors");

    let e = err(merge(&[&parts[0], &parts[2]], &out));
    assert!(e.contains("shards 1/3 missing"), "{e}");
    let e = err(merge(&[&parts[0], &parts[1], &parts[1], &parts[2]], &out));
    assert!(
        e.contains("p1.safetensors") && e.contains("given twice"),
        "{e}"
    );

    let other = d.join("other-encoder.safetensors");
    ok(build(
        &input,
        &other,
        &["--encoder", "hash-8", "--shard", "2/3"],
    ));
    let e = err(merge(&[&parts[0], &parts[1], &other], &out));
    assert!(
        e.contains("other-encoder.safetensors") && e.contains("encoder"),
        "{e}"
    );

    let seed = d.join("other-seed.safetensors");
    ok(sdr()
        .args(["corpus", "build", "--format", "csv", "--split", "train"])
        .args([
            "--sample",
            "20",
            "--seed",
            "4",
            "--quiet",
            "--encoder",
            "hash-24",
        ])
        .args(["--shard", "2/3", "--input"])
        .arg(&input)
        .arg("--out")
        .arg(&seed)
        .output()
        .unwrap());
    let e = err(merge(&[&parts[0], &parts[1], &seed], &out));
    assert!(
        e.contains("other-seed.safetensors") && e.contains("seed"),
        "{e}"
    );

    let whole = d.join("whole.safetensors");
    ok(build(&input, &whole, &["--encoder", "hash-24"]));
    let e = err(merge(&[&whole], &out));
    assert!(
        e.contains("whole.safetensors") && e.contains("not a shard"),
        "{e}"
    );
    assert!(!out.exists());

    let e = err(build(
        &input,
        &out,
        &["--encoder", "hash-24", "--shard", "3/3"],
    ));
    assert!(e.contains("--shard"), "{e}");
    let e = err(build(
        &input,
        &out,
        &["--encoder", "hash-24", "--shard", "0/21"],
    ));
    assert!(e.contains("fewer than 21 shards"), "{e}");
}

#[test]
fn merge_refuses_an_out_that_is_one_of_its_shards() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = csv(d);
    let parts: Vec<PathBuf> = (0..2)
        .map(|i| d.join(format!("p{i}.safetensors")))
        .collect();
    for (i, p) in parts.iter().enumerate() {
        ok(build(
            &input,
            p,
            &["--encoder", "hash-8", "--shard", &format!("{i}/2")],
        ));
    }
    let before = std::fs::read(&parts[1]).unwrap();
    // The same file under another spelling is still an input.
    let alias = d.join(".").join("p1.safetensors");
    let e = err(merge(&[&parts[0], &parts[1]], &alias));
    assert!(
        e.contains("is also the input") && e.contains("p1.safetensors"),
        "{e}"
    );
    assert_eq!(std::fs::read(&parts[1]).unwrap(), before);
    // A missing output folder fails before the merge.
    let e = err(merge(
        &[&parts[0], &parts[1]],
        &d.join("nodir/m.safetensors"),
    ));
    assert!(e.contains("folder") && e.contains("nodir"), "{e}");
}
