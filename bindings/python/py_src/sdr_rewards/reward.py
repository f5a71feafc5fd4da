"""``SDRReward``: the SDR reward as a TRL ``GRPOTrainer`` reward function.

R = format_weight * R_fmt + semantic_weight * (R_sem^F + R_sem^I)   (paper §3.2)
    [+ clinical_weight * F1_CheXpert   (beyond the paper; off by default)]

with R_sem^S = 1 - min(D(E^S(completion), E^S(reference)), 1) and R_sem = 0
(and F1_CheXpert = 0) when the completion breaks the
``<think>F</think><answer>I</answer>`` template.
"""

from __future__ import annotations

import atexit
import logging
import numbers
import os
import sys
import threading
import weakref
import time
import warnings
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _sdr
from .completion import Completion, completion_text
from .encoder_spec import resolve_encoder
from .explain import check_worst, log_worst
from . import missing_section as _missing_section

_COMPONENTS = ("format", "findings", "impression")

_log = logging.getLogger("sdr_rewards")

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def check_flag(value: Any, name: str) -> bool:
    """A yes/no option: a bool (or NumPy bool), the integer 0 or 1, or a string ``1/true/yes/on`` or
    ``0/false/no/off`` (any case), as ``sdr_rewards.config`` reads the ``SDR_*``
    variables: verl's ``reward_kwargs`` can arrive as strings, and ``bool("false")``
    is True. Anything else raises (TypeError, or ValueError for another string)."""
    if isinstance(value, bool):
        return value
    if _numpy_bool(value):
        return bool(value)
    if isinstance(value, numbers.Integral) and value in (0, 1):
        # A YAML/JSON 0 or 1, as the strings "0" and "1".
        return bool(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise ValueError(f"{name}={value!r}: expected True/False (or 'true'/'false', '1'/'0', 'yes'/'no')")
    raise TypeError(f"{name} must be a bool, got {type(value).__name__} {value!r}")


def _numpy_bool(value: Any) -> bool:
    np = sys.modules.get("numpy")  # only a value of an imported numpy can be one
    return np is not None and isinstance(value, np.bool_)


def _real(value: Any) -> bool:
    """A real number (int, float, NumPy float32, ...), not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and not _numpy_bool(value)


PRECISIONS = ("f32", "bf16")


def check_precision(precision: Any) -> str:
    """``precision`` if it is one of ``PRECISIONS``; checked when the reward is
    made, not when its encoder is first loaded (the message is the extension's)."""
    if not isinstance(precision, str) or precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r}: expected 'f32' or 'bf16'")
    return precision


def _rows(values: Any) -> Any:
    """A 1-D NumPy array (verl and datasets hand columns over as object arrays)
    as a list, as ``completions`` takes one; anything else as it is."""
    if type(values).__module__ == "numpy" and getattr(values, "ndim", None) == 1:
        return values.tolist()
    return values


def _strings(values: Any, column: str) -> List[str]:
    values = _rows(values)
    if isinstance(values, str) or not isinstance(values, (list, tuple)):
        raise TypeError(f"column {column!r} must be a list of strings, got {type(values).__name__}")
    out = []
    for i, v in enumerate(values):
        if not isinstance(v, str):
            raise TypeError(f"column {column!r} item {i} must be a string, got {type(v).__name__}")
        out.append(v)
    return out


def _references(values: Any) -> List[Union[str, Dict[str, str]]]:
    """References as ``score`` takes them: report strings, or ``{"findings",
    "impression"}`` mappings (other keys ignored), mixed as they come. A bad one
    is named ``reference N``, as the Rust side names a reference it refuses."""
    values = _rows(values)
    if isinstance(values, str) or not isinstance(values, (list, tuple)):
        raise TypeError(
            f"references must be a list of reports (strings) or "
            f"{{'findings', 'impression'}} dicts, got {type(values).__name__}"
        )
    out: List[Union[str, Dict[str, str]]] = []
    for i, v in enumerate(values):
        if isinstance(v, str):
            out.append(v)
            continue
        if not isinstance(v, Mapping):
            raise TypeError(
                f"reference {i} must be a string (a report) or a dict "
                f"{{'findings': ..., 'impression': ...}}, got {type(v).__name__}"
            )
        sections = {}
        for key in ("findings", "impression"):
            if key not in v:
                raise ValueError(f"reference {i}: needs 'findings' and 'impression' keys, missing {key!r}")
            if not isinstance(v[key], str):
                raise TypeError(f"reference {i}: {key!r} must be a string, got {type(v[key]).__name__}")
            sections[key] = v[key]
        out.append(sections)
    return out


class SDRReward:
    """The SDR reward, callable as a TRL ``GRPOTrainer`` reward function.

    Parameters
    ----------
    metric : str
        Set-distance spec (``"chamfer"``, ``"ot"``, ``"sinkhorn:eps=0.1"``, ...;
        see ``sdr_rewards.METRICS``).
    reference_column : str
        Dataset column holding the reference report: the training template
        ``<think>F</think><answer>I</answer>`` or plain ``Findings:`` /
        ``Impression:`` text.
    format_weight, semantic_weight : float
        lambda_fmt and lambda_sem (paper: 1 and 1); finite and >= 0.
    exact : bool
        Use the exact-match baseline R_exact for the section terms. Like
        `distinct_sentences`, a bool or a string ``"true"``/``"false"``,
        ``"1"``/``"0"``, ``"yes"``/``"no"`` (verl's ``reward_kwargs`` may arrive as
        strings); anything else raises.
    model_dir : str, optional
        Model folder (default: ``$SDR_MODEL``, then
        ``~/.cache/sdr/models/all-mpnet-base-v2``).
    reference_columns : (str, str), optional
        Separate Findings and Impression columns; overrides `reference_column`.
    name : str, optional
        ``__name__`` (TRL logs ``rewards/<name>``); default ``sdr_<metric family>``
        (``sdr_exact`` with ``exact=True``).
    encoder : callable or str, optional
        Bring your own sentence encoder: any callable ``list[str] -> (n, d)``
        array (numpy, a torch tensor on any device, or anything
        ``numpy.asarray`` takes), for example a sentence-transformers model
        already on the trainer's GPU: ``encoder=lambda s: st.encode(s,
        convert_to_tensor=True, normalize_embeddings=True)``. Parsing,
        deduplication, the reference cache and the distances stay in Rust; the
        callable sees only the distinct sentences that are not cached, once per
        batch (and once at start-up, to learn ``d``). Rows need not be
        unit-norm. A string ``"package.module:attribute"`` names such a callable
        to import (the form verl and OpenRLHF configurations pass); it is
        imported when the reward is made and again in each process that
        unpickles it (the pickle carries the name, not the model). Without it,
        SDR's own all-mpnet-base-v2 runs on ``device``.
    device : str
        Where SDR's own encoder runs: ``"cpu"`` (default), ``"cuda"`` or
        ``"cuda:N"`` (a build of the package with the ``cuda`` feature; batches
        of 256 sentences). Ignored with a callable ``encoder``.
    precision : str
        Numeric precision of SDR's own encoder: ``"f32"`` (default) or
        ``"bf16"``: bfloat16 GEMMs with f32 activations on CPUs with AVX-512
        BF16 or AMX-BF16 (about 2x faster there, cosine >= 0.999 to f32), f32
        with a ``RuntimeWarning`` on other CPUs, bf16 weights and activations on
        a GPU. Part of the sentence cache's identity (a ``cache_path`` file of
        the other precision is refused). Ignored with a callable ``encoder``.
    distinct_sentences : bool
        Drop repeated sentences within a section before the distance (true
        set semantics; beyond the paper, whose equations keep repeats). A small
        policy trained on Chamfer can repeat a safe sentence, because every
        copy lowers the generated-to-reference mean; with this on, a verbatim
        repeat earns nothing (paraphrases still count). Hausdorff is unaffected.
    clinical_weight : float
        Beyond the paper: adds ``clinical_weight`` x the CheXpert-14 example F1
        between the rule-based labels (``sdr_rewards.label``, uncertain counted as
        present) of the completion's and the reference's Findings +
        Impression: 1 when they agree on every observation, lower when they
        contradict. 0 for a malformed completion. Default 0: the paper's
        reward, bit for bit. Logged as ``<name>/clinical`` when > 0.
    cache_mib : float
        Memory bound of the sentence cache in MiB (default 1024, about 335,000
        sentences at d = 768). Every sentence the reward embeds, completions
        and references alike, is kept (least recently used evicted first), so a
        sentence is embedded once per run and keeps the same vector: rewards do
        not depend on what else is in a batch. 0 turns caching off.
    cache_path : str or PathLike, optional
        Persist the cache: loaded at start (a file of another encoder, or a
        damaged one, is refused with a ``RuntimeWarning`` and the run starts
        empty), written atomically every ``cache_save_interval`` seconds after a
        batch and at interpreter exit, so a resumed run starts warm. A file of
        another encoder is never overwritten.
    cache_save_interval : float
        Seconds between saves (default 300).
    encoder_id : str, optional
        With a callable ``encoder``: a name for what it computes (model,
        precision), which keys the cache. Required together with ``cache_path``
        (checked when the reward is made).
    explain : bool or int
        After each batch, explain the worst well-formed completions (True: 4,
        an int: that many) with ``sdr_rewards.explain`` and log their missing and
        unsupported sentences as the columns ``<name>/missing`` and
        ``<name>/unsupported`` of TRL's completions table (``log_extra``), or
        to the ``sdr_rewards`` logger without it; the rows are kept in
        ``last_explanation``. Costs one more encoder call per explained
        completion (SDR's own encoder is then loaded once more, unless
        `encoder` is given). Default off.

    cost : str
        The sentence cost the section distances read: ``"cosine"`` (default,
        the paper's ``(1 - cos) / 2``, bit for bit) or, beyond the paper,
        ``"clinical"`` (``"clinical:lambda=L"`` for another strength): the
        cosine cost plus a penalty on the rows and columns of sentences whose
        findings the other section contradicts (present against absent, left
        against right, small against large) or lacks (docs/SPEC.md §10). A
        reversed finding or a wrong side then costs what it should, under every
        metric but GW. The sections in which a conflict was found are logged as
        ``<name>/conflicts``. Ignored with ``exact=True``.

    missing_section : str
        A reference with an empty Findings or Impression: ``"error"``
        (default) raises ValueError naming its index; ``"score"`` scores the
        section that is there, sets the missing one's term to 0 and counts it
        (``missing_sections`` in ``score``'s result, ``<name>/missing_sections``
        in the logs). See ``sdr_rewards.missing_section``; ``sdr check-data`` finds
        such references before a run.

    Calling it as ``reward(prompts=..., completions=..., **columns)`` returns one
    float per completion. Completions are strings, chat message lists, or the
    parsed messages TRL hands a reward when the tokenizer has a response schema
    (``reasoning_content`` / ``reasoning`` / ``thinking`` beside ``content``):
    the report is rebuilt as ``<think>reasoning</think>content``
    (``sdr_rewards.completion_text``); a shape it cannot read raises TypeError naming
    it. A completion that breaks the template scores 0 (no exception). When TRL passes
    ``log_extra`` / ``log_metric`` callbacks, the per-sample components
    (``<name>/format``, ``/findings``, ``/impression``, and ``/clinical`` when
    ``clinical_weight`` > 0) and their means are logged through them, with the
    cache's ``<name>/cache_hit_rate``, ``<name>/embedded`` (sentences sent to
    the encoder) and ``<name>/encode_seconds``.

    Each batch's distinct sentences are looked up in the sentence cache and the
    rest embedded in one call. The Rust work runs without the GIL. The object
    pickles as its configuration; the encoder is loaded lazily, again in each
    process (after ``fork`` or unpickling).
    """

    def __init__(
        self,
        metric: str = "chamfer",
        reference_column: str = "solution",
        format_weight: float = 1.0,
        semantic_weight: float = 1.0,
        exact: bool = False,
        model_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
        reference_columns: Optional[Tuple[str, str]] = None,
        name: Optional[str] = None,
        encoder: Optional[Callable[[List[str]], Any]] = None,
        distinct_sentences: bool = False,
        clinical_weight: float = 0.0,
        cache_mib: float = 1024.0,
        cache_path: Optional[Union[str, "os.PathLike[str]"]] = None,
        cache_save_interval: float = 300.0,
        encoder_id: Optional[str] = None,
        explain: Union[bool, int] = False,
        device: str = "cpu",
        precision: str = "f32",
        missing_section: str = "error",
        cost: str = "cosine",
    ) -> None:
        if not isinstance(metric, str):
            raise TypeError(f"metric must be a string, got {type(metric).__name__}")
        for label, w in (
            ("format_weight", format_weight),
            ("semantic_weight", semantic_weight),
            ("clinical_weight", clinical_weight),
        ):
            if not _real(w):
                raise TypeError(f"{label} must be a number, got {type(w).__name__}")
        canonical = _sdr.check_reward_options(
            metric, float(format_weight), float(semantic_weight), float(clinical_weight)
        )
        if not isinstance(cost, str):
            raise TypeError(f"cost must be a string ('cosine' or 'clinical'), got {type(cost).__name__}")
        self.cost = _sdr.check_cost(cost)
        if not isinstance(reference_column, str):
            raise TypeError("reference_column must be a string")
        if reference_columns is not None:
            if (
                not isinstance(reference_columns, (tuple, list))
                or len(reference_columns) != 2
                or not all(isinstance(c, str) for c in reference_columns)
            ):
                raise ValueError(
                    "reference_columns must be a pair of column names (findings, impression), "
                    f"got {reference_columns!r}"
                )
            reference_columns = (reference_columns[0], reference_columns[1])
        self.metric = canonical
        self.reference_column = reference_column
        self.reference_columns = reference_columns
        self.format_weight = float(format_weight)
        self.semantic_weight = float(semantic_weight)
        self.exact = check_flag(exact, "exact")
        self.distinct_sentences = check_flag(distinct_sentences, "distinct_sentences")
        self.clinical_weight = float(clinical_weight)
        for label, w in (("cache_mib", cache_mib), ("cache_save_interval", cache_save_interval)):
            if not _real(w) or not (0 <= float(w) < float("inf")):
                raise ValueError(f"{label} must be a finite number >= 0, got {w!r}")
        self.cache_mib = float(cache_mib)
        self.cache_path = None if cache_path is None else os.fspath(cache_path)
        self.cache_save_interval = float(cache_save_interval)
        if encoder_id is not None and not isinstance(encoder_id, str):
            raise TypeError(f"encoder_id must be a string, got {type(encoder_id).__name__}")
        self.encoder_id = encoder_id
        self.model_dir = None if model_dir is None else os.fspath(model_dir)
        if not isinstance(device, str):
            raise TypeError(f"device must be a string such as 'cpu' or 'cuda:0', got {type(device).__name__}")
        _sdr.check_device(device)  # a typo fails here, not at the first batch
        self.device = device
        self.precision = check_precision(precision)
        self.missing_section = _missing_section.check_policy(missing_section)
        if encoder is not None and not callable(encoder) and not isinstance(encoder, str):
            raise TypeError(f"encoder must be a callable list[str] -> (n, d) array, got {type(encoder).__name__}")
        # "module:attribute" is imported here (a typo fails now) and again in each
        # process that unpickles the reward: the configuration keeps the spec, so a
        # pickle carries the name, not the model.
        self._encoder_spec: Optional[str] = encoder if isinstance(encoder, str) and encoder else None
        self.encoder = resolve_encoder(encoder)
        if self.encoder is not None and self.cache_path is not None and self.encoder_id is None:
            # The scorer's own check, made when the reward is, not at the first batch.
            raise ValueError(
                "cache_path with a callable encoder needs encoder_id= (a name that changes "
                "whenever the callable's vectors would, e.g. 'st:all-mpnet-base-v2/bf16'): "
                "a saved cache must never be read by another encoder"
            )
        if name is not None and not isinstance(name, str):
            raise TypeError(f"name must be a string, got {type(name).__name__}")
        self.__name__ = name or ("sdr_exact" if self.exact else "sdr_" + canonical.split(":")[0])
        self.explain = check_worst(explain)
        self.last_explanation: List[Dict[str, Any]] = []
        self._reset()

    # -- state ---------------------------------------------------------------

    def _reset(self) -> None:
        self._scorer: Optional[_sdr.RewardScorer] = None
        self._pid = os.getpid()
        self._lock = threading.Lock()

    def _get_scorer(self) -> "_sdr.RewardScorer":
        if self._pid != os.getpid():
            # A forked child: the parent's locks and encoder are not ours.
            self._reset()
        scorer = self._scorer
        if scorer is None:
            with self._lock:
                if self._scorer is None:
                    self._scorer = _sdr.RewardScorer(
                        self.metric,
                        self.format_weight,
                        self.semantic_weight,
                        self.exact,
                        self.model_dir,
                        self.encoder,
                        self.distinct_sentences,
                        self.clinical_weight,
                        self.cache_mib,
                        self.cache_path,
                        self.cache_save_interval,
                        self.encoder_id,
                        self.device,
                        self.precision,
                        cost=self.cost,
                    )
                    self._on_cache_opened(self._scorer)
                scorer = self._scorer
        return scorer

    def _on_cache_opened(self, scorer: "_sdr.RewardScorer") -> None:
        info = scorer.cache_info()
        if info.get("refused"):
            warnings.warn(f"{self.__name__}: {info['load']}", RuntimeWarning, stacklevel=3)
        if self.cache_path is not None:
            # Save at exit without keeping the scorer alive.
            ref = weakref.ref(scorer)

            def _save() -> None:
                s = ref()
                if s is not None:
                    try:
                        s.save_cache()
                    except OSError as e:  # the run is over; say why the file is stale
                        warnings.warn(f"could not save the sentence cache: {e}", RuntimeWarning)

            atexit.register(_save)

    def cache_info(self) -> Dict[str, Any]:
        """The sentence cache: entries, bytes, max_bytes, hits, misses, evictions,
        identity; with ``cache_path`` also path, writable, and load (what was found)."""
        return self._get_scorer().cache_info()

    def save_cache(self) -> int:
        """Write the cache to ``cache_path`` now (atomically); returns the sentences
        written (0 without a path or when nothing changed)."""
        return self._get_scorer().save_cache()

    def config(self) -> Dict[str, Any]:
        return {
            "metric": self.metric,
            "reference_column": self.reference_column,
            "format_weight": self.format_weight,
            "semantic_weight": self.semantic_weight,
            "exact": self.exact,
            "model_dir": self.model_dir,
            "reference_columns": self.reference_columns,
            "name": self.__name__,
            "encoder": self._encoder_spec if self._encoder_spec is not None else self.encoder,
            "distinct_sentences": self.distinct_sentences,
            "clinical_weight": self.clinical_weight,
            "cache_mib": self.cache_mib,
            "cache_path": self.cache_path,
            "cache_save_interval": self.cache_save_interval,
            "encoder_id": self.encoder_id,
            "explain": self.explain,
            "device": self.device,
            "precision": self.precision,
            "missing_section": self.missing_section,
            "cost": self.cost,
        }

    def __getstate__(self) -> Dict[str, Any]:
        return self.config()

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]

    def __repr__(self) -> str:
        # Options beyond the paper appear only when set.
        args = ", ".join(
            f"{k}={v!r}"
            for k, v in self.config().items()
            if not (k == "encoder" and v is None)
            and not (k == "distinct_sentences" and not v)
            and not (k == "clinical_weight" and v == 0.0)
            and not (k == "cache_mib" and v == 1024.0)
            and not (k in ("cache_path", "encoder_id") and v is None)
            and not (k == "cache_save_interval" and v == 300.0)
            and not (k == "explain" and not v)
            and not (k == "device" and v == "cpu")
            and not (k == "precision" and v == "f32")
            and not (k == "missing_section" and v == "error")
            and not (k == "cost" and v == "cosine")
        )
        return f"SDRReward({args})"

    # -- scoring -------------------------------------------------------------

    def score(
        self,
        completions: Sequence[Completion],
        references: Optional[Sequence[Union[str, Mapping[str, Any]]]] = None,
        findings: Optional[Sequence[str]] = None,
        impression: Optional[Sequence[str]] = None,
    ) -> Dict[str, List[float]]:
        """Rewards and components: ``{"reward", "format", "findings", "impression"}``
        (and ``"clinical"`` when ``clinical_weight`` > 0), one float per completion, and
        ``"unconverged"``, ``"failed"``: per completion, the sections whose distance solver
        did not converge (last iterate used) or gave no finite value (term 0), SPEC §4.
        Give `references` (whole reports, or ``{"findings", "impression"}`` dicts, the
        two mixed as they come) or both `findings` and `impression`. A bad reference is
        named by its index (``reference 2: ...``).

        With the built-in encoder, new sentences are embedded 256 at a time and Ctrl-C
        (KeyboardInterrupt) stops the call after the part under way; what was embedded
        stays in the sentence cache. A callable ``encoder=`` gets all of a batch's new
        sentences in one call, on the calling thread."""
        if completions is None:
            raise TypeError("completions must be a list of completions (strings or chat messages), got None")
        if isinstance(completions, (str, bytes)):
            # A string is a sequence of one-character completions.
            raise TypeError(
                f"completions must be a list of completions (strings or chat messages), "
                f"got a single {type(completions).__name__}: wrap it in a list"
            )
        texts = []
        for k, c in enumerate(completions):
            try:
                texts.append(completion_text(c))
            except TypeError as e:
                raise TypeError(f"completions[{k}]: {e}") from None
        kwargs: Dict[str, Any] = {}
        if references is not None:
            kwargs["references"] = _references(references)
        if findings is not None:
            kwargs["findings"] = _strings(findings, "findings")
        if impression is not None:
            kwargs["impression"] = _strings(impression, "impression")
        try:
            return self._get_scorer().score(texts, missing_section=self.missing_section, **kwargs)
        except (UnicodeEncodeError, TypeError):
            # A lone surrogate (e.g. from errors="surrogateescape"): name the text
            # (inside a section dict it reaches here as a TypeError).
            for column, values in [("completions", texts)] + list(kwargs.items()):
                for i, v in enumerate(values):
                    try:
                        for text in v.values() if isinstance(v, dict) else (v,):
                            text.encode("utf-8")
                    except UnicodeEncodeError as e:
                        raise ValueError(f"{column}[{i}] is not valid Unicode text: {e}") from None
            raise

    def last_stats(self) -> Dict[str, float]:
        """Counters of the last batch (samples, sentences, distinct, embedded, cache_hits,
        hit_rate, encode_seconds, unconverged, failed)."""
        return self._get_scorer().last_stats()

    def __call__(
        self,
        prompts: Optional[Sequence[Any]] = None,
        completions: Optional[Sequence[Completion]] = None,
        completion_ids: Optional[Sequence[Any]] = None,
        **kwargs: Any,
    ) -> List[float]:
        if completions is None:
            raise TypeError("SDRReward needs completions=[...]")
        started = time.perf_counter()
        if self.reference_columns is not None:
            fcol, icol = self.reference_columns
            missing = [c for c in (fcol, icol) if c not in kwargs]
            if missing:
                raise ValueError(self._missing(missing, kwargs))
            out = self.score(completions, findings=kwargs[fcol], impression=kwargs[icol])
        else:
            if self.reference_column not in kwargs:
                raise ValueError(self._missing([self.reference_column], kwargs))
            out = self.score(completions, references=kwargs[self.reference_column])
        log_extra: Optional[Callable[[str, List[float]], None]] = kwargs.get("log_extra")
        log_metric: Optional[Callable[[str, float], None]] = kwargs.get("log_metric")
        for key in _COMPONENTS + (("clinical",) if "clinical" in out else ()):
            values = out[key]
            if callable(log_extra):
                log_extra(f"{self.__name__}/{key}", values)
            if callable(log_metric) and values:
                log_metric(f"{self.__name__}/{key}", sum(values) / len(values))
        if "missing_sections" in out:
            missing_total = sum(out["missing_sections"])
            if missing_total:
                warnings.warn(
                    f"{self.__name__}: {missing_total} reference section(s) missing in this batch, "
                    "scored as 0 (missing_section='score')",
                    RuntimeWarning,
                    stacklevel=2,
                )
            if callable(log_metric):
                log_metric(f"{self.__name__}/missing_sections", float(missing_total))
        for key in ("unconverged", "failed"):
            # Sections scored with an unconverged solver's last iterate, or with a
            # non-finite distance (term 0; SPEC §4): logged whenever there are any.
            total = sum(out.get(key, ()))
            if total:
                warnings.warn(
                    f"{self.__name__}: {total} section(s) {key} "
                    "(see SPEC §4: last iterate used / term 0)",
                    RuntimeWarning,
                    stacklevel=2,
                )
                if callable(log_metric):
                    log_metric(f"{self.__name__}/{key}", float(total))
        if callable(log_metric):
            # Wall time of this call (parse, embed, distances): the reward's share of a step.
            log_metric(f"{self.__name__}/seconds", time.perf_counter() - started)
            if not self.exact:
                stats = self._get_scorer().last_stats()
                log_metric(f"{self.__name__}/cache_hit_rate", float(stats["hit_rate"]))
                log_metric(f"{self.__name__}/embedded", float(stats["embedded"]))
                log_metric(f"{self.__name__}/encode_seconds", float(stats["encode_seconds"]))
                if self.cost != "cosine" and not self.exact:
                    log_metric(f"{self.__name__}/conflicts", float(stats.get("conflicts", 0)))
        if self.explain and not self.exact:
            # The worst completions' missing / unsupported sentences (sdr_rewards/explain.py),
            # after the timing: explaining is not part of the reward's cost.
            try:
                self.last_explanation = log_worst(self, completions, kwargs, out, log_extra)
            except Exception as e:  # noqa: BLE001 - explaining is logging, never the reward's failure
                _log.warning("%s: could not explain this batch: %s: %s", self.__name__, type(e).__name__, e)
                self.last_explanation = []
        return out["reward"]

    @staticmethod
    def _missing(columns: List[str], kwargs: Dict[str, Any]) -> str:
        have = sorted(k for k in kwargs if k not in ("log_extra", "log_metric", "trainer_state"))
        return f"reference column(s) {columns} not among the dataset columns passed: {have}"
