"""Benchmark `sureon eval sureon` (recipes/evaluation/sureon/evaluate.py) on the demo benchmark with a tiny random
Qwen3-VL on the CPU, against bare generation of the same rows in the same batches, measured in the same run.

It builds the demo benchmark as ``make demo`` does (the sample release's bench config over the sample videos: 11
questions of 8 frames, visual and blind: 22 generations) and a tiny Qwen3-VL of head size 64 (vLLM's CPU attention
refuses smaller heads; random weights of std 0.3, so answers depend on the prompt), and prints

1. the command's overhead on the transformers backend: its generation phase as the run drives it
   (``generate_share``: rows -> frames read -> the prompt formatter -> fingerprint and cache check -> batched
   ``generate`` -> cache append) against a bare loop over the same conversations in the same batches (the project's
   encoder, ``TransformersBackend.prepare``, then ``model.generate``), interleaved, the best of ``--repeats``; and the
   whole command in this process (weights loaded, the build read, predictions and summary written);
2. the same on vLLM (``--backend vllm``, which renders each prompt as the transformers backend encodes it) against a
   bare ``LLM.generate`` over the same requests, rendered beforehand, run by ``build/vllm-venv/bin/python`` (``make
   vllm_venv``) in a subprocess (skipped, with the reason printed, when that environment is absent), and the two
   bare loops against each other: what the two engines take for the same requests;
3. the speed-up from 1 process to 2 ranks (``torch.distributed.run``, gloo; one CPU thread per rank), each from an
   empty output folder: of the whole command (start-up, imports, model load included, as a user pays it) and of its
   generation phase (the slowest rank's, from ``summary.json``); the predictions of both must be the same bytes.

The tiny model makes generation cheap, so each overhead ratio is an upper bound of what a real 8B model sees.

    python benchmarks/eval_sureon.py [--batch-size 4] [--max-new-tokens 32] [--repeats 3] [--no-vllm] [--no-ranks]
"""

import argparse
import contextlib
import io
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.timing import best_of, one_process_and_two_ranks, parse_with_quick, print_ranks  # noqa: E402


VLLM_PYTHON = REPO / "build" / "vllm-venv" / "bin" / "python"
FIGURES = "figures: "  # the line the vLLM arm prints its results on (vLLM prints its own lines too)
VLLM_SECONDS = 1200  # the engine starts in under a minute here, compiling included; the arm runs in seconds
MODEL_NAME = "tiny"


def build_inputs(work: Path, options) -> tuple[Path, Path]:
    """(the demo benchmark, the tiny model); without videos (``--mode blind``) the build holds no frames."""
    from builders.sureon.build import BuildOptions, build_sureon
    from recipes.training.tiny_models import build_tiny_qwen3_vl
    from sample_data.make_videos import write_sample_videos

    videos = None
    if options.mode != "blind":
        videos = work / "videos"
        write_sample_videos(videos)
    build = BuildOptions(
        release=REPO / "sample_data" / "sureon_release",
        out=work / "sureon",
        videos=videos,
        configs=["bench"],
        on_missing_video="skip",
        cache_dir=work / "frame-cache",
    )
    bench = build_sureon(build).out
    model = build_tiny_qwen3_vl(work / "tiny", head_dim=64, weight_std=0.3, max_pixels=256 * 256)
    return bench, model


def load_rows(bench: Path, options):
    from recipes.evaluation.sureon.evaluate import load_benchmark

    return load_benchmark(
        argparse.Namespace(dataset=str(bench), config="bench", split="test", limit=options.questions)
    )


def batches_of(dataset, options, frames_as: str) -> list[list[list[dict]]]:
    """The conversations the run generates, in its batches: per chunk of rows, every row visual, then every row blind
    (``generate_share`` on an empty cache)."""
    from builders.hub import media_root, resolve_frames
    from builders.prompt import format_messages
    from recipes.evaluation.inference import chunks
    from recipes.evaluation.sureon.evaluate import MODES, ROWS_PER_CHUNK

    modes = MODES[options.mode]
    root = media_root(str(options.bench), dataset) if "visual" in modes else None
    batches = []
    for chunk in chunks(range(len(dataset)), ROWS_PER_CHUNK):
        rows = [resolve_frames(row, root) for row in dataset.select(chunk)] if root else dataset.select(chunk)
        items = [format_messages(row, blind=mode == "blind", frames_as=frames_as) for mode in modes for row in rows]
        batches += [items[i : i + options.batch_size] for i in range(0, len(items), options.batch_size)]
    return batches


def runner_phase(backend, dataset, options, folder: Path) -> None:
    """The run's generation phase on an empty cache, as ``sureon eval sureon`` drives it."""
    from recipes.evaluation.inference import GenerationCache, GenerationStats
    from recipes.evaluation.sureon.evaluate import MODES, generate_share

    shutil.rmtree(folder, ignore_errors=True)
    cache, stats = GenerationCache(folder / "rank-0-of-1.jsonl"), GenerationStats()
    args = argparse.Namespace(dataset=str(options.bench), max_frames=None)
    indices = list(range(len(dataset)))
    generate_share(args, dataset, indices, MODES[options.mode], backend, MODEL_NAME, None, cache, stats, {})
    assert stats.generated == len(dataset) * len(MODES[options.mode])


def interleaved(options, *arms) -> list[float]:
    """The best time of each arm over ``--repeats`` rounds, the arms one after the other in each (the same noise)."""
    rounds = [[best_of(1, arm) for arm in arms] for _ in range(options.repeats)]
    return [min(times) for times in zip(*rounds, strict=True)]


def transformers_arms(dataset, options, work: Path) -> dict:
    """Seconds of the run's generation phase and of bare generation over the same conversations and batches."""
    import torch

    from recipes.evaluation.inference import TransformersBackend

    backend = TransformersBackend(
        str(options.model),
        dtype="float32",
        device="cpu",
        batch_size=options.batch_size,
        max_new_tokens=options.max_new_tokens,
    )
    batches = batches_of(dataset, options, backend.frames_as)

    def bare(conversations=batches):
        for batch in conversations:
            inputs = backend.prepare(batch).to(backend.model.device)
            with torch.inference_mode():
                backend.model.generate(**inputs, max_new_tokens=options.max_new_tokens, do_sample=False)

    bare(batches[:1])  # warm-up: weights loaded, kernels chosen, both paths alike
    runner, plain = interleaved(options, lambda: runner_phase(backend, dataset, options, work / "overhead"), bare)
    count = sum(map(len, batches))
    return {"generations": count, "frames_as": backend.frames_as, "runner": runner, "bare": plain}


def whole_command(options, work: Path) -> float:
    """Seconds of ``sureon eval sureon`` in this process from an empty folder: weights loaded, build read, written."""
    from recipes.evaluation.sureon.evaluate import main

    def command():
        out = work / "whole"
        shutil.rmtree(out, ignore_errors=True)
        with contextlib.redirect_stdout(io.StringIO()):  # its printed summary
            assert main(eval_args(options, out)) == 0

    return best_of(options.repeats, command)


def eval_args(options, out: Path) -> list[str]:
    argv = ["--model", str(options.model), "--dataset", str(options.bench), "--mode", options.mode]
    argv += ["--out", str(out), "--model-name", MODEL_NAME, "--batch-size", str(options.batch_size)]
    argv += ["--max-new-tokens", str(options.max_new_tokens), "--dtype", "float32", "--device", "cpu"]
    return argv + (["--limit", str(options.questions)] if options.questions else [])


def vllm_arms(dataset, options, work: Path) -> dict:
    """Run in vLLM's environment: seconds of the run's phase on ``--backend vllm`` and of a bare ``LLM.generate`` over
    the same requests in the same batches (rendered beforehand, as the backend renders them), and the engine's
    start-up."""
    from recipes.evaluation.inference import make_backend

    started = time.perf_counter()
    backend = make_backend(
        "vllm",
        str(options.model),
        dtype="float32",
        batch_size=options.batch_size,
        max_new_tokens=options.max_new_tokens,
        max_model_len=4096,
    )
    startup = time.perf_counter() - started
    requests = [backend.prompts(batch) for batch in batches_of(dataset, options, backend.frames_as)]
    untokenized = {"add_special_tokens": False}  # the rendered text holds the template's special tokens

    def bare():
        for batch in requests:
            backend.llm.generate(batch, backend.sampling, use_tqdm=False, tokenization_kwargs=untokenized)

    bare()  # warm-up
    runner, plain = interleaved(options, lambda: runner_phase(backend, dataset, options, work / "vllm"), bare)
    count = sum(map(len, requests))
    return {"generations": count, "frames_as": backend.frames_as, "runner": runner, "bare": plain, "startup": startup}


def figures_line(stream, seconds: float) -> str:
    """The line of ``stream`` that starts with :data:`FIGURES`; "" when it ends or ``seconds`` pass first."""
    lines = queue.Queue()
    threading.Thread(target=lambda: [*map(lines.put, stream), lines.put("")], daemon=True).start()
    deadline = time.monotonic() + seconds
    try:
        while (line := lines.get(timeout=max(deadline - time.monotonic(), 0))) and not line.startswith(FIGURES):
            pass
    except queue.Empty:
        return ""
    return line


def run_vllm_arm(options, work: Path) -> dict | str:
    """The vLLM figures from ``build/vllm-venv`` (a subprocess), or why they were not measured."""
    if options.no_vllm:
        return "left out (--no-vllm)"
    if not VLLM_PYTHON.is_file():
        return f"skipped: no vLLM environment at {VLLM_PYTHON.relative_to(REPO)} (make vllm_venv builds it)"
    command = [str(VLLM_PYTHON), str(Path(__file__).resolve()), "--vllm-arm", "--bench", str(options.bench)]
    command += ["--model", str(options.model), "--mode", options.mode, "--batch-size", str(options.batch_size)]
    command += ["--max-new-tokens", str(options.max_new_tokens), "--repeats", str(options.repeats)]
    command += ["--questions", str(options.questions)] if options.questions else []
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1"}
    log = work / "vllm-arm.log"
    # In a session of its own, ended once its one line of figures is read: vLLM's engine processes were seen not to
    # exit with the interpreter here, and a vLLM started beside another one on these cores waiting forever.
    with log.open("w") as errors:
        arm = subprocess.Popen(
            command, env=env, cwd=work, stdout=subprocess.PIPE, stderr=errors, text=True, start_new_session=True
        )
        try:
            line = figures_line(arm.stdout, VLLM_SECONDS)
            ended = arm.poll()
        finally:
            os.killpg(arm.pid, signal.SIGKILL)
            arm.wait()
    if not line:
        why = f"exit status {ended}" if ended is not None else f"none within {VLLM_SECONDS} s: another vLLM here?"
        return f"no figures from {VLLM_PYTHON.relative_to(REPO)} ({why}): {log.read_text()[-1500:].strip()}"
    return json.loads(line.removeprefix(FIGURES))


def per_generation(seconds: float, count: int) -> str:
    return f"{1000 * seconds / count:.1f} ms/generation"


def report_vllm(vllm: dict | str, figures: dict) -> None:
    if isinstance(vllm, str):
        print(f"vLLM: {vllm}")
        return
    count = vllm["generations"]
    print(f"vLLM (frames as {vllm['frames_as']}; engine start-up {vllm['startup']:.0f} s, not counted)")
    print(
        f"  runner: {per_generation(vllm['runner'], count)}   bare LLM.generate: {per_generation(vllm['bare'], count)}"
        f"   ratio {vllm['runner'] / vllm['bare']:.2f}x"
    )
    if vllm["frames_as"] == figures["frames_as"]:  # the same requests to both engines
        ratio = (vllm["bare"] / count) / (figures["bare"] / figures["generations"])
        print(f"  bare LLM.generate / bare transformers generate: {ratio:.2f}x")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["both", "blind"], default="both", help="blind: a build without videos")
    parser.add_argument("--questions", type=int, help="only the first N questions (default: all 11)")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-whole", action="store_true", help="leave out the whole command in this process")
    parser.add_argument("--no-vllm", action="store_true", help="leave out the vLLM arm (its engine starts in minutes)")
    parser.add_argument("--no-ranks", action="store_true", help="leave out 1 process vs 2 ranks (3 fresh processes)")
    parser.add_argument("--vllm-arm", action="store_true", help=argparse.SUPPRESS)  # run by the vLLM environment
    parser.add_argument("--bench", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--model", type=Path, help=argparse.SUPPRESS)
    options = parse_with_quick(
        parser,
        argv,
        {
            "mode": "blind",
            "questions": 2,
            "batch_size": 2,
            "max_new_tokens": 2,
            "repeats": 1,
            "no_whole": True,
            "no_vllm": True,
            "no_ranks": True,
        },
    )
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        if options.vllm_arm:
            print(FIGURES + json.dumps(vllm_arms(load_rows(options.bench, options), options, work)), flush=True)
            return 0
        options.bench, options.model = build_inputs(work, options)
        dataset = load_rows(options.bench, options)
        figures = transformers_arms(dataset, options, work)
        count = figures["generations"]
        print(
            f"`sureon eval sureon --mode {options.mode}` on {len(dataset)} demo questions, {count} generations "
            f"(batch {options.batch_size}, {options.max_new_tokens} new tokens), tiny Qwen3-VL, float32, CPU"
        )
        print(f"transformers (frames as {figures['frames_as']})")
        print(
            f"  runner: {per_generation(figures['runner'], count)}   bare generate: "
            f"{per_generation(figures['bare'], count)}   ratio {figures['runner'] / figures['bare']:.2f}x"
        )
        if not options.no_whole:
            whole = whole_command(options, work)
            print(
                f"  whole command in this process: {per_generation(whole, count)}   ratio to bare generate "
                f"{whole / figures['bare']:.2f}x"
            )
        report_vllm(run_vllm_arm(options, work), figures)
        if options.no_ranks:
            return 0
        print_ranks(
            one_process_and_two_ranks(
                lambda out: ["sureon", "eval", "sureon", *eval_args(options, out)], work, port=29613
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
