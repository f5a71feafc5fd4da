//! `--device` and `--cache-dir` of the commands that embed text: a build without CUDA
//! refuses `--device cuda` in one line; a sentence cache kept in a folder makes a
//! second run embed nothing and print the same output.

mod cli;

use cli::{build_corpus, have_model, sdr, tiny_study};

#[test]
fn cuda_device_in_a_cpu_build_is_one_clear_line() {
    if cfg!(feature = "cuda") {
        return;
    }
    for cmd in [
        &["embed", "--device", "cuda"][..],
        &[
            "select",
            "--corpus",
            "c.safetensors",
            "--device",
            "cuda:1",
            "x.jsonl",
        ][..],
        &["serve", "--device", "cuda"][..],
        &[
            "corpus",
            "build",
            "--input",
            "r.csv",
            "--format",
            "csv",
            "--out",
            "c.safetensors",
            "--device",
            "cuda",
        ][..],
    ] {
        let out = sdr().args(cmd).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{cmd:?}: {err}");
        assert!(err.contains("no CUDA back-end"), "{cmd:?}: {err}");
        assert!(err.contains("build-sdr.sh --cuda"), "{cmd:?}: {err}");
    }
    let out = sdr().args(["embed", "--device", "tpu"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(err.contains("expected cpu, cuda or cuda:N"), "{err}");
}

/// Needs the model (`bash scripts/fetch-model.sh`, which the test script runs).
#[test]
fn a_cache_dir_is_filled_once_and_read_back() {
    if !have_model() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (csv, cands) = tiny_study(dir.path());
    let corpus = dir.path().join("c.safetensors");
    build_corpus(&csv, &corpus, &[]);
    let cache = dir.path().join("cache");
    let select = |out: &str| {
        let o = sdr()
            .args(["select", "--metric", "chamfer", "--corpus"])
            .arg(&corpus)
            .arg("--cache-dir")
            .arg(&cache)
            .arg(&cands)
            .arg("-o")
            .arg(dir.path().join(out))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        std::fs::read_to_string(dir.path().join(out)).unwrap()
    };
    let first = select("first.jsonl");
    let files: Vec<_> = std::fs::read_dir(&cache).unwrap().flatten().collect();
    assert_eq!(files.len(), 1, "one cache file per encoder");
    let file = files[0].path();
    assert!(file.extension().is_some_and(|e| e == "sdrc"));
    let stamp = std::fs::metadata(&file).unwrap().modified().unwrap();
    let second = select("second.jsonl");
    assert_eq!(
        first, second,
        "the cached vectors give the same picks and scores"
    );
    // Nothing new was embedded, so the file was not rewritten.
    assert_eq!(std::fs::metadata(&file).unwrap().modified().unwrap(), stamp);

    // A damaged file costs only time: a notice, the same output, a fresh file.
    std::fs::write(&file, b"SDRC2 damaged cache").unwrap();
    let o = sdr()
        .args(["select", "--metric", "chamfer", "--corpus"])
        .arg(&corpus)
        .arg("--cache-dir")
        .arg(&cache)
        .arg(&cands)
        .output()
        .unwrap();
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("starting with an empty sentence cache"),
        "{err}"
    );
    assert!(std::fs::metadata(&file).unwrap().len() > 100);
}

/// Needs the model. The help says a cache file of another encoder is ignored:
/// it is neither read nor replaced by this encoder's cache at the end.
#[test]
fn a_cache_file_of_another_encoder_is_left_as_it_is() {
    if !have_model() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (csv, cands) = tiny_study(dir.path());
    let corpus = dir.path().join("c.safetensors");
    build_corpus(&csv, &corpus, &[]);
    let cache = dir.path().join("cache");
    let select = || {
        sdr()
            .args(["select", "--quiet", "--corpus"])
            .arg(&corpus)
            .arg("--cache-dir")
            .arg(&cache)
            .arg(&cands)
            .output()
            .unwrap()
    };
    let o = select();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let files: Vec<_> = std::fs::read_dir(&cache).unwrap().flatten().collect();
    assert_eq!(files.len(), 1);
    let file = files[0].path();
    // This encoder's file name, another encoder's cache inside.
    let other = sdr_embed::SentenceCache::unbounded("another-encoder", 4);
    other.insert(
        sdr_embed::text_key("The lungs are clear."),
        vec![1.0f32, 0.0, 0.0, 0.0].into(),
    );
    other.save(&file).unwrap();
    let before = std::fs::read(&file).unwrap();
    let sentences = dir.path().join("s.txt");
    std::fs::write(&sentences, "Heart size normal.\nA new sentence.\n").unwrap();
    let embed = sdr()
        .arg("embed")
        .arg(&sentences)
        .arg("--cache-dir")
        .arg(&cache)
        .arg("-o")
        .arg(dir.path().join("e.jsonl"))
        .output()
        .unwrap();
    for o in [select(), embed] {
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{err}");
        let notices: Vec<_> = err
            .lines()
            .filter(|l| l.contains("another-encoder"))
            .collect();
        assert_eq!(notices.len(), 1, "{err}");
        assert!(
            notices[0].contains("starting with an empty sentence cache, which is not saved"),
            "{err}"
        );
        assert_eq!(
            std::fs::read(&file).unwrap(),
            before,
            "the file was replaced"
        );
        assert_eq!(std::fs::read_dir(&cache).unwrap().count(), 1);
    }
}
