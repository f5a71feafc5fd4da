//! Sentence-level lock-step over K streaming candidates (SPEC §6).
//!
//! A candidate's sentences are the [`plain_units`] of its text so far: the
//! Findings and Impression sentences, and also a preamble or header-less text
//! (so that a model that ignores the layout still advances sentence by
//! sentence). While a candidate is live its last unit may still grow, so it
//! counts as complete only once text after it has arrived; this costs at most
//! one token of the next sentence, which is counted as generated.
//!
//! A candidate whose report has ended (SPEC §1: `</answer>`, a second Findings or
//! Impression header, a line opening another example) is stopped there and its
//! stream closed: what a small model writes after its report (the prompt's examples,
//! again) cannot change the parsed report, only cost tokens.

use sdr_core::report::{plain_units, report_ended, Section};
use serde::Serialize;

use crate::{Candidates, End, GenError};

/// The complete sentences of a partial output, by section.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Partial {
    /// Complete Findings sentences.
    pub findings: Vec<String>,
    /// Complete Impression sentences.
    pub impression: Vec<String>,
}

/// One candidate's output so far.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct CandidateState {
    /// Generated text.
    pub text: String,
    /// Tokens consumed through [`Candidates::next`].
    pub tokens: usize,
    /// Why it stopped; `None` while live.
    pub end: Option<End>,
    /// Tokens consumed when the candidate's n-th sentence was seen complete.
    pub sentence_tokens: Vec<usize>,
    /// Byte offset in `text` after each token-bearing piece, for replay.
    pub token_ends: Vec<usize>,
    #[serde(skip)]
    complete: usize,
}

impl CandidateState {
    /// Whether it can still produce tokens.
    pub fn is_live(&self) -> bool {
        self.end.is_none()
    }

    /// Number of complete sentences (all sections, preamble included).
    pub fn complete_sentences(&self) -> usize {
        self.complete
    }

    /// The complete Findings and Impression sentences.
    pub fn partial(&self) -> Partial {
        let mut units = plain_units(&self.text);
        if self.is_live() {
            units.pop();
        }
        let mut p = Partial::default();
        for u in units {
            match u.section {
                Some(Section::Findings) => p.findings.push(u.text),
                Some(Section::Impression) => p.impression.push(u.text),
                None => {}
            }
        }
        p
    }

    fn push(&mut self, piece: crate::Piece) {
        self.text.push_str(&piece.text);
        if piece.tokens > 0 {
            self.tokens += piece.tokens;
            self.token_ends.push(self.text.len());
        }
        if piece.end.is_some() {
            self.end = piece.end;
        }
        self.recount();
    }

    /// Ends a live candidate (its text is kept) and counts its last sentence as complete.
    fn finish(&mut self, end: End) {
        self.end = Some(end);
        self.recount();
    }

    fn recount(&mut self) {
        let units = plain_units(&self.text).len();
        let complete = if self.is_live() {
            units.saturating_sub(1)
        } else {
            units
        };
        while self.sentence_tokens.len() < complete {
            self.sentence_tokens.push(self.tokens);
        }
        self.complete = complete;
    }
}

/// Drives K candidates sentence by sentence.
pub struct LockStep<'a> {
    batch: Box<dyn Candidates + 'a>,
    states: Vec<CandidateState>,
    stop_at_report_end: bool,
}

impl<'a> LockStep<'a> {
    /// Wraps started candidates.
    pub fn new(batch: Box<dyn Candidates + 'a>) -> Self {
        let states = vec![CandidateState::default(); batch.k()];
        Self {
            batch,
            states,
            stop_at_report_end: true,
        }
    }

    /// Whether a candidate is stopped once its report has ended (on by default).
    pub fn stop_at_report_end(mut self, on: bool) -> Self {
        self.stop_at_report_end = on;
        self
    }

    /// Every candidate's state.
    pub fn states(&self) -> &[CandidateState] {
        &self.states
    }

    /// Number of candidates.
    pub fn k(&self) -> usize {
        self.states.len()
    }

    /// Tokens the back-end produced for candidate `id` (see [`Candidates::produced`]).
    pub fn produced(&self, id: usize) -> usize {
        self.batch.produced(id)
    }

    /// Decodes the candidates in `ids` until each holds `target` complete
    /// sentences or has ended; `on_piece(id)` is called after each piece.
    pub fn decode_until(
        &mut self,
        ids: &[usize],
        target: Option<usize>,
        mut on_piece: impl FnMut(usize, &CandidateState),
    ) -> Result<(), GenError> {
        if let Some(&bad) = ids.iter().find(|&&i| i >= self.states.len()) {
            return Err(GenError::Protocol(format!(
                "candidate {bad} does not exist (k = {})",
                self.states.len()
            )));
        }
        let pending = |states: &[CandidateState]| -> Vec<usize> {
            ids.iter()
                .copied()
                .filter(|&i| {
                    let s = &states[i];
                    s.is_live() && target.is_none_or(|t| s.complete < t)
                })
                .collect()
        };
        let mut todo = pending(&self.states);
        while !todo.is_empty() {
            let pieces = self.batch.next(&todo)?;
            if pieces.len() != todo.len() {
                return Err(GenError::Protocol(format!(
                    "back-end returned {} pieces for {} candidates",
                    pieces.len(),
                    todo.len()
                )));
            }
            for (&id, piece) in todo.iter().zip(pieces) {
                let state = &mut self.states[id];
                state.push(piece);
                if self.stop_at_report_end && state.is_live() && report_ended(&state.text) {
                    self.batch.cancel(id);
                    state.finish(End::Stop);
                }
                on_piece(id, &self.states[id]);
            }
            todo = pending(&self.states);
        }
        Ok(())
    }

    /// Decodes the candidates in `ids` to their end.
    pub fn decode_to_end(
        &mut self,
        ids: &[usize],
        on_piece: impl FnMut(usize, &CandidateState),
    ) -> Result<(), GenError> {
        self.decode_until(ids, None, on_piece)
    }

    /// Cancels a live candidate: its stream stops and its text so far is kept.
    pub fn cancel(&mut self, id: usize) {
        if let Some(s) = self.states.get_mut(id) {
            if s.is_live() {
                self.batch.cancel(id);
                s.end = Some(End::Cancelled);
            }
        }
    }

    /// The final states, consuming the driver (the back-end's streams close).
    pub fn into_states(self) -> Vec<CandidateState> {
        self.states
    }
}
