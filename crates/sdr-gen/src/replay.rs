//! Already generated candidates, streamed back token by token, so that
//! pruning can be evaluated after the fact (as the paper did for API models).
//!
//! Token boundaries come from the generation record (`token_ends`, byte
//! offsets written by `sdr generate`). Text without them is cut into
//! pseudo-tokens (a word or a punctuation mark with its leading
//! whitespace), and the outcome says the counts are estimated.

use serde::{Deserialize, Serialize};

pub use crate::lenient::{Finish, Lenient, StudyId, TokenCount};
use crate::{CandidateState, Candidates, End, GenError, Piece, SamplingSettings};

/// One stored candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// Full generated text.
    pub text: String,
    /// Byte offsets after each token, non-decreasing (a token may add no
    /// text: a stop token, part of a UTF-8 character), on character
    /// boundaries, the last one at `text.len()` (none for an empty text).
    pub token_ends: Option<Vec<usize>>,
}

/// Replays stored candidates through the [`Candidates`] interface.
#[derive(Debug)]
pub struct Replay {
    texts: Vec<String>,
    ends: Vec<Vec<usize>>,
    pos: Vec<usize>,
    done: Vec<bool>,
    estimated: bool,
}

/// Cuts `text` into pseudo-tokens: leading whitespace plus a run of letters
/// and digits, or plus one other character.
pub fn pseudo_token_ends(text: &str) -> Vec<usize> {
    let mut ends = Vec::new();
    let mut it = text.char_indices().peekable();
    while let Some(&(_, c)) = it.peek() {
        // leading whitespace
        if c.is_whitespace() {
            while it.peek().is_some_and(|&(_, c)| c.is_whitespace()) {
                it.next();
            }
        }
        match it.next() {
            None => break,
            Some((i, c)) if c.is_alphanumeric() => {
                let mut end = i + c.len_utf8();
                while let Some(&(j, d)) = it.peek() {
                    if !d.is_alphanumeric() {
                        break;
                    }
                    end = j + d.len_utf8();
                    it.next();
                }
                ends.push(end);
            }
            Some((i, c)) => ends.push(i + c.len_utf8()),
        }
    }
    if ends.last().copied().unwrap_or(0) < text.len() {
        ends.push(text.len());
    }
    ends
}

/// Checks a generation record's framing: one `token_ends` list per candidate
/// (`candidates` of them) and, where the record counts each candidate's
/// `tokens`, one token end per token. A server stream's pieces are chunks,
/// and its last one also carries the tokens that the server's usage count has
/// beyond the chunks (the OpenAI back-end: `chunked`), so there a candidate
/// may have fewer ends than tokens. The offsets themselves are checked by
/// [`Replay::new`] ([`check_token_ends`]). The error says what is wrong.
pub fn check_framing(
    candidates: usize,
    token_ends: &[Vec<usize>],
    tokens: Option<&[usize]>,
    chunked: bool,
) -> Result<(), String> {
    if token_ends.len() != candidates {
        return Err(format!(
            "{} token_ends lists for {candidates} candidates",
            token_ends.len()
        ));
    }
    let Some(tokens) = tokens else {
        return Ok(());
    };
    for (i, (ends, &n)) in token_ends.iter().zip(tokens).enumerate() {
        if ends.len() > n {
            return Err(format!(
                "candidate {i}: token_ends has {} offsets, more than its {n} tokens (\"tokens\")",
                ends.len()
            ));
        }
        if !chunked && ends.len() != n {
            return Err(format!(
                "candidate {i}: token_ends has {} offsets, but \"tokens\" says {n}",
                ends.len()
            ));
        }
    }
    Ok(())
}

/// Checks stored token boundaries against their text (see [`Stored::token_ends`]);
/// the error says what is wrong, starting with `token_ends`.
pub fn check_token_ends(text: &str, ends: &[usize]) -> Result<(), String> {
    let n = text.len();
    let mut prev = 0;
    for (j, &b) in ends.iter().enumerate() {
        if b < prev {
            return Err(format!(
                "token_ends decreases at index {j} ({prev} then {b})"
            ));
        }
        if b > n {
            return Err(format!(
                "token_ends offset {b} is past the end of the text ({n} bytes)"
            ));
        }
        if !text.is_char_boundary(b) {
            return Err(format!("token_ends offset {b} splits a UTF-8 character"));
        }
        prev = b;
    }
    match ends.last() {
        None if n > 0 => Err(format!("token_ends is empty, but the text has {n} bytes")),
        Some(&last) if last != n => Err(format!(
            "token_ends ends at byte {last}, but the text has {n} bytes"
        )),
        _ => Ok(()),
    }
}

impl Replay {
    /// Checks the stored token boundaries; `what` names the record in errors.
    pub fn new(candidates: Vec<Stored>, what: &str) -> Result<Self, GenError> {
        if candidates.is_empty() {
            return Err(GenError::Input(format!("{what}: no candidates")));
        }
        let mut estimated = false;
        let mut texts = Vec::new();
        let mut ends = Vec::new();
        for (i, c) in candidates.into_iter().enumerate() {
            let e = match c.token_ends {
                Some(e) => {
                    check_token_ends(&c.text, &e)
                        .map_err(|m| GenError::Input(format!("{what}: candidate {i}: {m}")))?;
                    e
                }
                None => {
                    estimated = true;
                    pseudo_token_ends(&c.text)
                }
            };
            texts.push(c.text);
            ends.push(e);
        }
        let k = texts.len();
        Ok(Self {
            texts,
            ends,
            pos: vec![0; k],
            done: vec![false; k],
            estimated,
        })
    }

    /// Whether some token counts are pseudo-token estimates.
    pub fn estimated(&self) -> bool {
        self.estimated
    }

    /// Tokens of candidate `id` in full.
    pub fn full_tokens(&self, id: usize) -> usize {
        self.ends[id].len()
    }
}

/// One study's generation record, as `sdr generate` writes it (one JSON
/// line) and reads it back (`--resume`, `sdr prune --full`), strictly.
/// [`ReplayRecord`] reads the same line, and any `{"id", "candidates"}`
/// line, over the same field types taken leniently ([`Lenient`]):
/// [`ReplayRecord::from`] a `GenRecord` is what it reads of its line.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct GenRecord {
    pub id: String,
    pub backend: String,
    pub prompt: String,
    pub context: Option<String>,
    pub seed: u64,
    /// How the candidates were sampled, checked by `--resume`; absent in records
    /// written before 0.2.0 (then only K is checked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<SamplingSettings>,
    pub candidates: Vec<String>,
    pub tokens: Vec<usize>,
    pub finish: Vec<Option<End>>,
    pub token_ends: Vec<Vec<usize>>,
    pub sentence_tokens: Vec<Vec<usize>>,
    pub seconds: f64,
}

impl GenRecord {
    /// Study `id`'s record from its candidates' final `states`.
    pub fn new(
        id: String,
        context: Option<String>,
        backend: String,
        prompt: String,
        seed: u64,
        states: &[CandidateState],
        seconds: f64,
    ) -> Self {
        GenRecord {
            id,
            backend,
            prompt,
            context,
            seed,
            sampling: None,
            candidates: states.iter().map(|s| s.text.clone()).collect(),
            tokens: states.iter().map(|s| s.tokens).collect(),
            finish: states.iter().map(|s| s.end.clone()).collect(),
            token_ends: states.iter().map(|s| s.token_ends.clone()).collect(),
            sentence_tokens: states.iter().map(|s| s.sentence_tokens.clone()).collect(),
            seconds,
        }
    }
}

/// One line of a candidates file (what `sdr select`, `sdr eval`, `sdr select-eval` and
/// `sdr prune --replay` read): `sdr generate`'s record ([`GenRecord`]), or any
/// `{"id", "candidates"}` line. Of [`GenRecord`]'s fields it reads `id`,
/// `backend`, `tokens` and `finish` leniently ([`Lenient`]: any JSON value,
/// kept as written), `candidates` and `token_ends` as typed; other fields
/// are ignored.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ReplayRecord {
    /// Any JSON value (`sdr select` echoes it back as written).
    pub id: StudyId,
    pub candidates: Vec<String>,
    /// Byte offsets after each token, per candidate.
    #[serde(default)]
    pub token_ends: Option<Vec<Vec<usize>>>,
    /// Tokens per candidate, as the line holds them: checked by
    /// [`ReplayRecord::token_counts`], so that a bad count's error names the field.
    #[serde(default)]
    pub tokens: Option<Vec<TokenCount>>,
    /// `sdr generate`'s back-end (`local:...`, `openai:...`).
    #[serde(default)]
    pub backend: Option<Lenient<String>>,
    /// `sdr generate`'s end of each candidate (a caller refuses an
    /// `{"error": ...}`: [`ReplayRecord::failed`]).
    #[serde(default)]
    pub finish: Vec<Finish>,
}

impl From<GenRecord> for ReplayRecord {
    /// What a `ReplayRecord` reads of `rec`'s line.
    fn from(rec: GenRecord) -> Self {
        ReplayRecord {
            id: rec.id.into(),
            candidates: rec.candidates,
            token_ends: Some(rec.token_ends),
            tokens: Some(rec.tokens.into_iter().map(Lenient::from).collect()),
            backend: Some(rec.backend.into()),
            finish: rec.finish.into_iter().map(Lenient::from).collect(),
        }
    }
}

impl ReplayRecord {
    /// The `tokens` counts, one per candidate, where the line has them; the
    /// error names the field ([`candidate_tokens`]).
    pub fn token_counts(&self) -> Result<Option<Vec<usize>>, String> {
        let k = self.candidates.len();
        self.tokens
            .as_deref()
            .map(|t| counts(t, k, Lenient::count))
            .transpose()
    }

    /// The first candidate that failed in generation (its `finish` is an
    /// `{"error": ...}`: [`Lenient::error`]), with the error.
    pub fn failed(&self) -> Option<(usize, String)> {
        self.finish
            .iter()
            .enumerate()
            .find_map(|(i, f)| Some((i, f.error()?)))
    }

    /// Checks `tokens` ([`ReplayRecord::token_counts`]) and the record's framing
    /// ([`check_framing`]; chunked for an `openai:...` back-end, whose
    /// server may count more tokens than its stream had chunks).
    ///
    /// # Errors
    /// [`GenError::Input`] saying what is wrong (the caller adds the line).
    pub fn check_tokens(&self) -> Result<(), GenError> {
        let tokens = self.token_counts().map_err(GenError::Input)?;
        let Some(te) = &self.token_ends else {
            return Ok(());
        };
        let chunked = matches!(&self.backend, Some(Lenient::Typed(b)) if b.starts_with("openai:"));
        check_framing(self.candidates.len(), te, tokens.as_deref(), chunked)
            .map_err(GenError::Input)
    }

    /// The candidates as a [`Replay`] (their token ends checked by
    /// [`Replay::new`]; `what` names the record in errors).
    pub fn replay(&self, what: &str) -> Result<Replay, GenError> {
        let stored = self
            .candidates
            .iter()
            .enumerate()
            .map(|(i, c)| Stored {
                text: c.clone(),
                token_ends: self.token_ends.as_ref().map(|te| te[i].clone()),
            })
            .collect();
        Replay::new(stored, what)
    }
}

/// A token count as a record holds it: anything but a non-negative integer
/// is an error naming `field`, never a count silently ignored.
pub fn token_count(t: &serde_json::Value, field: &str) -> Result<usize, String> {
    t.as_u64()
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| crate::lenient::not_a_count(t, field))
}

/// A record's `"tokens"`: one count per candidate (of `k`), each checked by
/// [`token_count`].
pub fn candidate_tokens(tokens: &[serde_json::Value], k: usize) -> Result<Vec<usize>, String> {
    counts(tokens, k, token_count)
}

/// `tokens`, one per candidate (of `k`), each read by `count(token, field)`.
fn counts<T>(
    tokens: &[T],
    k: usize,
    count: impl Fn(&T, &str) -> Result<usize, String>,
) -> Result<Vec<usize>, String> {
    if tokens.len() != k {
        return Err(format!(
            "\"tokens\" has {} counts for {k} candidates",
            tokens.len()
        ));
    }
    tokens
        .iter()
        .enumerate()
        .map(|(i, t)| count(t, &format!("tokens[{i}]")))
        .collect()
}

impl Candidates for Replay {
    fn k(&self) -> usize {
        self.texts.len()
    }

    fn next(&mut self, ids: &[usize]) -> Result<Vec<Piece>, GenError> {
        let mut out = Vec::with_capacity(ids.len());
        for &id in ids {
            if id >= self.texts.len() || self.done[id] {
                return Err(GenError::Protocol(format!(
                    "replay candidate {id} is not live"
                )));
            }
            let p = self.pos[id];
            let start = if p == 0 { 0 } else { self.ends[id][p - 1] };
            let piece = if p < self.ends[id].len() {
                self.pos[id] += 1;
                let last = self.pos[id] == self.ends[id].len();
                let end = if last {
                    self.texts[id].len()
                } else {
                    self.ends[id][p]
                };
                if last {
                    self.done[id] = true;
                }
                Piece {
                    text: self.texts[id][start..end].to_string(),
                    tokens: 1,
                    end: last.then_some(End::Stop),
                }
            } else {
                // An empty candidate ends at once.
                self.done[id] = true;
                Piece {
                    text: self.texts[id][start..].to_string(),
                    tokens: 0,
                    end: Some(End::Stop),
                }
            };
            out.push(piece);
        }
        Ok(out)
    }

    fn cancel(&mut self, id: usize) {
        if let Some(d) = self.done.get_mut(id) {
            *d = true;
        }
    }

    fn produced(&self, id: usize) -> usize {
        self.pos[id]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_wants_one_list_per_candidate_and_one_end_per_token() {
        let ends = vec![vec![3, 5], vec![2]];
        assert!(check_framing(2, &ends, None, false).is_ok());
        assert!(check_framing(2, &ends, Some(&[2, 1]), false).is_ok());
        let e = check_framing(3, &ends, None, false).unwrap_err();
        assert_eq!(e, "2 token_ends lists for 3 candidates");
        let e = check_framing(2, &ends, Some(&[2, 4]), false).unwrap_err();
        assert_eq!(
            e,
            "candidate 1: token_ends has 1 offsets, but \"tokens\" says 4"
        );
        // A server's chunks may carry several tokens, never fewer than one.
        assert!(check_framing(2, &ends, Some(&[2, 4]), true).is_ok());
        let e = check_framing(2, &ends, Some(&[1, 1]), true).unwrap_err();
        assert!(
            e.starts_with("candidate 0: token_ends has 2 offsets, more than its 1"),
            "{e}"
        );
    }

    #[test]
    fn a_record_checks_its_counts_then_its_framing() {
        let rec = |line: &str| -> ReplayRecord { serde_json::from_str(line).unwrap() };
        let ok = rec(
            r#"{"id": 1, "candidates": ["a b", "c"], "tokens": [2, 1], "token_ends": [[1, 3], [1]]}"#,
        );
        ok.check_tokens().unwrap();
        assert_eq!(ok.replay("f:1").unwrap().full_tokens(0), 2);
        for (line, want) in [
            (
                r#"{"id": 1, "candidates": ["a", "c"], "tokens": [1]}"#,
                "\"tokens\" has 1 counts for 2 candidates",
            ),
            (
                r#"{"id": 1, "candidates": ["a", "c"], "tokens": [1, -1]}"#,
                "\"tokens[1]\" must be a non-negative integer, got -1",
            ),
            (
                r#"{"id": 1, "candidates": ["a b", "c"], "tokens": [3, 1], "token_ends": [[1, 3], [1]]}"#,
                "candidate 0: token_ends has 2 offsets, but \"tokens\" says 3",
            ),
        ] {
            assert_eq!(rec(line).check_tokens().unwrap_err().to_string(), want);
        }
        // An OpenAI server's chunks may carry more tokens than one each.
        rec(r#"{"id": 1, "candidates": ["a b", "c"], "tokens": [3, 1], "token_ends": [[1, 3], [1]], "backend": "openai:x"}"#)
            .check_tokens()
            .unwrap();
    }

    fn gen_record() -> GenRecord {
        GenRecord {
            id: "s1".into(),
            backend: "openai:http://x/v1 m".into(),
            prompt: "p2".into(),
            context: None,
            seed: 9,
            sampling: Some(SamplingSettings {
                k: Some(2),
                temperature: Some(0.7),
                top_p: Some(1.0),
                max_tokens: Some(4),
                repetition_penalty: Some(1.0),
                prefill: None,
            }),
            candidates: vec!["a b".into(), "c".into()],
            tokens: vec![3, 1],
            finish: vec![Some(End::Stop), Some(End::Error("idle timeout".into()))],
            token_ends: vec![vec![1, 3], vec![1]],
            sentence_tokens: vec![vec![3], vec![1]],
            seconds: 0.5,
        }
    }

    #[test]
    fn a_generation_record_reads_back_typed() {
        let rec = gen_record();
        let line = serde_json::to_string(&rec).unwrap();
        assert_eq!(
            line,
            r#"{"id":"s1","backend":"openai:http://x/v1 m","prompt":"p2","context":null,"seed":9,"sampling":{"k":2,"temperature":0.7,"top_p":1.0,"max_tokens":4,"repetition_penalty":1.0,"prefill":null},"candidates":["a b","c"],"tokens":[3,1],"finish":["stop",{"error":"idle timeout"}],"token_ends":[[1,3],[1]],"sentence_tokens":[[3],[1]],"seconds":0.5}"#
        );
        let read: ReplayRecord = serde_json::from_str(&line).unwrap();
        assert_eq!(read, ReplayRecord::from(rec.clone()));
        // Every lenient field is typed, as written.
        assert_eq!(read.id, Lenient::Typed("s1".into()));
        assert!(read.finish.iter().all(|f| f.typed().is_some()));
        assert_eq!(read.token_counts(), Ok(Some(vec![3, 1])));
        assert_eq!(read.failed(), Some((1, "idle timeout".into())));
        // Chunked: 3 tokens over 2 ends is fine for an OpenAI server.
        read.check_tokens().unwrap();
        // And the strict reader takes it back whole.
        let again: GenRecord = serde_json::from_str(&line).unwrap();
        assert_eq!(serde_json::to_string(&again).unwrap(), line);
    }

    #[test]
    fn a_candidates_line_is_read_leniently() {
        let rec: ReplayRecord = serde_json::from_str(
            r#"{"id": 12, "candidates": ["a", "b"], "tokens": [1, "x"], "finish": ["odd", {"error": 7}],
                "backend": 5, "prompt": [], "seed": "s"}"#,
        )
        .unwrap();
        assert_eq!(rec.id, Lenient::Other(serde_json::json!(12)));
        assert_eq!(rec.id.text(), "12");
        assert_eq!(serde_json::to_string(&rec.id).unwrap(), "12");
        assert_eq!(rec.backend, Some(Lenient::Other(serde_json::json!(5))));
        assert_eq!(rec.finish[0], Lenient::Other(serde_json::json!("odd")));
        assert_eq!(rec.failed(), Some((1, "7".into())));
        assert_eq!(
            rec.token_counts().unwrap_err(),
            "\"tokens[1]\" must be a non-negative integer, got \"x\""
        );
        // Absent or null optional fields: nothing to check, nothing failed.
        let bare: ReplayRecord =
            serde_json::from_str(r#"{"id": null, "candidates": [""], "tokens": null}"#).unwrap();
        assert_eq!(bare.id.text(), "null");
        assert_eq!(bare.token_counts(), Ok(None));
        assert_eq!(bare.failed(), None);
        bare.check_tokens().unwrap();
        // What stays an error: no id, no candidates, a null finish, tokens
        // that are not a list, token_ends that are not offsets.
        for (line, want) in [
            (r#"{"candidates": []}"#, "missing field `id`"),
            (r#"{"id": 1}"#, "missing field `candidates`"),
            (
                r#"{"id": 1, "candidates": [], "finish": null}"#,
                "invalid type: null, expected a sequence",
            ),
            (
                r#"{"id": 1, "candidates": [], "tokens": 3}"#,
                "invalid type: integer `3`, expected a sequence",
            ),
            (
                r#"{"id": 1, "candidates": [], "token_ends": [[-1]]}"#,
                "invalid value: integer `-1`, expected usize",
            ),
        ] {
            let e = serde_json::from_str::<ReplayRecord>(line)
                .unwrap_err()
                .to_string();
            assert!(e.starts_with(want), "{line}: {e}");
        }
    }

    #[test]
    fn pseudo_tokens() {
        let t = "Findings: Heart 1.5 cm.\n No  effusion";
        let ends = pseudo_token_ends(t);
        let mut prev = 0;
        let toks: Vec<&str> = ends
            .iter()
            .map(|&e| {
                let s = &t[prev..e];
                prev = e;
                s
            })
            .collect();
        assert_eq!(
            toks,
            [
                "Findings",
                ":",
                " Heart",
                " 1",
                ".",
                "5",
                " cm",
                ".",
                "\n No",
                "  effusion"
            ]
        );
        assert_eq!(pseudo_token_ends(""), Vec::<usize>::new());
        assert_eq!(pseudo_token_ends("  "), vec![2]);
        assert_eq!(pseudo_token_ends("é ü"), vec![2, 5]);
    }

    #[test]
    fn streams_back_the_text() {
        let mut r = Replay::new(
            vec![
                Stored {
                    text: "ab cd".into(),
                    token_ends: Some(vec![2, 5]),
                },
                Stored {
                    text: String::new(),
                    token_ends: None,
                },
            ],
            "study 1",
        )
        .unwrap();
        let p = r.next(&[0, 1]).unwrap();
        assert_eq!(p[0].text, "ab");
        assert_eq!(p[0].end, None);
        assert_eq!(p[1].end, Some(End::Stop));
        let p = r.next(&[0]).unwrap();
        assert_eq!(
            (p[0].text.as_str(), p[0].end.clone()),
            (" cd", Some(End::Stop))
        );
        assert!(r.next(&[0]).is_err());
        assert!(r.estimated());
    }

    #[test]
    fn rejects_bad_offsets() {
        for ends in [vec![3, 2], vec![9], vec![1], vec![2], vec![]] {
            // decreasing, past the end, inside 'é', short of the end, none
            let e = Replay::new(
                vec![Stored {
                    text: "éab".into(),
                    token_ends: Some(ends),
                }],
                "study 7",
            )
            .unwrap_err();
            assert!(
                e.to_string()
                    .starts_with("study 7: candidate 0: token_ends"),
                "{e}"
            );
        }
    }

    #[test]
    fn accepts_what_generation_writes() {
        // A stop token and the first byte of a split character add no text;
        // an empty text may end at once or with a stop token.
        for (text, ends) in [
            ("ab é", vec![2, 2, 3, 3, 5, 5]),
            ("", vec![]),
            ("", vec![0]),
        ] {
            check_token_ends(text, &ends).unwrap();
        }
    }
}
