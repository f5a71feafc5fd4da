"""SDR: set-distance rewards for radiology report generation.

A Rust core (report parsing, sentence segmentation, all-mpnet-base-v2
embeddings, fifteen set distances) with reward functions for GRPO trainers:

- ``SDRReward``: a TRL ``GRPOTrainer`` reward function;
- ``sdr_rewards.verl.compute_score`` / ``compute_score_async``: verl's
  ``custom_reward_function``;
- ``sdr_rewards/openrlhf_reward.py``: OpenRLHF's reward-function file (or run
  ``sdr serve`` and point ``--reward.remote_url`` at it);
- ``sdr_rewards.completion_text``: the report in a completion of any shape a trainer
  passes (strings, chat messages, TRL's parsed responses with
  ``reasoning_content``);
- ``sdr_rewards.distance`` / ``sdr_rewards.distances`` for one pair of embedding sets, and
  ``sdr_rewards.distance_batch`` / ``sdr_rewards.distances_batch`` for many pairs in one call;
- ``sdr_rewards.label`` / ``sdr_rewards.chexpert_f1``: CheXpert-14 labels by phrase rules and
  CheXpert-rule F1, with no model weights (``sdr_rewards.clinical`` adds adapters to
  the optional model-based metrics);
- ``sdr_rewards.build_corpus`` / ``sdr_rewards.merge_corpus``: the reference corpus of
  ``sdr corpus build``, whole or one shard of it, and the merge of the shards
  (``recipes/ray_corpus.py`` builds the shards on a Ray cluster).
- ``sdr_rewards.PruneScorer``: the partial score of distance-guided pruning (paper
  Alg. 1) against a corpus, for generation loops written in Python.
- ``sdr_rewards.metrics``: every metric of ``sdr score`` (BLEU, ROUGE, METEOR,
  chrF++, BERTScore, CheXpert-rule F1) for your own outputs, per pair and
  over the corpus.
- ``sdr_rewards.explain``: why a report got its reward: sentence pairs and costs,
  missing and unsupported findings (as ``sdr explain``).
- ``sdr_rewards.register_cost``: a sentence cost of your own, written in Python,
  opened by name wherever a cost spec is taken (``SDRReward(cost=...)``).

Paper: "SDR: Set-Distance Rewards for Radiology Report Generation".
"""

import os as _os

# candle keeps a process-wide pool of persistent threads for element-wise ops,
# started on first use; a process forked after that inherits the pool without
# its threads and hangs in its first large op. With one candle thread there is
# no such pool. Matrix products still run in parallel, on SDR's own per-process
# Rayon pool, which a forked child recreates. Set CANDLE_NUM_THREADS yourself
# to trade fork safety for speed.
_os.environ.setdefault("CANDLE_NUM_THREADS", "1")

from ._sdr import (
    METRICS,
    Encoder,
    PruneScorer,
    __version__,
    build_corpus,
    check_device,
    chexpert_f1,
    clinical_conflicts,
    distance,
    distance_batch,
    distances,
    distances_batch,
    findings_consistency,
    get_parallelism,
    label,
    merge_corpus,
    parse_report,
    select_by_findings,
    set_parallelism,
    split_sentences,
)
from ._sdr import _after_fork_child
from . import metrics
from .costs import register_cost
from .reward import SDRReward, completion_text
from .explain import explain  # the function; the module stays sys.modules["sdr_rewards.explain"]

# Forked workers (TRL data loaders, verl reward workers) inherit no Rayon pool
# threads: the child turns parallelism off, as huggingface/tokenizers does.
if hasattr(_os, "register_at_fork"):
    _os.register_at_fork(after_in_child=_after_fork_child)

__all__ = [
    "METRICS",
    "clinical_conflicts",
    "Encoder",
    "PruneScorer",
    "SDRReward",
    "__version__",
    "build_corpus",
    "check_device",
    "chexpert_f1",
    "completion_text",
    "distance",
    "distances",
    "distance_batch",
    "distances_batch",
    "explain",
    "findings_consistency",
    "get_parallelism",
    "label",
    "merge_corpus",
    "parse_report",
    "register_cost",
    "select_by_findings",
    "set_parallelism",
    "split_sentences",
]
