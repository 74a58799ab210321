"""Run a model on the public perception benchmarks (the Sureon paper, D.3, Table 5): the ``bench-*`` configs of a
public build.

    sureon eval public --model outputs/Sureon-VLM-8B --dataset build/public \\
        --benchmark bench-cholec80-phase-frame bench-cholec80-phase-clip --out results/sureon-vlm/public
    accelerate launch --num_processes 8 -m recipes.evaluation.public.evaluate --model ... (the same arguments)
    torchrun --nproc-per-node 8 -m recipes.evaluation.public.evaluate ...
    # vLLM: serve the model in its own environment (vLLM pins its own torch and transformers), then
    vllm serve outputs/Sureon-VLM-8B --served-model-name sureon-vlm --limit-mm-per-prompt '{"image": 8}'
    sureon eval public --backend openai --base-url http://localhost:8000/v1 --model sureon-vlm ...

Each row's prompt is the project's one prompt formatter (``builders.prompt.format_messages``) over the row's
question (ours, from ``public_converters/templates/benchmarks.yaml``) and frames: a frame-mode row shows its one
frame, a clip-mode row its window with every frame at its absolute timestamp (one video for Qwen3-VL, tagged images
otherwise). The answer is read by ``public_converters.grounded.parse_answer``, the parser that checked the corpus's
own answers (a reply with text around the JSON is read from its first ``{`` or ``[`` to the matching last bracket);
an unparseable reply is a miss, never dropped. Boxes stay on the prompt's 0-1000 grid: IoU is unchanged by scaling
each axis, so mAP50 equals that of pixel boxes.

Scale: the transformers backend batches rows (``--batch-size``). Under ``torchrun`` / ``accelerate launch`` rank r
takes rows r, r + W, r + 2W, ... of every benchmark, on ``cuda:LOCAL_RANK``, and caches its generations in
``generations/rank-R-of-W.jsonl`` (a killed run resumes each rank where it stopped; every rank also reads the other
caches, so a rerun with another world size repeats nothing); rank 0 gathers the ranks' outputs and writes
``predictions.jsonl`` in the datasets' row order: the same bytes a one-process run writes
(:mod:`recipes.evaluation.ranks`). ``predictions.jsonl`` is what ``sureon report public`` reads.

``--preset NAME`` runs a model with its Table 3 settings (``recipes/evaluation/presets.py``; explicit flags win);
an endpoint's separate reasoning field is kept as ``reasoning`` beside ``raw_output``, never parsed. summary.json
records the run's settings and the endpoint's token usage, and ``contamination`` when the training record stored with
the weights shows they were trained on a benchmark's rows (:mod:`recipes.evaluation.contamination`; warned about
before anything is generated).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from builders.arguments import positive_int
from builders.errors import InputError, report_mistakes
from builders.hub import check_build_path, media_root, resolve_frames
from builders.outputs import write_atomic
from builders.prompt import format_messages
from recipes.evaluation.inference import (
    GenerationCache,
    GenerationItem,
    GenerationStats,
    generate_cached,
    usage_totals,
)
from recipes.evaluation.ranks import Ranks, Share, share_timing
from recipes.evaluation.runner import (
    add_backend_arguments,
    add_system_prompt_arguments,
    backend_from_args,
    check_counts,
    check_sources,
    contamination_of,
    resolve_settings,
    run_settings,
    system_prompt_of,
)
from recipes.model_io.answers import read_answer


MODE = "visual"
ROWS_PER_CHUNK = 256  # rows whose frames are read at once (a batch of generations is cached as soon as it ends)
PREDICTION_FIELDS = (
    "question_id",
    "model",
    "benchmark",
    "task",
    "input_mode",
    "video_id",
    "frame_index",
    "criterion",
    "reference",
    "prediction",
    "labels",
    "reference_boxes",
    "boxes",
    "raw_output",
    "reasoning",
    "parse_error",
)


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument(
        "--model", help="local path or Hub id (or the endpoint's model name); required unless --preset gives it"
    )
    parser.add_argument(
        "--model-name", help="name written in predictions and reports (default: the preset's name, else --model)"
    )
    parser.add_argument("--dataset", required=True, type=Path, help="a public build (sureon build public) folder")
    parser.add_argument(
        "--benchmark",
        dest="benchmarks",
        required=True,
        nargs="+",
        metavar="NAME",
        help="bench-* configs, e.g. bench-cholec80-phase-frame",
    )
    parser.add_argument("--out", required=True, type=Path, help="output folder (reused: a rerun resumes)")
    add_backend_arguments(
        parser,
        unit="rows",
        max_new_tokens=256,
        device_help="transformers device (default: cuda:LOCAL_RANK when available, else cpu)",
    )
    add_system_prompt_arguments(parser)
    parser.add_argument("--limit", type=positive_int, help="only the first N rows of each benchmark (smoke runs)")
    return parser


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], epilog=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    return add_arguments(parser)


# ---- answers ------------------------------------------------------------------------------------------------------


def prediction_record(row: dict, text: str | None, model: str, reasoning: str | None = None) -> dict:
    prediction, error = read_answer(row, text)
    boxes = row["task"] == "tool_localization"
    record = {
        "question_id": row["question_id"],
        "model": model,
        "benchmark": row["benchmark"],
        "task": row["task"],
        "input_mode": row["input_mode"],
        "video_id": row["video_id"],
        "frame_index": row["frame_index"],
        "criterion": row["criterion"],
        "reference": row["reference"],
        "prediction": None if boxes else prediction,
        "labels": None if boxes or row["task"] == "cvs" else row["labels"],  # the closed set the report scores over
        "reference_boxes": row["reference_boxes"] if boxes else None,
        "boxes": prediction if boxes else None,
        "raw_output": text,
        "reasoning": reasoning,
        "parse_error": error,
    }
    return {k: record[k] for k in PREDICTION_FIELDS}


# ---- the run ------------------------------------------------------------------------------------------------------


PUBLIC_BUILD = "the public benchmarks are the bench-* configs of a public build (`sureon build public`)"


def check_benchmarks(dataset: Path, names: list[str], option: str = "--dataset") -> None:
    """Every ``--benchmark`` is a ``bench-*`` config of the build, checked on its card before anything loads; the
    message names the benchmarks the build has."""
    from builders.build_loading import build_configs

    for name in names:
        if not name.startswith("bench-"):
            raise InputError(f"--benchmark {name}: {PUBLIC_BUILD}")
    check_build_path(dataset, option)
    if not Path(dataset).expanduser().is_dir():
        return  # a Hub id: load_benchmark reports what it lacks
    configs = build_configs(dataset, option)
    missing = [name for name in names if name not in configs]
    if missing:
        benchmarks = [config for config in configs if config.startswith("bench-")]
        has = f"its benchmarks: {', '.join(benchmarks)}" if benchmarks else f"it has none: {PUBLIC_BUILD}"
        raise InputError(f"{dataset} has no benchmark {', '.join(missing)} ({has})")


def load_benchmark(dataset: Path, name: str, limit: int | None):
    from builders.build_loading import load_build

    if not name.startswith("bench-"):
        raise InputError(f"--benchmark {name}: {PUBLIC_BUILD}")
    rows = load_build(dataset, name, "test", expected=PUBLIC_BUILD)
    return rows.select(range(min(limit, len(rows)))) if limit else rows


def generate_shard(
    args, rows, indices: list[int], backend, model: str, system_prompt, cache, stats, details=None
) -> dict:
    """Outputs (question_id -> text) for the rows at ``indices``, in chunks, cached batch by batch; ``details``
    receives an endpoint's reasoning and usage per question_id."""
    outputs, done, started = {}, 0, time.monotonic()
    root = media_root(args.dataset, rows)
    for start in range(0, len(indices), ROWS_PER_CHUNK):
        chunk = rows.select(indices[start : start + ROWS_PER_CHUNK]).to_list()
        items = [
            GenerationItem(
                row["question_id"],
                MODE,
                format_messages(
                    resolve_frames(row, root),
                    frames_as=backend.frames_as,
                    system_prompt=system_prompt,
                    max_frames=args.max_frames,
                ),
            )
            for row in chunk
        ]
        found = {}
        generated = generate_cached(backend, model, items, cache, stats, found)
        outputs |= {qid: text for (qid, _), text in generated.items()}
        if details is not None:
            details |= {qid: entry for (qid, _), entry in found.items()}
        done += len(chunk)
        rate = done / max(time.monotonic() - started, 1e-9)
        print(f"  {done}/{len(indices)} rows ({rate:.2f} rows/s)", file=sys.stderr, flush=True)
    return outputs


def benchmark_contamination(args, benchmarks: dict) -> list[dict]:
    """The findings of :func:`recipes.evaluation.runner.contamination_of` over every benchmark, each naming the
    benchmark, task and input mode its rows are reported under (what ``sureon report public`` marks)."""
    findings = []
    for name, rows in benchmarks.items():
        found = contamination_of(args, name, "test", rows["question_id"])
        if found and len(rows):
            group = rows.select_columns(["benchmark", "task", "input_mode"])[0]
            findings += [finding | {"reported_as": group} for finding in found]
    return findings


def run(args) -> int:
    ranks = Ranks.of_launch()
    ranks.check_same_arguments(args)
    resolve_settings(args)
    check_counts(limit=args.limit, max_new_tokens=args.max_new_tokens)
    check_benchmarks(args.dataset, args.benchmarks)
    check_sources(args)
    model = args.model_name or args.model
    if args.backend == "transformers" and args.device is None:
        args.device = ranks.device()
    benchmarks = {name: load_benchmark(args.dataset, name, args.limit) for name in args.benchmarks}
    contamination = benchmark_contamination(args, benchmarks) if ranks.writes else []
    max_frames = max((len(r) for rows in benchmarks.values() for r in rows["frame_indices"]), default=1)
    backend = backend_from_args(args, max_frames)
    args.out.mkdir(parents=True, exist_ok=True)
    system_prompt = system_prompt_of(args)
    cache = ranks.cache(GenerationCache, args.out / "generations")
    stats = GenerationStats()
    shard, details, started = {}, {}, time.monotonic()
    for name, rows in benchmarks.items():
        indices = ranks.share(len(rows))
        print(f"{name}: rank {ranks.rank}/{ranks.world_size}, {len(indices)} of {len(rows)} rows", file=sys.stderr)
        shard |= generate_shard(args, rows, indices, backend, model, system_prompt, cache, stats, details)
    timing = share_timing(ranks, len(shard), stats.generated, stats.cached, started)
    merged = ranks.gather(Share(shard, details, timing))
    if merged is None:
        return 0  # rank 0 writes the outputs
    outputs, details = merged.results, merged.details
    failed = sorted(qid for qid, text in outputs.items() if text is None)
    if failed:
        raise RuntimeError(
            f"{len(failed)} generation(s) failed after retries (e.g. {', '.join(failed[:5])}): rerun the same "
            "command; finished generations are cached"
        )
    lines, summary = [], {"model": model, "dataset": str(args.dataset), "backend": backend.name, "benchmarks": {}}
    summary["frames_as"] = backend.frames_as  # how clips reached the model (--frames-as auto resolved): reports say it
    summary["run_settings"] = run_settings(args)  # the public benchmarks have no 8-frame protocol
    if contamination:
        summary["contamination"] = contamination  # trained on the rows scored: `sureon report public` marks them
    for name, rows in benchmarks.items():
        records = [
            prediction_record(
                row, outputs[row["question_id"]], model, details.get(row["question_id"], {}).get("reasoning")
            )
            for row in rows.to_list()
        ]
        lines += [json.dumps(record, ensure_ascii=False) + "\n" for record in records]
        summary["benchmarks"][name] = {
            "rows": len(records),
            "unparsed": sum(r["parse_error"] is not None for r in records),
        }
    write_atomic(args.out / "predictions.jsonl", "".join(lines))
    summary["generation"] = merged.timing  # world_size; rows, generated, cached, seconds per rank
    generation_usage = usage_totals(details.values())
    summary["token_usage"] = {model: generation_usage} if generation_usage is not None else {}
    write_atomic(args.out / "summary.json", json.dumps(summary, indent=2) + "\n")
    for name, entry in summary["benchmarks"].items():
        print(f"{name}: {entry['rows']} rows, {entry['unparsed']} unparsed")
    print(f"Wrote {args.out / 'predictions.jsonl'} (score it with `sureon report public`)")
    return 0


def main(argv: list[str] | None = None) -> int:
    """The module run directly (``torchrun -m recipes.evaluation.public.evaluate``): a mistake is one line per rank."""
    args = make_parser().parse_args(argv)
    return report_mistakes(lambda: run(args))


if __name__ == "__main__":
    sys.exit(main())
