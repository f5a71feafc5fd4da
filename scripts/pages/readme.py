"""The README's results sentences on the labeler and the candidates files, from the files their
pages use (one figure per fact: the same functions as labeler.md and generators.md).

- `labeler-f1`: agreement of the rule labeler with IU X-ray's human coding under both
  uncertain-label conventions (`docs/results/labeler/iu_validation.json`, scripts/pages/labeler.py);
- `candidates-format`, `generators-format`: the well-formed and token-limit shares of the
  candidates files (`scripts/pages/candidates.py`: the files themselves and parse.json);
- `yardstick-agreement`: how often the independent implementation picks as `sdr select` does
  (`docs/results/yardstick/`, scripts/pages/yardstick.py).

Standard library only.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

HERE = Path(__file__).resolve().parent


def module(name: str):
    spec = importlib.util.spec_from_file_location(f"{name}_for_readme", HERE / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


labeler = module("labeler")
candidates = module("candidates")
yardstick = module("yardstick")


def labeler_f1() -> str:
    d = labeler.data()
    absent, present = d["uncertain_absent"]["macro_supported"]["f1"], d["uncertain_present"]["macro_supported"]["f1"]
    return (f"macro F1 {absent:.3f} with an uncertain mention counted as absent, {present:.3f} with it counted as\n"
            f"present, the convention of every other table ([docs/results/labeler.md](docs/results/labeler.md)),")


def shares():
    sm = candidates.format_stats(candidates.SMOL)
    g = candidates.format_stats(candidates.GEMMA, sm["studies"])
    old = candidates.format_stats(candidates.SMOL_OLD)
    p = lambda s, k: candidates.pct(s[k], s["candidates"])  # noqa: E731
    return g, sm, old, p


def candidates_format() -> str:
    g, sm, old, p = shares()
    return (f"better than SmolLM2-135M-Instruct under the same settings ({p(g, 'well_formed')} % of candidates "
            f"well-formed\nagainst {p(sm, 'well_formed')} %, {p(g, 'token_limit')} % at the token limit against "
            f"{p(sm, 'token_limit')} % on the first {sm['studies']} studies; `python3 tools/candidate_stats.py\n"
            f"FILE...`); SmolLM2's generations are kept beside it\n"
            f"(`{candidates.SMOL}`, and\n`{candidates.SMOL_OLD}` without prefill and penalty: "
            f"{p(old, 'well_formed')} % well-formed)")


def generators_format() -> str:
    g, sm, _, p = shares()
    return (f"  With the settings of the bundled SmolLM2 file, Gemma keeps the format better ({p(g, 'well_formed')} % "
            f"of\n  candidates well-formed against {p(sm, 'well_formed')} %, {p(g, 'token_limit')} % at the token "
            f"limit against {p(sm, 'token_limit')} % on the first {sm['studies']}\n  studies; "
            f"`{candidates.GEMMA}`,\n  [`docs/results/generators.md`](docs/results/generators.md)).")


def yardstick_agreement() -> str:
    parts = []
    for f in yardstick.files("default"):
        a, n = yardstick.agreement("default", f)
        parts.append(f"{a} of {n} studies on `{f}`")
    return ("(`tools/yardstick.py`, [`docs/results/yardstick.md`](docs/results/yardstick.md)) picks the same\n"
            "candidate as `sdr select` in " + ", ".join(parts) + ";\nthe page traces each disagreement to a "
            "parse choice (SPEC §1).")


def expectation_example() -> str:
    """Two omission weights of the Findings-consistency check, from the file it reads."""
    import json

    e = json.loads((HERE.parents[1] / "data/clinical/impression_expectation.json").read_text())["findings"]
    return (f"left-out effusion costs {e['Pleural Effusion']['expectation']:.2f} and a left-out device "
            f"{e['Support Devices']['expectation']:.2f}, `data/clinical/impression_expectation.json`);")


BLOCKS = {
    ("README.md", "expectation-example"): expectation_example,
    ("README.md", "yardstick-agreement"): yardstick_agreement,
    ("README.md", "labeler-f1"): labeler_f1,
    ("README.md", "candidates-format"): candidates_format,
    ("README.md", "generators-format"): generators_format,
}
