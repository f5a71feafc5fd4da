//! Logits parity with candle's `quantized_llama` on the SmolLM2 GGUF, both
//! with dequantized (f32) weights.
//!
//! With quantized weights both sides round every activation to 8 bits before
//! each matmul; a last-bit difference anywhere (another summation order in
//! attention) can flip one rounding and move the logits by tenths, as candle's
//! own prompt pass and token-by-token pass differ on some prompts. In f32 the
//! comparison checks the model's arithmetic (norms, RoPE, grouped attention,
//! SwiGLU) to float precision; the quantized kernels are compared with
//! candle's in the unit tests of `local::kernels`. Alone in its test binary
//! because candle reads `CANDLE_DEQUANTIZE_ALL` from the environment.
//! Needs the GGUF (`bash scripts/fetch-smollm2.sh`).

use std::path::PathBuf;

use candle_core::quantized::gguf_file;
use candle_core::{Device, Tensor};
use candle_transformers::models::quantized_llama::ModelWeights;
use sdr_gen::local::llama::Llama;
use sdr_gen::local::tokenizer::GgufTokenizer;
use sdr_gen::{Prompt, PromptTemplate};

fn gguf() -> PathBuf {
    let models = std::env::var_os("SDR_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cache/sdr/models")
        });
    let path = models.join("smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf");
    assert!(
        path.is_file(),
        "{} is missing: run `bash scripts/fetch-smollm2.sh` first",
        path.display()
    );
    path
}

fn forward(m: &mut ModelWeights, tokens: &[u32], pos: usize) -> Vec<f32> {
    let input = Tensor::new(tokens, &Device::Cpu)
        .unwrap()
        .unsqueeze(0)
        .unwrap();
    m.forward(&input, pos)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1()
        .unwrap()
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[test]
fn logits_match_candle_in_f32() {
    let path = gguf();
    // Before any candle matmul is built in this process (single test).
    std::env::set_var("CANDLE_DEQUANTIZE_ALL", "1");
    let mut file = std::fs::File::open(&path).unwrap();
    let content = gguf_file::Content::read(&mut file).unwrap();
    let mut reference = ModelWeights::from_gguf(content, &mut file, &Device::Cpu).unwrap();
    let (model, metadata) = Llama::load_dequantized(&path).unwrap();
    let tok = GgufTokenizer::from_metadata(&metadata, "smollm2").unwrap();

    for user in [
        "Describe a normal chest X-ray in one sentence.".to_string(),
        PromptTemplate::P1.text().unwrap(),
    ] {
        let text = tok
            .render_chat(&Prompt {
                system: None,
                user,
                images: vec![],
            })
            .unwrap();
        let tokens = tok.encode(&text).unwrap();
        reference.clear_kv_cache();
        let want = forward(&mut reference, &tokens, 0);
        let (mut cache, got) = model.prefill(&tokens).unwrap();
        let diff = max_abs_diff(&got, &want);
        eprintln!(
            "prompt of {} tokens: max |logit diff| = {diff:e}",
            tokens.len()
        );
        assert!(diff < 1e-3, "prefill logits differ by {diff}");

        // Two decode steps after the prompt.
        cache.set_rows(1);
        let mut next = [1115u32, 28];
        for (i, t) in next.iter_mut().enumerate() {
            let want = forward(&mut reference, &[*t], tokens.len() + i);
            let got = model.decode(&mut cache, &[0], &[*t]).unwrap();
            let diff = max_abs_diff(&got, &want);
            eprintln!("decode step {i}: max |logit diff| = {diff:e}");
            assert!(diff < 1e-3, "decode logits differ by {diff}");
        }
    }
}
