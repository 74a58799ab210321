"""Evaluate a model on the Sureon benchmark, visual and blind (the Sureon paper, Section 4, Appendix D.1).

    sureon eval sureon --model Qwen/Qwen3-VL-8B-Instruct --dataset build/sureon --mode both --out results/qwen3vl-8b
    sureon eval sureon --model gpt-5.1 --backend openai --dataset build/sureon --mode both --out results/gpt51 \\
        --judge-model gpt-5.1
    sureon eval sureon --preset gpt-5.1-high --dataset build/sureon --out results/gpt51   (Table 3's settings)
    python -m recipes.evaluation.sureon.evaluate ...   (the same arguments)
    torchrun --nproc-per-node 8 -m sureon eval sureon ...   (or accelerate launch --num_processes 8 -m sureon ...)

Every model gets the project's one prompt (``builders.prompt.format_messages``); the blind pass is the same call with
``blind=True``, so the two differ only in the frames. A model trained with a system prompt (``recipes/sft.py``
records it in ``training_complete.json`` next to the weights) is evaluated with it, so training and evaluation
render identical prompts; ``--system-prompt`` replaces it and ``--no-system-prompt`` drops it. ``--max-frames N``
shows each clip's stored frames as training does under ``max_frames: N`` (the same frames, ``builders.prompt``'s
one frame rule); the run records whether it kept the benchmark's 8-frame protocol (``run_settings.frames``), and a
run below it is labelled so in the printed summary and ``sureon report``.

Multiple-choice answers are scored by the option letter, temporal ordering by the exact event order
(``recipes.model_io.answers``); unparseable answers count as wrong and are listed. Sequence summaries are graded
by the strict LLM judge when ``--judge-model`` is given (``recipes.evaluation.judge``), else left unscored
(``correct: null``); they never enter the pooled accuracy.

``--preset NAME`` runs a model with its Table 3 settings (``recipes/evaluation/presets.py``); any flag given
overrides the preset. An endpoint's separate reasoning field (``reasoning_content`` / ``reasoning``) is recorded as
``reasoning`` beside ``raw_output`` and never parsed as the answer.

Writes to ``--out``: ``predictions.jsonl`` (one line per question and mode: question_id, model, mode, category,
answer_format, num_options, raw_output, reasoning, parsed, answer, correct, scored_by), ``summary.json`` (μ over the
accuracy-scored items, per category, SM apart, multimodal gain, unparseable ids, counts, the run's settings and
preset, LLM usage per stage and token usage per model; ``contamination`` when the training record stored with the
weights shows they were trained on the rows scored, :mod:`recipes.evaluation.contamination`, which is also printed
as a warning before anything is generated; ``generation``: what was generated and reused, and each rank's share and
seconds), and the caches that make a rerun resume: ``generations/rank-R-of-W.jsonl`` (per model, question and mode;
``rank-0-of-1.jsonl`` for one process) and ``llm_cache.sqlite`` (endpoint and judge calls). The statistical report
(CIs, McNemar, tables) is ``sureon report sureon``.

Under ``torchrun`` / ``accelerate launch`` rank r generates questions r, r + W, r + 2W, ... (both modes) on
``cuda:LOCAL_RANK`` into its own cache log, reading every rank's; rank 0 gathers the generations, then parses, judges
and writes once: the same ``predictions.jsonl`` a one-process run writes (:mod:`recipes.evaluation.ranks`).
"""

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

from builders.arguments import positive_int
from builders.errors import InputError, report_mistakes
from builders.hub import frames_are_files, media_root, resolve_frames
from builders.outputs import write_atomic
from builders.prompt import answer_target, format_messages, protocol_label
from builders.sureon.categories import CATEGORIES, MCQ, ORDERING
from recipes.evaluation.inference import (
    GenerationCache,
    GenerationItem,
    GenerationStats,
    chunks,
    generate_cached,
    usage_totals,
)
from recipes.evaluation.ranks import Ranks, Share, share_timing
from recipes.evaluation.runner import (
    add_backend_arguments,
    add_judge_request_arguments,
    add_system_prompt_arguments,
    backend_from_args,
    check_counts,
    check_sources,
    contamination_of,
    resolve_settings,
    run_settings,
    system_prompt_of,
)
from recipes.model_io.answers import parse_answer


MODES = {"visual": ["visual"], "blind": ["blind"], "both": ["visual", "blind"]}
PREDICTION_FIELDS = (
    "question_id",
    "model",
    "mode",
    "category",
    "answer_format",
    "num_options",
    "raw_output",
    "reasoning",
    "parsed",
    "answer",
    "correct",
    "scored_by",
)
ROWS_PER_CHUNK = 64  # rows whose frames are held in memory at once
SUREON_BUILD = "`sureon eval sureon` reads a Sureon build (`sureon build sureon`; the benchmark is its bench config)"


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument(
        "--model", help="local path or Hub id (or the endpoint's model name); required unless --preset gives it"
    )
    parser.add_argument(
        "--model-name", help="name written in predictions and reports (default: the preset's name, else --model)"
    )
    parser.add_argument("--dataset", required=True, help="a built Sureon folder (Hub layout) or a Hub dataset id")
    parser.add_argument("--config", default="bench")
    parser.add_argument("--split", default="test")
    parser.add_argument("--mode", choices=list(MODES), default="both")
    parser.add_argument("--out", required=True, type=Path, help="output folder (reused: a rerun resumes)")
    add_backend_arguments(
        parser, unit="questions", max_new_tokens=512, device_help="transformers device (default: cuda when available)"
    )
    parser.add_argument("--judge-model", help="LLM judge for sequence summaries (none: SM left unscored)")
    parser.add_argument("--judge-base-url", help="the judge's endpoint (default: $OPENAI_BASE_URL)")
    parser.add_argument("--judge-api-key-env", default="OPENAI_API_KEY")
    add_judge_request_arguments(parser)
    parser.add_argument(
        "--judge-prompt", type=Path, help="judge prompt file (default: recipes/evaluation/prompts/...)"
    )
    add_system_prompt_arguments(parser)
    parser.add_argument("--limit", type=positive_int, help="evaluate only the first N questions (smoke runs)")
    return parser


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], epilog=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    return add_arguments(parser)


def load_benchmark(args):
    """The benchmark split with frames left encoded (decoded only for the questions still to generate); frames stored
    as files (a training config's default layout) stay paths, resolved against the build by ``generate_all``."""
    from datasets import Image, List

    from builders.build_loading import load_build

    dataset = load_build(args.dataset, args.config, args.split, expected=SUREON_BUILD)
    if "frames" in dataset.column_names and not frames_are_files(dataset.features):
        dataset = dataset.cast_column("frames", List(Image(decode=False)))
    if args.limit:
        dataset = dataset.select(range(min(args.limit, len(dataset))))
    return dataset


def check_frames(dataset, modes: list[str], source: str) -> None:
    if "visual" not in modes:
        return
    if "frames" not in dataset.column_names:
        raise InputError(
            f"{source} has no frames (an annotation-only build): rebuild it with --videos, or evaluate --mode blind"
        )
    empty = [qid for qid, count in zip(dataset["question_id"], dataset["frame_timestamps"], strict=True) if not count]
    if empty:
        raise InputError(
            f"{source}: {len(empty)} question(s) have no frames (e.g. {', '.join(empty[:5])}); their visual prompt "
            "would equal the blind one. Rebuild with --on-missing-video skip, or evaluate --mode blind"
        )


def generate_share(args, dataset, indices, modes, backend, model_name, system_prompt, cache, stats, details):
    """Outputs per (question_id, mode) of the rows at ``indices`` (this rank's share), cached batch by batch, a
    failed generation ``None``; ``details`` receives an endpoint's reasoning and usage per generation."""
    outputs = {}
    root = media_root(args.dataset, dataset) if "visual" in modes else None
    for chunk in chunks(indices, ROWS_PER_CHUNK):
        rows = [resolve_frames(row, root) for row in dataset.select(chunk)] if root else dataset.select(chunk)
        items = [
            GenerationItem(
                row["question_id"],
                mode,
                format_messages(
                    row,
                    blind=mode == "blind",
                    frames_as=backend.frames_as,
                    system_prompt=system_prompt,
                    max_frames=args.max_frames,
                ),
            )
            for mode in modes
            for row in rows
        ]
        outputs.update(generate_cached(backend, model_name, items, cache, stats, details))
    return outputs


def check_generated(outputs: dict) -> None:
    """Stop before anything is written when an endpoint gave up on a generation (a rerun asks only for those)."""
    failed = sorted(f"{qid} ({mode})" for (qid, mode), text in outputs.items() if text is None)
    if failed:
        raise RuntimeError(
            f"{len(failed)} generation(s) failed after retries ({', '.join(failed[:5])}...): rerun the same command; "
            "finished generations are cached and will not be repeated"
        )


def score_all(
    records: list[dict], modes: list[str], outputs: dict, model_name: str, details: dict | None = None
) -> list[dict]:
    """One prediction per record and mode, parsed from the output text alone (never from the reasoning field)."""
    predictions = []
    details = details or {}
    for mode in modes:
        for record in records:
            raw = outputs[(record["question_id"], mode)]
            target = answer_target(record)
            parsed = parse_answer(record, raw, target)
            accuracy_scored = record["answer_format"] in (MCQ, ORDERING)
            predictions.append(
                {
                    "question_id": record["question_id"],
                    "model": model_name,
                    "mode": mode,
                    "category": record["category"],
                    "answer_format": record["answer_format"],
                    "num_options": len(record["options"]) if record["options"] else None,
                    "raw_output": raw,
                    "reasoning": details.get((record["question_id"], mode), {}).get("reasoning"),
                    "parsed": parsed.parsed,
                    "answer": target,
                    "correct": parsed.correct,
                    "scored_by": "accuracy" if accuracy_scored else "judge",
                }
            )
    return predictions


def judge_all(args, predictions: list[dict]):
    """Fill ``correct`` of the judge-scored predictions; return the client (for its usage) or None without a judge."""
    if not args.judge_model:
        return None
    from builders.llm import LLMClient
    from recipes.evaluation.judge import JudgePrompt, SequenceJudge

    client = LLMClient(
        args.judge_model,
        base_url=args.judge_base_url,
        api_key=os.environ.get(args.judge_api_key_env),
        cache=args.out / "llm_cache.sqlite",
        max_concurrency=args.max_concurrency,
        max_retries=args.max_retries,
        progress=True,
    )
    prompt = JudgePrompt.from_file(args.judge_prompt) if args.judge_prompt else None
    judge = SequenceJudge(client, prompt, params=args.judge_request_params)
    judged = [p for p in predictions if p["scored_by"] == "judge"]
    for prediction, verdict in zip(
        judged, judge.judge_many([(p["answer"], p["parsed"]) for p in judged]), strict=True
    ):
        prediction["correct"] = verdict.correct
    return client


def _accuracy(flags: list[bool]) -> float | None:
    return round(100.0 * sum(flags) / len(flags), 2) if flags else None


def _category_order(codes) -> list[str]:
    known = [c.code for c in CATEGORIES]
    return [code for code in known if code in codes] + sorted(set(codes) - set(known))


def summarize(predictions: list[dict], modes: list[str]) -> dict:
    """μ over the accuracy-scored items, per category, judged items apart, and MG = S_v − S_wv (percent)."""
    per_mode = {}
    for mode in modes:
        rows = [p for p in predictions if p["mode"] == mode]
        scored = [p for p in rows if p["scored_by"] == "accuracy"]
        by_category = defaultdict(list)
        for p in rows:
            by_category[p["category"]].append(p)
        per_category = {}
        for code in _category_order(by_category):
            flags = [p["correct"] for p in by_category[code] if p["correct"] is not None]
            per_category[code] = {
                "n": len(by_category[code]),
                "scored": len(flags),
                "correct": sum(flags),
                "accuracy": _accuracy(flags),
                "scored_by": by_category[code][0]["scored_by"],
            }
        judged = [p for p in rows if p["scored_by"] == "judge"]
        verdicts = [p["correct"] for p in judged if p["correct"] is not None]
        per_mode[mode] = {
            "mu": _accuracy([p["correct"] for p in scored]),
            "scored": len(scored),
            "correct": sum(p["correct"] for p in scored),
            "per_category": per_category,
            "judged": {"n": len(judged), "verdicts": len(verdicts), "correct": sum(verdicts)}
            | {
                "accuracy": _accuracy(verdicts),
                "unjudged": [p["question_id"] for p in judged if p["correct"] is None],
            },
            "unparseable": [p["question_id"] for p in scored if p["parsed"] is None],
        }
    summary = {"modes": per_mode}
    if set(modes) == {"visual", "blind"}:
        visual, blind = per_mode["visual"], per_mode["blind"]
        summary["multimodal_gain"] = {
            "mu": round(visual["mu"] - blind["mu"], 2) if visual["mu"] is not None else None,
            "per_category": {
                code: round(entry["accuracy"] - blind["per_category"][code]["accuracy"], 2)
                for code, entry in visual["per_category"].items()
                if entry["accuracy"] is not None and blind["per_category"][code]["accuracy"] is not None
            },
        }
    return summary


def run(args) -> int:
    ranks = Ranks.of_launch()
    ranks.check_same_arguments(args)
    resolve_settings(args)
    check_counts(limit=args.limit, max_new_tokens=args.max_new_tokens)
    check_sources(args)
    modes = MODES[args.mode]
    model_name = args.model_name or args.model
    dataset = load_benchmark(args)
    check_frames(dataset, modes, f"{args.dataset} ({args.config}/{args.split})")
    contamination = contamination_of(args, args.config, args.split, dataset["question_id"]) if ranks.writes else []
    max_frames = (
        max(map(len, dataset["frame_timestamps"]), default=0) if "frame_timestamps" in dataset.column_names else 0
    )
    if args.backend == "transformers" and args.device is None:
        args.device = ranks.device()
    backend = backend_from_args(args, max_frames)
    args.out.mkdir(parents=True, exist_ok=True)
    system_prompt = system_prompt_of(args)
    # this rank's log, holding every rank's and a run's single generations.jsonl from before sharding
    cache = ranks.cache(GenerationCache, args.out / "generations", earlier=[args.out / "generations.jsonl"])
    stats, details, started = GenerationStats(), {}, time.monotonic()
    indices = ranks.share(len(dataset))
    if ranks.world_size > 1:
        print(f"rank {ranks.rank}/{ranks.world_size}: {len(indices)} of {len(dataset)} questions", file=sys.stderr)
    outputs = generate_share(args, dataset, indices, modes, backend, model_name, system_prompt, cache, stats, details)
    timing = share_timing(ranks, len(indices), stats.generated, stats.cached, started)
    merged = ranks.gather(Share(outputs, details, timing))
    if merged is None:
        return 0  # rank 0 scores and writes
    outputs, details = merged.results, merged.details
    check_generated(outputs)
    text_columns = [c for c in dataset.column_names if c != "frames"]
    records = dataset.select_columns(text_columns).to_list()
    predictions = score_all(records, modes, outputs, model_name, details)
    judge_client = judge_all(args, predictions)
    summary = {
        "model": model_name,
        "dataset": str(args.dataset),
        "config": args.config,
        "split": args.split,
        "backend": backend.name,
        "frames_as": backend.frames_as,
        "system_prompt": system_prompt,
        "questions": len(records),
        "run_settings": run_settings(args, max_frames),
    }
    trained = trained_frames(args)
    if trained is not None:
        summary["run_settings"]["frames"]["trained_max_frames"] = trained
    if contamination:
        summary["contamination"] = contamination  # trained on the rows scored: `sureon report` marks the model
    summary |= summarize(predictions, modes)
    shares = merged.timing["ranks"]  # rank, rows, generated, cached, seconds of each rank
    summary["generation"] = {key: sum(share[key] for share in shares) for key in ("generated", "cached")}
    summary["generation"] |= merged.timing
    usage = {}
    for client in (getattr(backend, "client", None), judge_client):
        if client is not None:
            usage |= client.ledger.as_dict()
    summary["llm_usage"] = usage
    # per model: the tokens of every answer used, reused ones included (llm_usage counts this process's calls)
    token_usage = {}
    generation_usage = usage_totals(details[key] for key in outputs if key in details)
    if generation_usage is not None:
        token_usage[model_name] = generation_usage
    if judge_client is not None and args.judge_model in judge_client.ledger.models:
        judged = judge_client.ledger.by_model()[args.judge_model]
        token_usage[f"{args.judge_model} (judge)"] = {k: v for k, v in judged.items() if k != "cached"}
    summary["token_usage"] = token_usage
    lines = "".join(json.dumps({k: p[k] for k in PREDICTION_FIELDS}, ensure_ascii=False) + "\n" for p in predictions)
    write_atomic(args.out / "predictions.jsonl", lines)
    write_atomic(args.out / "summary.json", json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    print(render_summary(summary))
    return 0


def trained_frames(args) -> int | None:
    """The ``max_frames`` the evaluated weights were trained with (``training_complete.json``), None when unknown."""
    if args.backend == "openai":
        return None
    from recipes.model_io.run_record import read_run_record

    return (read_run_record(args.model, args.revision) or {}).get("max_frames")


def render_summary(summary: dict) -> str:
    settings = summary["run_settings"].get("frames") or {}
    frames = protocol_label(settings)
    trained = settings.get("trained_max_frames")
    if trained and trained != settings.get("frames_shown"):
        frames += f" (trained with max_frames {trained}: --max-frames {trained} shows the frames it was trained on)"
    lines = [
        f"{summary['model']} on {summary['dataset']} ({summary['config']}, {summary['questions']} questions){frames}"
    ]
    for mode, entry in summary["modes"].items():
        categories = " ".join(f"{code} {c['accuracy']}" for code, c in entry["per_category"].items())
        lines.append(f"  {mode:6s} mu {entry['mu']} over {entry['scored']} items | {categories}")
        lines.append(f"         unparseable {len(entry['unparseable'])}, judged {entry['judged']['verdicts']}")
    if "multimodal_gain" in summary:
        lines.append(f"  MG     {summary['multimodal_gain']['mu']}")
    generation = summary["generation"]
    lines.append(f"  generations: {generation['generated']} new, {generation['cached']} from the cache")
    if generation["world_size"] > 1:
        shares = ", ".join(
            f"rank {r['rank']} {r['generated']} new in {r['seconds']:.1f} s" for r in generation["ranks"]
        )
        lines.append(f"  {generation['world_size']} ranks: {shares}")
    if summary.get("contamination"):
        lines.append("  trained on the evaluated rows: these scores are not held out (summary.json: contamination)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """The module run directly (``torchrun -m recipes.evaluation.sureon.evaluate``): a mistake is one line per rank."""
    args = make_parser().parse_args(argv)
    return report_mistakes(lambda: run(args))


if __name__ == "__main__":
    sys.exit(main())
