//! Sentence segmentation on real IU X-ray reports and on MIMIC-CXR-style
//! layouts (SPEC §1).
//!
//! The IU X-ray data is bundled at `data/iu-xray/indiana_reports.csv`
//! (columns `uid,MeSH,Problems,image,indication,comparison,findings,impression`).

use std::collections::HashSet;
use std::path::PathBuf;

use sdr_core::report::{parse_plain, parse_report, split_sentences};

/// One IU X-ray report: uid, findings, impression.
struct IuReport {
    uid: u32,
    findings: String,
    impression: String,
}

/// Minimal RFC 4180 reader (quoted fields, doubled quotes, newlines in quotes);
/// enough for the bundled file, and keeps `sdr-core` free of a CSV dependency.
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(ch) = chars.next() {
        if quoted {
            match ch {
                '"' if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                '"' => quoted = false,
                _ => field.push(ch),
            }
            continue;
        }
        match ch {
            '"' => quoted = true,
            ',' => row.push(std::mem::take(&mut field)),
            '\r' => {}
            '\n' => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            _ => field.push(ch),
        }
    }
    if !field.is_empty() || !row.is_empty() {
        row.push(field);
        rows.push(row);
    }
    rows
}

fn iu_reports() -> Vec<IuReport> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/iu-xray/indiana_reports.csv");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let rows = parse_csv(&text);
    assert_eq!(
        rows[0],
        [
            "uid",
            "MeSH",
            "Problems",
            "image",
            "indication",
            "comparison",
            "findings",
            "impression"
        ]
    );
    rows[1..]
        .iter()
        .map(|r| {
            assert_eq!(r.len(), 8, "row {:?}", r.first());
            IuReport {
                uid: r[0].parse().expect("uid"),
                findings: r[6].clone(),
                impression: r[7].clone(),
            }
        })
        .collect()
}

fn iu(uid: u32) -> IuReport {
    iu_reports()
        .into_iter()
        .find(|r| r.uid == uid)
        .unwrap_or_else(|| panic!("uid {uid}"))
}

fn s(text: &str) -> Vec<String> {
    split_sentences(text)
}

// ---------------------------------------------------------------- IU X-ray

#[test]
fn iu_uid_4_missing_space_and_numbered_impression() {
    let r = iu(4);
    assert_eq!(
        s(&r.findings),
        [
            "There are diffuse bilateral interstitial and alveolar opacities consistent with chronic obstructive lung disease and bullous emphysema.",
            "There are irregular opacities in the left lung apex, that could represent a cavitary lesion in the left lung apex.",
            "There are streaky opacities in the right upper lobe, XXXX scarring.",
            "The cardiomediastinal silhouette is normal in size and contour.",
            "There is no pneumothorax or large pleural effusion.",
        ]
    );
    assert_eq!(
        s(&r.impression),
        [
            "Bullous emphysema and interstitial fibrosis.",
            "Probably scarring in the left apex, although difficult to exclude a cavitary lesion.",
            "Opacities in the bilateral upper lobes could represent scarring, however the absence of comparison exam, recommend short interval followup radiograph or CT thorax to document resolution.",
        ]
    );
}

#[test]
fn iu_uid_2_deid_tokens() {
    assert_eq!(
        s(&iu(2).findings),
        [
            "Borderline cardiomegaly.",
            "Midline sternotomy XXXX.",
            "Enlarged pulmonary arteries.",
            "Clear lungs.",
            "Inferior XXXX XXXX XXXX.",
        ]
    );
    assert_eq!(s(&iu(1).impression), ["Normal chest x-XXXX."]);
}

#[test]
fn iu_uid_9_doctor_and_time() {
    assert_eq!(
        s(&iu(9).impression),
        [
            "Increased size of density in the left cardiophrenic XXXX.",
            "Primary differential considerations include increased size of prominent epicardial fat, pericardial mass, pleural mass or cardiac aneurysm.",
            "CT chest with contrast is recommended.",
            "These findings and recommendations were discussed XXXX.",
            "XXXX by Dr. XXXX XXXX telephone at XXXX p.m. XXXX/XXXX.",
            "Dr. XXXX<XXXX>technologist receipt of the results.",
        ]
    );
}

#[test]
fn iu_uid_60_glued_deid_and_decimals() {
    let r = iu(60);
    assert_eq!(
        s(&r.findings),
        [
            "Stable appearance of hiatal hernia.",
            "Clear right lung XXXX.",
            "In the left superior lower lobe there is a 1.9 x 1.8 cm round area of density which has increased in size compared to prior chest radiograph and recommend a XXXX chest, abdomen and pelvis with contrast as this area is suspicious for potential malignancy.",
            "Normal cardiac contour.",
            "No pneumothorax or pleural effusion.",
        ]
    );
    assert_eq!(s(&r.impression).len(), 3);
    assert!(s(&r.impression)[0].starts_with("Round area of density measuring 1.9 x 1.8 cm"));
}

#[test]
fn iu_vertebral_levels() {
    assert_eq!(
        s(&iu(2084).impression),
        [
            "Pathologic fractures seen at T5 and L2.",
            "Left venous catheter in SVC."
        ]
    );
    assert_eq!(
        s(&iu(315).impression),
        [
            "Heart size is normal.",
            "Lungs are clear.",
            "Old fusion of approximately T9-T10."
        ]
    );
    let spine = s(&iu(240).findings);
    assert!(spine.contains(
        &"disc spaces are old narrow, and large osteophytes present on the vertebral bodies, worst at L2-L3.".to_string()
    ));
    assert!(spine.contains(&"XXXX elements from L4 through S1 are sclerotic.".to_string()));
}

#[test]
fn iu_glued_enumerators() {
    assert_eq!(
        s(&iu(451).impression),
        [
            "Severe arthritic changes in both hips left worse than right.",
            "Possible COPD but no acute pulmonary disease.",
        ]
    );
    assert_eq!(
        s(&iu(1652).impression),
        [
            "Dextroscoliosis of the thoracic spine.",
            "No evidence of acute bony abnormalities."
        ]
    );
    assert_eq!(
        s(&iu(468).impression).last().unwrap(),
        "Chronic findings as discussed below."
    );
}

#[test]
fn iu_lower_case_sentence_start_and_html() {
    assert_eq!(
        s(&iu(617).findings),
        [
            "Lungs are clear.",
            "No pleural effusions or pneumothoraces.",
            "heart and mediastinum are stable with normal sized heart.",
            "Degenerative changes in the spine.",
        ]
    );
    assert_eq!(
        s(&iu(2192).findings),
        [
            "No focal lung consolidation.",
            "No pneumothorax or pleural effusion.",
            "Heart size and pulmonary vascularity are within normal limits.",
            "Minimal degenerative changes of the thoracic spine.",
            "The previously described XXXX deformity in the midthoracic spine is again seen.",
            "There is subcutaneous shunt catheter tubing along the anterior chest wall",
        ]
    );
    assert_eq!(
        s(&iu(146).impression)[1..3],
        [
            "Pulmonary vascularity is normal.>]",
            "Lung volumes are low."
        ]
    );
    // A dash inside a line is not a bullet.
    assert_eq!(s(&iu(2750).impression)[0].get(..13), Some("13 - 14 mm ri"));
}

/// Never panics on any IU report; segmenting the sentences again (joined by
/// blank lines) returns them unchanged; so does joining them by a space when
/// every sentence ends in terminal punctuation (unpunctuated list items, as in
/// `1. Cardiomegaly 2. Ectatic aorta`, merge when joined by a space, by design);
/// every sentence is trimmed with collapsed whitespace.
#[test]
fn iu_all_reports_stable() {
    let reports = iu_reports();
    assert_eq!(reports.len(), 3851);
    let ends_terminal = |x: &String| {
        x.trim_end_matches([')', ']', '>', '"', '\''])
            .ends_with(['.', '?', '!'])
    };
    let mut unpunctuated = 0;
    for r in &reports {
        for text in [&r.findings, &r.impression] {
            let first = s(text);
            for sentence in &first {
                assert_eq!(sentence.trim(), sentence);
                assert!(
                    !sentence.contains("  ") && !sentence.contains('\n'),
                    "{sentence:?}"
                );
            }
            assert_eq!(s(&first.join("\n\n")), first, "uid {}", r.uid);
            if first.iter().all(ends_terminal) {
                assert_eq!(s(&first.join(" ")), first, "uid {}", r.uid);
            } else {
                unpunctuated += 1;
            }
        }
    }
    println!("IU sections with a sentence lacking terminal punctuation: {unpunctuated}");
}

/// Data README: the 3,331 complete reports have about 15k Findings sentences,
/// about 5.5k of them distinct.
#[test]
fn iu_sentence_statistics() {
    let reports = iu_reports();
    let complete: Vec<&IuReport> = reports
        .iter()
        .filter(|r| !r.findings.trim().is_empty() && !r.impression.trim().is_empty())
        .collect();
    let findings: Vec<String> = complete.iter().flat_map(|r| s(&r.findings)).collect();
    let impression: Vec<String> = complete.iter().flat_map(|r| s(&r.impression)).collect();
    let distinct_f: HashSet<&String> = findings.iter().collect();
    let distinct_i: HashSet<&String> = impression.iter().collect();
    let empty_f = complete
        .iter()
        .filter(|r| s(&r.findings).is_empty())
        .count();
    let empty_i = complete
        .iter()
        .filter(|r| s(&r.impression).is_empty())
        .count();
    println!(
        "IU complete reports: {}; Findings sentences {} ({} distinct); Impression sentences {} ({} distinct); sections without a sentence: F {empty_f}, I {empty_i}",
        complete.len(),
        findings.len(),
        distinct_f.len(),
        impression.len(),
        distinct_i.len()
    );
    assert_eq!(complete.len(), 3331);
    assert!(
        (13_500..=16_500).contains(&findings.len()),
        "{}",
        findings.len()
    );
    assert!(
        (4_800..=6_200).contains(&distinct_f.len()),
        "{}",
        distinct_f.len()
    );
    assert_eq!((empty_f, empty_i), (0, 0));
}

// ------------------------------------------------------ MIMIC-CXR style

/// A MIMIC-CXR-like free-text report (written for this test, not MIMIC data):
/// capitalised headers, hard wraps at ~70 columns, `___` de-identification.
const MIMIC_STYLE: &str = "                                 FINAL REPORT
 EXAMINATION:  CHEST (PA AND LAT)

 INDICATION:  ___ year old woman with cough and fever.  Evaluate for
 pneumonia.

 TECHNIQUE:  Chest PA and lateral

 COMPARISON:  ___.

 FINDINGS:

 PA and lateral views of the chest provided.  There is a 1.5 cm nodular
 opacity in the right upper lobe, e.g. a granuloma vs. a small focus of
 consolidation.  No large effusion or pneumothorax.  Approx. 2 mm
 of pleural thickening at the left apex.  Mild compression deformity of
 T9.  No acute fracture.  Heart size is normal.  Dr. ___ reviewed the
 study at 10:30 a.m. on ___.
 
 IMPRESSION:
 
 1. Right upper lobe nodular opacity measuring 1.5 cm, possibly a
 granuloma.  Follow-up CT is recommended.
 2. No pneumonia.
 
 RECOMMENDATION(S):  Chest CT in 3 months.

 NOTIFICATION:  The findings were discussed with Dr. ___ by telephone on ___ at
 11:05 AM.
";

#[test]
fn mimic_style_report() {
    let r = parse_plain(MIMIC_STYLE);
    assert!(r.format_valid);
    assert_eq!(
        r.findings,
        [
            "PA and lateral views of the chest provided.",
            "There is a 1.5 cm nodular opacity in the right upper lobe, e.g. a granuloma vs. a small focus of consolidation.",
            "No large effusion or pneumothorax.",
            "Approx. 2 mm of pleural thickening at the left apex.",
            "Mild compression deformity of T9.",
            "No acute fracture.",
            "Heart size is normal.",
            "Dr. ___ reviewed the study at 10:30 a.m. on ___.",
        ]
    );
    assert_eq!(
        r.impression,
        [
            "Right upper lobe nodular opacity measuring 1.5 cm, possibly a granuloma.",
            "Follow-up CT is recommended.",
            "No pneumonia.",
        ]
    );
    assert_eq!(parse_report(MIMIC_STYLE), r);
}

#[test]
fn mimic_style_inline_headers_and_levels() {
    let text = "FINDINGS: There is a wedge compression deformity of the T9. vertebral body,
unchanged.  Degenerative changes at L1-L2. Lungs are clear.
IMPRESSION: No acute cardiopulmonary process.  WET READ: ___ ___ 9:15 PM
No pneumonia.";
    let r = parse_plain(text);
    assert_eq!(
        r.findings,
        [
            "There is a wedge compression deformity of the T9. vertebral body, unchanged.",
            "Degenerative changes at L1-L2.",
            "Lungs are clear.",
        ]
    );
    // `WET READ:` after a sentence end starts an ignored section.
    assert_eq!(r.impression, ["No acute cardiopulmonary process."]);
}

#[test]
fn bullets_and_numbered_lists() {
    let text = "Findings:
- Heart size is normal
- Lungs are clear, no effusion.
* No pneumothorax
• Bones intact

Impression:
1) Normal chest.
2) No change since ___ (1.2 cm nodule stable).";
    let r = parse_plain(text);
    assert!(r.format_valid);
    assert_eq!(
        r.findings,
        [
            "Heart size is normal",
            "Lungs are clear, no effusion.",
            "No pneumothorax",
            "Bones intact"
        ]
    );
    assert_eq!(
        r.impression,
        [
            "Normal chest.",
            "No change since ___ (1.2 cm nodule stable)."
        ]
    );
}

#[test]
fn llm_chatter_and_markdown() {
    let text = "Sure, here is the report for the chest X-ray:

**Findings:** The heart size is within normal limits. The lungs are clear.
No pleural effusion.

**Impression:**
No acute cardiopulmonary abnormality.";
    let r = parse_report(text);
    assert!(r.format_valid);
    assert_eq!(
        r.findings,
        [
            "The heart size is within normal limits.",
            "The lungs are clear.",
            "No pleural effusion."
        ]
    );
    assert_eq!(r.impression, ["No acute cardiopulmonary abnormality."]);
    assert!(!parse_report("Sure, here is the report: The heart is normal.").format_valid);
}

/// HTML-like output of a small model: tags before headers, around sentences
/// and on lines of their own.
#[test]
fn llm_markup_report() {
    let text = "Here is the report:\n<pre>\n<h2><b>Findings:</b></h2>\n<p>The heart is <em>normal</em> in size.</p>
<p>No pleural effusion.</p><img src=\"https://example.org/cxr.png\" alt=\"Chest X-ray.\">
<ul>\n<li>No pneumothorax</li>\n<li>Bones intact</li>\n</ul>\n<h2>Impression:</h2>\n<p>No acute disease.</p>\n</pre>";
    let r = parse_report(text);
    assert!(r.format_valid);
    assert_eq!(
        r.findings,
        [
            "The heart is normal in size.",
            "No pleural effusion.",
            "No pneumothorax",
            "Bones intact"
        ]
    );
    assert_eq!(r.impression, ["No acute disease."]);
}

#[test]
fn template_reports() {
    let ok = "<think>\n1. The heart is normal in size.\n2. Lungs are clear.\n</think>\n<answer>No acute disease.</answer>\n";
    let r = parse_report(ok);
    assert!(r.format_valid);
    assert_eq!(
        r.findings,
        ["The heart is normal in size.", "Lungs are clear."]
    );
    assert_eq!(r.impression, ["No acute disease."]);
    for bad in [
        "<think>A.</think>",
        "<think>A.</think><answer>B.</answer><answer>B.</answer>",
        "<answer>B.</answer><think>A.</think>",
        "x<think>A.</think><answer>B.</answer>",
        "<think>A.</think><answer>   </answer>",
        "<think></think><answer>B.</answer>",
        "Findings: A.\nImpression: B.\n</think>",
    ] {
        assert!(!parse_report(bad).format_valid, "{bad:?}");
    }
}

// ---------------------------------------------------------------- properties

mod properties {
    use super::*;
    use proptest::prelude::*;
    use sdr_core::report::{exact_match_reward, normalize_for_exact_match, parse_template};

    /// Strings dense in the characters the segmenter reacts to.
    fn tricky() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop_oneof![
                Just("."),
                Just(". "),
                Just("\n"),
                Just("\n\n"),
                Just(" "),
                Just("1."),
                Just("2)"),
                Just("(3)"),
                Just("- "),
                Just("* "),
                Just("*"),
                Just("-"),
                Just("• "),
                Just("XXXX"),
                Just("___"),
                Just("T9"),
                Just("Dr"),
                Just("e.g."),
                Just("p.m."),
                Just("1.5"),
                Just("No"),
                Just("The"),
                Just("lungs"),
                Just("é"),
                Just("Ö"),
                Just("😀"),
                Just("\u{301}"),
                Just("?"),
                Just("!"),
                Just("…"),
                Just(")"),
                Just("("),
                Just("<think>"),
                Just("</think>"),
                Just("<answer>"),
                Just("</answer>"),
                Just("Findings:"),
                Just("IMPRESSION:"),
                Just("**"),
                Just("#"),
                Just("&gt;"),
                Just("<BR>"),
                Just("\r\n"),
                Just("\u{2028}"),
                Just("\t"),
                Just(":"),
                Just("◦"),
                Just("•x"),
                Just("a)"),
                Just("(b)"),
                Just("ii)"),
                Just("_"),
                Just("Rt."),
                Just("J."),
                Just("rib"),
                Just("and"),
                Just("Comparison:"),
                Just("WET READ:"),
                Just("impression"),
                Just("Example 2"),
                Just("\u{a0}"),
                Just("<b>"),
                Just("</b>"),
                Just("<text>"),
                Just("<"),
                Just(">"),
                Just("x=1"),
                Just("<img src=\"a.png\" alt=\"A. B\">"),
                Just("<h2>Example 5</h2>"),
            ],
            0..40,
        )
        .prop_map(|parts| parts.concat())
    }

    fn check_sentences(sentences: &[String]) -> Result<(), TestCaseError> {
        for x in sentences {
            prop_assert!(!x.is_empty());
            prop_assert_eq!(x.trim(), x.as_str());
            prop_assert!(!x.contains("  ") && !x.contains('\n'));
        }
        Ok(())
    }

    /// A fixed seed, so a run of CI cannot fail where the one before passed;
    /// `SDR_PROPTEST_SEED=N` and `SDR_PROPTEST_CASES=N` explore further.
    fn config() -> ProptestConfig {
        let var = |name: &str| std::env::var(name).ok().and_then(|v| v.parse().ok());
        ProptestConfig {
            cases: var("SDR_PROPTEST_CASES").map_or(2000, |n: u64| n as u32),
            failure_persistence: None,
            rng_seed: proptest::test_runner::RngSeed::Fixed(
                var("SDR_PROPTEST_SEED").unwrap_or(20261126),
            ),
            ..ProptestConfig::default()
        }
    }

    proptest! {
        #![proptest_config(config())]

        #[test]
        fn never_panics_on_tricky_text(text in tricky()) {
            let sentences = split_sentences(&text);
            check_sentences(&sentences)?;
            prop_assert_eq!(split_sentences(&sentences.join("\n\n")), sentences);
            for r in [parse_report(&text), parse_plain(&text), parse_template(&text)] {
                check_sentences(&r.findings)?;
                check_sentences(&r.impression)?;
                if r.format_valid {
                    prop_assert!(!r.findings.is_empty() && !r.impression.is_empty());
                }
            }
            let _ = normalize_for_exact_match(&text);
            let _ = exact_match_reward(&parse_report(&text), &text, &text, 0);
        }

        #[test]
        fn never_panics_on_any_string(text in any::<String>()) {
            let sentences = split_sentences(&text);
            check_sentences(&sentences)?;
            let _ = parse_report(&text);
            let _ = parse_plain(&text);
            let _ = normalize_for_exact_match(&text);
        }

        #[test]
        fn template_validity(f in "[A-Z][a-z ]{0,20}\\.", i in "[A-Z][a-z ]{0,20}\\.",
                             ws in "[ \n\t]{0,3}", junk in "[a-z.]{1,3}") {
            let ok = format!("{ws}<think>{f}</think>{ws}<answer>{i}</answer>{ws}");
            prop_assert!(parse_template(&ok).format_valid);
            let outside = format!("<think>{f}</think>{junk}<answer>{i}</answer>");
            prop_assert!(!parse_template(&outside).format_valid);
            let twice = format!("{ok}{ok}");
            prop_assert!(!parse_template(&twice).format_valid);
        }
    }
}
