"""Load test of `sdr serve` on loopback: many concurrent OpenRLHF clients.

Starts `sdr serve` (chamfer, SDR's own encoder on the CPU), then runs `--clients`
asyncio clients for `--seconds` (or until `--max-requests`), each on its own
keep-alive connection, each sending one-sample OpenRLHF requests
(`{"query": [prompt + completion], "prompts": [prompt], "labels": [reference]}`)
one after another, as OpenRLHF's remote reward workers do. Completions and
references are built from IU X-ray reports as in bench/rewards.py (references:
test-split reports; completions: other reports' sections, one in eight malformed).

Reported: requests, throughput, latency p50/p90/p99/max, status counts, errors
(anything but 200 and the documented 503 of load shedding), the server's
sentence-cache counters at the end (distinct look-ups, hits, sentences embedded),
and its resident memory (start, peak sampled every 0.25 s, and the kernel's VmHWM).
The pool's sentences recur (IU reports share many), so once the server's
sentence cache holds them most requests need no encoder; `--server-arg=--cache-mib=0`
turns the cache off, so that every request's sentences are embedded.
A second phase (`--overload-queue N`, on by default) restarts the server with
`--max-queued-samples N` below the number of clients to show overload being shed
with fast 503s (clients honour `Retry-After`) while the accepted requests still
succeed.

    python3 bench/serve_load.py --sdr target/release/sdr [--clients 200] [--seconds 60]

Only the standard library is needed (no HTTP client package): a bare python3 runs it,
.venv-bench/bin/python too.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROMPT = "<|im_start|>user\nWrite the report.<|im_end|>\n<|im_start|>assistant\n"


def requests_pool(n: int, seed: int = 0) -> list[bytes]:
    test, train = [], []
    with open(ROOT / "data/iu-xray/indiana_reports.csv", newline="") as f:
        for r in csv.DictReader(f):
            fi, im = r["findings"].strip(), r["impression"].strip()
            if fi and im:
                (test if int(r["uid"]) % 10 == 0 else train).append((fi, im))
    rng = random.Random(seed)
    out = []
    for k in range(n):
        f, i = test[(k // 8) % len(test)]
        cf, ci = rng.choice(train)
        comp = f"<think>{cf}</think><answer>{ci}</answer>"
        if k % 8 == 7:
            comp = comp.replace("</answer>", "")
        body = {"query": [PROMPT + comp], "prompts": [PROMPT], "labels": [f"<think>{f}</think><answer>{i}</answer>"]}
        out.append(json.dumps(body).encode())
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid: int, key: str = "VmRSS") -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


async def http_post(reader, writer, port: int, body: bytes):
    writer.write(
        b"POST /get_reward HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % (port, len(body)) + body
    )
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:] if ":" in l)}
    data = await reader.readexactly(int(headers.get("content-length", "0")))
    return status, headers, data


async def client(port, pool, deadline, budget, lat, statuses, errors, rng):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        while time.perf_counter() < deadline and budget[0] > 0:
            budget[0] -= 1
            body = pool[rng.randrange(len(pool))]
            t = time.perf_counter()
            try:
                status, headers, data = await http_post(reader, writer, port, body)
            except (OSError, asyncio.IncompleteReadError) as e:
                errors.append(f"connection: {e}")
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                continue
            statuses[status] = statuses.get(status, 0) + 1
            if status == 200:
                lat.append(time.perf_counter() - t)
                reward = json.loads(data)["rewards"][0]
                if not (0.0 <= reward <= 3.0):
                    errors.append(f"reward out of range: {reward}")
            elif status == 503:
                await asyncio.sleep(float(headers.get("retry-after", "1")))
            else:
                errors.append(f"HTTP {status}: {data[:200]!r}")
    finally:
        writer.close()


async def sample_rss(pid, stop, samples):
    while not stop.is_set():
        samples.append(rss_kib(pid))
        await asyncio.sleep(0.25)


def start_server(sdr: str, port: int, extra: list[str]) -> subprocess.Popen:
    cmd = [sdr, "serve", "--port", str(port), "--metric", "chamfer", *extra]
    p = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    t = time.time()
    while time.time() - t < 300:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
                s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                if b"200" in s.recv(64):
                    return p
        except OSError:
            pass
        if p.poll() is not None:
            raise SystemExit(f"sdr serve exited with {p.returncode}: {p.stderr.read()}")
        time.sleep(0.2)
    p.kill()
    raise SystemExit("sdr serve did not answer /health within 300 s")


def get_health(port: int) -> dict:
    """The server's /health JSON (its sentence-cache counters)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return json.loads(data.split(b"\r\n\r\n", 1)[1])


async def phase(sdr, clients, seconds, max_requests, pool, extra):
    port = free_port()
    srv = start_server(sdr, port, extra)
    rss0 = rss_kib(srv.pid)
    lat, statuses, errors, rss = [], {}, [], []
    stop = asyncio.Event()
    sampler = asyncio.create_task(sample_rss(srv.pid, stop, rss))
    budget = [max_requests]
    t0 = time.perf_counter()
    deadline = t0 + seconds
    await asyncio.gather(
        *(client(port, pool, deadline, budget, lat, statuses, errors, random.Random(k)) for k in range(clients))
    )
    wall = time.perf_counter() - t0
    stop.set()
    await sampler
    health = get_health(port)
    hwm = rss_kib(srv.pid, "VmHWM")
    srv.terminate()
    srv.wait(timeout=60)
    lat.sort()

    def q(p):
        return lat[min(len(lat) - 1, int(p * len(lat)))] if lat else float("nan")

    ok = statuses.get(200, 0)
    return {
        "server_args": extra,
        "clients": clients,
        "wall_seconds": round(wall, 2),
        "requests": sum(statuses.values()),
        "ok": ok,
        "shed_503": statuses.get(503, 0),
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "errors": len(errors),
        "first_errors": errors[:5],
        "throughput_ok_per_s": round(ok / wall, 2),
        "latency_s": {
            "p50": round(q(0.50), 3),
            "p90": round(q(0.90), 3),
            "p99": round(q(0.99), 3),
            "max": round(lat[-1], 3) if lat else None,
            "mean": round(statistics.fmean(lat), 3) if lat else None,
        },
        "cache": {k: (health.get("cache") or {}).get(k) for k in ("distinct", "hits", "hit_rate", "embedded", "encode_seconds")},
        "rss_mib": {
            "start": round(rss0 / 1024, 1),
            "peak_sampled": round(max(rss, default=0) / 1024, 1),
            "vm_hwm": round(hwm / 1024, 1),
        },
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sdr", default=str(ROOT / "target/release/sdr"))
    ap.add_argument("--clients", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--max-requests", type=int, default=200_000, help="stop after this many requests")
    ap.add_argument("--pool", type=int, default=4096, help="distinct requests to draw from")
    ap.add_argument("--overload-queue", type=int, default=50,
                    help="--max-queued-samples for the overload phase (0 skips it)")
    ap.add_argument("--server-arg", action="append", default=[], metavar="ARG",
                    help="extra `sdr serve` argument for both phases, repeatable "
                         "(e.g. --server-arg=--cache-mib=0: every sentence embedded each time)")
    ap.add_argument("--json", help="write the results here too")
    args = ap.parse_args()

    load = os.getloadavg()
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; cpus {os.cpu_count()}", file=sys.stderr)
    pool = requests_pool(args.pool)
    results = {"load_before": load[0], "cpus": os.cpu_count()}
    results["normal"] = asyncio.run(
        phase(args.sdr, args.clients, args.seconds, args.max_requests, pool, list(args.server_arg))
    )
    print(json.dumps(results["normal"], indent=1))
    if args.overload_queue > 0:
        extra = [*args.server_arg, "--max-queued-samples", str(args.overload_queue)]
        results["overload"] = asyncio.run(phase(args.sdr, args.clients, args.seconds, args.max_requests, pool, extra))
        print(json.dumps(results["overload"], indent=1))
    if args.json:
        tmp = Path(args.json + ".tmp")
        tmp.write_text(json.dumps(results, indent=1) + "\n")
        tmp.replace(args.json)
    bad = results["normal"]["errors"] + results.get("overload", {}).get("errors", 0)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
