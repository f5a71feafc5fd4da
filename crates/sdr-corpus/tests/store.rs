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

#[test]
fn one_column_for_both_sections_and_non_utf8_reports_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("r.csv");
    std::fs::write(&csv, "id,findings,impression\n7,A.,B.\n").unwrap();
    let jsonl = dir.path().join("r.jsonl");
    std::fs::write(
        &jsonl,
        "{\"id\": 7, \"findings\": \"A.\", \"impression\": \"B.\"}\n",
    )
    .unwrap();
    for (path, format) in [(&csv, SourceFormat::Csv), (&jsonl, SourceFormat::Jsonl)] {
        let mut o = SourceOptions {
            format,
            ..Default::default()
        };
        o.columns.findings = "impression".into();
        let e = read_source(path, &o).unwrap_err().to_string();
        assert!(
            e.contains("findings and impression both read column `impression`"),
            "{e}"
        );
    }
    // A MIMIC-style report with bytes that are not UTF-8 is named, not decoded
    // with replacement characters.
    let mimic = dir.path().join("m");
    std::fs::create_dir_all(&mimic).unwrap();
    std::fs::write(mimic.join("s1.txt"), b"FINDINGS: Clear \xff\xfe lungs.\n").unwrap();
    let e = read_source(
        &mimic,
        &SourceOptions {
            format: SourceFormat::MimicDir,
            ..Default::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("s1.txt") && e.contains("not UTF-8"), "{e}");
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

type Meta = serde_json::Map<String, serde_json::Value>;

/// The header JSON of a safetensors file and the data after it.
fn split_header(bytes: &[u8]) -> (serde_json::Value, Vec<u8>) {
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    (header, bytes[8 + n..].to_vec())
}

/// Rewrites `path` with its header metadata passed through `edit`: the JSON
/// is serialised again, padded with spaces to a multiple of 8 bytes (as the
/// safetensors writer does, so the tensors stay aligned) and the 8-byte
/// length prefix is set to its new length; the data is kept as it is.
fn edit_header(path: &std::path::Path, edit: impl FnOnce(&mut Meta)) {
    let (mut header, data) = split_header(&std::fs::read(path).unwrap());
    edit(header["__metadata__"].as_object_mut().unwrap());
    let mut json = serde_json::to_vec(&header).unwrap();
    while json.len() % 8 != 0 {
        json.push(b' ');
    }
    let mut out = (json.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&json);
    out.extend_from_slice(&data);
    std::fs::write(path, out).unwrap();
}

fn set(meta: &mut Meta, key: &str, value: &str) {
    meta.insert(key.into(), serde_json::Value::String(value.into()));
}

/// `meta_sha256` as the format documents it, computed here independently:
/// sha256 over every other key and value in key order, each as its byte
/// length (u64 little-endian) then its bytes.
fn documented_meta_sha256(meta: &Meta) -> String {
    use sha2::{Digest, Sha256};
    let mut keys: Vec<&String> = meta.keys().filter(|k| *k != "meta_sha256").collect();
    keys.sort();
    let mut h = Sha256::new();
    for k in keys {
        let v = meta[k].as_str().unwrap();
        for s in [k.as_str(), v] {
            h.update((s.len() as u64).to_le_bytes());
            h.update(s.as_bytes());
        }
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn the_header_is_version_2_with_a_checksum_over_every_metadata_key() {
    let dir = tempfile::tempdir().unwrap();
    let (path, bytes) = written(dir.path());
    let (header, _) = split_header(&bytes);
    let meta = header["__metadata__"].as_object().unwrap();
    assert_eq!(meta["format_version"], "2");
    assert_eq!(meta["meta_sha256"], documented_meta_sha256(meta).as_str());
    // Every value the reader interprets is covered, `content_sha256` too.
    for k in ["encoder_sha256", "split", "dim", "content_sha256", "format"] {
        assert!(meta.contains_key(k), "{k}");
    }
    // A shard's keys are covered as well.
    let src = common::source_of(
        (0..6)
            .map(|t| sdr_corpus::SourceReport {
                id: t.to_string(),
                findings: vec![format!("Finding {t}.")],
                impression: vec!["Normal.".into()],
            })
            .collect(),
    );
    let (part, shard) =
        sdr_corpus::shard_source(&src, sdr_corpus::ShardSpec { index: 1, count: 2 }).unwrap();
    let data = sdr_corpus::build_corpus(
        &part,
        &HashEncoder::new(8),
        &sdr_corpus::BuildInfo {
            source_format: "test".into(),
            split: "all".into(),
            sample: None,
            seed: 0,
        },
        None,
    )
    .unwrap();
    data.write_shard(&path, &shard).unwrap();
    let (header, _) = split_header(&std::fs::read(&path).unwrap());
    let meta = header["__metadata__"].as_object().unwrap();
    assert!(meta.contains_key("selection_sha256"));
    assert_eq!(meta["meta_sha256"], documented_meta_sha256(meta).as_str());
    Corpus::open(&path).unwrap();
}

#[test]
fn an_edited_metadata_value_is_refused_as_a_header_checksum_mismatch() {
    let dir = tempfile::tempdir().unwrap();
    let (path, bytes) = written(dir.path());
    let original = Corpus::open(&path).unwrap().meta().clone();
    let flip = |v: &str| {
        let mut c: Vec<char> = v.chars().collect();
        c[0] = if c[0] == 'a' { 'b' } else { 'a' };
        c.into_iter().collect::<String>()
    };
    type Edit = Box<dyn Fn(&mut Meta)>;
    let edits: Vec<(&str, Edit)> = vec![
        ("split", Box::new(|m| set(m, "split", "test"))),
        (
            "encoder_sha256",
            Box::new(move |m| {
                let v = flip(m["encoder_sha256"].as_str().unwrap());
                set(m, "encoder_sha256", &v)
            }),
        ),
        (
            "encoder",
            Box::new(|m| set(m, "encoder", "all-mpnet-base-v2")),
        ),
        (
            "segmenter_version",
            Box::new(|m| set(m, "segmenter_version", "sdr-seg-0")),
        ),
        ("seed", Box::new(|m| set(m, "seed", "7"))),
        // Values that would otherwise fail as something else.
        ("dim", Box::new(|m| set(m, "dim", "9"))),
        ("n_reports", Box::new(|m| set(m, "n_reports", "many"))),
        (
            "content_sha256",
            Box::new(move |m| {
                let v = flip(m["content_sha256"].as_str().unwrap());
                set(m, "content_sha256", &v)
            }),
        ),
        // A key added or removed.
        ("added key", Box::new(|m| set(m, "note", "edited"))),
        ("removed key", Box::new(|m| drop(m.remove("source")))),
        ("shard key", Box::new(|m| set(m, "shard_index", "0"))),
    ];
    for (what, edit) in &edits {
        std::fs::write(&path, &bytes).unwrap();
        edit_header(&path, edit);
        let e = Corpus::open(&path).unwrap_err();
        one_line(&e, &path, "metadata checksum mismatch");
        assert!(e.to_string().contains("corrupted or edited"), "{what}: {e}");
    }
    // Control: the same edit with the checksum recomputed opens, so the
    // refusal above is the checksum's and not the rewrite's.
    std::fs::write(&path, &bytes).unwrap();
    edit_header(&path, |m| {
        set(m, "split", "test");
        let sum = documented_meta_sha256(m);
        set(m, "meta_sha256", &sum);
    });
    let c = Corpus::open(&path).unwrap();
    assert_eq!(c.meta().split, "test");
    assert_eq!(c.meta().encoder, original.encoder);
    // A byte flipped in place in a metadata value (length prefix untouched).
    let mut b = bytes.clone();
    let needle = b"\"split\":\"all\"";
    let at = b
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("split in the header")
        + needle.len()
        - 2;
    b[at] = b'm';
    std::fs::write(&path, &b).unwrap();
    one_line(
        &Corpus::open(&path).unwrap_err(),
        &path,
        "metadata checksum mismatch",
    );
}

#[test]
fn a_version_2_header_without_its_checksum_is_refused_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = written(dir.path());
    edit_header(&path, |m| drop(m.remove("meta_sha256")));
    one_line(&Corpus::open(&path).unwrap_err(), &path, "`meta_sha256`");
}

#[test]
fn a_version_1_file_is_refused_with_a_request_to_rebuild() {
    let dir = tempfile::tempdir().unwrap();
    let (path, bytes) = written(dir.path());
    // A version-1 header: no `meta_sha256`.
    edit_header(&path, |m| {
        set(m, "format_version", "1");
        m.remove("meta_sha256");
    });
    let e = Corpus::open(&path).unwrap_err();
    one_line(&e, &path, "format version 1");
    one_line(&e, &path, "rebuild it with `sdr corpus build`");
    // A newer version is not something to rebuild.
    std::fs::write(&path, &bytes).unwrap();
    edit_header(&path, |m| set(m, "format_version", "3"));
    let e = Corpus::open(&path).unwrap_err();
    one_line(&e, &path, "format version 3; this build reads version 2");
}
