//! A candidate stops once its report has ended (SPEC §1 end rule), and only then.

use sdr_gen::replay::{Replay, Stored};
use sdr_gen::{End, LockStep};

fn lockstep(texts: &[&str]) -> LockStep<'static> {
    let stored = texts
        .iter()
        .map(|t| Stored {
            text: t.to_string(),
            token_ends: None,
        })
        .collect();
    LockStep::new(Box::new(Replay::new(stored, "test").unwrap()))
}

// A real SmolLM2-135M output shape: the report, then the prompt's example again.
const RAMBLING: &str = "Findings: The heart is normal in size. The lungs are clear.\n\
Impression: No acute cardiopulmonary abnormality.\n\n\
Example 2\nFindings: Mild cardiomegaly. No effusion.\nImpression: Cardiomegaly.";
const CLEAN: &str = "Findings: The lungs are clear.\nImpression: Normal chest.";
const TEMPLATE: &str = "<think>Lungs clear.</think><answer>Normal.</answer> And then more text.";

#[test]
fn rambling_candidate_stops_at_the_next_example() {
    let mut run = lockstep(&[RAMBLING, CLEAN, TEMPLATE]);
    run.decode_to_end(&[0, 1, 2], |_, _| {}).unwrap();
    let s = run.into_states();
    // Stopped as soon as "Example 2" appeared: nothing of the second report was read.
    assert_eq!(s[0].end, Some(End::Stop));
    assert!(s[0].text.contains("Example 2"), "{:?}", s[0].text);
    assert!(!s[0].text.contains("Mild cardiomegaly"), "{:?}", s[0].text);
    assert_eq!(
        s[0].partial().findings,
        ["The heart is normal in size.", "The lungs are clear."]
    );
    assert_eq!(
        s[0].partial().impression,
        ["No acute cardiopulmonary abnormality."]
    );
    // A report that never ends early runs to the end of its stream.
    assert_eq!(s[1].text, CLEAN);
    // The template ends at </answer>.
    assert_eq!(s[2].end, Some(End::Stop));
    assert!(s[2].text.ends_with("</answer>"), "{:?}", s[2].text);
    assert!(s[0].tokens < sdr_gen::replay::pseudo_token_ends(RAMBLING).len());
}

#[test]
fn stop_rule_can_be_turned_off() {
    let mut run = lockstep(&[RAMBLING]).stop_at_report_end(false);
    run.decode_to_end(&[0], |_, _| {}).unwrap();
    let s = run.into_states();
    assert_eq!(s[0].text, RAMBLING);
    // The parser still reads only the first report.
    assert_eq!(s[0].partial().impression.len(), 1);
}
