//! `sdr serve` as trainers call it: structured completions in `/v1/rewards`
//! (TRL's parsed responses), and `--missing-section score`, which keeps a
//! sample whose reference lacks a section (OpenRLHF would otherwise train on
//! with reward `None`).

mod common;

use common::*;
use sdr_cli::commands::serve::{Limits, MissingSection};
use sdr_reward::RewardOptions;
use serde_json::json;

const FINDINGS: &str = "The heart is normal in size. Lungs are clear.";
const ANSWER: &str = "<answer>No acute disease.</answer>";
const NO_IMPRESSION: &str =
    "<think>Heart size is normal. The lungs are clear. No pleural effusion.</think><answer></answer>";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parsed_reasoning_scores_as_the_whole_report() {
    let mut srv = start(RewardOptions::default(), Limits::default()).await;
    let body = json!({
        "completions": [
            GOOD,
            {"role": "assistant", "reasoning_content": FINDINGS, "content": ANSWER},
            [{"role": "user", "content": "x"}, {"role": "assistant", "reasoning": FINDINGS, "content": ANSWER}],
            [{"role": "assistant", "content": [{"type": "thinking", "thinking": FINDINGS}, {"type": "text", "text": ANSWER}]}],
        ],
        "references": [REF, REF, REF, REF],
    });
    let (status, out) = post_json(srv.addr, "/v1/rewards", &body).await;
    assert_eq!(status, 200, "{out}");
    let rewards = floats(&out["rewards"]);
    assert!(rewards[0] > 2.0, "{rewards:?}");
    assert!(rewards.iter().all(|r| *r == rewards[0]), "{rewards:?}");
    assert!(out.get("missing_sections").is_none(), "{out}");

    // An unreadable shape is a 400 naming it, not a reward of 0.
    for (completion, needle) in [
        (json!(5), "completions[1]: a completion must be a string"),
        (
            json!({"role": "assistant"}),
            "completions[1]: a chat message must have \"content\"",
        ),
        (
            json!([{"content": [{"type": "image"}]}]),
            "completions[1]: content part 0 is not text",
        ),
    ] {
        let body = json!({"completions": [GOOD, completion], "references": [REF, REF]});
        let (status, out) = post_json(srv.addr, "/v1/rewards", &body).await;
        assert_eq!(status, 400, "{out}");
        let msg = out["error"].as_str().unwrap();
        assert!(msg.contains(needle), "{msg}");
    }
    srv.stop();
    srv.task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_section_score_keeps_the_sample_and_counts_it() {
    let limits = Limits {
        missing_section: MissingSection::Score,
        ..Limits::default()
    };
    let mut srv = start(RewardOptions::default(), limits).await;
    let prompt = "<|im_start|>user\nWrite the report.<|im_end|>\n<|im_start|>assistant\n";
    let body = json!({
        "query": [format!("{prompt}{GOOD}<|im_end|>"), format!("{prompt}{GOOD}<|im_end|>"), format!("{prompt}Heart.")],
        "prompts": [prompt, prompt, prompt],
        "labels": [REF, NO_IMPRESSION, NO_IMPRESSION],
    });
    let (status, out) = post_json(srv.addr, "/get_reward", &body).await;
    assert_eq!(status, 200, "{out}");
    let logs = &out["extra_logs"];
    assert_eq!(floats(&logs["missing_sections"]), [0.0, 1.0, 1.0]);
    let (findings, impression) = (floats(&logs["findings"]), floats(&logs["impression"]));
    // The present section is scored as against the whole reference, the missing one is 0.
    assert_eq!(findings[1], findings[0]);
    assert_eq!(impression[1], 0.0);
    assert_eq!(floats(&out["rewards"])[1], 1.0 + findings[0]);
    assert_eq!(floats(&out["rewards"])[2], 0.0); // malformed: 0 whatever the reference

    let body = json!({
        "completions": [GOOD, GOOD],
        "references": [{"findings": " ", "impression": ""}, {"findings": "", "impression": "No acute disease."}],
    });
    let (status, out) = post_json(srv.addr, "/v1/rewards", &body).await;
    assert_eq!(status, 200, "{out}");
    assert_eq!(floats(&out["missing_sections"]), [2.0, 1.0]);
    assert_eq!(floats(&out["rewards"])[0], 1.0); // only the format term
    assert_eq!(floats(&out["rewards"])[1], 2.0); // format + an identical impression

    let (_, health) = request(srv.addr, "GET", "/health", b"").await;
    let health: serde_json::Value = serde_json::from_str(&health).unwrap();
    assert_eq!(health["missing_section"], "score");
    assert_eq!(health["missing_sections"], 5);
    srv.stop();
    srv.task.await.unwrap().unwrap();
}
