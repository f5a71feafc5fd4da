//! The corpus file: round trip, and refusal of truncated, corrupt and
//! mismatched files with one-line errors naming the file.

mod common;

use sdr_core::report::SEGMENTER_VERSION;
use sdr_corpus::{
    read_source, Corpus, HashEncoder, SentenceEncoder, SourceFormat, SourceOptions, Split,
};

fn one_line(e: &impl std::fmt::Display, file: &std::path::Path, needle: &str) {
    let s = e.to_string();
    assert!(!s.contains('\n'), "multi-line error: {s}");
    assert!(
        s.contains(&file.display().to_string()),
        "file not named: {s}"
    );
    assert!(s.contains(needle), "`{needle}` not in: {s}");
}

#[test]
fn round_trip_from_csv_with_split_and_missing_sections() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("reports.csv");
    std::fs::write(
        &csv,
        "uid,MeSH,Problems,image,indication,comparison,findings,impression\n\
         1,normal,normal,x,,,\"Heart size normal. Lungs are clear.\",Normal chest.\n\
         2,a,b,x,,,\"Mild cardiomegaly. Lungs are clear.\",Cardiomegaly.\n\
         3,a,b,x,,,,No acute disease.\n\
         4,a,b,x,,,Lungs are clear.,\n\
         5,a,b,x,,,,\n\
         10,a,b,x,,,Test study only.,Test.\n",
    )
    .unwrap();
    let src = read_source(
        &csv,
        &SourceOptions {
            format: SourceFormat::Csv,
            split: Split::Train,
            ..Default::default()
        },
    )
    .unwrap();
    // uid 1 is validation, 10 test, 5 has neither section.
    assert_eq!(
        src.reports
            .iter()
            .map(|r| r.id.as_str())
            .collect::<Vec<_>>(),
        ["2", "3", "4"]
    );
    assert_eq!(src.dropped_empty, 1);
    let data = common::build(src.reports.clone(), 16);
    // "Lungs are clear." occurs twice but is stored once: 4 distinct sentences.
    assert_eq!(data.sentences.len(), 4);
    assert_eq!(data.findings_offsets, [0, 2, 2, 3]);
    assert_eq!(data.impression_offsets, [0, 1, 2, 2]);
    let path = dir.path().join("c.safetensors");
    data.write(&path).unwrap();
    let c = Corpus::open(&path).unwrap();
    let v = c.view();
    assert_eq!(c.n_reports(), 3);
    assert_eq!(v.embeddings, &data.embeddings[..]);
    assert_eq!(v.findings.offsets, &data.findings_offsets[..]);
    assert_eq!(v.findings.indices, &data.findings_indices[..]);
    assert_eq!(v.impression.indices, &data.impression_indices[..]);
    assert_eq!((0..3).map(|t| c.id(t)).collect::<Vec<_>>(), ["2", "3", "4"]);
    assert_eq!(
        c.sentence(v.findings.rows(2)[0] as usize),
        "Lungs are clear."
    );
    assert_eq!(c.meta(), &data.meta);
    assert_eq!(c.meta().segmenter_version, SEGMENTER_VERSION);
    let enc = HashEncoder::new(16);
    c.check_compatible(
        &enc.name(),
        &enc.weights_sha256().unwrap(),
        SEGMENTER_VERSION,
    )
    .unwrap();
    // No temporary file is left beside it.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
}

#[test]
fn sampling_is_seeded_and_sized() {
    let dir = tempfile::tempdir().unwrap();
    let jl = dir.path().join("r.jsonl");
    let mut text = String::new();
    for i in 0..50 {
        text.push_str(&format!(
            "{{\"id\": {i}, \"findings\": \"Finding {i}.\", \"impression\": [\"Imp {i}.\"]}}\n"
        ));
    }
    std::fs::write(&jl, text).unwrap();
    let opts = |seed| SourceOptions {
        format: SourceFormat::Jsonl,
        sample: Some(10),
        seed,
        ..Default::default()
    };
    let a = read_source(&jl, &opts(1)).unwrap();
    let b = read_source(&jl, &opts(1)).unwrap();
    let c = read_source(&jl, &opts(2)).unwrap();
    assert_eq!(a.reports.len(), 10);
    assert_eq!(a.reports, b.reports);
    assert_ne!(a.reports, c.reports);
    assert_eq!(
        a.reports[0].impression,
        ["Imp ".to_string() + &a.reports[0].id + "."]
    );
}

#[test]
fn mimic_dir_uses_plain_headers() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("files/p10/p10000032");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::write(
        sub.join("s1.txt"),
        "                                 FINAL REPORT\n EXAMINATION:  CHEST (PA AND LAT)\n\n \
         INDICATION:  Cough.\n\n FINDINGS:  No focal consolidation.  Heart size is normal.\n\n \
         IMPRESSION:  No acute cardiopulmonary process.\n",
    )
    .unwrap();
    std::fs::write(sub.join("s2.txt"), "IMPRESSION: Stable.\n").unwrap();
    let src = read_source(
        dir.path(),
        &SourceOptions {
            format: SourceFormat::MimicDir,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(src.reports.len(), 2);
    assert_eq!(src.reports[0].id, "files/p10/p10000032/s1");
    assert_eq!(
        src.reports[0].findings,
        ["No focal consolidation.", "Heart size is normal."]
    );
    assert_eq!(
        src.reports[0].impression,
        ["No acute cardiopulmonary process."]
    );
    assert!(src.reports[1].findings.is_empty());
}

#[test]
fn missing_column_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("rex.csv");
    std::fs::write(&csv, "id,Findings,Impression\n7,A.,B.\n").unwrap();
    // ReXGradient-style capitalised names are found case-insensitively; `id` is the id.
    let ok = read_source(&csv, &SourceOptions::default()).unwrap();
    assert_eq!(ok.reports[0].id, "7");
    assert_eq!(ok.reports[0].findings, ["A."]);
    let mut o = SourceOptions::default();
    o.columns.findings = "report_findings".into();
    let e = read_source(&csv, &o).unwrap_err().to_string();
    assert!(
        e.contains("no column `report_findings`") && e.contains("rex.csv"),
        "{e}"
    );
}

fn written(dir: &std::path::Path) -> (std::path::PathBuf, Vec<u8>) {
    let data = common::random_corpus(40, 30, 8, 3);
    let path = dir.join("c.safetensors");
    data.write(&path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    (path, bytes)
}

#[test]
fn truncated_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (path, bytes) = written(dir.path());
    for cut in [0, 5, 100, bytes.len() / 2, bytes.len() - 1] {
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let e = Corpus::open(&path).unwrap_err();
        one_line(&e, &path, "truncated");
    }
}

#[test]
fn corrupt_data_and_header_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (path, bytes) = written(dir.path());
    // A flipped byte in the last tensor bytes (data region).
    let mut b = bytes.clone();
    let at = b.len() - 3;
    b[at] ^= 0x20;
    std::fs::write(&path, &b).unwrap();
    one_line(&Corpus::open(&path).unwrap_err(), &path, "checksum");
    // A flipped byte inside the JSON header.
    let mut b = bytes.clone();
    b[20] = b'#';
    std::fs::write(&path, &b).unwrap();
    one_line(
        &Corpus::open(&path).unwrap_err(),
        &path,
        "not a usable SDR corpus",
    );
    // A different safetensors file (no corpus metadata).
    let t =
        safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![1], &[0, 0, 128, 63])
            .unwrap();
    safetensors::serialize_to_file([("x", t)], None, &path).unwrap();
    one_line(&Corpus::open(&path).unwrap_err(), &path, "metadata");
}

#[test]
fn other_encoder_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = written(dir.path());
    let c = Corpus::open(&path).unwrap();
    let e = c
        .check_compatible("all-mpnet-base-v2", "78c0", SEGMENTER_VERSION)
        .unwrap_err();
    one_line(&e, &path, "encoder `sdr-hash-bow-8`");
    let enc = HashEncoder::new(8);
    let e = c
        .check_compatible(&enc.name(), "abc", SEGMENTER_VERSION)
        .unwrap_err();
    one_line(&e, &path, "weights sha256");
    let e = c
        .check_compatible(&enc.name(), "none", "sdr-seg-0")
        .unwrap_err();
    one_line(&e, &path, "segmenter");
}

#[test]
fn the_same_model_at_another_precision_is_refused_with_the_flag_to_pass() {
    let dir = tempfile::tempdir().unwrap();
    let mut data = common::random_corpus(10, 8, 8, 3);
    data.meta.encoder = "all-mpnet-base-v2+bf16".into();
    let path = dir.path().join("c.safetensors");
    data.write(&path).unwrap();
    let c = Corpus::open(&path).unwrap();
    let sha = c.meta().encoder_sha256.clone();
    c.check_compatible("all-mpnet-base-v2+bf16", &sha, SEGMENTER_VERSION)
        .unwrap();
    let e = c
        .check_compatible("all-mpnet-base-v2", &sha, SEGMENTER_VERSION)
        .unwrap_err();
    one_line(&e, &path, "embedded at bf16");
    one_line(&e, &path, "--precision bf16");
    // Another model is still an encoder mismatch, whatever its precision.
    let e = c
        .check_compatible("other-model", &sha, SEGMENTER_VERSION)
        .unwrap_err();
    one_line(&e, &path, "encoder `all-mpnet-base-v2+bf16`");
}
