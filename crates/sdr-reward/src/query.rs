//! The completion inside an OpenRLHF query, shared by `sdr serve`'s
//! `/v1/openrlhf` route and Python's `sdr/openrlhf_reward.py`.
//!
//! OpenRLHF sends `query = prompt + completion`, decoded with
//! `skip_special_tokens=False`: the completion ends with the end-of-sequence
//! token (`<|im_end|>`, `<|eot_id|>`, `</s>`, `<end_of_turn>`, ...) and the
//! query may start with a beginning-of-sequence token that the prompt string
//! lacks. The template (SPEC §1) allows only whitespace outside its tags, so
//! those tokens would zero every reward; they are not the model's text, and
//! they are removed here, at the ends only.
//!
//! The query need not start with the prompt string: OpenRLHF 0.11 cuts a long
//! prompt's tokens from the left (`prompt_token_ids[-max_prompt_length:]`)
//! and decodes the query from what is left, but passes the whole prompt, and
//! a tokenizer may not decode a prompt to the same string (normalisers, a
//! prefix space). The completion then starts after the prompt's end (its chat
//! template's assistant header), which is looked for in the query.

/// Literal special tokens of the tokenizers in use for report generation
/// (Llama 2 / Mistral, Gemma, BERT-style) besides the `<|...|>` family.
const LITERAL_TOKENS: [&str; 10] = [
    "<s>",
    "</s>",
    "<bos>",
    "<eos>",
    "<pad>",
    "<unk>",
    "<start_of_turn>",
    "<end_of_turn>",
    "[PAD]",
    "[SEP]",
];

/// The length of the special token that `text` starts with, if any:
/// a literal from [`LITERAL_TOKENS`] or `<|name|>` (ChatML, Llama 3, Qwen,
/// Phi, GPT-2's `<|endoftext|>`), where `name` is 1-64 characters without
/// whitespace, `<`, `>` or `|`.
fn special_at_start(text: &str) -> Option<usize> {
    if let Some(t) = LITERAL_TOKENS.iter().find(|t| text.starts_with(**t)) {
        return Some(t.len());
    }
    let rest = text.strip_prefix("<|")?;
    let end = rest.find("|>")?;
    let name = &rest[..end];
    let plain = |c: char| !(c.is_whitespace() || matches!(c, '<' | '>' | '|'));
    ((1..=64).contains(&name.chars().count()) && name.chars().all(plain)).then_some(end + 4)
}

/// The length of the special token that `text` ends with, if any.
fn special_at_end(text: &str) -> Option<usize> {
    if let Some(t) = LITERAL_TOKENS.iter().find(|t| text.ends_with(**t)) {
        return Some(t.len());
    }
    let head = text.strip_suffix("|>")?;
    let start = head.rfind("<|")?;
    special_at_start(&text[start..]).filter(|&n| start + n == text.len())?;
    Some(text.len() - start)
}

/// `text` without the special tokens (and whitespace between them) at its
/// start.
pub fn strip_leading_special(text: &str) -> &str {
    let mut t = text;
    loop {
        let trimmed = t.trim_start();
        match special_at_start(trimmed) {
            Some(n) => t = &trimmed[n..],
            // Whitespace before the text itself is the model's (or the
            // template's) and stays.
            None => return t,
        }
    }
}

/// `text` without the special tokens (and whitespace between them) at its
/// end.
pub fn strip_trailing_special(text: &str) -> &str {
    let mut t = text;
    loop {
        let trimmed = t.trim_end();
        match special_at_end(trimmed) {
            Some(n) => t = &trimmed[..trimmed.len() - n],
            None => return t,
        }
    }
}

/// The shortest end of a prompt that [`completion_of`] accepts as found in a
/// query it does not start with, in bytes: a chat template's assistant header
/// (`<|im_start|>assistant\n`, `<start_of_turn>model\n`, Llama 3's) is longer,
/// and a few common characters (`"\n"`, `". "`) would cut a completion
/// anywhere.
pub const MIN_PROMPT_END: usize = 16;

/// The byte offset in `query` just after the last occurrence of the longest
/// end (suffix) of `prompt` that occurs in it, if that end is at least
/// [`MIN_PROMPT_END`] bytes long.
///
/// An end of the prompt that occurs in the query has every shorter end occur
/// too, so the longest one is found by bisection over the prompt's character
/// boundaries: about log2(prompt length) substring searches.
fn after_prompt_end(query: &str, prompt: &str) -> Option<usize> {
    // Start offsets of the prompt's ends, longest (the whole prompt) first.
    let starts: Vec<usize> = prompt.char_indices().map(|(i, _)| i).collect();
    let found = |k: usize| query.contains(&prompt[starts[k]..]);
    // The shortest end: the last character.
    let last = starts.len() - 1;
    if !found(last) {
        return None;
    }
    let longest = if found(0) {
        0
    } else {
        // found(lo) holds and found(hi) does not, with hi < lo.
        let (mut lo, mut hi) = (last, 0);
        while lo - hi > 1 {
            let mid = hi + (lo - hi) / 2;
            if found(mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        lo
    };
    let end = &prompt[starts[longest]..];
    if end.len() < MIN_PROMPT_END {
        return None;
    }
    query.rfind(end).map(|at| at + end.len())
}

/// How [`completion_match`] found the completion in a query.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PromptMatch {
    /// No prompt was given: the whole query (without its special tokens at
    /// the ends).
    NoPrompt,
    /// The query starts with the prompt (once a beginning-of-sequence token
    /// that only the query has is set aside).
    Prefix,
    /// The query does not start with the prompt, but an end of it (at least
    /// [`MIN_PROMPT_END`] bytes, usually the chat template's assistant header)
    /// occurs in it: the completion is what follows its last occurrence.
    /// OpenRLHF 0.11 cuts long prompts from the left (and a tokenizer may not
    /// decode a prompt to the same string).
    PromptEnd,
    /// Nothing of the prompt was found: the whole query.
    NotFound,
}

/// [`completion_of`], and how the completion was found.
pub fn completion_match<'a>(query: &'a str, prompt: Option<&str>) -> (&'a str, PromptMatch) {
    let (body, how) = match prompt.filter(|p| !p.is_empty()) {
        Some(p) => match query
            .strip_prefix(p)
            .or_else(|| strip_leading_special(query).strip_prefix(strip_leading_special(p)))
        {
            Some(body) => (body, PromptMatch::Prefix),
            None => match after_prompt_end(query, p) {
                Some(at) => (&query[at..], PromptMatch::PromptEnd),
                None => (strip_leading_special(query), PromptMatch::NotFound),
            },
        },
        None => (strip_leading_special(query), PromptMatch::NoPrompt),
    };
    (strip_trailing_special(body), how)
}

/// The completion inside an OpenRLHF `query`: what follows `prompt` when the
/// query starts with it (also once a beginning-of-sequence token that only
/// the query has is set aside); else what follows the last occurrence of the
/// longest end of the prompt found in the query, if at least
/// [`MIN_PROMPT_END`] bytes long (a prompt cut from the left, or one the
/// tokenizer does not decode exactly: see [`PromptMatch::PromptEnd`]); else
/// the whole query. Either way without the special tokens at its end.
pub fn completion_of<'a>(query: &'a str, prompt: Option<&str>) -> &'a str {
    completion_match(query, prompt).0
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROMPT: &str = "<|im_start|>user\nWrite the report.<|im_end|>\n<|im_start|>assistant\n";
    const REPORT: &str = "<think>Heart normal.</think><answer>No acute disease.</answer>";

    #[test]
    fn end_of_sequence_tokens_are_removed() {
        for eos in [
            "<|im_end|>",
            "<|eot_id|>",
            "<|endoftext|>",
            "<|end_of_text|>",
            "</s>",
            "<eos>",
            "<end_of_turn>",
            "<|im_end|>\n<|endoftext|>",
            "<end_of_turn>\n<eos>",
        ] {
            let query = format!("{PROMPT}{REPORT}{eos}");
            assert_eq!(completion_of(&query, Some(PROMPT)), REPORT, "{eos:?}");
        }
    }

    #[test]
    fn a_beginning_of_sequence_token_only_the_query_has_is_set_aside() {
        for bos in ["<s>", "<bos>", "<|begin_of_text|>", "<s> "] {
            let query = format!("{bos}{PROMPT}{REPORT}</s>");
            assert_eq!(completion_of(&query, Some(PROMPT)), REPORT, "{bos:?}");
        }
        // The prompt has it and the query too: the plain prefix.
        let query = format!("<s>{PROMPT}{REPORT}");
        assert_eq!(completion_of(&query, Some(&format!("<s>{PROMPT}"))), REPORT);
    }

    #[test]
    fn the_models_own_text_is_kept() {
        // Whitespace, ordinary tags and text after the answer stay: they are
        // the model's, and the template rule decides what they are worth.
        let text = format!("{REPORT} trailing words");
        assert_eq!(completion_of(&text, None), text);
        assert_eq!(
            completion_of(" <think>x</think> ", None),
            " <think>x</think> "
        );
        assert_eq!(
            completion_of("a <|not a token|>", None),
            "a <|not a token|>"
        );
        assert_eq!(completion_of("a <||>", None), "a <||>");
        assert_eq!(completion_of("x</answer>", None), "x</answer>");
        // A query that does not start with its prompt is parsed whole.
        assert_eq!(completion_of(REPORT, Some("other prompt")), REPORT);
        assert_eq!(completion_of("", Some(PROMPT)), "");
        assert_eq!(completion_of("<|im_end|>", None), "");
    }

    #[test]
    fn a_prompt_cut_from_the_left_is_found_by_its_end() {
        // OpenRLHF 0.11 keeps the last max_prompt_length prompt tokens: the query
        // starts inside the prompt, and the whole prompt string is passed.
        for cut in [1, 5, 20, 40] {
            let query = format!("{}{REPORT}<|im_end|>", &PROMPT[cut..]);
            assert_eq!(
                completion_match(&query, Some(PROMPT)),
                (REPORT, PromptMatch::PromptEnd),
                "{cut}"
            );
        }
        // Byte-level BPE cut inside a character decodes to U+FFFD.
        let prompt = "<|im_start|>user\nBefund: Herzgröße normal, Lunge frei.<|im_end|>\n<|im_start|>assistant\n";
        let query = format!(
            "\u{FFFD}e normal, Lunge frei.<|im_end|>\n<|im_start|>assistant\n{REPORT}<|im_end|>"
        );
        assert_eq!(completion_of(&query, Some(prompt)), REPORT);
        // With a beginning-of-sequence token before the cut prompt.
        let query = format!("<s>{}{REPORT}</s>", &PROMPT[30..]);
        assert_eq!(completion_of(&query, Some(PROMPT)), REPORT);
    }

    #[test]
    fn a_prompt_that_does_not_decode_exactly_is_found_by_its_end() {
        // A normaliser changed the user's text; the assistant header is intact.
        let prompt = "<|im_start|>user\nWrite the report\u{2019}s findings.<|im_end|>\n<|im_start|>assistant\n";
        let query = format!("<|im_start|>user\nWrite the report's findings.<|im_end|>\n<|im_start|>assistant\n{REPORT}<|im_end|>");
        assert_eq!(
            completion_match(&query, Some(prompt)),
            (REPORT, PromptMatch::PromptEnd)
        );
        // The longest end found counts, not an earlier, shorter one.
        let query = format!("junk<|im_start|>assistant\nx{PROMPT}{REPORT}");
        assert_eq!(completion_of(&query, Some(&PROMPT[1..])), REPORT);
        // The model's text after the answer is kept (the template rule judges it).
        let query = format!("{}{REPORT} more", &PROMPT[10..]);
        assert_eq!(
            completion_of(&query, Some(PROMPT)),
            format!("{REPORT} more")
        );
    }

    #[test]
    fn a_short_common_end_is_not_a_match() {
        // Fewer than MIN_PROMPT_END bytes of the prompt's end found: the whole
        // query, as before; a few common characters would cut anywhere.
        let prompt = "Describe the image.\n";
        let query = "<think>Heart.\nLungs.</think><answer>Normal.</answer>".to_string();
        assert_eq!(
            completion_match(&query, Some(prompt)),
            (query.as_str(), PromptMatch::NotFound)
        );
        assert_eq!(
            completion_match("<think>p</think>", Some("p")).1,
            PromptMatch::NotFound
        );
        // Exactly MIN_PROMPT_END bytes is enough.
        let prompt = "0123456789abcdef";
        assert_eq!(prompt.len(), MIN_PROMPT_END);
        assert_eq!(
            completion_match("xx0123456789abcdefdone", Some(&format!("zz{prompt}"))),
            ("done", PromptMatch::PromptEnd)
        );
        assert_eq!(
            completion_match("xx123456789abcdefdone", Some(prompt)).1,
            PromptMatch::NotFound
        );
    }

    #[test]
    fn exact_prefixes_and_no_prompt_are_reported() {
        let query = format!("{PROMPT}{REPORT}<|im_end|>");
        assert_eq!(
            completion_match(&query, Some(PROMPT)),
            (REPORT, PromptMatch::Prefix)
        );
        let query = format!("<s>{PROMPT}{REPORT}</s>");
        assert_eq!(
            completion_match(&query, Some(PROMPT)),
            (REPORT, PromptMatch::Prefix)
        );
        assert_eq!(
            completion_match(REPORT, None),
            (REPORT, PromptMatch::NoPrompt)
        );
        assert_eq!(
            completion_match(REPORT, Some("")),
            (REPORT, PromptMatch::NoPrompt)
        );
    }
}
