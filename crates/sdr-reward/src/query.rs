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

/// The completion inside an OpenRLHF `query`: what follows `prompt` when the
/// query starts with it (also once a beginning-of-sequence token that only
/// the query has is set aside), else the whole query; either way without the
/// special tokens at its end.
pub fn completion_of<'a>(query: &'a str, prompt: Option<&str>) -> &'a str {
    let body = match prompt.filter(|p| !p.is_empty()) {
        Some(p) => query
            .strip_prefix(p)
            .or_else(|| strip_leading_special(query).strip_prefix(strip_leading_special(p)))
            .unwrap_or_else(|| strip_leading_special(query)),
        None => strip_leading_special(query),
    };
    strip_trailing_special(body)
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
}
