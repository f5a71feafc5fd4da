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

``sdr check-data`` finds such references before a run. The policy is applied
by the Rust scorer (``sdr_reward::missing``), the same code as
``sdr serve --missing-section``.
"""

from __future__ import annotations

from typing import Any

from . import _sdr

POLICIES = tuple(_sdr.MISSING_SECTION_POLICIES)


def check_policy(policy: Any) -> str:
    if not isinstance(policy, str) or policy not in POLICIES:
        raise ValueError(f"missing_section {policy!r}: expected 'error' or 'score'")
    return policy
