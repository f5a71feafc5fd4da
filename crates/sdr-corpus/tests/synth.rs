//! Synthetic corpora: an `n` whose corpus would not fit is refused before
//! anything is allocated.

mod common;

use sdr_corpus::rng::SplitMix64;
use sdr_corpus::synth::{estimated_bytes, resample_checked, MAX_BYTES};

#[test]
fn huge_n_is_refused_with_the_estimate() {
    let mut rng = SplitMix64::new(3);
    let reports = (0..20)
        .map(|i| common::random_report(&mut rng, i, &[], true))
        .collect();
    let base = common::build(reports, 8);
    let small = resample_checked(&base, 50, 1).unwrap();
    assert_eq!(small.n_reports(), 50);
    // The estimate bounds the real size of a small resample from above and below.
    let real = 4 * (small.findings_indices.len() + small.impression_indices.len()) as u64;
    assert!(estimated_bytes(&base, 50).unwrap() > real);
    for n in [99_999_999_999_999usize, usize::MAX] {
        let e = resample_checked(&base, n, 1).err().unwrap().to_string();
        assert!(
            e.starts_with(&format!(
                "invalid option `n` = `{n}`: a corpus of {n} reports"
            )),
            "{e}"
        );
        assert!(
            e.contains(&format!("over the limit of {} GiB", MAX_BYTES >> 30)),
            "{e}"
        );
    }
}
