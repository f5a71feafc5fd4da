"""A client of ``sdr serve``'s ``/v1/rewards``, for reward workers that share
one encoder.

verl starts several reward workers per machine (``reward.num_workers``, 8 by
default), and each process that scores with SDR's own encoder holds its own
copy of the weights (about 860 MiB resident each with all-mpnet-base-v2). With
``serve_url`` (verl's ``reward_kwargs``) or ``SDR_SERVE_URL`` (the OpenRLHF
file) the workers send their samples to one ``sdr serve`` on the machine
instead: one encoder in memory, one sentence cache for every worker, and the
server's own batcher merges the workers' requests. The reward's options are
then the server's (``sdr serve --metric ... --format-weight ...``); only the
metric may be named per request.

Standard library only (``urllib``): no dependency for the workers.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any, Dict, List, Optional, Sequence

# /v1/rewards reply keys -> the keys of SDRReward.score's result.
_KEYS = {
    "rewards": "reward",
    "format": "format",
    "findings": "findings",
    "impression": "impression",
    "clinical": "clinical",
    "unconverged": "unconverged",
    "failed": "failed",
    "missing_sections": "missing_sections",
}


class ServeClient:
    """Scores through ``POST {url}/v1/rewards``; ``score`` returns what
    ``SDRReward.score`` returns (``reward``, ``format``, ``findings``, ...)."""

    def __init__(self, url: str, metric: Optional[str] = None, timeout: float = 300.0) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"serve_url must be an http(s) URL of `sdr serve`, got {url!r}")
        self.url = url.rstrip("/")
        if self.url.endswith("/v1/rewards"):
            self.url = self.url[: -len("/v1/rewards")]
        self.metric = metric
        self.timeout = float(timeout)

    def __repr__(self) -> str:
        return f"ServeClient({self.url!r}, metric={self.metric!r})"

    def score(self, completions: Sequence[str], references: Sequence[Any]) -> Dict[str, List[Any]]:
        body: Dict[str, Any] = {"completions": list(completions), "references": list(references)}
        if self.metric is not None:
            body["metric"] = self.metric
        request = urllib.request.Request(
            self.url + "/v1/rewards",
            data=json.dumps(body).encode("utf-8"),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                reply = json.loads(response.read())
        except urllib.error.HTTPError as e:
            # 4xx: the server names the bad input ({"error": "reference 3: ..."}).
            try:
                message = json.loads(e.read()).get("error", "")
            except (ValueError, AttributeError):
                message = ""
            error = ValueError if 400 <= e.code < 500 else RuntimeError
            raise error(f"sdr serve at {self.url}: {e.code} {message or e.reason}") from None
        except urllib.error.URLError as e:
            raise ConnectionError(f"sdr serve at {self.url} is unreachable: {e.reason}") from None
        return {ours: reply[theirs] for theirs, ours in _KEYS.items() if theirs in reply}
