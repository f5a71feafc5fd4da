"""What the reward does with a reference that lacks a section.

A training label whose Findings or Impression is empty has no set to compare
that section against (SPEC §4). Two policies, chosen with ``missing_section=``
(``SDRReward``, verl's ``reward_kwargs``) or ``SDR_MISSING_SECTION`` (the
OpenRLHF file):

``"error"``
    Raise ``ValueError`` naming the reference (``reference 3: section
    `impression` is empty``). Right where an exception stops the run (TRL,
    verl); wrong where the trainer swallows it: OpenRLHF 0.11 logs a failed
    reward call at INFO level and trains on with reward ``None`` for the
    sample, so the sample is lost without a word.

``"score"``
    Score what can be scored and count the rest. The missing section's term is
    0 for every completion of that reference:

        R = lambda_fmt R_fmt + lambda_sem (R_sem^present + 0) [+ lambda_clin F1]

    Within a GRPO group (one reference, many completions) a term that is the
    same for every completion moves no advantage, so the group still learns
    from the section that is there. With both sections missing only the format
    term remains (the clinical term is then 0 too). Each result carries
    ``missing_sections`` (0, 1 or 2 per sample), which the adapters log.

``sdr check-data`` finds such references before a run.

The present section is scored by giving it in place of the missing one and
setting the missing one's term to 0 afterwards; the CheXpert labels of a
section given twice are those of the section once, so the clinical term is
the one against the present section alone.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import _sdr

POLICIES = ("error", "score")
# Stands in for a reference with no section at all; its terms are set to 0.
_PLACEHOLDER = "Not reported."


def check_policy(policy: Any) -> str:
    if not isinstance(policy, str) or policy not in POLICIES:
        raise ValueError(f"missing_section {policy!r}: expected 'error' or 'score'")
    return policy


def _sections_of(reference: Any) -> Optional[Tuple[str, str, List[str], List[str]]]:
    """(findings text, impression text, findings sentences, impression sentences)
    of a reference, or None when it is not a string or a section dict (the
    scorer names such a reference)."""
    if isinstance(reference, str):
        parsed = _sdr.parse_report(reference)
        f, i = parsed["findings"], parsed["impression"]
        # The sentences rejoined as paragraphs: split again they give the same
        # sentences (a line break alone does not end a numbered item without a full stop).
        return "\n\n".join(f), "\n\n".join(i), f, i
    if isinstance(reference, dict):
        f_text, i_text = reference.get("findings"), reference.get("impression")
        if not isinstance(f_text, str) or not isinstance(i_text, str):
            return None
        return f_text, i_text, _sdr.split_sentences(f_text), _sdr.split_sentences(i_text)
    return None


def fill(references: Sequence[Any]) -> Tuple[List[Any], List[Tuple[bool, bool]]]:
    """References with each missing section filled in (by the other section, or
    a placeholder when both are missing), and per reference which of
    (findings, impression) was missing."""
    filled: List[Any] = []
    missing: List[Tuple[bool, bool]] = []
    for ref in references:
        sections = _sections_of(ref)
        if sections is None:
            filled.append(ref)
            missing.append((False, False))
            continue
        f_text, i_text, f, i = sections
        gone = (not f, not i)
        if gone == (False, False):
            filled.append(ref)
        elif gone == (True, True):
            filled.append({"findings": _PLACEHOLDER, "impression": _PLACEHOLDER})
        elif gone[0]:
            filled.append({"findings": i_text, "impression": i_text})
        else:
            filled.append({"findings": f_text, "impression": f_text})
        missing.append(gone)
    return filled, missing


def apply(
    out: Dict[str, List[Any]],
    missing: Sequence[Tuple[bool, bool]],
    format_weight: float,
    semantic_weight: float,
    clinical_weight: float,
) -> Dict[str, List[Any]]:
    """`out` (a scorer's result over filled references) with each missing
    section's term set to 0, the reward composed again, and
    ``missing_sections`` added."""
    out = {k: list(v) for k, v in out.items()}
    counts: List[int] = []
    for k, (no_f, no_i) in enumerate(missing):
        counts.append(int(no_f) + int(no_i))
        if not (no_f or no_i):
            continue
        if no_f:
            out["findings"][k] = 0.0
        if no_i:
            out["impression"][k] = 0.0
        if no_f and no_i and "clinical" in out:
            out["clinical"][k] = 0.0
        if out["format"][k] == 0.0:
            continue  # a malformed completion scores 0 whatever the reference
        # The scorer's composition (sdr_core::reward::RewardConfig::combine), in its order.
        reward = format_weight * out["format"][k] + semantic_weight * (out["findings"][k] + out["impression"][k])
        if clinical_weight > 0.0:
            reward += clinical_weight * out["clinical"][k]
        out["reward"][k] = reward
    out["missing_sections"] = counts
    return out
