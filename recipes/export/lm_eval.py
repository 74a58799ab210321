"""``sureon export lm-eval``: SurgiQ as lm-evaluation-harness 0.4.x tasks, faithful to ``sureon eval surgiq``.

    sureon export lm-eval --dataset build/surgiq --out build/exports/lm_tasks
    lm-eval run --model hf --model_args pretrained=MODEL,dtype=float32 --tasks surgiq_default_0shot \
        --include_path build/exports/lm_tasks

One task per config and shot count (``surgiq_{default,shuffled}_{0..3}shot``). The protocol is ours
(``recipes/evaluation/surgiq/scoring.py``, the SurgiQ paper's 4.2), expressed in lm-eval's terms:

- the prompt is :func:`builders.prompt.surgiq_prompt` itself (``doc_to_text``), demonstrations included: each
  k-shot row carries the first k questions of our fixed pool (:func:`fewshot_pool`), and every k-shot task leaves the
  whole pool out of scoring, as ``sureon eval surgiq --shots k`` does. lm-eval's own few-shot sampler is not used
  (its assembly differs between 0.4 releases); the tasks set ``num_fewshot: 0``, so do not pass ``--num_fewshot``.
- the choices are the labels in both variants, ``A``..``D`` and `` A``..`` D``, with ``target_delimiter: ""``: lm-eval
  scores each as a continuation of the prompt (which ends with ``Answer:``), and :func:`process_results` takes the
  max of the two variants per letter, the argmax (ties to the earlier letter) and the softmax confidence through the
  same :func:`recipes.evaluation.surgiq.scoring.predictions_from_scores` as our runner.
- metrics: ``acc`` (ours), ``acc_space_only`` (what stock lm-eval MMLU-style scoring reports: the space-prefixed
  label only), ``brier`` and ``ece`` (10 equal-width bins), from ``recipes/evaluation/surgiq/calibration.py``.

A label variant the tokenizer splits into several tokens is scored alike by both: the sum of its tokens'
log-probabilities as the prompt's continuation (``recipes.evaluation.surgiq.scoring.LabelScorer``). One known
difference, absent from the tokenizers we use: lm-eval prepends no BOS unless told (``add_bos_token=True``) while our
scorer encodes with the tokenizer's special tokens, so for a tokenizer that adds a BOS (Llama, Gemma) pass
``add_bos_token=True``; Qwen's and our tiny models' add none.
"""

import argparse
from pathlib import Path

import numpy as np

from builders.errors import InputError
from builders.options import LETTERS
from builders.prompt import surgiq_prompt
from recipes.evaluation.surgiq.evaluate import load_surgiq
from recipes.evaluation.surgiq.scoring import (
    LABEL_VARIANTS,
    MAX_SHOTS,
    NUM_OPTIONS,
    fewshot_pool,
    predictions_from_scores,
)
from recipes.export.task_files import FunctionTag, task_yaml, write_json, write_jsonl, write_utils_shim


COMMAND = "sureon export lm-eval"
CONFIGS = ("default", "shuffled")
TEMPLATE = "_surgiq_template_yaml"
DEMONSTRATION_FIELDS = ("id", "question", "options", "answer_index")
CHOICES = [variant.format(letter) for variant in LABEL_VARIANTS for letter in LETTERS[:NUM_OPTIONS]]
SPACE_PREFIXED = LABEL_VARIANTS.index(" {}")


def task_name(config: str, shots: int) -> str:
    return f"surgiq_{config}_{shots}shot"


# --- the task's functions (the exported utils.py re-exports them) ---------------------------------------------------


def doc_to_text(doc: dict) -> str:
    """Our SurgiQ prompt, with the row's demonstrations; it ends with the answer cue."""
    return surgiq_prompt(doc, doc.get("demonstrations") or [])


def doc_to_choice(doc: dict) -> list[str]:
    return list(CHOICES)


def doc_to_target(doc: dict) -> int:
    """The index of the answer's plain label among the choices (used by lm-eval only for its own bookkeeping)."""
    return int(doc["answer_index"])


def label_scores(loglikelihoods: list[float], variant: int | None = None) -> list[float]:
    """Per letter: the max over label variants (ours), or one variant's log-likelihood (``variant`` given)."""
    table = np.asarray(loglikelihoods, dtype=float).reshape(len(LABEL_VARIANTS), NUM_OPTIONS)
    return (table.max(axis=0) if variant is None else table[variant]).tolist()


def prediction(doc: dict, loglikelihoods: list[float]) -> dict:
    """Our runner's prediction record for one doc, from lm-eval's per-choice log-likelihoods."""
    return predictions_from_scores([doc], {doc["id"]: label_scores(loglikelihoods)})[0]


def process_results(doc: dict, results: list) -> dict:
    """lm-eval hands the ``(loglikelihood, is_greedy)`` of each of the eight choices, in ``CHOICES`` order."""
    if len(results) != len(CHOICES):
        raise InputError(f"SurgiQ {doc.get('id')}: expected {len(CHOICES)} choice scores, got {len(results)}")
    loglikelihoods = [float(result[0]) for result in results]
    ours = prediction(doc, loglikelihoods)
    space_only = int(np.argmax(label_scores(loglikelihoods, SPACE_PREFIXED)))
    probabilities = np.array(list(ours["probabilities"].values()))
    onehot = np.eye(NUM_OPTIONS)[doc["answer_index"]]
    return {
        "acc": float(ours["correct"]),
        "acc_space_only": float(space_only == doc["answer_index"]),
        "brier": float(((probabilities - onehot) ** 2).sum()),
        "ece": (ours["confidence"], bool(ours["correct"])),
    }


def ece(items: list[tuple[float, bool]]) -> float:
    """Top-label ECE over the run (our 10 equal-width bins)."""
    from recipes.evaluation.surgiq.calibration import DEFAULT_BINS, expected_calibration_error

    confidence, correct = zip(*items, strict=True)
    return float(expected_calibration_error(np.array(confidence), np.array(correct, dtype=float), DEFAULT_BINS))


# --- the export -----------------------------------------------------------------------------------------------------


def task_rows(records: list[dict], shots: int) -> tuple[list[dict], list[str]]:
    """The rows a ``shots``-shot task scores (each with its demonstrations) and the ids it leaves out."""
    pool = fewshot_pool(records) if shots else []
    demonstrations = [{key: d[key] for key in DEMONSTRATION_FIELDS} for d in pool[:shots]]
    pool_ids = {r["id"] for r in pool}
    rows = [{**r, "demonstrations": demonstrations} for r in records if r["id"] not in pool_ids]
    return rows, sorted(pool_ids)


def template_config() -> dict:
    metric = lambda name, higher, aggregation="mean": {  # noqa: E731
        "metric": name,
        "aggregation": aggregation,
        "higher_is_better": higher,
    }
    return {
        "dataset_path": "json",
        "output_type": "multiple_choice",
        "test_split": "test",
        "doc_to_text": FunctionTag("doc_to_text"),
        "doc_to_choice": FunctionTag("doc_to_choice"),
        "doc_to_target": FunctionTag("doc_to_target"),
        "target_delimiter": "",
        "num_fewshot": 0,
        "process_results": FunctionTag("process_results"),
        "metric_list": [
            metric("acc", True),
            metric("acc_space_only", True),
            metric("brier", False),
            metric("ece", False, FunctionTag("ece")),
        ],
        "metadata": {"version": 1.0},
    }


def readme(tasks: list[dict], dataset: str) -> str:
    lines = [
        "# SurgiQ for lm-evaluation-harness",
        "",
        f"Exported by `{COMMAND}` from `{dataset}`. Run a task with",
        "",
        "```bash",
        "lm-eval run --model hf --model_args pretrained=MODEL,dtype=float32 \\",
        f"    --tasks {tasks[0]['task']} --include_path {Path(tasks[0]['data']).parent.parent}",
        "```",
        "",
        "| task | config | shots | scored | left out (few-shot pool) |",
        "| --- | --- | --- | --- | --- |",
    ]
    lines += [
        f"| `{t['task']}` | {t['config']} | {t['shots']} | {t['scored']} | {len(t['excluded_from_scoring'])} |"
        for t in tasks
    ]
    lines += [
        "",
        (
            "The protocol is `sureon eval surgiq`'s: the same prompt (demonstrations from the fixed pool of three, "
            "which every k-shot task leaves out of scoring), the next-token log-probability of each label in its "
            "plain and space-prefixed variant, the max of the two, argmax, softmax confidence. Do not pass "
            "`--num_fewshot`: the demonstrations are in each row. For a tokenizer that prepends a BOS token (Llama, "
            "Gemma) add `add_bos_token=True` to `--model_args`, as our scorer encodes with the tokenizer's special "
            "tokens."
        ),
        "",
        (
            "Metrics: `acc` (ours), `acc_space_only` (stock lm-eval MMLU-style scoring: the space-prefixed label "
            "`' A'` only; the difference between the two columns is what the stock scoring would change for this "
            "model), `brier` and `ece` (top-label, 10 equal-width bins)."
        ),
        "",
        "The data files are referenced by absolute path: export again after moving this folder.",
        "",
    ]
    return "\n".join(lines)


def export_lm_eval(dataset: str, out: Path, *, split: str = "test", overwrite: bool = False) -> dict:
    """Write the task folder; returns the manifest (per task: rows read = scored + left out)."""
    from builders.build_loading import build_configs
    from builders.outputs import staged_output

    out = Path(out).resolve()
    names = build_configs(dataset)
    configs = [config for config in CONFIGS if config in names]
    if not configs:
        raise InputError(
            f"{dataset} has neither config {' nor '.join(CONFIGS)} (it has: {', '.join(names)}): lm-eval tasks are "
            "exported from a SurgiQ build (`sureon build surgiq`)"
        )
    tasks = []
    with staged_output(out, overwrite) as staging:
        functions = ["doc_to_text", "doc_to_choice", "doc_to_target", "process_results", "ece"]
        write_utils_shim(staging, __name__, functions, COMMAND)
        (staging / TEMPLATE).write_text(task_yaml(template_config()), encoding="utf-8")
        for config in configs:
            records = load_surgiq(dataset, config, split)
            for shots in range(MAX_SHOTS + 1):
                rows, excluded = task_rows(records, shots)
                if len(rows) + len(excluded) != len(records):
                    raise AssertionError(f"{config} {shots}-shot: {len(records)} read != scored + left out")
                name = task_name(config, shots)
                data = f"data/{name}.jsonl"
                write_jsonl(staging / data, rows)
                files = {"data_files": {"test": str(out / data)}}
                task = {"include": TEMPLATE, "task": name, "dataset_kwargs": files}
                (staging / f"{name}.yaml").write_text(task_yaml(task), encoding="utf-8")
                tasks.append(
                    {
                        "task": name,
                        "config": config,
                        "shots": shots,
                        "data": str(out / data),
                        "read": len(records),
                        "scored": len(rows),
                        "excluded_from_scoring": excluded,
                    }
                )
        manifest = {"command": COMMAND, "dataset": str(dataset), "split": split, "tasks": tasks}
        write_json(staging / "manifest.json", manifest)
        (staging / "README.md").write_text(readme(tasks, str(dataset)), encoding="utf-8")
    return manifest


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--dataset", required=True, help="a folder built by `sureon build surgiq` (or its Hub id)")
    parser.add_argument("--split", default="test")
    parser.add_argument("--out", required=True, type=Path, help="the task folder (pass it as --include_path)")
    parser.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
    return parser


def run(args: argparse.Namespace) -> int:
    manifest = export_lm_eval(args.dataset, args.out, split=args.split, overwrite=args.overwrite)
    for task in manifest["tasks"]:
        print(
            f"{task['task']}: {task['read']} read = {task['scored']} scored + "
            f"{len(task['excluded_from_scoring'])} left out (few-shot pool)"
        )
    first = manifest["tasks"][0]["task"]
    print(f"wrote {args.out}; run: lm-eval run --model hf --model_args pretrained=MODEL --tasks {first} ", end="")
    print(f"--include_path {args.out}")
    return 0
