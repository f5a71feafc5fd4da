//! Parity of every text metric with its reference implementation, on the
//! fixture written by `tools/fixtures/eval_metrics.py` (real IU X-ray report
//! pairs plus edge cases). Run with `--nocapture` to see the largest
//! deviation per metric.
//!
//! Tolerances: BLEU 1e-12 relative; ROUGE, METEOR and the stemmer-dependent
//! variants 1e-12 absolute; chrF++ 1e-10 on sacrebleu's 0-100 scale;
//! BERTScore 1e-9 absolute (f32 embeddings, f64 arithmetic on both sides).

mod common;

use common::{f64s, fixture, fixture_path, strs, Deviation};
use sdr_eval::bertscore::{bert_score_pair, IdfWeights, TokenEmbeddings};
use sdr_eval::bleu::{
    corpus_bleu, sacrebleu_corpus_bleu, sentence_bleu, SacreSmoothing, Smoothing,
};
use sdr_eval::chrf::{corpus_chrf, sentence_chrf, ChrfConfig};
use sdr_eval::meteor::{meteor, MeteorConfig};
use sdr_eval::porter;
use sdr_eval::rouge::rouge;
use sdr_eval::tokenize::tokenize;
use sdr_eval::wordnet::WordNet;
use serde_json::Value;

fn pairs(f: &Value) -> Vec<(String, String, Vec<String>)> {
    f["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().to_string(),
                p["hypothesis"].as_str().unwrap().to_string(),
                strs(&p["references"]),
            )
        })
        .collect()
}

const SMOOTHING: [(&str, Smoothing); 3] = [
    ("none", Smoothing::None),
    ("epsilon", Smoothing::Epsilon(0.1)),
    ("add_one", Smoothing::AddOne),
];

#[test]
fn tokenizer_matches_python() {
    let f = fixture();
    for p in f["pairs"].as_array().unwrap() {
        assert_eq!(
            tokenize(p["hypothesis"].as_str().unwrap()),
            strs(&p["hypothesis_tokens"]),
            "{}",
            p["name"]
        );
    }
}

#[test]
fn bleu_matches_nltk() {
    let f = fixture();
    let mut dev = Deviation::new("BLEU-1..4 sentence", 1e-12);
    for (p, (name, hyp, refs)) in f["pairs"].as_array().unwrap().iter().zip(pairs(&f)) {
        let h = tokenize(&hyp);
        let r: Vec<Vec<String>> = refs.iter().map(|s| tokenize(s)).collect();
        for (key, sm) in SMOOTHING {
            let got = sentence_bleu(&r, &h, 4, sm).unwrap();
            for (n, (g, w)) in got.iter().zip(f64s(&p["sentence_bleu"][key])).enumerate() {
                dev.check_rel(*g, w, &format!("{name} {key} BLEU-{}", n + 1));
            }
        }
    }
    dev.report();

    let mut dev = Deviation::new("BLEU-1..4 corpus", 1e-12);
    let all = pairs(&f);
    let hyps: Vec<Vec<String>> = all.iter().map(|(_, h, _)| tokenize(h)).collect();
    let refs: Vec<Vec<Vec<String>>> = all
        .iter()
        .map(|(_, _, r)| r.iter().map(|s| tokenize(s)).collect())
        .collect();
    for (key, sm) in SMOOTHING {
        let got = corpus_bleu(&refs, &hyps, 4, sm).unwrap();
        for (n, (g, w)) in got.iter().zip(f64s(&f["corpus"]["bleu"][key])).enumerate() {
            dev.check_rel(*g, w, &format!("corpus {key} BLEU-{}", n + 1));
        }
    }
    dev.report();
}

#[test]
fn bleu_matches_sacrebleu() {
    let f = fixture();
    let modes = [("exp", SacreSmoothing::Exp), ("none", SacreSmoothing::None)];
    let mut dev = Deviation::new("sacreBLEU corpus (0-100)", 1e-12);
    for (p, (name, hyp, refs)) in f["pairs"].as_array().unwrap().iter().zip(pairs(&f)) {
        let h = vec![tokenize(&hyp)];
        let r: Vec<Vec<Vec<String>>> = vec![refs.iter().map(|s| tokenize(s)).collect()];
        for (key, m) in modes {
            let got = sacrebleu_corpus_bleu(&r, &h, m).unwrap();
            dev.check_rel(
                got,
                p["sacrebleu_bleu"][key].as_f64().unwrap(),
                &format!("{name} {key}"),
            );
        }
    }
    let all = pairs(&f);
    let hyps: Vec<Vec<String>> = all.iter().map(|(_, h, _)| tokenize(h)).collect();
    let refs: Vec<Vec<Vec<String>>> = all
        .iter()
        .map(|(_, _, r)| r.iter().map(|s| tokenize(s)).collect())
        .collect();
    for (key, m) in modes {
        let got = sacrebleu_corpus_bleu(&refs, &hyps, m).unwrap();
        dev.check_rel(
            got,
            f["corpus"]["sacrebleu_bleu"][key].as_f64().unwrap(),
            &format!("corpus {key}"),
        );
    }
    dev.report();
}

#[test]
fn rouge_matches_rouge_score() {
    let f = fixture();
    for (key, stem, label) in [
        ("rouge", false, "ROUGE-1/2/L"),
        ("rouge_stem", true, "ROUGE-1/2/L use_stemmer"),
    ] {
        let mut dev = Deviation::new(label, 1e-12);
        for (p, (name, hyp, refs)) in f["pairs"].as_array().unwrap().iter().zip(pairs(&f)) {
            let s = rouge(&refs[0], &hyp, stem);
            for (k, got) in [
                ("rouge1", s.rouge1),
                ("rouge2", s.rouge2),
                ("rougeL", s.rouge_l),
            ] {
                let want = f64s(&p[key][k]);
                dev.check(got.precision, want[0], &format!("{name} {k} P"));
                dev.check(got.recall, want[1], &format!("{name} {k} R"));
                dev.check(got.fmeasure, want[2], &format!("{name} {k} F"));
            }
        }
        dev.report();
    }
}

#[test]
fn porter_matches_nltk() {
    let f = fixture();
    let stems = f["stems"].as_object().unwrap();
    for (w, s) in stems {
        assert_eq!(porter::stem(w), s.as_str().unwrap(), "stem({w})");
    }
    assert!(stems.len() > 300);
}

fn check_meteor(f: &Value, wordnet: Option<&WordNet>, key: &str, label: &'static str) {
    let mut dev = Deviation::new(label, 1e-12);
    let cfg = MeteorConfig::default();
    for (p, (name, hyp, refs)) in f["pairs"].as_array().unwrap().iter().zip(pairs(f)) {
        let h = tokenize(&hyp);
        let r: Vec<Vec<String>> = refs.iter().map(|s| tokenize(s)).collect();
        let got = meteor(&r, &h, wordnet, &cfg).unwrap();
        dev.check(got, p[key].as_f64().unwrap(), &name);
    }
    dev.report();
}

fn check_synonyms(f: &Value, wn: &WordNet) {
    for (w, want) in f["synonyms"].as_object().unwrap() {
        let got: Vec<String> = wn.synonyms(w).into_iter().collect();
        assert_eq!(got, strs(want), "synonyms({w})");
    }
}

#[test]
fn meteor_without_synonyms_matches_nltk_with_stub_wordnet() {
    check_meteor(&fixture(), None, "meteor_no_synonyms", "METEOR exact+stem");
}

#[test]
fn meteor_with_wordnet_subset_matches_nltk() {
    let f = fixture();
    let wn = WordNet::load(&fixture_path("wordnet-mini")).unwrap();
    assert!(!wn.is_empty());
    check_synonyms(&f, &wn);
    check_meteor(&f, Some(&wn), "meteor_wordnet", "METEOR WordNet (subset)");
}

/// The same against the full WordNet 3.0 database (Debian `wordnet-base`):
/// `cargo test -p sdr-eval --test metrics -- --ignored`.
/// Needs WordNet 3.0 (Debian wordnet-base, which scripts/test.sh installs). Without it
/// the test passes with a note, unless SDR_REQUIRE_WORDNET=1 (set by scripts/test.sh, so
/// CI cannot skip it).
#[test]
fn meteor_with_full_wordnet_matches_nltk() {
    let f = fixture();
    let Some(dir) = WordNet::default_dir() else {
        assert!(
            std::env::var("SDR_REQUIRE_WORDNET").as_deref() != Ok("1"),
            "WordNet 3.0 database missing (apt-get install wordnet-base)"
        );
        eprintln!("skipped: no WordNet 3.0 in $SDR_WORDNET_DIR or /usr/share/wordnet");
        return;
    };
    let wn = WordNet::load(&dir).unwrap();
    assert!(wn.len() > 140_000, "{} lemmas", wn.len());
    check_synonyms(&f, &wn);
    check_meteor(&f, Some(&wn), "meteor_wordnet", "METEOR WordNet (full)");
}

#[test]
fn chrf_matches_sacrebleu() {
    let f = fixture();
    let cfg = ChrfConfig::default();
    let mut dev = Deviation::new("chrF++ sentence", 1e-10);
    for (p, (name, hyp, refs)) in f["pairs"].as_array().unwrap().iter().zip(pairs(&f)) {
        let got = sentence_chrf(&hyp, &refs, &cfg).unwrap();
        dev.check(got, p["chrf_pp"].as_f64().unwrap(), &name);
    }
    dev.report();
    let mut dev = Deviation::new("chrF++ corpus", 1e-10);
    let all = pairs(&f);
    let hyps: Vec<&str> = all.iter().map(|(_, h, _)| h.as_str()).collect();
    let refs: Vec<Vec<&str>> = all
        .iter()
        .map(|(_, _, r)| r.iter().map(String::as_str).collect())
        .collect();
    let got = corpus_chrf(&hyps, &refs, &cfg).unwrap();
    dev.check(got, f["corpus"]["chrf_pp"].as_f64().unwrap(), "corpus");
    dev.report();
}

fn embeddings(ids: &Value, rows: &Value) -> TokenEmbeddings {
    let token_ids: Vec<u32> = ids
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect();
    let rows: Vec<Vec<f64>> = rows.as_array().unwrap().iter().map(f64s).collect();
    let dim = rows[0].len();
    TokenEmbeddings {
        special: token_ids.iter().map(|&t| t == 0 || t == 2).collect(),
        token_ids,
        dim,
        // The fixture stores float32 values exactly, so this cast is lossless.
        data: rows.iter().flatten().map(|&v| v as f32).collect(),
    }
}

#[test]
fn bertscore_matches_greedy_cos_idf() {
    let f = fixture();
    let cases = f["bertscore"].as_array().unwrap();
    let refs: Vec<TokenEmbeddings> = cases
        .iter()
        .map(|c| embeddings(&c["ref_ids"], &c["ref_emb"]))
        .collect();
    let idf = IdfWeights::from_references(refs.iter().map(|r| r.token_ids.as_slice()));
    let mut dev = Deviation::new("BERTScore P/R/F1 (+idf)", 1e-9);
    for (k, (c, r)) in cases.iter().zip(&refs).enumerate() {
        let h = embeddings(&c["hyp_ids"], &c["hyp_emb"]);
        for (key, w) in [("plain", None), ("idf", Some(&idf))] {
            let got = bert_score_pair(&h, r, w).unwrap();
            let want = f64s(&c[key]);
            dev.check(got.precision, want[0], &format!("case {k} {key} P"));
            dev.check(got.recall, want[1], &format!("case {k} {key} R"));
            dev.check(got.f1, want[2], &format!("case {k} {key} F"));
        }
    }
    dev.report();
}

/// sacrebleu 2.6.0 `sentence_bleu` defaults and its 13a tokens, on the pairs of
/// `tools/fixtures/sacrebleu_sentence.py`.
#[test]
fn sacrebleu_sentence_bleu_matches_sacrebleu() {
    use sdr_eval::sacrebleu::{sacrebleu_sentence_bleu, tokenize_13a};
    let text = std::fs::read_to_string(fixture_path("sacrebleu_sentence.json")).unwrap();
    let f: Value = serde_json::from_str(&text).unwrap();
    let pairs = f["pairs"].as_array().unwrap();
    assert!(pairs.len() >= 60);
    let mut worst = 0.0f64;
    for p in pairs {
        let name = p["name"].as_str().unwrap();
        let hyp = p["hypothesis"].as_str().unwrap();
        let refs: Vec<&str> = p["references"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap())
            .collect();
        let toks: Vec<&str> = p["tokens_13a"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap())
            .collect();
        assert_eq!(tokenize_13a(hyp), toks, "{name}: 13a tokens");
        let want = p["sentence_bleu"].as_f64().unwrap();
        let got = sacrebleu_sentence_bleu(hyp, &refs).unwrap();
        let dev = (got - want).abs() / want.abs().max(1e-12);
        worst = worst.max(if want == 0.0 { got.abs() } else { dev });
        assert!(
            if want == 0.0 { got == 0.0 } else { dev < 1e-12 },
            "{name}: {got} vs sacrebleu {want}"
        );
    }
    eprintln!(
        "sacrebleu sentence BLEU: largest relative deviation {worst:.1e} over {} pairs",
        pairs.len()
    );
}
