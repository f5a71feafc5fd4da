//! `remove_temporary_files` (what a signal handler calls before the process
//! ends). Alone in its test binary: after it runs, every new temporary file
//! of this process is removed at once.

use std::io::Write;

use sdr_core::io::{remove_temporary_files, AtomicFile};

#[test]
fn a_stopping_process_leaves_no_temporary_files_and_keeps_old_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let kept = dir.path().join("kept.txt");
    std::fs::write(&kept, b"old").unwrap();
    let mut a = AtomicFile::create(&kept).unwrap();
    a.write_all(b"new, unfinished").unwrap();
    let mut b = AtomicFile::create(&dir.path().join("new.jsonl")).unwrap();
    b.write_all(b"{}").unwrap();
    let done = dir.path().join("done.txt");
    sdr_core::io::write_atomic(&done, |f| f.write_all(b"done")).unwrap();
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 4);

    // As a signal handler would, before exiting: the destructors never run.
    assert_eq!(remove_temporary_files(), 2);
    std::mem::forget(a);
    std::mem::forget(b);
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["done.txt", "kept.txt"]);
    assert_eq!(std::fs::read(&kept).unwrap(), b"old");

    // A write begun while the process stops leaves nothing behind either.
    let late = AtomicFile::create(&dir.path().join("late.txt")).unwrap();
    std::mem::forget(late);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
}
