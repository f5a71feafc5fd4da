"""Write the faithfulness benchmark's cases (docs/results/faithfulness.md).

From each held-out IU X-ray report (test and validation splits, uid % 10 in {0, 1},
with both sections; the project's split, data/iu-xray/README.md) it writes perturbed copies of the report, one per kind of
edit that the report allows, as JSON Lines `{"id", "uid", "kind", "reference",
"candidate", "before", "after"}` (reference and candidate as
"Findings: ...\\nImpression: ..."; `before` / `after` the edited sentences):

- `rephrase`: one Findings sentence rewritten with its meaning kept, from the table
  REPHRASINGS below (exact sentences first, then general patterns); the control.
- `absent_to_present`: a denied finding ("No pneumothorax.") stated as present
  ("There is a pneumothorax."); other findings denied in the same sentence stay
  denied ("No pneumothorax or pleural effusion." -> "There is a pneumothorax. No
  pleural effusion.").
- `present_to_absent`: an abnormal finding denied ("Left basilar atelectasis." ->
  "No left basilar atelectasis.").
- `left_right`: left and right swapped in an abnormal finding.
- `side_any`: left and right swapped in any Findings sentence that states something on
  one side, whatever its finding (no denial, no hedge, one of the two side words only:
  "The right hemidiaphragm remains mildly elevated.", "Calcified left paratracheal lymph
  nodes are seen."); `left_right` is its subset whose finding is in the ABNORMAL list.
- `omission`: an abnormal finding's sentence removed.
- `hallucination`: an abnormal sentence of a train report, naming a finding this
  report does not name, inserted.
- `severity`: small <-> large, mild <-> severe (and kin) in an abnormal finding.
- `unrelated`: another held-out report with other problems (both sections).

Only the Findings section is edited, except `unrelated`. Deterministic (seed 0).

    python3 bench/faithfulness/make_cases.py            # writes bench/faithfulness/cases.jsonl
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
CSV = ROOT / "data" / "iu-xray" / "indiana_reports.csv"

# Meaning-preserving rewrites (whole sentence, case-insensitive). Exact sentences
# come from the most frequent IU X-ray Findings sentences; the general patterns
# after them cover the rest. Each keeps the finding, its polarity, side and size.
REPHRASINGS: list[tuple[str, str]] = [
    (r"No pneumothorax\.", "Pneumothorax is not seen."),
    (r"There is no pneumothorax\.", "No pneumothorax is seen."),
    (r"No pleural effusion\.", "There is no pleural effusion."),
    (r"No pneumothorax or pleural effusion\.", "There is no pleural effusion or pneumothorax."),
    (r"No pleural effusion or pneumothorax\.", "No pneumothorax or pleural effusion is seen."),
    (r"There is no pleural effusion or pneumothorax\.", "No pleural effusion or pneumothorax."),
    (r"No pleural effusion or pneumothorax is seen\.", "There is no pleural effusion or pneumothorax."),
    (r"No pleural effusions or pneumothoraces\.", "There are no pleural effusions or pneumothoraces."),
    (r"There is no pneumothorax or pleural effusion\.", "No pneumothorax or pleural effusion is identified."),
    (r"There is no pneumothorax or effusion\.", "No effusion or pneumothorax."),
    (r"There is no effusion or pneumothorax\.", "No pneumothorax or effusion is seen."),
    (r"The lungs are clear\.", "Both lungs are clear."),
    (r"Lungs are clear\.", "The lungs appear clear."),
    (r"The lungs are clear bilaterally\.", "Both lungs are clear."),
    (r"Both lungs are clear and expanded\.", "The lungs are clear and expanded."),
    (r"The heart is normal in size\.", "Heart size is normal."),
    (r"Heart size is normal\.", "The heart is normal in size."),
    (r"Heart size normal\.", "Normal heart size."),
    (r"Normal heart size\.", "Heart size is within normal limits."),
    (r"Heart size is within normal limits\.", "The heart is normal in size."),
    (r"The heart size is normal\.", "The heart is of normal size."),
    (r"Heart size within normal limits\.", "Normal heart size."),
    (r"The heart is normal in size and contour\.", "Heart size and contour are normal."),
    (r"Heart and mediastinum normal\.", "The heart and mediastinum are normal."),
    (r"The mediastinum is unremarkable\.", "Unremarkable mediastinum."),
    (r"Mediastinal contours are normal\.", "The mediastinal contours are normal."),
    (r"The cardiomediastinal silhouette is normal in size and contour\.", "Normal cardiomediastinal silhouette."),
    (r"Cardiomediastinal silhouette is within normal limits\.", "The cardiomediastinal silhouette is normal."),
    (r"Pulmonary vascularity is within normal limits\.", "Normal pulmonary vascularity."),
    (r"Bony structures are intact\.", "The bony structures are intact."),
    (r"There is no focal consolidation\.", "No focal consolidation is seen."),
    (r"No focal consolidation\.", "There is no focal consolidation."),
    (r"No focal airspace disease\.", "There is no focal airspace disease."),
    (r"No acute bony abnormality\.", "There is no acute bony abnormality."),
    # General patterns.
    (r"No ([a-z ,]+)\.", r"There is no \1."),
    (r"There (?:is|are) no ([a-z ,]+)\.", r"No \1."),
    (r"There (?:is|are) (?!no )(?:an? )?([a-z ]+)\.", r"\1."),
    (
        r"((?:left|right|bilateral|mild|minimal|small|calcified|stable)[a-z ]* "
        r"(?:atelectasis|granuloma|granulomas|opacity|scarring|spondylosis|degenerative changes|cardiomegaly|effusion))\.",
        r"There is \1.",
    ),
]

# Findings a denial can be turned into a statement of: keyword -> present sentence.
PRESENT = {
    "pneumothorax": "There is a pneumothorax.",
    "pneumothoraces": "There is a pneumothorax.",
    "pleural effusion": "There is a pleural effusion.",
    "pleural effusions": "There are pleural effusions.",
    "effusion": "There is a pleural effusion.",
    "effusions": "There are pleural effusions.",
    "consolidation": "There is focal consolidation.",
    "airspace disease": "There is focal airspace disease.",
    "air space disease": "There is focal airspace disease.",
    "edema": "There is pulmonary edema.",
    "infiltrate": "There is an infiltrate.",
    "opacity": "There is a focal opacity.",
    "pneumonia": "There is pneumonia.",
    "nodule": "There is a pulmonary nodule.",
    "mass": "There is a mass.",
    "fracture": "There is an acute fracture.",
    "cardiomegaly": "There is cardiomegaly.",
    "mediastinal widening": "There is mediastinal widening.",
}
NEGATION = re.compile(r"\b(no|not|without|negative|free of|clear of|resolved|removed|normal|unremarkable|otherwise)\b", re.I)
HEDGE = re.compile(r"\b(may|possible|possibly|likely|probable|suspect|suggest|versus|vs|cannot|question)\w*", re.I)
ABNORMAL = re.compile(
    r"\b(atelectasis|atelectatic|effusions?|opacity|opacities|granulomas?|cardiomegaly|consolidation|edema|"
    r"nodules?|pneumothorax|infiltrates?|scarring|hyperinflat\w*|hyperexpan\w*|emphysema\w*|copd|degenerative|"
    r"spondylosis|scoliosis|hernia|enlarged|enlargement|fractures?|tortuous|tortuosity|osteophytes?|"
    r"atherosclero\w*|airspace disease|pneumonia|calcified|calcifications?|elevat\w+|kyphosis|fibrosis|"
    r"density|densities|thickening|deformity)\b",
    re.I,
)
SEVERITY = {
    "small": "large", "large": "small", "tiny": "large", "trace": "large",
    "mild": "severe", "severe": "mild", "mildly": "severely", "severely": "mildly",
    "minimal": "extensive", "extensive": "minimal", "moderate": "mild", "moderately": "mildly",
    "marked": "mild", "markedly": "mildly",
}
SPLIT = re.compile(r"(?<=\.)\s+(?=[A-Z0-9])")


def sentences(text: str) -> list[str]:
    return [s.strip() for s in SPLIT.split(text.strip()) if s.strip()]


def report(findings: list[str], impression: str) -> str:
    return f"Findings: {' '.join(findings)}\nImpression: {impression}"


def is_abnormal(s: str) -> bool:
    return bool(ABNORMAL.search(s)) and not NEGATION.search(s) and not HEDGE.search(s) and "XXXX" not in s


def case_rng(uid: int, kind: str) -> random.Random:
    return random.Random(f"{uid}:{kind}:0")


def rephrase(s: str) -> str | None:
    for pattern, repl in REPHRASINGS:
        m = re.fullmatch(pattern, s, flags=re.I)
        if m:
            out = m.expand(repl).strip()
            out = out[0].upper() + out[1:]
            return out if out != s else None
    return None


def absent_to_present(s: str) -> str | None:
    low = s.lower()
    # Sentences that open with the denial ("No ...", "There is no ..."): the
    # statement that replaces them then says all that they said.
    neg = re.match(r"(?:there (?:is|are) )?(no)\b", low)
    if not neg or HEDGE.search(s) or "XXXX" in s:
        return None
    hits = []
    for k in sorted(PRESENT, key=len, reverse=True):
        for m in re.finditer(rf"\b{k}\b", low):
            if m.start() > neg.start() and not any(m.start() < e and b < m.end() for b, e, _ in hits):
                hits.append((m.start(), m.end(), k))
    if not hits:
        return None
    hits.sort()
    first = hits[0][2]
    rest = [k for _, _, k in hits[1:] if PRESENT[k] != PRESENT[first]]
    out = PRESENT[first]
    if rest:
        out += " No " + (", ".join(rest[:-1]) + " or " + rest[-1] if len(rest) > 1 else rest[0]) + "."
    return out


GRADE_LEAD = re.compile(r"^(mild|minimal|small|tiny|trace|moderate|large|severe|marked)\s+", re.I)


def present_to_absent(s: str) -> str | None:
    if not is_abnormal(s):
        return None
    m = re.match(r"^There (is|are) (?:an? )?(.+)$", s)
    if m:
        return f"There {m.group(1)} no {m.group(2)}"
    if not re.search(r"\b(is|are|has|have|was|were|appears?|seen|noted|present|demonstrated|identified)\b", s, re.I):
        body = GRADE_LEAD.sub("", s)
        return "No " + body[0].lower() + body[1:]
    m = re.search(r"\b(is|are)\b", s)
    if m:
        return s[: m.end()] + " not" + s[m.end():]
    return None


def swap_sides(s: str) -> str | None:
    if not is_abnormal(s) or not re.search(r"\b(left|right)\b", s, re.I):
        return None
    swap = {"left": "right", "right": "left", "Left": "Right", "Right": "Left", "LEFT": "RIGHT", "RIGHT": "LEFT"}
    return re.sub(r"\b(left|right|Left|Right|LEFT|RIGHT)\b", lambda m: swap[m.group(1)], s)


# A side stated as normal ("Left lung clear.") is no finding.
NORMAL = re.compile(r"\b(clear|intact)\b", re.I)


def swap_any_side(s: str) -> str | None:
    low = s.lower()
    has = {w for w in ("left", "right") if re.search(rf"\b{w}\b", low)}
    if len(has) != 1 or NEGATION.search(s) or HEDGE.search(s) or NORMAL.search(s) or "XXXX" in s:
        return None
    swap = {"left": "right", "right": "left", "Left": "Right", "Right": "Left", "LEFT": "RIGHT", "RIGHT": "LEFT"}
    return re.sub(r"\b(left|right|Left|Right|LEFT|RIGHT)\b", lambda m: swap[m.group(1)], s)


def change_severity(s: str) -> str | None:
    if not is_abnormal(s):
        return None
    words = list(re.finditer(r"\b(" + "|".join(SEVERITY) + r")\b", s, re.I))
    if not words:
        return None
    m = words[0]
    w = SEVERITY[m.group(1).lower()]
    if m.group(1)[0].isupper():
        w = w[0].upper() + w[1:]
    return s[: m.start()] + w + s[m.end():]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", type=Path, default=CSV)
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("cases.jsonl"))
    args = ap.parse_args()

    rows = list(csv.DictReader(open(args.csv, newline="", encoding="utf-8")))
    complete = [r for r in rows if r["findings"].strip() and r["impression"].strip()]
    test = [r for r in complete if int(r["uid"]) % 10 in (0, 1)]
    train = [r for r in complete if int(r["uid"]) % 10 not in (0, 1)]
    # Abnormal sentences of train reports, for hallucinations.
    pool = sorted(
        {
            s
            for r in train
            for s in sentences(r["findings"])
            if is_abnormal(s) and len(s.split()) <= 12
        }
    )

    out = []
    for r in test:
        uid = int(r["uid"])
        f = sentences(r["findings"])
        imp = r["impression"].strip()
        ref = report(f, imp)

        def add(kind: str, candidate: str, before: str, after: str) -> None:
            out.append(
                {
                    "id": f"{uid}-{kind}",
                    "uid": uid,
                    "kind": kind,
                    "reference": ref,
                    "candidate": candidate,
                    "before": before,
                    "after": after,
                }
            )

        def edit_one(kind: str, fn) -> None:
            idx = list(range(len(f)))
            case_rng(uid, kind).shuffle(idx)
            for i in idx:
                new = fn(f[i])
                if new:
                    add(kind, report(f[:i] + [new] + f[i + 1:], imp), f[i], new)
                    return

        edit_one("rephrase", rephrase)
        edit_one("absent_to_present", absent_to_present)
        edit_one("present_to_absent", present_to_absent)
        edit_one("left_right", swap_sides)
        edit_one("severity", change_severity)
        edit_one("side_any", swap_any_side)

        abnormal = [i for i, s in enumerate(f) if is_abnormal(s)]
        if abnormal and len(f) >= 2:
            i = case_rng(uid, "omission").choice(abnormal)
            add("omission", report(f[:i] + f[i + 1:], imp), f[i], "")

        rng = case_rng(uid, "hallucination")
        named = {m.group(1).lower() for m in ABNORMAL.finditer(r["findings"])}
        choices = [s for s in pool if not {m.group(1).lower() for m in ABNORMAL.finditer(s)} & named]
        if choices:
            s = rng.choice(choices)
            at = rng.randrange(len(f) + 1)
            add("hallucination", report(f[:at] + [s] + f[at:], imp), "", s)

        rng = case_rng(uid, "unrelated")
        others = [o for o in test if o["Problems"] != r["Problems"]]
        o = rng.choice(others)
        add("unrelated", report(sentences(o["findings"]), o["impression"].strip()), "", f"uid {o['uid']}")

    tmp = args.out.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        for c in out:
            fh.write(json.dumps(c, ensure_ascii=False) + "\n")
    tmp.replace(args.out)
    counts: dict[str, int] = {}
    for c in out:
        counts[c["kind"]] = counts.get(c["kind"], 0) + 1
    print(f"{len(test)} held-out reports, {len(out)} cases: {counts}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
