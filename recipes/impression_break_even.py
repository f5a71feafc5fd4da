"""Why a reward teaches a weak Findings -> Impression policy to name findings or to stay silent
(docs/results/grpo-impression.md, "Why the clinical cost teaches silence to a weak policy").

On 150 abnormal train studies (reference Impression states a CheXpert finding), each reward of
three impressions against the study's reference: its own impression (the right finding), the
normal impression, and another abnormal study's impression (a wrong finding); and the share of
right findings a policy needs for naming findings to beat the normal impression in expectation.

    .venv-trainers/bin/python recipes/impression_break_even.py [--json OUT.json]

Beside the rewards of the study, the clinical cost with a finding the candidate adds and one it
omits weighed apart (`clinical:added=A,omitted=O`, issue 57 item 3): a heavier omission makes
the normal impression pay for the finding it leaves out; a lighter addition makes a wrong
finding cheaper; both lower the share of right findings a policy needs.
"""

import random
import sys
sys.path.insert(0, str(__import__('pathlib').Path(__file__).resolve().parent))
import argparse, json, os
import common
from grpo import is_abnormal
rows = [r for r in common.studies("train") if is_abnormal(r)]
random.Random(0).shuffle(rows)
rows = rows[:150]
refs = [common.impression_target(r) for r in rows]
wrong = refs[1:] + refs[:1]  # another abnormal study's impression
NORMAL = "No acute cardiopulmonary abnormality."
rewards = {
    "cosine": common.ImpressionReward("c", metric="chamfer"),
    "cosine + F1 term": common.ImpressionReward("f", metric="chamfer", clinical_weight=1.0),
    "clinical cost": common.ImpressionReward("k", metric="chamfer", cost="clinical:lambda=1.5,unmatched=0.5"),
    "clinical cost, unmatched=0": common.ImpressionReward("k0", metric="chamfer", cost="clinical:lambda=1.5,unmatched=0"),
    "clinical cost + F1 term": common.ImpressionReward("kf", metric="chamfer", cost="clinical:lambda=1.5,unmatched=0.5", clinical_weight=1.0),
}
for a, o in [(0.25, 0.5), (0.5, 1.0), (0.25, 1.0), (0.0, 1.0), (0.0, 0.5), (1.0, 0.25)]:
    rewards[f"clinical cost, added={a:g}, omitted={o:g}"] = common.ImpressionReward(
        f"k{a:g}-{o:g}", metric="chamfer", cost=f"clinical:lambda=1.5,added={a:g},omitted={o:g}"
    )
ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--json", default=None, help="also write the rows here")
args = ap.parse_args()
table = []
print(f"{len(rows)} abnormal train studies; rewards of three impressions against each reference (mean):")
print("| reward | own impression (right finding) | normal impression | another abnormal study's impression (wrong finding) | right - normal | normal - wrong | break-even share right |")
print("|---|---:|---:|---:|---:|---:|---:|")
for name, rw in rewards.items():
    m = lambda c: sum(rw(prompts=None, completions=c, impression=refs)) / len(refs)
    r, n, w = m(refs), m([NORMAL] * len(refs)), m(wrong)
    # Naming a finding beats the normal impression in expectation when p*r + (1-p)*w > n.
    p = (n - w) / (r - w)
    print(f"| {name} | {r:.3f} | {n:.3f} | {w:.3f} | {r - n:+.3f} | {n - w:+.3f} | {100 * p:.0f} % |")
    table.append({"reward": name, "right": round(r, 6), "normal": round(n, 6), "wrong": round(w, 6), "break_even_share_right": round(p, 6)})
if args.json:
    tmp = args.json + ".tmp"
    with open(tmp, "w") as fh:
        json.dump({"studies": len(rows), "normal_impression": NORMAL, "rows": table}, fh, indent=1)
        fh.write("\n")
    os.replace(tmp, args.json)
