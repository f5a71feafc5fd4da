//! Any text through the report parser and the segmenter: never a panic, and
//! valid reports always carry sentences in both sections.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let parsed = sdr_core::report::parse_report(text);
    if parsed.format_valid {
        assert!(!parsed.findings.is_empty() && !parsed.impression.is_empty());
    }
    for s in sdr_core::report::split_sentences(text) {
        assert!(!s.trim().is_empty());
    }
});
