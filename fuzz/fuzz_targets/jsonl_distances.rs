//! Any bytes as one `sdr distances` input line: an error or finite values in
//! range, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sdr_core::Metric;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let metrics = Metric::all();
    if let Ok(values) = sdr_cli::commands::distances::compute_line(text, &metrics) {
        for (m, e) in metrics.iter().zip(values) {
            let v = e.value;
            assert!(v.is_finite(), "{m} gave {v}");
            if m.is_bounded() {
                assert!((-1e-9..=1.0 + 1e-9).contains(&v), "{m} gave {v}");
            }
        }
    }
});
