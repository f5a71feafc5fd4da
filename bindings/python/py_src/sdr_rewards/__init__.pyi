# Type stubs of the public `sdr_rewards` API (checked against the built module by
# tests/test_stubs.py).
#
# Typing-only names: the TypedDicts (ParsedReport, SentenceExplanation,
# SectionExplanation, ExplainedSections, Explanation, ConsistencyStatement,
# ConsistencyIssue, FindingsConsistency, FindingsSelection, ChexpertF1,
# ScoreResult) and the alias Completion exist for type checkers only: the
# runtime returns plain dicts. Import them under `if typing.TYPE_CHECKING:`
# (`from sdr_rewards import Explanation` fails at run time). They are not in
# `__all__`.
import os
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, TypedDict, TypeVar, Union, final, overload

from typing_extensions import NotRequired

import numpy as np
import numpy.typing as npt

__version__: str
METRICS: List[str]

_F = TypeVar("_F", bound=Callable[..., Any])

Completion = Union[str, Dict[str, Any], Sequence[Dict[str, Any]]]

class ParsedReport(TypedDict):
    format_valid: bool
    findings: List[str]
    impression: List[str]

def distance(
    a: Union[npt.NDArray[np.float32], npt.NDArray[np.float64]],
    b: Union[npt.NDArray[np.float32], npt.NDArray[np.float64]],
    metric: str = "chamfer",
) -> float:
    """One metric between the rows of `a` and `b`; Ctrl-C stops it within
    about 0.1 s (KeyboardInterrupt, or what a signal handler raises)."""
def distances(
    a: Union[npt.NDArray[np.float32], npt.NDArray[np.float64]],
    b: Union[npt.NDArray[np.float32], npt.NDArray[np.float64]],
    metrics: Optional[Sequence[str]] = None,
) -> Dict[str, float]:
    """Several metrics sharing one cost matrix; Ctrl-C stops them as
    ``distance``."""
_Pairs = Iterable[
    Sequence[Union[npt.NDArray[np.float32], npt.NDArray[np.float64]]]
]

def distance_batch(pairs: _Pairs, metric: str = "chamfer") -> npt.NDArray[np.float64]: ...
def distances_batch(
    pairs: _Pairs, metrics: Optional[Sequence[str]] = None
) -> Dict[str, npt.NDArray[np.float64]]: ...
def parse_report(text: str) -> ParsedReport: ...

class SentenceExplanation(TypedDict, total=False):
    sentence: str
    match: Optional[int]
    cost: Optional[float]
    mass: float  # plan-based metrics only
    nearest: int
    nearest_cost: float
    conflict: str  # cost="clinical" only: the finding of the other section that conflicts

class SectionExplanation(TypedDict):
    distance: float
    converged: bool
    reward: float
    candidate: List[SentenceExplanation]
    reference: List[SentenceExplanation]
    missing: List[int]
    unsupported: List[int]

class ExplainedSections(TypedDict):
    findings: SectionExplanation
    impression: SectionExplanation

class Explanation(TypedDict):
    metric: str
    threshold: float
    format_valid: bool
    reward: float
    sections: Optional[ExplainedSections]
    cost: NotRequired[str]  # when the cost is not "cosine"

def clinical_conflicts(a: List[str], b: List[str]) -> Dict[str, List[Optional[Dict[str, Any]]]]: ...

class ConsistencyStatement(TypedDict):
    sentence: int
    text: str
    fact: str

class ConsistencyIssue(TypedDict):
    finding: str
    kind: str
    weight: float
    impression: Optional[ConsistencyStatement]
    findings: Optional[ConsistencyStatement]

class FindingsConsistency(TypedDict):
    score: float
    contradiction: float
    unsupported: float
    omission: float
    contradictions: List[ConsistencyIssue]
    unsupported_findings: List[ConsistencyIssue]
    omissions: List[ConsistencyIssue]
    impression_sentences: int
    findings_sentences: int

class FindingsSelection(TypedDict):
    chosen: int
    all_malformed: bool
    scores: List[Optional[float]]
    semantic: List[Optional[float]]
    checks: List[Optional[FindingsConsistency]]

def findings_consistency(impression: str, findings: str) -> FindingsConsistency: ...
def select_by_findings(
    candidates: List[str],
    findings: str,
    encoder: str = "mpnet",
    model_dir: Optional[Union[str, os.PathLike[str]]] = None,
) -> FindingsSelection: ...
def explain(
    candidate: str,
    reference: Union[str, Mapping[str, str]],
    metric: str = "chamfer",
    threshold: Optional[float] = None,
    *,
    encoder: Optional[Union["Encoder", str, Callable[[List[str]], Any]]] = None,
    model_dir: Optional[Union[str, os.PathLike[str]]] = None,
    device: str = "cpu",
    precision: str = "f32",
    cost: str = "cosine",
) -> Explanation: ...

_Path = Union[str, os.PathLike[str]]

# The canonical name ("cpu", "cuda:0"); ValueError for a typo, or cuda in a build without CUDA.
def check_device(device: str) -> str: ...

def build_corpus(
    input: _Path,
    out: _Path,
    format: str,
    *,
    shard: Optional[Tuple[int, int]] = None,
    split: str = "all",
    sample: Optional[int] = None,
    seed: int = 0,
    id_col: Optional[str] = None,
    findings_col: str = "findings",
    impression_col: str = "impression",
    encoder: str = "mpnet",
    model_dir: Optional[_Path] = None,
    device: str = "cpu",
    precision: str = "f32",
) -> Dict[str, Any]: ...
def merge_corpus(parts: Sequence[_Path], out: _Path) -> Dict[str, Any]: ...

class ChexpertF1(TypedDict):
    macro_f1_14: float
    micro_f1_14: float
    macro_f1_5: float
    micro_f1_5: float
    per_observation: Dict[str, float]
    support: Dict[str, int]
    n: int

def label(
    text: str, labeler: str = "rules", judge_base: Optional[str] = None
) -> Dict[str, Optional[int]]: ...
def chexpert_f1(
    hyps: Sequence[str],
    refs: Sequence[str],
    uncertain_as_positive: bool = True,
    labeler: str = "rules",
    judge_base: Optional[str] = None,
) -> ChexpertF1: ...
def split_sentences(text: str) -> List[str]: ...
def set_parallelism(on: bool) -> None: ...
def get_parallelism() -> bool: ...
def completion_text(completion: Completion) -> str: ...
@overload
def register_cost(name: str, factory: None = None, *, params: str = "") -> Callable[[_F], _F]: ...
@overload
def register_cost(name: str, factory: _F, *, params: str = "") -> _F: ...

@final
class Encoder:
    # A pyo3 class: constructed by __new__ (stubtest checks it against the runtime).
    def __new__(
        cls,
        model_dir: Optional[Union[str, os.PathLike[str]]] = None,
        device: str = "cpu",
        precision: str = "f32",
    ) -> "Encoder": ...
    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...
    @property
    def dim(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def model_dir(self) -> str: ...
    @property
    def device(self) -> str: ...
    @property
    def precision(self) -> str: ...
    @property
    def max_seq_length(self) -> int: ...
    def cache_info(self) -> Dict[str, int]: ...
    def clear_cache(self) -> None: ...

@final
class PruneScorer:
    def __new__(
        cls,
        corpus: _Path,
        metric: str = "chamfer",
        agg: str = "min",
        *,
        encoder: str = "mpnet",
        model_dir: Optional[_Path] = None,
        device: str = "cpu",
        precision: str = "f32",
    ) -> "PruneScorer": ...
    @property
    def policy(self) -> str: ...
    def score(
        self, partials: Sequence[Tuple[Sequence[str], Sequence[str]]]
    ) -> Dict[str, Any]: ...

class ScoreResult(TypedDict):
    reward: List[float]
    format: List[float]
    findings: List[float]
    impression: List[float]
    clinical: NotRequired[List[float]]  # clinical_weight > 0
    unconverged: List[int]
    failed: List[int]
    missing_sections: NotRequired[List[int]]  # missing_section="score"

class SDRReward:
    __name__: str
    metric: str
    reference_column: str
    reference_columns: Optional[Tuple[str, str]]
    format_weight: float
    semantic_weight: float
    exact: bool
    model_dir: Optional[str]
    encoder: Optional[Callable[[List[str]], Any]]
    distinct_sentences: bool
    clinical_weight: float
    cache_mib: float
    cache_path: Optional[str]
    cache_save_interval: float
    encoder_id: Optional[str]
    explain: int
    device: str
    precision: str
    missing_section: str
    cost: str
    last_explanation: List[Dict[str, Any]]
    def __init__(
        self,
        metric: str = "chamfer",
        reference_column: str = "solution",
        format_weight: float = 1.0,
        semantic_weight: float = 1.0,
        exact: bool = False,
        model_dir: Optional[Union[str, os.PathLike[str]]] = None,
        reference_columns: Optional[Tuple[str, str]] = None,
        name: Optional[str] = None,
        encoder: Optional[Union[str, Callable[[List[str]], Any]]] = None,
        distinct_sentences: bool = False,
        clinical_weight: float = 0.0,
        cache_mib: float = 1024.0,
        cache_path: Optional[Union[str, os.PathLike[str]]] = None,
        cache_save_interval: float = 300.0,
        encoder_id: Optional[str] = None,
        explain: Union[bool, int] = False,
        device: str = "cpu",
        precision: str = "f32",
        missing_section: str = "error",
        cost: str = "cosine",
    ) -> None: ...
    def __call__(
        self,
        prompts: Optional[Sequence[Any]] = None,
        completions: Optional[Sequence[Completion]] = None,
        completion_ids: Optional[Sequence[Any]] = None,
        **kwargs: Any,
    ) -> List[float]: ...
    def score(
        self,
        completions: Sequence[Completion],
        references: Optional[Sequence[Union[str, Mapping[str, Any]]]] = None,
        findings: Optional[Sequence[str]] = None,
        impression: Optional[Sequence[str]] = None,
    ) -> ScoreResult: ...
    def last_stats(self) -> Dict[str, float]: ...
    def cache_info(self) -> Dict[str, Any]: ...
    def save_cache(self) -> int: ...
    def config(self) -> Dict[str, Any]: ...

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
