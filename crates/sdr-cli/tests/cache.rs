//! `sdr cache list|prune|clear` on cache folders of the tests' own: what each
//! file is worth, what pruning removes, the lock rule, and bad folders.

mod cli;

use std::path::{Path, PathBuf};
use std::process::Output;

use cli::{have_model, json_lines, sdr, stderr};

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `sdr cache <args> --dir dir`, which must succeed; its stdout.
fn cache(dir: &Path, args: &[&str]) -> String {
    let o = sdr()
        .arg("cache")
        .args(args)
        .arg("--dir")
        .arg(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    stdout(&o)
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

const OLD: &str = "old-f32-avx512-0123456789ab.pack";
const JUNK: &str = "junk-bf16-avx512-ba9876543210.pack";
const TEMP: &str = ".junk-bf16-avx512-ba9876543210.pack.Xy12Zq.tmp.pack";

/// A cache folder of files that no load will use: one of the format before the
/// folder was recorded (version 1), a damaged one, a killed packer's temporary
/// file, lock files, and a file that is not the cache's.
fn stale_cache(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let mut v1 = b"SDRPACK\0".to_vec();
    v1.extend(1u32.to_le_bytes());
    v1.resize(4096, 0);
    std::fs::write(dir.join(OLD), &v1).unwrap();
    std::fs::write(dir.join("old-f32-avx512-0123456789ab.lock"), b"").unwrap();
    std::fs::write(dir.join(JUNK), b"not a packed-weights file").unwrap();
    std::fs::write(dir.join(TEMP), [0u8; 100]).unwrap();
    std::fs::write(dir.join("lone-f32-avx512-000000000000.lock"), b"").unwrap();
    std::fs::write(dir.join("notes.txt"), b"mine").unwrap();
}

#[test]
fn files_no_load_will_use_are_listed_and_pruned() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("packed");
    stale_cache(&dir);
    let before = names(&dir);

    let table = cache(&dir, &["list"]);
    for want in [
        "(old-f32-avx512-0123456789ab.pack)",
        "older format",
        "damaged: not a packed-weights file",
        "unfinished write",
        "3 files, 0.0 MB; stale: 3 files",
    ] {
        assert!(table.contains(want), "no {want:?} in:\n{table}");
    }
    assert!(
        !table.contains("notes.txt") && !table.contains("lone"),
        "{table}"
    );

    let o = sdr()
        .args(["cache", "list", "--json", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    let lines = json_lines(&o);
    let got: Vec<(String, &str, &str, u64)> = lines
        .iter()
        .map(|l| {
            let path = PathBuf::from(l["path"].as_str().unwrap());
            assert_eq!(path.parent(), Some(dir.as_path()));
            assert_eq!(l["folder"], serde_json::Value::Null, "{l}");
            assert_eq!(l["stale"], true, "{l}");
            assert_eq!(l["valid"], false, "{l}");
            (
                path.file_name().unwrap().to_string_lossy().into_owned(),
                l["status"].as_str().unwrap(),
                l["precision"].as_str().unwrap(),
                l["bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    let want = [
        (TEMP.to_string(), "unfinished write", "bf16", 100),
        (JUNK.to_string(), "damaged", "bf16", 25),
        (OLD.to_string(), "older format", "f32", 4096),
    ];
    assert_eq!(got, want);
    assert_eq!(
        lines[1]["detail"],
        "not a packed-weights file (too short or no magic)"
    );

    let dry = cache(&dir, &["prune", "--dry-run"]);
    assert!(dry.contains("would remove 3 files"), "{dry}");
    assert_eq!(dry.matches("would remove ").count(), 4, "{dry}");
    assert_eq!(names(&dir), before, "a dry run removed files");

    let pruned = cache(&dir, &["prune"]);
    assert!(pruned.contains(&format!("removed {}", dir.join(OLD).display())));
    assert!(
        pruned.ends_with("removed 3 files, 0.0 MB freed\n"),
        "{pruned}"
    );
    assert_eq!(names(&dir), ["notes.txt"], "the .lock files go too");
    assert!(cache(&dir, &["list"]).ends_with(": empty\n"));
    assert!(cache(&dir, &["prune"]).starts_with("nothing to prune"));

    // `clear` removes every entry the same way.
    stale_cache(&dir);
    let cleared = cache(&dir, &["clear"]);
    assert!(
        cleared.ends_with("removed 3 files, 0.0 MB freed\n"),
        "{cleared}"
    );
    assert_eq!(names(&dir), ["notes.txt"]);
}

#[test]
fn a_folder_that_is_not_a_cache_loses_nothing() {
    // `--dir` given a git repository's pack folder, or a project's: its packs and
    // lock files are not SDR's, whatever their content.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let files: [(&str, &[u8]); 5] = [
        (
            "pack-8f3e2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f.pack",
            b"PACK\0\0\0\x02",
        ),
        (
            "pack-8f3e2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f.idx",
            b"\xfftOc",
        ),
        ("notes.pack", b""),
        ("Cargo.lock", b"version = 4"),
        ("yarn.lock", b""),
    ];
    for (name, bytes) in files {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
    let before = names(dir);
    assert!(cache(dir, &["list"]).ends_with(": empty\n"));
    assert!(cache(dir, &["prune"]).starts_with("nothing to prune"));
    cache(dir, &["clear"]);
    assert_eq!(names(dir), before);
}

#[test]
fn a_bad_dir_is_one_error_line_and_a_missing_one_is_an_empty_cache() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("a-file");
    std::fs::write(&file, b"precious").unwrap();
    for args in [&["list"][..], &["list", "--json"], &["prune"], &["clear"]] {
        let o = sdr()
            .arg("cache")
            .args(args)
            .arg("--dir")
            .arg(&file)
            .output()
            .unwrap();
        let err = stderr(&o);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with(&format!(
                "sdr: error: --dir {}: not a folder",
                file.display()
            )),
            "{err}"
        );
        assert!(o.stdout.is_empty());
    }
    assert_eq!(std::fs::read(&file).unwrap(), b"precious");

    let missing = tmp.path().join("missing");
    assert!(cache(&missing, &["list"]).ends_with(": empty\n"));
    assert_eq!(cache(&missing, &["list", "--json"]), "");
    assert!(cache(&missing, &["prune"]).starts_with("nothing to prune"));
    assert_eq!(
        cache(&missing, &["clear"]),
        "removed 0 files, 0.0 MB freed\n"
    );
    assert!(!missing.exists());

    // Without --dir: the loader's folder, or none at all.
    let o = sdr()
        .args(["cache", "list"])
        .env("SDR_PACKED_CACHE", "off")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(o.stdout.is_empty());
    assert!(
        stderr(&o).contains("SDR_PACKED_CACHE=off"),
        "{}",
        stderr(&o)
    );
    let dir = tmp.path().join("packed");
    stale_cache(&dir);
    let o = sdr()
        .args(["cache", "list"])
        .env("SDR_PACKED_CACHE", &dir)
        .output()
        .unwrap();
    assert!(stdout(&o).contains("older format"), "{}", stderr(&o));

    let o = sdr().args(["cache", "prune", "--help"]).output().unwrap();
    let help = stdout(&o);
    for flag in ["--dry-run", "--dir"] {
        assert!(help.contains(flag), "{help}");
    }
}

/// A copy of the model folder in `dir/name` (links to its files).
fn model_copy(dir: &Path, name: &str) -> PathBuf {
    let real = sdr_embed::resolve_model_dir(None).unwrap();
    let copy = dir.join(name);
    std::fs::create_dir(&copy).unwrap();
    for entry in std::fs::read_dir(&real).unwrap() {
        let entry = entry.unwrap();
        std::os::unix::fs::symlink(entry.path(), copy.join(entry.file_name())).unwrap();
    }
    copy
}

#[test]
fn the_file_of_a_folder_that_is_gone_is_pruned_and_a_valid_one_kept() {
    if !have_model() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("packed");
    let input = tmp.path().join("in.txt");
    std::fs::write(&input, "Heart size is normal.\n").unwrap();
    let real = std::fs::canonicalize(sdr_embed::resolve_model_dir(None).unwrap()).unwrap();
    let copy = std::fs::canonicalize(model_copy(tmp.path(), "copy")).unwrap();
    for model in [&real, &copy] {
        let o = sdr()
            .env("SDR_PACKED_CACHE", &dir)
            .arg("embed")
            .arg("--model")
            .arg(model)
            .arg(&input)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
    }
    std::fs::remove_dir_all(&copy).unwrap();
    let o = sdr()
        .args(["cache", "list", "--json", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    let lines = json_lines(&o);
    let mut got: Vec<(String, String)> = lines
        .iter()
        .map(|l| {
            (
                l["folder"].as_str().unwrap().to_string(),
                l["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    got.sort();
    // Both f32 files of one model: the same size.
    let mb = format!("{:.1} MB", lines[0]["bytes"].as_u64().unwrap() as f64 / 1e6);
    let mut want = vec![
        (real.display().to_string(), "valid".to_string()),
        (copy.display().to_string(), "folder gone".to_string()),
    ];
    want.sort();
    assert_eq!(got, want);

    let pruned = cache(&dir, &["prune"]);
    assert!(pruned.contains("folder gone; packed from"), "{pruned}");
    assert!(
        pruned.ends_with(&format!("removed 1 file, {mb} freed\n")),
        "{pruned}"
    );
    let table = cache(&dir, &["list"]);
    assert!(table.contains(&real.display().to_string()), "{table}");
    assert!(table.ends_with(&format!("1 file, {mb}\n")), "{table}");

    // A file whose lock another process holds (packing it now) is left.
    let pack = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "pack"))
        .unwrap();
    let lock = std::fs::File::options()
        .write(true)
        .open(pack.with_extension("lock"))
        .unwrap();
    lock.lock().unwrap();
    let cleared = cache(&dir, &["clear"]);
    assert!(
        cleared.contains("another process is packing it"),
        "{cleared}"
    );
    assert!(pack.exists());
    drop(lock);
    let cleared = cache(&dir, &["clear"]);
    assert!(
        cleared.ends_with(&format!("removed 1 file, {mb} freed\n")),
        "{cleared}"
    );
    assert!(names(&dir).is_empty(), "{:?}", names(&dir));
}
