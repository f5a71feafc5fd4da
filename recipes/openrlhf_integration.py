"""Integration check: the reward inside OpenRLHF 0.11's own rollout code, on a CPU.

OpenRLHF's `SingleTurnAgentExecutor` (openrlhf.utils.agent) generates one completion,
decodes prompt + completion with its special tokens, and asks for the reward of that
one sample: from a Python file (`--reward.remote_url .../sdr_rewards/openrlhf_reward.py`,
through `asyncio.to_thread`) or over HTTP (`--reward.remote_url
http://HOST:PORT/get_reward`, here `sdr serve --missing-section score`). Both are
driven here, many samples at once as in a rollout, with a stand-in for the vLLM
engine that returns fixed token ids (vLLM does not install on a CPU machine; the
executor's code is OpenRLHF's own).

Checks: rewards equal `SDRReward.score` on the same completions (within 1e-5 for the
server, which may be the MKL build); a label without an
Impression gets a reward and `missing_sections = 1` in `extra_logs`, never `None`
(OpenRLHF trains on with `None` after logging a failed reward call at INFO level).

    SDR_BIN=target/release/sdr .venv-trainers/bin/python recipes/openrlhf_integration.py
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import struct
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


class Engine:
    """Stands in for OpenRLHF's vLLM engine: answers each prompt with its scripted completion."""

    def __init__(self, tok, answers):
        self.tok = tok
        self.answers = answers  # prompt token ids (tuple) -> completion text

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        text = self.answers[tuple(prompt_token_ids)]
        ids = self.tok(text, add_special_tokens=False)["input_ids"] + [self.tok.convert_tokens_to_ids("<|im_end|>")]
        await asyncio.sleep(0)
        out = SimpleNamespace(token_ids=ids, text=text, finish_reason="stop", logprobs=None)
        return SimpleNamespace(outputs=[out])


async def rollout(executor, tok, prompts, labels, engine):
    params = SimpleNamespace(max_tokens=512, logprobs=None)
    return await asyncio.gather(
        *(executor.execute(p, l, params, 2048, tok, engine) for p, l in zip(prompts, labels))
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def as_float(v):
    if hasattr(v, "tolist"):
        v = v.tolist()
    if isinstance(v, list):
        (v,) = v
    return float(v)


def main() -> int:
    from openrlhf.utils.agent import SingleTurnAgentExecutor
    from transformers import AutoTokenizer

    import sdr_rewards

    problems: list = []
    report: dict = {}
    gguf = common.find_gguf()
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    rows = common.studies("train")[:16]
    prompts = [tok.apply_chat_template(common.prompt_messages(r), add_generation_prompt=True, tokenize=False) for r in rows]
    completions = [common.target(r) for r in rows[1:]] + [common.target(rows[0])]
    labels = [common.target(r) for r in rows]
    no_impression = 5
    labels[no_impression] = labels[no_impression].split("<answer>")[0] + "<answer></answer>"
    answers = {tuple(tok(p, add_special_tokens=False)["input_ids"]): c for p, c in zip(prompts, completions)}
    engine = Engine(tok, answers)

    policy = sdr_rewards.SDRReward(metric="chamfer", missing_section="score")
    expected = policy.score(completions, references=labels)
    report["expected"] = expected["reward"]

    def check(label, outputs, tol=0.0):
        rewards = [o["reward"] for o in outputs]
        if any(r is None for r in rewards):
            problems.append(f"{label}: reward None for samples {[k for k, r in enumerate(rewards) if r is None]}")
            return
        got = [as_float(r) for r in rewards]
        report[label] = got
        want = expected["reward"]
        if label == "file":  # the file hands OpenRLHF float32 tensors
            want = [struct.unpack("f", struct.pack("f", e))[0] for e in want]
        if any(abs(g - e) > tol for g, e in zip(got, want)) or len(got) != len(want):
            problems.append(f"{label}: rewards {got} != SDRReward.score {expected['reward']}")
        missing = [as_float(o["extra_logs"].get("missing_sections", -1)) for o in outputs]
        if missing[no_impression] != 1.0 or sum(missing) != 1.0:
            problems.append(f"{label}: extra_logs missing_sections {missing}")

    # The reward file, loaded and called by OpenRLHF.
    path = Path(sdr_rewards.__file__).with_name("openrlhf_reward.py")
    check("file", asyncio.run(rollout(SingleTurnAgentExecutor(str(path)), tok, prompts, labels, engine)))

    # sdr serve, over HTTP.
    sdr_bin = os.environ.get("SDR_BIN") or str(ROOT / "target" / "release" / "sdr")
    port = free_port()
    server = subprocess.Popen(
        [sdr_bin, "serve", "--port", str(port), "--missing-section", "score"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except OSError:
                if server.poll() is not None:
                    raise SystemExit(f"sdr serve exited: {server.stderr.read().decode()}")
                time.sleep(0.2)
        url = f"http://127.0.0.1:{port}/get_reward"
        # The CLI may be the MKL build (scripts/build-sdr.sh): its GEMMs round differently.
        check("serve", asyncio.run(rollout(SingleTurnAgentExecutor(url), tok, prompts, labels, engine)), 1e-5)
        health = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/health").read())
        report["serve_health"] = {k: health[k] for k in ("requests", "batches", "samples", "missing_sections")}
    finally:
        server.terminate()
        server.wait(30)

    print(json.dumps(report))
    for p in problems:
        print(f"openrlhf_integration: FAIL: {p}", file=sys.stderr)
    if not problems:
        print("openrlhf_integration: ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
