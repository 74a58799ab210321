"""Benchmark the shared chat client (builders/llm/) against an endpoint with a fixed latency.

For the same ``--requests`` calls (each reply delayed ``--latency`` seconds, as a busy endpoint would), this times

- the client with ``max_concurrency=1`` (the baseline: one call after another),
- the client with ``max_concurrency=--concurrency`` (what a construction stage or a hosted evaluation uses),
- a rerun of the same calls answered from the on-disk cache (what a resumed run costs),

and prints each as a ratio against the baseline measured in the same run, with the most requests the endpoint held
at once (never above the cap) and the client's own cost per call beyond the latency. The endpoint is an in-process
``httpx.MockTransport`` (an ``asyncio.sleep`` then a chat completion), so the figures measure the client, not a
server; the whole request path (payload, cache key, SQLite commit, response parsing) runs as in production.

    python benchmarks/llm_client.py [--requests 500] [--latency 0.05] [--concurrency 32] [--workdir build/bench]
"""

import argparse
import asyncio
import json
import shutil
import sys
import time
from pathlib import Path

import httpx


REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.timing import parse_with_quick  # noqa: E402
from builders.llm import ChatRequest, LLMClient  # noqa: E402


class SlowEndpoint:
    """Answers every chat completion after ``latency`` seconds and records the most calls held at once."""

    def __init__(self, latency: float):
        self.latency = latency
        self.in_flight = self.peak = self.calls = 0

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.in_flight += 1
        self.calls += 1
        self.peak = max(self.peak, self.in_flight)
        await asyncio.sleep(self.latency)
        self.in_flight -= 1
        content = json.loads(request.content)["messages"][0]["content"]
        message = {"role": "assistant", "content": content.upper()}
        usage = {"prompt_tokens": 12, "completion_tokens": 3}
        return httpx.Response(200, json={"choices": [{"message": message, "finish_reason": "stop"}], "usage": usage})


def timed_run(latency: float, cache: Path, requests: list[ChatRequest], concurrency: int):
    endpoint = SlowEndpoint(latency)
    client = LLMClient(
        "bench-model",
        base_url="http://endpoint.invalid/v1",
        api_key="local",
        cache=cache,
        max_concurrency=concurrency,
        transport=httpx.MockTransport(endpoint),
    )
    start = time.perf_counter()
    results = client.chat_many(requests)
    return time.perf_counter() - start, [r.text for r in results], endpoint


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds the endpoint waits before each reply")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--workdir", type=Path, default=REPO / "build" / "bench" / "llm_client")
    args = parse_with_quick(parser, argv, {"requests": 16, "latency": 0.005, "concurrency": 4})
    shutil.rmtree(args.workdir, ignore_errors=True)
    args.workdir.mkdir(parents=True)

    requests = [
        ChatRequest([{"role": "user", "content": f"question {i}"}], max_tokens=8) for i in range(args.requests)
    ]
    sequential, first, one = timed_run(args.latency, args.workdir / "sequential.sqlite", requests, 1)
    concurrent, second, many = timed_run(args.latency, args.workdir / "concurrent.sqlite", requests, args.concurrency)
    cached, third, rerun = timed_run(args.latency, args.workdir / "concurrent.sqlite", requests, args.concurrency)
    assert first == second == third == [f"QUESTION {i}" for i in range(args.requests)]
    assert one.peak == 1 and many.peak <= args.concurrency and rerun.calls == 0

    overhead_ms = (sequential / args.requests - args.latency) * 1000
    print(f"{args.requests} calls, {args.latency * 1000:.0f} ms endpoint latency each")
    print(f"  max_concurrency=1 (baseline)  {sequential:7.2f} s   peak in flight {one.peak:3d}   ", end="")
    print(f"client cost {overhead_ms:.2f} ms per call")
    print(
        f"  max_concurrency={args.concurrency:<3d}           {concurrent:7.2f} s   peak in flight {many.peak:3d}   ",
        end="",
    )
    print(f"{sequential / concurrent:6.1f}x faster than the baseline")
    print(f"  cached rerun                  {cached:7.2f} s   endpoint calls {rerun.calls:3d}   ", end="")
    print(f"{sequential / cached:6.1f}x faster than the baseline")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
