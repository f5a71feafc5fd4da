//! Decoding speed of the local back-end: prefill time of the p2 prompt, then
//! tokens/s for one sequence and for K = 8 rows decoded as one batch (128
//! new tokens each, greedy, no stopping, so every run does the same work).
//!
//!     cargo run --release -p sdr-gen --example local_speed -- [GGUF]
//!
//! The GGUF defaults to the SmolLM2 file of `scripts/fetch-smollm2.sh`.

use std::path::PathBuf;
use std::time::Instant;

use sdr_gen::local::LocalBackend;
use sdr_gen::{Prompt, PromptTemplate};

fn argmax(v: &[f32]) -> u32 {
    (0..v.len())
        .max_by(|&i, &j| v[i].total_cmp(&v[j]))
        .unwrap_or(0) as u32
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = match std::env::args_os().nth(1) {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(std::env::var_os("HOME").ok_or("HOME is not set")?)
            .join(".cache/sdr/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"),
    };
    let t = Instant::now();
    let backend = LocalBackend::load(&path)?;
    eprintln!("load: {:.2} s", t.elapsed().as_secs_f64());
    let prompt = Prompt {
        system: None,
        user: PromptTemplate::P2.text()?,
        images: vec![],
    };
    let text = backend.tokenizer().render_chat(&prompt)?;
    let tokens = backend.tokenizer().encode(&text)?;
    let model = backend.model();
    let vocab = model.config().vocab;

    let t = Instant::now();
    let (prefilled, first) = model.prefill(&tokens)?;
    let prefill = t.elapsed().as_secs_f64();
    println!(
        "prefill: {} tokens in {prefill:.2} s ({:.0} tokens/s)",
        tokens.len(),
        tokens.len() as f64 / prefill
    );

    const NEW: usize = 128;
    for k in [1usize, 8] {
        let mut cache = prefilled.clone();
        cache.set_rows(k);
        let rows: Vec<usize> = (0..k).collect();
        let mut next = vec![argmax(&first); k];
        let t = Instant::now();
        for _ in 0..NEW {
            let logits = model.decode(&mut cache, &rows, &next)?;
            for (n, l) in next.iter_mut().zip(logits.chunks_exact(vocab)) {
                *n = argmax(l);
            }
        }
        let s = t.elapsed().as_secs_f64();
        println!(
            "K={k}: {NEW} steps in {s:.2} s: {:.1} tokens/s ({:.1} steps/s)",
            (k * NEW) as f64 / s,
            NEW as f64 / s
        );
    }
    Ok(())
}
