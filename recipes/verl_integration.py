"""Integration check: `sdr_rewards/verl.py` inside verl 0.9's own reward loop, on a CPU.

Configurations are composed from verl's own hydra config (verl/trainer/config/
ppo_trainer.yaml, as `python -m verl.trainer.main_ppo` composes it), with only the
keys the READMEs name:

    reward.reward_manager.name=<manager>
    reward.custom_reward_function.path=<site-packages>/sdr_rewards/verl.py
    reward.custom_reward_function.name=compute_score | compute_score_async
    +reward.custom_reward_function.reward_kwargs.metric=chamfer
    reward.num_workers=2

and driven through verl's code:

1. the loader (`get_custom_reward_fn` -> `load_extern_object`);
2. `RewardLoopWorker.compute_score_batch` for every reward-loop manager (naive, dapo,
   gdpo, rate_limited, remote), with the plain and the async function (`remote` takes
   only the plain one): one concurrent call per sample, as in training;
3. `RewardLoopManager.compute_rm_score` on a local Ray cluster (reward workers as Ray
   actors);
4. `reward.reward_manager.name=batch` is refused by verl (`Unknown reward manager`).

Each manager's rewards must equal `SDRReward.score` on the decoded responses, bit for
bit. Exit status 0 when every expectation holds; each failure is printed.

    .venv-trainers/bin/python recipes/verl_integration.py
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

MANAGERS = ("naive", "dapo", "gdpo", "rate_limited", "remote")


def compose(tokenizer_dir: str, manager: str, fn: str = "compute_score", extra=()):
    import verl
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    import sdr_rewards.verl

    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return hydra_compose(
            config_name="ppo_trainer",
            overrides=[
                f"reward.reward_manager.name={manager}",
                f"reward.custom_reward_function.path={sdr_rewards.verl.__file__}",
                f"reward.custom_reward_function.name={fn}",
                "+reward.custom_reward_function.reward_kwargs.metric=chamfer",
                "reward.num_workers=2",
                f"actor_rollout_ref.model.path={tokenizer_dir}",
                *extra,
            ],
        )


def batch_of(tok, responses, truths):
    """A DataProto as verl's rollout hands the reward loop: prompt and response ids,
    right-padded responses, the reference under reward_model.ground_truth."""
    import numpy as np
    import torch
    from verl import DataProto

    ids = [tok(r, add_special_tokens=False)["input_ids"] + [tok.eos_token_id] for r in responses]
    width = max(len(i) for i in ids)
    prompt = torch.ones((len(ids), 4), dtype=torch.long)
    resp = torch.full((len(ids), width), tok.pad_token_id or 0, dtype=torch.long)
    mask = torch.zeros((len(ids), 4 + width), dtype=torch.long)
    mask[:, :4] = 1
    for k, seq in enumerate(ids):
        resp[k, : len(seq)] = torch.tensor(seq)
        mask[k, 4 : 4 + len(seq)] = 1
    return DataProto.from_dict(
        tensors={"prompts": prompt, "responses": resp, "attention_mask": mask,
                 "input_ids": torch.cat([prompt, resp], dim=1)},
        non_tensors={
            "data_source": np.array(["iu_xray"] * len(ids), dtype=object),
            "reward_model": np.array([{"ground_truth": t} for t in truths], dtype=object),
        },
    )


_LOOP = None


def run_worker(config, data):
    """verl's RewardLoopWorker in this process, on one event loop for the whole run (as
    in a worker process: the rate_limited manager's limiters are bound to the first
    loop that uses them)."""
    from verl.experimental.reward_loop import RewardLoopWorker

    global _LOOP
    if _LOOP is None:
        _LOOP = asyncio.new_event_loop()
        asyncio.set_event_loop(_LOOP)
    worker = RewardLoopWorker(config)
    return _LOOP.run_until_complete(worker.compute_score_batch(data))


def main() -> int:
    import numpy as np
    import ray
    from transformers import AutoTokenizer

    import sdr_rewards
    from verl.trainer.ppo.reward import get_custom_reward_fn

    problems: list = []
    report: dict = {}
    gguf = common.find_gguf()
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    rows = common.studies("train")[:12]
    truths = [common.target(r) for r in rows]
    # Responses: the references of the next study (a real report, not the reference),
    # one malformed, one equal to its reference.
    responses = [common.target(r) for r in rows[1:]] + [truths[0]]
    responses[3] = "Findings without the template."
    decoded = [tok.decode(tok(r, add_special_tokens=False)["input_ids"], skip_special_tokens=True) for r in responses]
    expected = sdr_rewards.SDRReward(metric="chamfer").score(decoded, references=truths)["reward"]
    report["expected"] = expected

    with tempfile.TemporaryDirectory() as tmp:
        tok.save_pretrained(tmp)
        data = batch_of(tok, responses, truths)

        # 1. The loader.
        fn = get_custom_reward_fn(compose(tmp, "naive"))
        got = fn(data_source="iu_xray", solution_str=decoded[0], ground_truth=truths[0], extra_info={})
        if got["score"] != expected[0]:
            problems.append(f"loader: {got} != {expected[0]}")

        ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
        try:
            # 2. Every reward-loop manager through RewardLoopWorker.
            for manager in MANAGERS:
                for name in ("compute_score", "compute_score_async"):
                    if manager == "remote" and name == "compute_score_async":
                        continue  # verl's remote manager asserts a plain function
                    label = f"{manager}/{name}"
                    try:
                        out = run_worker(compose(tmp, manager, name), data)
                    except Exception as e:  # noqa: BLE001 - reported
                        problems.append(f"{label}: {type(e).__name__}: {e}")
                        continue
                    scores = [o["reward_score"] for o in out]
                    keys = sorted(out[0]["reward_extra_info"])
                    report[label] = {"scores_equal": scores == expected, "extra_keys": keys}
                    if scores != expected:
                        problems.append(f"{label}: rewards {scores} != SDRReward.score {expected}")
                    for k in ("score", "format", "findings", "impression"):
                        if k not in keys:
                            problems.append(f"{label}: reward_extra_info has no {k!r} ({keys})")

            # 3. RewardLoopManager on the local Ray cluster.
            from verl.experimental.reward_loop import RewardLoopManager

            for name in ("compute_score", "compute_score_async"):
                manager = RewardLoopManager(compose(tmp, "naive", name))
                out = manager.compute_rm_score(data)
                # verl stores rm_scores as float32 (the reward at the last response token).
                scores = out.batch["rm_scores"].sum(dim=-1).tolist()
                expected32 = [float(np.float32(e)) for e in expected]
                report[f"RewardLoopManager/{name}"] = {
                    "scores_equal": scores == expected32,
                    "extra_keys": sorted(out.meta_info["reward_extra_keys"]),
                }
                if scores != expected32:
                    problems.append(f"RewardLoopManager/{name}: {scores} != {expected32}")
                for w in manager.reward_loop_workers:
                    ray.kill(w)
        finally:
            ray.shutdown()

        # 4. The batch manager is gone from verl's trainer path.
        try:
            run_worker(compose(tmp, "batch"), data)
            problems.append("reward.reward_manager.name=batch was accepted")
        except ValueError as e:
            report["batch"] = str(e)
            if "Unknown reward manager: batch" not in str(e):
                problems.append(f"batch: unexpected error {e}")

    print(json.dumps(report))
    for p in problems:
        print(f"verl_integration: FAIL: {p}", file=sys.stderr)
    if not problems:
        print("verl_integration: ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
