//! Properties of explanations on synthetic sentence sets: random directions in
//! 32 dimensions are nearly orthogonal (cost ~0.5, far above any threshold),
//! so "the same finding" is the same vector and "another finding" another one.

use super::*;
use crate::reward::{reward, EmbeddedSections};
use crate::test_support::lcg;

const DIM: usize = 32;

/// `n` random unit vectors (row-major) and their names `s0`, `s1`, ...
fn findings(n: usize, seed: u64) -> (Vec<String>, Vec<f64>) {
    let mut s = seed;
    let mut data = Vec::with_capacity(n * DIM);
    for _ in 0..n {
        let row: Vec<f64> = (0..DIM).map(|_| lcg(&mut s) - 0.5).collect();
        let norm = row.iter().map(|x| x * x).sum::<f64>().sqrt();
        data.extend(row.iter().map(|x| x / norm));
    }
    ((0..n).map(|i| format!("s{seed}-{i}")).collect(), data)
}

fn pick(text: &[String], data: &[f64], keep: &[usize]) -> (Vec<String>, Vec<f64>) {
    let t = keep.iter().map(|&k| text[k].clone()).collect();
    let d = keep
        .iter()
        .flat_map(|&k| data[k * DIM..(k + 1) * DIM].iter().copied())
        .collect();
    (t, d)
}

fn view<'a>(text: &'a [String], data: &'a [f64]) -> Sentences<'a> {
    Sentences {
        text,
        vectors: SetView::new(data, DIM),
    }
}

fn metrics() -> Vec<Metric> {
    Metric::all()
}

/// Whether every sentence of a pair with a perfect match gets a partner:
/// partial OT with a fixed `rho < 1` moves only part of the mass, so some
/// sentences stay unpaired (and are still not missing: they have a neighbour).
fn pairs_everything(metric: &Metric) -> bool {
    !matches!(
        metric,
        Metric::Pot {
            rho: crate::distance::Rho::Fixed(_)
        }
    )
}

#[test]
fn a_candidate_equal_to_its_reference_is_all_matched_at_zero_cost() {
    let (text, data) = findings(5, 1);
    for metric in metrics() {
        let e = explain_section(
            &metric,
            DEFAULT_THRESHOLD,
            &view(&text, &data),
            &view(&text, &data),
        )
        .unwrap();
        assert!(e.missing.is_empty() && e.unsupported.is_empty(), "{metric}");
        for (side, list) in [("candidate", &e.candidate), ("reference", &e.reference)] {
            for (i, s) in list.iter().enumerate() {
                assert_eq!(s.sentence, text[i]);
                assert_eq!(s.nearest, i, "{metric} {side} {i}");
                assert!(s.nearest_cost < 1e-12);
                if pairs_everything(&metric) {
                    assert_eq!(s.matched, Some(i), "{metric} {side} {i}");
                }
                if let Some(c) = s.cost {
                    assert!(c < 1e-12, "{metric} {side} {i}");
                }
            }
        }
        if !matches!(
            metric,
            Metric::Gw { .. } | Metric::Sinkhorn { .. } | Metric::Uot { .. }
        ) {
            assert!(e.distance < 1e-12, "{metric}: {}", e.distance);
            assert_eq!(e.reward, 1.0 - e.distance);
        }
    }
}

#[test]
fn dropping_a_reference_finding_makes_exactly_it_missing() {
    let (text, data) = findings(5, 2);
    for dropped in [0, 3, 4] {
        let keep: Vec<usize> = (0..5).filter(|&k| k != dropped).collect();
        let (ct, cd) = pick(&text, &data, &keep);
        for metric in metrics() {
            let e = explain_section(
                &metric,
                DEFAULT_THRESHOLD,
                &view(&ct, &cd),
                &view(&text, &data),
            )
            .unwrap();
            assert_eq!(e.missing, [dropped], "{metric}");
            assert!(e.unsupported.is_empty(), "{metric}");
            assert!(e.reference[dropped].nearest_cost > DEFAULT_THRESHOLD);
        }
    }
}

#[test]
fn adding_an_unrelated_finding_makes_exactly_it_unsupported() {
    let (text, data) = findings(4, 3);
    let (extra_t, extra_d) = findings(1, 99);
    for at in [0, 2, 4] {
        let mut ct = text.clone();
        ct.insert(at, extra_t[0].clone());
        let mut cd = data.clone();
        cd.splice(at * DIM..at * DIM, extra_d.iter().copied());
        for metric in metrics() {
            let e = explain_section(
                &metric,
                DEFAULT_THRESHOLD,
                &view(&ct, &cd),
                &view(&text, &data),
            )
            .unwrap();
            assert_eq!(e.unsupported, [at], "{metric}");
            assert!(e.missing.is_empty(), "{metric}");
            // Every other candidate sentence is paired with its own reference
            // sentence (Hung-Pen leaves the surplus one unpaired).
            for (i, s) in e.candidate.iter().enumerate().filter(|(i, _)| *i != at) {
                let own = if i < at { i } else { i - 1 };
                if pairs_everything(&metric) && !matches!(metric, Metric::Gw { .. }) {
                    assert_eq!(s.matched, Some(own), "{metric} candidate {i}");
                }
            }
            if matches!(metric, Metric::HungPen { .. }) {
                assert_eq!(e.candidate[at].matched, None);
                assert_eq!(e.candidate[at].cost, None);
            }
        }
    }
}

#[test]
fn plan_based_metrics_report_masses_others_do_not() {
    let (text, data) = findings(3, 4);
    let (other, od) = findings(2, 5);
    for metric in metrics() {
        let e = explain_section(&metric, 0.2, &view(&text, &data), &view(&other, &od)).unwrap();
        let plan_based = !matches!(
            metric,
            Metric::Chamfer | Metric::Hausdorff | Metric::HungNn | Metric::HungPen { .. }
        );
        assert_eq!(e.candidate[0].mass.is_some(), plan_based, "{metric}");
        assert_eq!(e.reference[1].mass.is_some(), plan_based, "{metric}");
    }
}

#[test]
fn the_report_reward_is_the_rewards() {
    let (ft, fd) = findings(4, 6);
    let (it, id) = findings(2, 7);
    let (cft, cfd) = pick(&ft, &fd, &[0, 2]);
    let (cit, cid) = pick(&it, &id, &[1]);
    let reference = ReportSentences {
        findings: view(&ft, &fd),
        impression: view(&it, &id),
    };
    let candidate = ReportSentences {
        findings: view(&cft, &cfd),
        impression: view(&cit, &cid),
    };
    for metric in metrics() {
        let options = ExplainOptions::new(metric, None).unwrap();
        let e = explain_report(&options, Some(&candidate), &reference, 0).unwrap();
        let expected = reward(
            &options.reward,
            Some(&EmbeddedSections {
                findings: candidate.findings.vectors,
                impression: candidate.impression.vectors,
            }),
            &EmbeddedSections {
                findings: reference.findings.vectors,
                impression: reference.impression.vectors,
            },
            0,
        )
        .unwrap();
        assert_eq!(e.reward, expected.reward, "{metric}");
        let s = e.sections.as_ref().unwrap();
        assert_eq!(s.findings.reward, expected.findings);
        assert_eq!(s.impression.reward, expected.impression);
        assert_eq!(s.findings.missing, [1, 3]);
        assert_eq!(s.impression.missing, [0]);
        assert!(e.format_valid);
        assert_eq!(e.metric, metric.to_string());
        assert_eq!(e.threshold, DEFAULT_THRESHOLD);
    }
    let malformed = explain_report(&ExplainOptions::default(), None, &reference, 0).unwrap();
    assert!(!malformed.format_valid && malformed.sections.is_none());
    assert_eq!(malformed.reward, 0.0);
}

#[test]
fn bad_inputs_are_errors_naming_them() {
    let (t, d) = findings(2, 8);
    let empty: Vec<String> = Vec::new();
    let s = view(&t, &d);
    let err = explain_section(&Metric::Chamfer, 1.5, &s, &s).unwrap_err();
    assert_eq!(err, SdrError::BadThreshold { value: 1.5 });
    assert!(ExplainOptions::new(Metric::Chamfer, Some(f64::NAN)).is_err());
    assert!(ExplainOptions::new(Metric::Chamfer, Some(-0.1)).is_err());
    let short = Sentences {
        text: &t[..1],
        vectors: SetView::new(&d, DIM),
    };
    let err = explain_section(&Metric::Chamfer, 0.2, &s, &short).unwrap_err();
    assert_eq!(
        err,
        SdrError::SentenceCount {
            set: Side::B,
            sentences: 1,
            vectors: 2
        }
    );
    assert_eq!(err.to_string(), "set `b` has 1 sentences but 2 vectors");
    let no_vectors: [f64; 0] = [];
    let reference = ReportSentences {
        findings: s,
        impression: view(&empty, &no_vectors),
    };
    let err = explain_report(&ExplainOptions::default(), None, &reference, 4).unwrap_err();
    assert_eq!(
        err,
        SdrError::EmptySection {
            index: 4,
            section: "impression"
        }
    );
}
