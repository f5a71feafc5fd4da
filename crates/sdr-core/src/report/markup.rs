//! HTML/XML-like markup tags in plain text (`<text>`, `</b>`, `<p class="x">`,
//! `<start_of_image>`), as small models write them around or instead of report
//! text (SPEC §1).
//!
//! A tag is `<` (or `</`) and, right after it, a name that starts with an
//! ASCII letter (letters, digits, `_`, `-`, `:` after it), then, for an opening
//! tag, attributes `name=value` (value quoted with `"` or `'`, or unquoted
//! without whitespace, quotes, `=` or backticks) after whitespace, then
//! optional whitespace, an optional `/` and `>`. A tag holds no `<` or `>`
//! (also not in quotes) and no blank line, and is at most [`MAX_TAG`]
//! characters long; a single line break counts as whitespace
//! (`<img src="..."\n alt="...">`), so collapsing whitespace never makes or
//! unmakes a tag. So `< 5 mm`, `<5mm`, `a <b and c> d` (words without `=`)
//! and an unclosed `<b` are text.
//!
//! The four template tags (`<think>`, `</think>`, `<answer>`, `</answer>`) are
//! never markup: they belong to the template parser (see [`super::template`]).
//! To the segmenter, `<br>` tags of any form are line breaks, as
//! normalisation makes the common ones (`<br>`, `<br/>`, `<br />`) everywhere.
//!
//! Uses: the header scanner skips tags as decoration before a header
//! (`<text>Findings:`, `<p><b>FINDINGS:</b>`), and the segmenter removes them
//! before splitting ([`strip_markup`]), so a line of tags alone is no sentence.

use std::borrow::Cow;

use super::normalize::starts_with_ignore_case;
use super::tags::TEMPLATE_TAGS;

/// Longest tag recognised, in characters (`<img src="..." alt="...">` with a
/// URL and alt text fits; prose in angle brackets rarely parses anyway).
pub(crate) const MAX_TAG: usize = 256;

fn is_name_start(ch: char) -> bool {
    ch.is_ascii_alphabetic()
}

fn is_name_char(ch: char) -> bool {
    ch.is_ascii_alphanumeric() || matches!(ch, '_' | '-' | ':')
}

fn is_attr_start(ch: char) -> bool {
    ch.is_ascii_alphabetic() || matches!(ch, '_' | ':')
}

/// Characters of an unquoted attribute value.
fn is_unquoted_value_char(ch: char) -> bool {
    !(ch.is_whitespace() || matches!(ch, '"' | '\'' | '=' | '<' | '>' | '`'))
}

/// The markup tag that starts at `c[i]`, if any: the index just past its `>`.
pub(crate) fn markup_tag_at(c: &[char], i: usize) -> Option<usize> {
    if c.get(i) != Some(&'<') {
        return None;
    }
    let limit = c.len().min(i + MAX_TAG);
    let at = |k: usize| if k < limit { Some(c[k]) } else { None };
    // Whitespace from `k` holding at most one line break; its end.
    let whitespace = |mut k: usize| {
        let mut breaks = 0;
        while let Some(ch) = at(k).filter(|ch| ch.is_whitespace()) {
            breaks += usize::from(ch == '\n');
            k += 1;
        }
        (breaks < 2).then_some(k)
    };
    let mut k = i + 1;
    let closing = at(k) == Some('/');
    if closing {
        k += 1;
    }
    if !at(k).is_some_and(is_name_start) {
        return None;
    }
    while at(k).is_some_and(is_name_char) {
        k += 1;
    }
    loop {
        let spaced_from = k;
        k = whitespace(k)?;
        match at(k)? {
            '>' => break,
            '/' if !closing && at(k + 1) == Some('>') => {
                k += 1;
                break;
            }
            ch if !closing && k > spaced_from && is_attr_start(ch) => {
                while at(k).is_some_and(is_name_char) {
                    k += 1;
                }
                if at(k) != Some('=') {
                    return None;
                }
                k += 1;
                match at(k)? {
                    quote @ ('"' | '\'') => {
                        k += 1;
                        while at(k)? != quote {
                            match c[k] {
                                '<' | '>' => return None,
                                ch if ch.is_whitespace() => k = whitespace(k)?,
                                _ => k += 1,
                            }
                        }
                        k += 1;
                    }
                    ch if is_unquoted_value_char(ch) => {
                        while at(k).is_some_and(is_unquoted_value_char) {
                            k += 1;
                        }
                    }
                    _ => return None,
                }
            }
            _ => return None,
        }
    }
    // `k` is at the closing `>`.
    let end = k + 1;
    let tag = &c[i..end];
    let template = TEMPLATE_TAGS
        .iter()
        .any(|t| t.chars().eq(tag.iter().copied()));
    (!template).then_some(end)
}

/// A `<br>` tag of any form (`<br>`, `<BR/>`, `<br class="x">`, `</br>`).
fn is_line_break(tag: &[char]) -> bool {
    let name = if tag.get(1) == Some(&'/') { 2 } else { 1 };
    starts_with_ignore_case(tag, name, "br")
        && !tag.get(name + 2).is_some_and(|&ch| is_name_char(ch))
}

/// Sentence terminators (as in the segmenter).
fn is_terminal(ch: char) -> bool {
    matches!(ch, '.' | '!' | '?' | '…' | '。')
}

/// Index in `out` of a `<` that may still open a tag at the end of `out`: the
/// last of `<` and `>` is a `<` at most [`MAX_TAG`] characters back.
fn open_tag(out: &[char]) -> Option<usize> {
    let from = out.len().saturating_sub(MAX_TAG);
    let k = from
        + out[from..]
            .iter()
            .rposition(|&ch| matches!(ch, '<' | '>'))?;
    (out[k] == '<').then_some(k)
}

/// Removes markup tags from normalised text, leaving the words.
///
/// A `<br>` tag becomes a line break. A run of adjacent other tags standing
/// alone, or at the start or end of a word, is removed (`a <b> c`, `<em>The`,
/// `normal</b>.`). A run glued between two letters or digits is inside a word
/// and stays as text (`XXXX<XXXX>technologist` in IU X-ray, `x<y>z`), unless
/// it holds a sentence terminator (which the segmenter could split at,
/// leaving a whole tag at a sentence edge): then it leaves one space. Where a
/// removal joins a new tag (`<<b>a>`), that one goes too, so the result holds
/// no removable tag and stripping it again changes nothing. Linear in the
/// text length (times [`MAX_TAG`] at most).
pub(crate) fn strip_markup(c: &[char]) -> Cow<'_, [char]> {
    if !c.contains(&'<') {
        return Cow::Borrowed(c);
    }
    let mut out: Vec<char> = Vec::with_capacity(c.len());
    // The `<` in `out` that may still open a tag.
    let mut open: Option<usize> = None;
    // A run of tags `out[a..b]` whose fate waits for the character after it.
    let mut run: Option<(usize, usize)> = None;
    // Characters to read again after a removal (last first), then the input.
    let mut again: Vec<char> = Vec::new();
    let mut input = c.iter().copied();
    loop {
        let Some(ch) = again.pop().or_else(|| input.next()) else {
            // End of text: a pending run has nothing after it.
            let Some((a, b)) = run.take() else { break };
            if let Some(tail) = settle_run(&mut out, a, b) {
                again.extend(out.split_off(tail).into_iter().rev());
                open = open_tag(&out);
            }
            continue;
        };
        out.push(ch);
        let len = out.len();
        match ch {
            '<' => open = Some(len - 1),
            '>' => {
                if let Some(s) = open.take() {
                    if markup_tag_at(&out, s) == Some(len) {
                        if is_line_break(&out[s..]) {
                            // Read a line break instead.
                            out.truncate(s);
                            again.push('\n');
                            open = open_tag(&out);
                            continue;
                        }
                        run = match run {
                            Some((a, b)) if b == s => Some((a, len)),
                            _ => Some((s, len)),
                        };
                        continue;
                    }
                }
            }
            _ => {
                if open.is_some_and(|s| len - s > MAX_TAG) {
                    open = None;
                }
            }
        }
        let Some((a, b)) = run else { continue };
        if open == Some(b) {
            // Another tag may follow the run directly.
            continue;
        }
        run = None;
        if let Some(tail) = settle_run(&mut out, a, b) {
            // What follows the removed run is read again: it may close a tag
            // opened before the run.
            again.extend(out.split_off(tail).into_iter().rev());
            open = open_tag(&out);
        }
    }
    Cow::Owned(out)
}

/// Keeps or removes the tag run `out[a..b]` (see [`strip_markup`]). When it
/// was removed, returns where the text after it now starts.
fn settle_run(out: &mut Vec<char>, a: usize, b: usize) -> Option<usize> {
    let glued =
        a > 0 && out[a - 1].is_alphanumeric() && out.get(b).is_some_and(|ch| ch.is_alphanumeric());
    if glued && !out[a..b].iter().any(|&ch| is_terminal(ch)) {
        return None;
    }
    if glued {
        out.splice(a..b, [' ']);
        Some(a + 1)
    } else {
        out.drain(a..b);
        Some(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(s: &str) -> Option<String> {
        let c: Vec<char> = s.chars().collect();
        markup_tag_at(&c, 0).map(|end| c[..end].iter().collect())
    }

    fn strip(s: &str) -> String {
        let c: Vec<char> = s.chars().collect();
        strip_markup(&c).iter().collect()
    }

    #[test]
    fn tags() {
        for s in [
            "<text>",
            "</text>",
            "<p>",
            "<h2 >",
            "<br/>",
            "<text />",
            "<start_of_image>",
            "<img src=\"https://x.org/a.jpg\" alt='A chest X-ray.' title=\"T\">",
            "<label class=\"btn btn-circle\" id=x-1>",
            "<XXXX>",
            "<Think>",
            "<thinking>",
            "</answer >",
            "<b\n>",
            "<b \n x=1\n>",
            "<img src=\"a.png\"\n     alt=\"A\nchest X-ray.\">",
        ] {
            assert_eq!(tag(s).as_deref(), Some(s), "{s:?}");
        }
        assert_eq!(tag("<b>x</b>").as_deref(), Some("<b>"));
    }

    #[test]
    fn not_tags() {
        for s in [
            "< 5 mm>",
            "<5mm>",
            "<b and c>",
            "<insert text here>",
            "<b",
            "<b x>",
            "<b x=>",
            "<b x=\"a>b\">",
            "<b\n\n>",
            "<b x=\"a\n \nb\">",
            "</b x=1>",
            "<b/ >",
            "<bx=1>x",
            "<>",
            "</>",
            "<-b>",
            "<think>",
            "</think>",
            "<answer>",
            "</answer>",
            "<<b>",
        ] {
            assert_eq!(tag(s), None, "{s:?}");
        }
        let long = format!("<a x=\"{}\">", "y".repeat(MAX_TAG));
        assert_eq!(tag(&long), None);
    }

    #[test]
    fn stripping() {
        assert_eq!(strip("<text>Findings: A."), "Findings: A.");
        assert_eq!(strip("a <b> c"), "a  c");
        assert_eq!(
            strip("<em>The heart</em> is normal</b>."),
            "The heart is normal."
        );
        assert_eq!(strip("clear</p><p>Heart"), "clear</p><p>Heart");
        assert_eq!(strip("clear</p>\n<p>Heart"), "clear\nHeart");
        assert_eq!(
            strip("Dr. XXXX<XXXX>technologist"),
            "Dr. XXXX<XXXX>technologist"
        );
        assert_eq!(strip("x<y a=\"b.\">Zed"), "x Zed");
        assert_eq!(strip("end.<start_of_image>If"), "end.If");
        assert_eq!(
            strip("No effusion < 5 mm, <5mm."),
            "No effusion < 5 mm, <5mm."
        );
        assert_eq!(strip("<<b>a>"), "");
        assert_eq!(strip("<a<b>>x"), "x");
        assert_eq!(strip("1. <text>\n2. </text>"), "1. \n2. ");
        assert_eq!(strip("<think>A.</think>"), "<think>A.</think>");
        assert_eq!(strip("<b>"), "");
        assert_eq!(strip("<a x=1</b>y=2>z"), "<a x=1</b>y=2>z");
        assert_eq!(strip("A<br\n/>B <BR clear=all>C</br>"), "A\nB \nC\n");
        assert_eq!(strip("<a<br class=x>>b"), "b");
        assert_eq!(strip("<img src=x\n alt=y>\nA."), "\nA.");
    }

    #[test]
    fn stripping_is_idempotent() {
        let parts = [
            "<", ">", "b", "</b>", "<b>", "x=1", " ", ".", "a", "\n", "/", "r",
        ];
        // Every string of up to 5 parts.
        let mut texts = vec![String::new()];
        for _ in 0..5 {
            let next: Vec<String> = texts
                .iter()
                .flat_map(|t| parts.iter().map(move |p| format!("{t}{p}")))
                .collect();
            texts.extend(next);
            texts.sort();
            texts.dedup();
        }
        for t in &texts {
            let once = strip(t);
            assert_eq!(strip(&once), once, "{t:?}");
        }
    }
}
