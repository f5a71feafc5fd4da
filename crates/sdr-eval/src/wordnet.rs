//! WordNet 3.0 synonym look-up for METEOR's synonym stage, reading the
//! standard WordNet database files (`index.{noun,verb,adj,adv}`,
//! `data.{noun,verb,adj,adv}`, `{noun,verb,adj,adv}.exc`).
//!
//! Semantics follow nltk 3.10.4 (`nltk/corpus/reader/wordnet.py`):
//! `wordnet.synsets(word)` lower-cases the word, and for each part of speech
//! in `[n, v, a, r]` runs `_morphy` (the exception list if the word is in it,
//! otherwise one pass of the detachment rules; then keep the word itself and
//! the candidate forms that the index lists for that part of speech), and
//! collects the synsets the index lists for those forms. METEOR then takes
//! the lemma names of those synsets (syntactic markers such as `(a)` removed,
//! case kept) that contain no `_`.
//!
//! Where the files come from: Debian's `wordnet-base` package installs them
//! in `/usr/share/wordnet` (nltk's own downloader host is not reachable from
//! this project's machines). WordNet 3.0 Copyright 2006 by Princeton
//! University; its licence allows redistribution with that notice.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use crate::error::{EvalError, Result};

/// Parts of speech in nltk's `POS_LIST` order, with their file suffixes.
const POS: [(char, &str); 4] = [('n', "noun"), ('v', "verb"), ('a', "adj"), ('r', "adv")];

/// nltk's `MORPHOLOGICAL_SUBSTITUTIONS`, per part of speech.
fn substitutions(pos: char) -> &'static [(&'static str, &'static str)] {
    match pos {
        'n' => &[
            ("s", ""),
            ("ses", "s"),
            ("ves", "f"),
            ("xes", "x"),
            ("zes", "z"),
            ("ches", "ch"),
            ("shes", "sh"),
            ("men", "man"),
            ("ies", "y"),
        ],
        'v' => &[
            ("s", ""),
            ("ies", "y"),
            ("es", "e"),
            ("es", ""),
            ("ed", "e"),
            ("ed", ""),
            ("ing", "e"),
            ("ing", ""),
        ],
        'a' => &[("er", ""), ("est", ""), ("er", "e"), ("est", "e")],
        _ => &[],
    }
}

/// One part of speech: lemma -> synset offsets, offset -> lemma names,
/// inflected form -> base forms.
#[derive(Debug, Default, Clone)]
struct PosTables {
    index: HashMap<String, Vec<u64>>,
    synsets: HashMap<u64, Vec<String>>,
    exceptions: HashMap<String, Vec<String>>,
}

/// An in-memory WordNet, enough for METEOR's synonym matching.
#[derive(Debug, Default, Clone)]
pub struct WordNet {
    tables: Vec<(char, PosTables)>,
}

impl WordNet {
    /// Where to look for the database by default: `$SDR_WORDNET_DIR` if set,
    /// else `/usr/share/wordnet` (Debian `wordnet-base`) if it exists.
    pub fn default_dir() -> Option<PathBuf> {
        if let Some(d) = std::env::var_os("SDR_WORDNET_DIR") {
            return Some(PathBuf::from(d));
        }
        let debian = PathBuf::from("/usr/share/wordnet");
        debian.join("index.noun").exists().then_some(debian)
    }

    /// Loads the twelve database files from `dir`.
    ///
    /// # Errors
    /// [`EvalError::Io`] when a file cannot be read, [`EvalError::WordNet`]
    /// when a line does not parse.
    pub fn load(dir: &Path) -> Result<Self> {
        let mut tables = Vec::with_capacity(4);
        for (pos, suffix) in POS {
            let mut t = PosTables::default();
            let path = dir.join(format!("index.{suffix}"));
            for (no, line) in read(&path)?.lines().enumerate() {
                if line.starts_with(' ') || line.trim().is_empty() {
                    continue;
                }
                let (lemma, offsets) =
                    parse_index_line(line).map_err(|message| EvalError::WordNet {
                        path: path.clone(),
                        line: no + 1,
                        message,
                    })?;
                t.index.insert(lemma, offsets);
            }
            let path = dir.join(format!("data.{suffix}"));
            for (no, line) in read(&path)?.lines().enumerate() {
                if line.starts_with(' ') || line.trim().is_empty() {
                    continue;
                }
                let (offset, names) =
                    parse_data_line(line).map_err(|message| EvalError::WordNet {
                        path: path.clone(),
                        line: no + 1,
                        message,
                    })?;
                t.synsets.insert(offset, names);
            }
            let path = dir.join(format!("{suffix}.exc"));
            for line in read(&path)?.lines() {
                let mut it = line.split_whitespace();
                if let Some(form) = it.next() {
                    t.exceptions
                        .insert(form.to_string(), it.map(str::to_string).collect());
                }
            }
            tables.push((pos, t));
        }
        Ok(WordNet { tables })
    }

    /// nltk `_morphy(form, pos)`.
    fn morphy(t: &PosTables, pos: char, form: &str) -> Vec<String> {
        let candidates: Vec<String> = match t.exceptions.get(form) {
            Some(bases) => bases.clone(),
            None => substitutions(pos)
                .iter()
                .filter(|(old, _)| form.ends_with(old))
                .map(|(old, new)| format!("{}{}", &form[..form.len() - old.len()], new))
                .collect(),
        };
        let mut out: Vec<String> = Vec::new();
        for f in std::iter::once(form.to_string()).chain(candidates) {
            if t.index.contains_key(&f) && !out.contains(&f) {
                out.push(f);
            }
        }
        out
    }

    /// The synonym set METEOR uses for `word`: lemma names without `_` of
    /// every synset of `word` (nltk `wordnet.synsets(word)`), in sorted order.
    /// The word itself is not added here.
    pub fn synonyms(&self, word: &str) -> BTreeSet<String> {
        let lemma = word.to_lowercase();
        let mut out = BTreeSet::new();
        for (pos, t) in &self.tables {
            for form in Self::morphy(t, *pos, &lemma) {
                for offset in t.index.get(&form).into_iter().flatten() {
                    for name in t.synsets.get(offset).into_iter().flatten() {
                        if !name.contains('_') {
                            out.insert(name.clone());
                        }
                    }
                }
            }
        }
        out
    }

    /// Number of lemmas in the index over all parts of speech.
    pub fn len(&self) -> usize {
        self.tables.iter().map(|(_, t)| t.index.len()).sum()
    }

    /// True when no lemma is loaded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn read(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).map_err(|source| EvalError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    // WordNet 3.0 is ASCII; should a file hold other bytes, read them as
    // Latin-1 rather than fail.
    Ok(match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => e.into_bytes().into_iter().map(char::from).collect(),
    })
}

/// `lemma pos synset_cnt p_cnt [ptr_symbol...] sense_cnt tagsense_cnt synset_offset...`
fn parse_index_line(line: &str) -> std::result::Result<(String, Vec<u64>), String> {
    let mut it = line.split_whitespace();
    let mut next = |what: &str| it.next().ok_or_else(|| format!("missing {what}"));
    let lemma = next("lemma")?.to_string();
    next("pos")?;
    let n_synsets: usize = next("synset_cnt")?
        .parse()
        .map_err(|e| format!("synset_cnt: {e}"))?;
    let n_pointers: usize = next("p_cnt")?.parse().map_err(|e| format!("p_cnt: {e}"))?;
    for _ in 0..n_pointers {
        next("ptr_symbol")?;
    }
    next("sense_cnt")?;
    next("tagsense_cnt")?;
    let mut offsets = Vec::with_capacity(n_synsets);
    for _ in 0..n_synsets {
        offsets.push(
            next("synset_offset")?
                .parse()
                .map_err(|e| format!("synset_offset: {e}"))?,
        );
    }
    Ok((lemma, offsets))
}

/// `synset_offset lex_filenum ss_type w_cnt(hex) word lex_id(hex) ... | gloss`
fn parse_data_line(line: &str) -> std::result::Result<(u64, Vec<String>), String> {
    let columns = line.split('|').next().unwrap_or("");
    let mut it = columns.split_whitespace();
    let mut next = |what: &str| it.next().ok_or_else(|| format!("missing {what}"));
    let offset: u64 = next("synset_offset")?
        .parse()
        .map_err(|e| format!("synset_offset: {e}"))?;
    next("lex_filenum")?;
    next("ss_type")?;
    let n = usize::from_str_radix(next("w_cnt")?, 16).map_err(|e| format!("w_cnt: {e}"))?;
    let mut names = Vec::with_capacity(n);
    for _ in 0..n {
        let word = next("word")?;
        next("lex_id")?;
        names.push(strip_marker(word).to_string());
    }
    Ok((offset, names))
}

/// nltk: `re.match(r"(.*?)(\([^()]*\))?$", name).group(1)`.
fn strip_marker(name: &str) -> &str {
    if name.ends_with(')') {
        if let Some(open) = name.rfind('(') {
            if !name[open + 1..name.len() - 1].contains(['(', ')']) {
                return &name[..open];
            }
        }
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_is_stripped() {
        assert_eq!(strip_marker("galore(ip)"), "galore");
        assert_eq!(strip_marker("big"), "big");
    }

    #[test]
    fn parses_lines() {
        let (l, o) = parse_index_line("dog n 2 3 @ ~ + 2 1 02084071 10114209  ").unwrap();
        assert_eq!((l.as_str(), o), ("dog", vec![2084071, 10114209]));
        let (off, names) =
            parse_data_line("02084071 05 n 02 dog 0 domestic_dog 0 001 @ 02083346 n 0000 | a dog")
                .unwrap();
        assert_eq!(off, 2084071);
        assert_eq!(names, vec!["dog", "domestic_dog"]);
        assert!(parse_index_line("dog n x").is_err());
    }
}
