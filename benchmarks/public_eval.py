"""Benchmark `sureon eval public` (recipes/evaluation/public/evaluate.py) with a tiny random Qwen3-VL on the CPU.

It builds the Cholec80 sample's benchmark configs (``bench-cholec80-phase-frame`` and ``-clip``: the 40-s test
video on a ``--bench-fps`` grid, 5 fps by default for 200 rows each, one frame or an 8-frame window per row) and
prints

- seconds per row of the transformers backend as the runner drives it (rows -> prompt formatter -> fingerprint and
  cache check -> batched ``generate`` -> cache append) against a bare loop over the same batches (processor +
  ``model.generate`` only), and their ratio: the runner's overhead;
- the speed-up from 1 process to 2 ranks (``torch.distributed.run``, gloo, one merged predictions file),
  each from an empty output folder, one CPU thread per rank: of the whole command (start-up, imports and model load
  included, as a user pays it) and of its generation phase (the slowest rank's, from ``summary.json``).

The tiny model makes generation cheap, so the overhead ratio is an upper bound of what a real 8B model sees.

    python benchmarks/public_eval.py [--rows 200] [--bench-fps 5] [--batch-size 8] [--max-new-tokens 32] [--no-ranks]
"""

import argparse
import shutil
import sys
import tempfile
from pathlib import Path


REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.timing import best_of, one_process_and_two_ranks, parse_with_quick, print_ranks  # noqa: E402
from public_converters.build import BuildOptions, build_public  # noqa: E402
from public_converters.spec import sample_module  # noqa: E402


BENCHMARKS = ("bench-cholec80-phase-frame", "bench-cholec80-phase-clip")


def eval_args(model: Path, dataset: Path, out: Path, options) -> list[str]:
    return [
        *("--model", str(model), "--dataset", str(dataset), "--out", str(out), "--benchmark", *BENCHMARKS),
        *("--batch-size", str(options.batch_size), "--max-new-tokens", str(options.max_new_tokens)),
        *("--limit", str(options.rows), "--dtype", "float32", "--device", "cpu"),
    ]


def overhead(model: Path, dataset: Path, work: Path, options) -> tuple[float, float, int]:
    """(runner seconds per row, bare seconds per row, rows)."""
    from builders.hub import resolve_frames
    from builders.prompt import format_messages
    from recipes.evaluation.inference import GenerationCache, GenerationStats, TransformersBackend
    from recipes.evaluation.public.evaluate import generate_shard, load_benchmark
    from recipes.evaluation.ranks import Ranks

    backend = TransformersBackend(
        str(model), dtype="float32", device="cpu", batch_size=options.batch_size, max_new_tokens=options.max_new_tokens
    )
    args = argparse.Namespace(dataset=dataset, max_frames=None)  # every stored frame, as `sureon eval public`
    benchmarks = [load_benchmark(dataset, name, options.rows) for name in BENCHMARKS]
    rows = sum(len(b) for b in benchmarks)
    batches = []
    for bench in benchmarks:
        conversations = [format_messages(resolve_frames(r, dataset), frames_as="video") for r in bench.to_list()]
        batches += [
            conversations[i : i + options.batch_size] for i in range(0, len(conversations), options.batch_size)
        ]
    backend.generate(batches[0])  # load the weights and warm up both paths alike

    def runner():
        folder = work / "overhead"
        shutil.rmtree(folder, ignore_errors=True)
        cache, stats = Ranks().cache(GenerationCache, folder), GenerationStats()
        for bench in benchmarks:
            generate_shard(args, bench, list(range(len(bench))), backend, "tiny", None, cache, stats)

    def bare():
        for batch in batches:
            backend.generate(batch)

    runs = [(best_of(1, runner), best_of(1, bare)) for _ in range(options.repeats)]  # interleaved: same noise
    return min(r for r, _ in runs) / rows, min(b for _, b in runs) / rows, rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200, help="rows per benchmark (at most the grid's)")
    parser.add_argument("--bench-fps", type=float, default=5.0, help="grid of the sample's 40-s test video")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-ranks", action="store_true", help="leave out 1 process vs 2 ranks (3 fresh processes)")
    options = parse_with_quick(
        parser,
        argv,
        {"rows": 2, "bench_fps": 0.25, "batch_size": 2, "max_new_tokens": 2, "repeats": 1, "no_ranks": True},
    )
    from recipes.training.tiny_models import build_tiny_qwen3_vl

    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        sample_module("cholec80").write(work / "cholec80")
        dataset = work / "public"
        build_public(BuildOptions(sources={"cholec80": work / "cholec80"}, out=dataset, bench_fps=options.bench_fps))
        model = build_tiny_qwen3_vl(work / "tiny", weight_std=0.3)  # answers that depend on the prompt
        ours, bare, rows = overhead(model, dataset, work, options)
        print(
            f"transformers backend over {rows} rows (batch {options.batch_size}, {options.max_new_tokens} new tokens)"
        )
        print(
            f"  runner: {ours * 1000:.1f} ms/row   bare generate: {bare * 1000:.1f} ms/row   ratio {ours / bare:.2f}x"
        )
        if options.no_ranks:
            return 0

        def command(out: Path) -> list[str]:
            return ["recipes.evaluation.public.evaluate", *eval_args(model, dataset, out, options)]

        print_ranks(one_process_and_two_ranks(command, work, port=29611))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
