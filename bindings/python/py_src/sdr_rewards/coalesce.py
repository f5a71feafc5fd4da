"""Coalescing of concurrent per-sample reward calls into one batched call.

verl's reward loop calls ``compute_score`` once per sample, concurrently
(coroutines on one event loop, or threads of its executor), and OpenRLHF's
``SingleTurnAgentExecutor`` calls the reward file once per sample through
``asyncio.to_thread``. Scored one by one, each call pays its own encoder
forward pass; on a GPU a pass over 256 sentences costs about what a pass over
8 does. A :class:`Coalescer` gathers the calls that arrive close together into
one call of the batched scorer, as text-embeddings-inference batches requests:

- a worker thread takes the first waiting request, then keeps taking requests
  while each arrives within ``window_s`` of the last, for at most ``max_wait_s``
  and ``max_batch`` samples;
- requests that arrive while a batch is being scored wait in the queue and
  form the next batch (continuous batching: no request waits for a timer
  while the scorer is idle longer than ``window_s``);
- each caller gets its own samples' slice of the batched result.

The rewards are bit-identical to one batched call of the same samples: the
scorer embeds each distinct sentence once and keeps its vector in the sentence
cache, and scores every sample on its own (tested in
``tests/test_coalesce.py``). When a batch fails, its requests are scored one by
one, so that an error reaches only the caller whose sample caused it.

The worker thread is started on first use and again in a forked child (the
process id is checked on each call); it is a daemon and holds no lock while
the scorer runs.
"""

from __future__ import annotations

import asyncio
import os
import queue
import threading
import time
from concurrent.futures import Future
from typing import Any, Callable, Dict, List, Sequence

ScoreFn = Callable[[List[Any], List[Any]], Dict[str, List[Any]]]

DEFAULT_WINDOW_S = 0.002
DEFAULT_MAX_WAIT_S = 0.05
DEFAULT_MAX_BATCH = 4096


class _Request:
    __slots__ = ("completions", "references", "future")

    def __init__(self, completions: List[Any], references: List[Any]) -> None:
        self.completions = completions
        self.references = references
        self.future: "Future[Dict[str, List[Any]]]" = Future()


def _slice(result: Dict[str, List[Any]], start: int, stop: int) -> Dict[str, List[Any]]:
    return {k: v[start:stop] for k, v in result.items()}


class Coalescer:
    """Gathers concurrent ``score(completions, references)`` calls into one
    call of `score_fn` (same signature and result: a dict of per-sample lists).

    Parameters
    ----------
    score_fn : callable
        The batched scorer, e.g. ``lambda c, r: reward.score(c, references=r)``.
    window_s : float
        Longest gap between two arrivals that still joins them (default 2 ms).
    max_wait_s : float
        Longest time a batch stays open after its first request (default 50 ms).
    max_batch : int
        Most samples in one batch (default 4096).
    """

    def __init__(
        self,
        score_fn: ScoreFn,
        window_s: float = DEFAULT_WINDOW_S,
        max_wait_s: float = DEFAULT_MAX_WAIT_S,
        max_batch: int = DEFAULT_MAX_BATCH,
    ) -> None:
        for label, v in (("window_s", window_s), ("max_wait_s", max_wait_s)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0 <= v < float("inf")):
                raise ValueError(f"{label} must be a finite number >= 0, got {v!r}")
        if isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1:
            raise ValueError(f"max_batch must be an integer >= 1, got {max_batch!r}")
        self._score_fn = score_fn
        self.window_s = float(window_s)
        self.max_wait_s = float(max_wait_s)
        self.max_batch = max_batch
        self._pid = -1
        self._start_lock = threading.Lock()
        self._queue: "queue.SimpleQueue[_Request]" = queue.SimpleQueue()
        self.batches = 0  # batched calls made (for tests and logs)
        self.largest_batch = 0

    # -- worker ----------------------------------------------------------------

    def _ensure_worker(self) -> None:
        if self._pid == os.getpid():
            return
        with self._start_lock:
            if self._pid == os.getpid():
                return
            # A new process (first use, or a forked child whose parent's thread
            # did not survive the fork): a fresh queue and worker.
            self._queue = queue.SimpleQueue()
            thread = threading.Thread(target=self._run, args=(self._queue,), name="sdr-coalescer", daemon=True)
            thread.start()
            self._pid = os.getpid()

    def _run(self, q: "queue.SimpleQueue[_Request]") -> None:
        while True:
            batch = [q.get()]
            n = len(batch[0].completions)
            opened = time.monotonic()
            while n < self.max_batch:
                wait = min(self.window_s, opened + self.max_wait_s - time.monotonic())
                if wait <= 0:
                    break
                try:
                    req = q.get(timeout=wait)
                except queue.Empty:
                    break
                batch.append(req)
                n += len(req.completions)
            self._score(batch)

    def _score(self, batch: List[_Request]) -> None:
        completions: List[Any] = []
        references: List[Any] = []
        for req in batch:
            completions.extend(req.completions)
            references.extend(req.references)
        self.batches += 1
        self.largest_batch = max(self.largest_batch, len(completions))
        try:
            result = self._score_fn(completions, references)
        except BaseException as e:  # noqa: BLE001 - handed to the callers
            if len(batch) == 1:
                batch[0].future.set_exception(e)
                return
            # Which request broke the batch: score each alone, so the others
            # get their rewards and only the bad one its error.
            for req in batch:
                try:
                    req.future.set_result(self._score_fn(req.completions, req.references))
                except BaseException as e1:  # noqa: BLE001
                    req.future.set_exception(e1)
            return
        start = 0
        for req in batch:
            stop = start + len(req.completions)
            req.future.set_result(_slice(result, start, stop))
            start = stop

    # -- callers ---------------------------------------------------------------

    def submit(self, completions: Sequence[Any], references: Sequence[Any]) -> "Future[Dict[str, List[Any]]]":
        """Queue samples; the future's result is their slice of the batch's result."""
        if len(completions) != len(references):
            raise ValueError(f"{len(completions)} completions but {len(references)} references")
        req = _Request(list(completions), list(references))
        if not req.completions:
            req.future.set_result(self._score_fn([], []))
            return req.future
        self._ensure_worker()
        self._queue.put(req)
        return req.future

    def score(self, completions: Sequence[Any], references: Sequence[Any]) -> Dict[str, List[Any]]:
        """Score samples together with whatever other threads submit meanwhile (blocks)."""
        return self.submit(completions, references).result()

    async def score_async(self, completions: Sequence[Any], references: Sequence[Any]) -> Dict[str, List[Any]]:
        """:meth:`score` for coroutines: the event loop keeps running while the
        batch is scored on the worker thread."""
        return await asyncio.wrap_future(self.submit(completions, references))

