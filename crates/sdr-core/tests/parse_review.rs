//! Adversarial parsing inputs from the SPEC §1 review of `sdr parse`: content
//! numbers in numbered lists, examples appended after an impression, bullet
//! symbols, bare markers, glued and inline headers, abbreviations, markup tags
//! (`<text>Findings:`, as SmolLM2 and Gemma 3 270M write), and degenerate long
//! tokens. Each case is the exact text the review fed to `sdr parse` (template
//! cases wrap Findings as `<think>..</think>`).

use std::time::{Duration, Instant};

use sdr_core::report::{
    parse_report, plain_report_ended, split_sentences, ParsedReport, SEGMENTER_VERSION,
};

fn findings(text: &str) -> Vec<String> {
    parse_report(&format!("<think>{text}</think><answer>X.</answer>")).findings
}

fn report(valid: bool, f: &[&str], i: &[&str]) -> ParsedReport {
    ParsedReport {
        format_valid: valid,
        findings: f.iter().map(|s| s.to_string()).collect(),
        impression: i.iter().map(|s| s.to_string()).collect(),
    }
}

#[test]
fn numbers_that_are_content_stay() {
    assert_eq!(
        findings("1. Old fractures of ribs 1 and 2. No pneumothorax."),
        ["Old fractures of ribs 1 and 2.", "No pneumothorax."]
    );
    assert_eq!(
        findings("1. Cardiomegaly. 2. Small effusion, grade 3. Increased since prior."),
        [
            "Cardiomegaly.",
            "Small effusion, grade 3.",
            "Increased since prior."
        ]
    );
    let r = parse_report(
        "Findings: The lungs are clear.\nImpression: 1. Stable. 2. Fracture of rib 3. No pneumothorax.",
    );
    assert_eq!(
        r.impression,
        ["Stable.", "Fracture of rib 3.", "No pneumothorax."]
    );
    assert_eq!(
        findings("1. No effusion. Rib 2. No pneumothorax."),
        ["No effusion.", "Rib 2.", "No pneumothorax."]
    );
    assert_eq!(
        findings("1. Fractures of ribs 1, 2. No effusion. 2. Status post CABG x 3. Stable."),
        [
            "Fractures of ribs 1, 2.",
            "No effusion.",
            "Status post CABG x 3.",
            "Stable."
        ]
    );
}

#[test]
fn numbered_lists_on_one_line_still_split() {
    assert_eq!(
        findings("1. Effusion. 2. Atelectasis."),
        ["Effusion.", "Atelectasis."]
    );
    assert_eq!(
        findings("1. Emphysema 2. Scarring 3. Opacities"),
        ["Emphysema", "Scarring", "Opacities"]
    );
    assert_eq!(
        findings("1. Normal heart size 2. Clear lungs 3. No effusion."),
        ["Normal heart size", "Clear lungs", "No effusion."]
    );
    // As in IU X-ray: an unpunctuated item, then a punctuated one.
    assert_eq!(
        findings("1. No acute disease. 2. Emphysematous changes 3. Retained contrast."),
        [
            "No acute disease.",
            "Emphysematous changes",
            "Retained contrast."
        ]
    );
}

#[test]
fn an_example_after_an_impression_ends_the_report() {
    let text = "Impression: No acute disease.\n\nExample 2:\nFindings: The heart is enlarged.\nImpression: Cardiomegaly.";
    assert_eq!(
        parse_report(text),
        report(false, &[], &["No acute disease."])
    );
    assert!(plain_report_ended(text));
    assert!(plain_report_ended("Impression: A.\nReport 2"));
    // The second Impression header ends it, also when the first stood before Findings.
    assert_eq!(
        parse_report("Impression: Normal.\nImpression: Normal.\nFindings: X.\nImpression: Y."),
        report(false, &[], &["Normal."])
    );
    assert_eq!(
        parse_report("Impression: A.\nFindings: B.\nImpression: C."),
        report(false, &["B."], &[])
    );
    // A marker before any header labels the model's own report.
    assert_eq!(
        parse_report("Example 5\nFindings: A.\nImpression: B.\n\nExample 6\nFindings: C."),
        report(true, &["A."], &["B."])
    );
    assert!(!plain_report_ended("Sure.\nExample 5\nFindings: A."));
}

#[test]
fn bullet_symbols_start_sentences_anywhere() {
    assert_eq!(
        findings("No effusion • No pneumothorax • Heart normal"),
        ["No effusion", "No pneumothorax", "Heart normal"]
    );
    assert_eq!(
        findings("•No effusion\n•No pneumothorax"),
        ["No effusion", "No pneumothorax"]
    );
    assert_eq!(
        findings("◦No effusion\n‣No edema ▪Bones intact."),
        ["No effusion", "No edema", "Bones intact."]
    );
    // Dashes and asterisks inside a line stay punctuation.
    assert_eq!(
        findings("A 13 - 14 mm nodule *stable* -No change."),
        ["A 13 - 14 mm nodule *stable* -No change."]
    );
}

#[test]
fn bare_markers_are_not_sentences() {
    for text in [
        "<think>a)</think><answer>(b)</answer>",
        "<think>1)</think><answer>(b)</answer>",
        "<think>_</think><answer>_</answer>",
        "<think>___</think><answer>(iv)</answer>",
    ] {
        assert_eq!(parse_report(text), report(false, &[], &[]), "{text}");
    }
    assert_eq!(
        findings("I) Heart normal. II) Lungs clear. a)"),
        ["Heart normal.", "Lungs clear."]
    );
    assert_eq!(findings("Compared to ___. x"), ["Compared to ___.", "x"]);
}

#[test]
fn glued_and_bracketed_headers() {
    assert_eq!(
        parse_report("Findings: Lungs clear.Impression: Normal."),
        report(true, &["Lungs clear."], &["Normal."])
    );
    assert_eq!(
        parse_report("Findings: Lungs clear!Impression: Normal."),
        report(true, &["Lungs clear!"], &["Normal."])
    );
    assert_eq!(
        parse_report("Findings: Lungs clear (see prior.) Impression: Normal."),
        report(true, &["Lungs clear (see prior.)"], &["Normal."])
    );
    assert_eq!(
        parse_report("Findings: A.\nImpression: \"B.\" Impression: C."),
        report(true, &["A."], &["\"B.\""])
    );
    assert_eq!(
        parse_report("Findings\u{a0}: A.\nImpression: B."),
        report(true, &["A."], &["B."])
    );
}

#[test]
fn a_lower_case_word_alone_on_a_line_is_text() {
    assert_eq!(
        parse_report(
            "Findings: There is no change to the\nimpression\nof cardiomegaly.\nImpression: Cardiomegaly."
        ),
        report(
            true,
            &["There is no change to the impression of cardiomegaly."],
            &["Cardiomegaly."]
        )
    );
    assert_eq!(
        parse_report("Findings: The lungs show no acute\nfindings\nImpression: Normal."),
        report(true, &["The lungs show no acute findings"], &["Normal."])
    );
    // Capitalised or marked up, a colonless header still counts.
    assert_eq!(
        parse_report("Findings: A.\nImpression\nB."),
        report(true, &["A."], &["B."])
    );
    assert_eq!(
        parse_report("## findings\nA.\n## impression\nB."),
        report(true, &["A."], &["B."])
    );
}

#[test]
fn inline_labels_cover_one_sentence() {
    assert_eq!(
        parse_report("Findings: Heart normal. Comparison: none. Lungs clear.\nImpression: Normal."),
        report(true, &["Heart normal.", "Lungs clear."], &["Normal."])
    );
    assert_eq!(
        parse_report("Findings: A.\nImpression: B. Recommendations: none. C."),
        report(true, &["A."], &["B.", "C."])
    );
    // MIMIC-CXR's capitalised inline headers run to the next header.
    assert_eq!(
        parse_report("FINDINGS: A.\nIMPRESSION: B.  WET READ: x\nC."),
        report(true, &["A."], &["B."])
    );
}

#[test]
fn own_labels_inside_the_template_are_dropped() {
    assert_eq!(
        parse_report("<think>Findings: No effusion.</think><answer>Impression: Normal.</answer>"),
        report(true, &["No effusion."], &["Normal."])
    );
}

#[test]
fn radiology_abbreviations() {
    assert_eq!(
        findings("Opacity in the Rt. lower lobe. Lt. effusion. Bilat. effusions."),
        [
            "Opacity in the Rt. lower lobe.",
            "Lt. effusion.",
            "Bilat. effusions."
        ]
    );
    assert_eq!(
        findings("Discussed with Dr. J. Smith on Dec. 12, 2019. No change."),
        [
            "Discussed with Dr. J. Smith on Dec. 12, 2019.",
            "No change."
        ]
    );
    assert_eq!(
        findings("Height loss at t9. level. Also at T9/T10. level. Fracture of T9. The lungs."),
        [
            "Height loss at t9. level.",
            "Also at T9/T10. level.",
            "Fracture of T9.",
            "The lungs."
        ]
    );
    assert_eq!(
        findings("2 cm approx. The lungs are clear. Approx. 2 cm."),
        ["2 cm approx.", "The lungs are clear.", "Approx. 2 cm."]
    );
    assert_eq!(
        findings("E. coli pneumonia. Hepatitis B. No effusion."),
        ["E. coli pneumonia.", "Hepatitis B.", "No effusion."]
    );
}

/// Small models put markup tags before their headers: `<text>Findings:` is a
/// header, as `**Findings:**` is (SmolLM2-135M, `iu-test-smollm2-k8-p2`, study
/// 240, candidate 3, shortened).
#[test]
fn markup_tags_before_headers() {
    assert_eq!(
        parse_report("<text>Findings: A. B.\n<text>Impression: C."),
        report(true, &["A.", "B."], &["C."])
    );
    assert_eq!(
        parse_report(
            "Example 5\n\n<text>Findings: Mild cardiomegaly with mild consolidation. \
No pneumothorax.\n\nImpressions: Mild cardiomegaly.\n\n******\n\nExample 6\n\n\
<text>Impression: Mild cardiomegaly."
        ),
        report(
            true,
            &[
                "Mild cardiomegaly with mild consolidation.",
                "No pneumothorax."
            ],
            &["Mild cardiomegaly."]
        )
    );
    assert_eq!(
        parse_report(
            "<p><b>FINDINGS:</b> Heart size is normal. Lungs are clear.</p>\n\
<p><b>IMPRESSION:</b> No acute disease.</p>"
        ),
        report(
            true,
            &["Heart size is normal.", "Lungs are clear."],
            &["No acute disease."]
        )
    );
    // Tags around a colonless header alone on its line mark it up; closing tags
    // may stand before the colon.
    assert_eq!(
        parse_report("<h2>Findings</h2>\nA.\n<h2>impression</h2>\nB."),
        report(true, &["A."], &["B."])
    );
    assert_eq!(
        parse_report("<b>Findings</b>: A.\n<strong>Impression</strong>: B."),
        report(true, &["A."], &["B."])
    );
    // Inside a line, after a sentence end; tags between are transparent.
    assert_eq!(
        parse_report("<p>Findings: A.</p> <p><b>Impression:</b> B.</p>"),
        report(true, &["A."], &["B."])
    );
    // A marked-up example line ends the report (Gemma 3 270M).
    let text = "Findings: A.\nImpression: B.\n\n<h2>Example 5</h2>\nFindings: C.";
    assert_eq!(parse_report(text), report(true, &["A."], &["B."]));
    assert!(plain_report_ended(
        "Findings: A.\nImpression: B.\n<h2>Example 5</h2>"
    ));
    // Other known headers behind tags end a section too.
    assert_eq!(
        parse_report("Findings: A.\nImpression: B.\n\n<h2>Conclusion</h2>\nC."),
        report(true, &["A."], &["B."])
    );
    assert_eq!(SEGMENTER_VERSION, "sdr-seg-4");
}

/// A line of tags alone is no sentence, so a placeholder answer
/// (`Findings: <text>`, Gemma 3 270M) is not well formed.
#[test]
fn markup_tags_alone_are_no_sentence() {
    for text in [
        "Findings: <text>\nImpression: <text>.",
        "Findings: <text>\n\nImpression: </text>",
        "Findings: 1. <text>\n2. <text>\nImpression: <img src=\"https://x.org/a.jpg\" alt=\"Chest X-ray.\">",
        "<think><text></think><answer><p></p></answer>",
    ] {
        assert_eq!(parse_report(text), report(false, &[], &[]), "{text:?}");
    }
    assert_eq!(
        parse_report("Findings: A.\n<text>\nImpression: <text>\n</text>\nB."),
        report(true, &["A."], &["B."])
    );
    assert_eq!(
        split_sentences("1. <text>\n2. </text>\n3. <br/>\n<start_of_image>"),
        Vec::<String>::new()
    );
}

/// Tags standing alone or at a word's edge go, the words stay; a tag glued
/// inside a word is text (IU X-ray has `XXXX<XXXX>technologist`); comparisons
/// are no tags.
#[test]
fn markup_tags_inside_sentences_keep_the_words() {
    assert_eq!(
        parse_report(
            "Findings: a <b> c. No effusion < 5 mm. Nodule <5mm. If a <b and c> d.\n\
Impression: <em>Normal</em> chest.<start_of_image>Follow-up <i>not</i> needed."
        ),
        report(
            true,
            &[
                "a c.",
                "No effusion < 5 mm.",
                "Nodule <5mm.",
                "If a <b and c> d."
            ],
            &["Normal chest.", "Follow-up not needed."]
        )
    );
    assert_eq!(
        split_sentences(
            "Dr. XXXX<XXXX>technologist receipt. <strong>Note</strong>: kg/m<sup>2</sup>."
        ),
        ["Dr. XXXX<XXXX>technologist receipt.", "Note: kg/m<sup>2."]
    );
}

/// The template keeps its rules: its four tags are never markup, a label of its
/// own section is dropped also behind tags, and other tags inside are removed.
#[test]
fn template_outputs_keep_their_rules_with_markup() {
    assert_eq!(
        parse_report("<think><p>Findings: A.</p></think><answer><b>Impression:</b> B.</answer>"),
        report(true, &["A."], &["B."])
    );
    assert_eq!(
        parse_report("<think><b>Impression:</b> A.</think><answer><em>B.</em></answer>"),
        report(true, &["Impression: A."], &["B."])
    );
    // Layout rules are unchanged: tags outside the template are text there.
    assert!(!parse_report("<p><think>A.</think><answer>B.</answer></p>").format_valid);
    assert!(!parse_report("<think>A.</think><b><answer>B.</answer>").format_valid);
    assert_eq!(
        parse_report("<think>A. <think>B.</think><answer>C.</answer>"),
        report(false, &["A.", "<think>B."], &["C."])
    );
    assert_eq!(
        split_sentences("A. <answer> B. </think>"),
        ["A.", "<answer> B.", "</think>"]
    );
}

/// The segmenter and the header scanner are linear: a whitespace-free token
/// with 100,000 periods (200,000 characters) took 97 s when every period
/// rescanned the token.
#[test]
fn long_tokens_take_linear_time() {
    let limit = Duration::from_secs(3);
    for text in [
        format!("Findings: {}", "a.".repeat(100_000)),
        format!("<think>{}</think><answer>X.</answer>", "a.".repeat(100_000)),
        format!("Findings: {}", "T9.".repeat(70_000)),
        format!("Findings: 1. A. 2. x{} end.", " 3)".repeat(70_000)),
        format!("Findings: {}", "Dr. J. ".repeat(30_000)),
        format!("Findings: {}", "x.) Impression".repeat(15_000)),
        format!("Findings: {}", "\n".repeat(200_000)),
        format!("Findings: {}", "a.<b>".repeat(40_000)),
        format!("Findings: {}", "<p x=\"".repeat(40_000)),
        format!("Findings: {}{}", "<".repeat(100_000), "b>a>".repeat(25_000)),
        format!("Findings: {}", "<b>\n".repeat(50_000)),
        format!("{}Findings: A.", "<b>".repeat(70_000)),
    ] {
        assert!(text.chars().count() >= 200_000);
        let t = Instant::now();
        let r = parse_report(&text);
        let _ = split_sentences(&text);
        let elapsed = t.elapsed();
        assert!(
            elapsed < limit,
            "{elapsed:?} for {:?}..., {} findings",
            &text[..30],
            r.findings.len()
        );
    }
}
