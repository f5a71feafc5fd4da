//! Pruning invariants (SPEC §6) on replayed candidates with scripted scores.

use sdr_gen::replay::{Replay, Stored};
use sdr_gen::{prune, Candidates, End, GenError, LockStep, Partial, Piece, PruneConfig};

fn report(n_findings: usize, tag: &str) -> String {
    let f: Vec<String> = (0..n_findings)
        .map(|i| format!("{tag} finding {i}."))
        .collect();
    format!("Findings: {}\nImpression: {tag} impression.", f.join(" "))
}

fn replay(texts: &[String]) -> Replay {
    Replay::new(
        texts
            .iter()
            .map(|t| Stored {
                text: t.clone(),
                token_ends: None,
            })
            .collect(),
        "test",
    )
    .unwrap()
}

fn run(
    texts: &[String],
    scorer: &mut dyn sdr_gen::PartialScorer,
    config: PruneConfig,
) -> Result<sdr_gen::PruneOutcome, GenError> {
    prune(
        LockStep::new(Box::new(replay(texts))),
        scorer,
        config,
        |_| {},
    )
}

/// Score = the number in the first Findings sentence's tag ("c3 finding 0." -> 3),
/// so candidate i scores i: lower index is better.
fn by_tag(parts: &[Partial]) -> Result<Vec<f64>, GenError> {
    Ok(parts
        .iter()
        .map(|p| match p.findings.first() {
            Some(s) => s[1..s.find(' ').unwrap()].parse::<f64>().unwrap(),
            None => f64::INFINITY,
        })
        .collect())
}

#[test]
fn drops_per_round() {
    let c = PruneConfig::default();
    let got: Vec<usize> = (0..=9).map(|n| c.drops(n)).collect();
    assert_eq!(got, [0, 0, 1, 2, 2, 3, 3, 4, 4, 5]);
    let c = PruneConfig {
        warmup: 1,
        fraction: 0.1,
        survivors: 1,
    };
    assert_eq!(c.drops(8), 1);
    let c = PruneConfig {
        warmup: 1,
        fraction: 0.99,
        survivors: 1,
    };
    assert_eq!(c.drops(8), 7);
    for bad in [0.0, 1.0, -0.5, f64::NAN] {
        assert!(PruneConfig {
            warmup: 1,
            fraction: bad,
            survivors: 1,
        }
        .validate()
        .is_err());
    }
    assert!(PruneConfig {
        warmup: 0,
        fraction: 0.5,
        survivors: 1,
    }
    .validate()
    .is_err());
}

#[test]
fn two_survivors_finish_and_the_better_complete_report_wins() {
    let texts: Vec<String> = (0..8).map(|i| report(5, &format!("c{i}"))).collect();
    let config = PruneConfig {
        warmup: 1,
        fraction: 0.5,
        survivors: 2,
    };
    assert_eq!(config.drops(3), 1, "3 active keep 2");
    assert_eq!(config.drops(2), 0);
    assert!(PruneConfig {
        survivors: 0,
        ..config
    }
    .validate()
    .is_err());
    let mut scorer = by_tag;
    let out = run(&texts, &mut scorer, config).unwrap();
    // 8 -> 4 -> 2, then both decode to their end and the lower score wins.
    assert_eq!(out.rounds.len(), 3);
    let last = out.rounds.last().unwrap();
    assert_eq!(last.active.len(), 2);
    assert_eq!(last.dropped.len(), 1);
    assert!(last.active.contains(&out.chosen) && !last.dropped.contains(&out.chosen));
    let finished: Vec<usize> = (0..8)
        .filter(|&i| out.candidates[i].end != Some(End::Cancelled))
        .collect();
    assert_eq!(finished, last.active, "both survivors ran to their end");
    let single = run(&texts, &mut scorer, PruneConfig::default()).unwrap();
    assert!(out.tokens_used > single.tokens_used);
}

#[test]
fn k8_rounds_survivors_and_token_accounting() {
    let texts: Vec<String> = (0..8).map(|i| report(5, &format!("c{i}"))).collect();
    let r = replay(&texts);
    let full: usize = (0..8).map(|i| r.full_tokens(i)).sum();
    let mut seen_sentences = Vec::new();
    let mut scorer = |parts: &[Partial]| {
        seen_sentences.push(parts.iter().map(|p| p.findings.len()).collect::<Vec<_>>());
        by_tag(parts)
    };
    let mut ticks = 0;
    let out = prune(
        LockStep::new(Box::new(r)),
        &mut scorer,
        PruneConfig::default(),
        |_| ticks += 1,
    )
    .unwrap();
    let sizes: Vec<usize> = out.rounds.iter().map(|r| r.active.len()).collect();
    assert_eq!(sizes, [8, 4, 2]);
    let dropped: Vec<Vec<usize>> = out.rounds.iter().map(|r| r.dropped.clone()).collect();
    assert_eq!(dropped, [vec![7, 6, 5, 4], vec![3, 2], vec![1]]);
    // Warm-up of one sentence, then one more per round.
    assert_eq!(seen_sentences, [vec![1; 8], vec![2; 4], vec![3; 2]]);
    assert_eq!(out.chosen, 0);
    assert_eq!(out.candidates[0].text, texts[0]);
    assert_eq!(out.candidates[0].end, Some(End::Stop));
    for c in &out.candidates[1..] {
        assert_eq!(c.end, Some(End::Cancelled));
    }
    let used: usize = out.candidates.iter().map(|c| c.tokens).sum();
    assert_eq!(out.tokens_used, used);
    assert_eq!(ticks, used);
    assert_eq!(out.tokens_produced, used);
    // Each pruned candidate stopped one token into its next sentence.
    let per_sentence = 4; // " cI", " finding", " N", "."
    let header = 2; // "Findings", ":"
    let lag = 1;
    assert_eq!(out.candidates[7].tokens, header + per_sentence + lag);
    assert_eq!(out.candidates[3].tokens, header + 2 * per_sentence + lag);
    assert_eq!(out.candidates[1].tokens, header + 3 * per_sentence + lag);
    assert!(used < full, "{used} vs {full}");
}

#[test]
fn warmup_two_and_one_candidate() {
    let texts: Vec<String> = (0..3).map(|i| report(4, &format!("c{i}"))).collect();
    let mut first = None;
    let mut scorer = |parts: &[Partial]| {
        first.get_or_insert(parts.iter().map(|p| p.findings.len()).collect::<Vec<_>>());
        by_tag(parts)
    };
    let out = run(
        &texts,
        &mut scorer,
        PruneConfig {
            warmup: 2,
            fraction: 0.5,
            survivors: 1,
        },
    )
    .unwrap();
    assert_eq!(first.unwrap(), [2, 2, 2]);
    // 3 -> drop ceil(1.5) = 2 -> 1 left.
    assert_eq!(out.rounds.len(), 1);
    assert_eq!(out.rounds[0].dropped, [2, 1]);

    // K = 1: no round, decoded to the end.
    let one = vec![report(3, "c0")];
    let r = replay(&one);
    let full = r.full_tokens(0);
    let out = prune(
        LockStep::new(Box::new(r)),
        &mut by_tag,
        PruneConfig::default(),
        |_| {},
    )
    .unwrap();
    assert!(out.rounds.is_empty());
    assert_eq!(out.tokens_used, full);
    assert_eq!(out.candidates[0].text, one[0]);
}

#[test]
fn an_ended_candidate_stays_in_the_pool_and_can_win() {
    // Candidate 0 is short (ends in the first lock-step rounds); it keeps the best score.
    let texts = vec![
        "Findings: c0 finding 0.\nImpression: c0.".to_string(),
        report(6, "c1"),
        report(6, "c2"),
        report(6, "c3"),
    ];
    let mut scorer = |parts: &[Partial]| by_tag(parts);
    let out = run(&texts, &mut scorer, PruneConfig::default()).unwrap();
    assert_eq!(out.rounds[0].active, [0, 1, 2, 3]);
    assert_eq!(out.rounds[1].active, [0, 1]);
    assert_eq!(out.chosen, 0);
    assert_eq!(out.candidates[0].end, Some(End::Stop));
    assert_eq!(out.candidates[0].text, texts[0]);
}

#[test]
fn ties_and_nan_and_missing_sections() {
    // Equal scores: the higher index goes; NaN counts as +inf.
    let texts: Vec<String> = (0..4).map(|i| report(3, &format!("c{i}"))).collect();
    let mut scorer = |parts: &[Partial]| {
        Ok(by_tag(parts)?
            .into_iter()
            .map(|tag| if tag == 0.0 { f64::NAN } else { 0.5 })
            .collect())
    };
    let out = run(&texts, &mut scorer, PruneConfig::default()).unwrap();
    assert_eq!(out.rounds[0].dropped, [0, 3]);
    assert_eq!(out.chosen, 1);

    // A preamble counts as a sentence for the lock-step but not for the score.
    let texts = vec![
        "Sure, here is a report. Findings: c1 finding 0. c1 finding 1.\nImpression: x.".to_string(),
        report(2, "c2"),
    ];
    let mut parts_seen = Vec::new();
    let mut scorer = |parts: &[Partial]| {
        parts_seen.push(parts.to_vec());
        by_tag(parts)
    };
    let out = run(&texts, &mut scorer, PruneConfig::default()).unwrap();
    assert!(parts_seen[0][0].findings.is_empty());
    assert_eq!(parts_seen[0][1].findings, ["c2 finding 0."]);
    assert_eq!(out.chosen, 1);
}

#[test]
fn scorer_errors_and_wrong_lengths_propagate() {
    let texts: Vec<String> = (0..2).map(|i| report(2, &format!("c{i}"))).collect();
    let mut bad = |_: &[Partial]| Ok(vec![0.0]);
    let e = run(&texts, &mut bad, PruneConfig::default()).unwrap_err();
    assert!(e.to_string().contains("1 scores for 2 candidates"), "{e}");
    let mut failing = |_: &[Partial]| Err(GenError::Score("corpus gone".into()));
    let e = run(&texts, &mut failing, PruneConfig::default()).unwrap_err();
    assert!(e.to_string().contains("corpus gone"));
}

#[test]
fn an_ended_candidate_missing_a_section_scores_infinity() {
    // Candidate 0 ends after one Findings sentence and never writes an Impression.
    let texts = vec![
        "Findings: c0 finding 0.".to_string(),
        report(6, "c1"),
        report(6, "c2"),
    ];
    let mut scorer = |parts: &[Partial]| by_tag(parts);
    let out = run(&texts, &mut scorer, PruneConfig::default()).unwrap();
    assert!(out.rounds[0].scores[0].is_infinite());
    assert_eq!(out.rounds[0].dropped[0], 0);
    assert_eq!(out.chosen, 1);
    let json = serde_json::to_string(&out.rounds[0]).unwrap();
    assert!(json.contains("\"scores\":[null,1.0,2.0]"), "{json}");
}

/// A replay whose candidate `failing` breaks off with an error after `after` pieces.
struct Breaks {
    inner: Replay,
    failing: usize,
    after: usize,
    seen: usize,
}

impl Candidates for Breaks {
    fn k(&self) -> usize {
        self.inner.k()
    }

    fn next(&mut self, ids: &[usize]) -> Result<Vec<Piece>, GenError> {
        let mut out = self.inner.next(ids)?;
        for (p, &id) in out.iter_mut().zip(ids) {
            if id == self.failing {
                self.seen += 1;
                if self.seen == self.after {
                    p.end = Some(End::Error("stream closed before a finish_reason".into()));
                    self.inner.cancel(id);
                }
            }
        }
        Ok(out)
    }

    fn cancel(&mut self, id: usize) {
        self.inner.cancel(id)
    }

    fn produced(&self, id: usize) -> usize {
        self.inner.produced(id)
    }
}

#[test]
fn a_failed_candidate_is_never_chosen() {
    // Candidate 0 scores best and holds both sections, but its stream fails
    // at its last token: a cut text, scored +inf, so it drops first.
    let texts = vec![
        "Findings: c0 finding 0.\nImpression: c0 impression.".to_string(),
        report(6, "c1"),
        report(6, "c2"),
    ];
    let failing = Breaks {
        inner: replay(&texts),
        failing: 0,
        after: sdr_gen::replay::pseudo_token_ends(&texts[0]).len(),
        seen: 0,
    };
    let config = PruneConfig {
        warmup: 2,
        ..PruneConfig::default()
    };
    let mut scorer = |parts: &[Partial]| by_tag(parts);
    let out = prune(
        LockStep::new(Box::new(failing)),
        &mut scorer,
        config,
        |_| {},
    )
    .unwrap();
    assert!(matches!(&out.candidates[0].end, Some(End::Error(_))));
    assert!(out.rounds[0].scores[0].is_infinite());
    assert_eq!(out.rounds[0].dropped, [0, 2]);
    assert_eq!(out.chosen, 1);

    // The only candidate fails: an error naming it, not a cut report.
    let one = vec![report(3, "c0")];
    let failing = Breaks {
        inner: replay(&one),
        failing: 0,
        after: 5,
        seen: 0,
    };
    let e = prune(
        LockStep::new(Box::new(failing)),
        &mut scorer,
        PruneConfig::default(),
        |_| {},
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "candidate 0 failed: stream closed before a finish_reason"
    );
}
