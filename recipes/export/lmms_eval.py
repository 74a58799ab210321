"""``sureon export lmms-eval``: the Sureon benchmark as lmms-eval 0.7 tasks over a local build (no Hub access).

    sureon export lmms-eval --dataset build/sureon --out build/exports/lmms_tasks
    python -m lmms_eval --model qwen3_vl --model_args pretrained=Qwen/Qwen3-VL-8B-Instruct \
        --tasks sureon --include_path build/exports/lmms_tasks --batch_size 1 --log_samples --output_path results/lmms

The layout follows lmms-eval's local-dataset tasks (its ``hd_epic`` task): a base YAML included by each task,
``!function utils.*`` hooks and a README. The dataset is the build folder itself (``dataset_path`` = its absolute
path, ``dataset_name: bench``), read by ``datasets.load_dataset`` with the frames as stored.

Three tasks: ``sureon_visual``, ``sureon_blind`` and ``sureon`` (both conditions on every question). The prompt is
our formatter's (:func:`builders.prompt.format_messages`, frames as tagged images: the clip's time range, then each
frame after its ``Frame at HH:MM:SS.ss:`` tag, then the question and options); the blind condition is the same call
with ``blind=True``. ``doc_to_messages`` serves chat models (lmms-eval 0.7.3 resolves ``--model qwen3_vl`` to its
chat implementation); ``doc_to_visual`` + ``doc_to_text`` serve simple ones, the text marking each frame's place as
``<image k>`` (run them with ``interleave_visuals=True``).
Each output is parsed and scored by our runner's own :func:`recipes.evaluation.sureon.evaluate.score_all`, so every
logged sample holds the prediction record ``sureon eval sureon`` writes, and the aggregations are its
:func:`summarize`: μ over the accuracy-scored questions (the eight multiple-choice categories and temporal ordering;
299 on the real benchmark), each category, and for ``sureon`` the multimodal gain MG = μ_visual − μ_blind, per
category too, in points. lmms-eval groups can only pool their tasks' metric values one metric at a time, so MG, which
pairs the two conditions on the same items, is the ``sureon`` task's rather than a group's.

Sequence summaries (SM) are generated and logged but not scored here: their grading is our strict LLM judge's
(``sureon eval sureon --judge-model``).

To get the same per-question outcome as ``sureon eval sureon``, compare like with like: lmms-eval's Qwen3-VL models
always send a system message (``You are a helpful assistant.`` unless ``system_prompt=`` says otherwise), load the
model in bfloat16 and take frames as images; so run ``sureon eval sureon --frames-as images --dtype bfloat16
--system-prompt "You are a helpful assistant." --max-new-tokens N`` with the task's ``max_new_tokens`` N. Our
runner's default (frames as one video with their true timestamps) has no lmms-eval counterpart: its Qwen3-VL
samples video files itself. lmms-eval also resizes images with ``qwen_vl_utils`` (within its own pixel bounds)
while our runner lets the processor resize, so outputs agree exactly only where neither resizes (a frame whose sides
are multiples of 32 inside both bounds); elsewhere expect small pixel differences. On the sample build's 192x108
frames (both sides resized to 192x96) the slow test's 22 outputs (11 questions, visual and blind) were identical.

lmms-eval 0.7.3 itself pins ``wandb==0.25`` and ``av<16`` and imports ``decord`` and ``filelock._api``
(``filelock<4``) without declaring them: install it in an environment of its own
(``tests/test_export_lmms_eval.py`` shows how). Its CLI reads ``--tasks NAME`` as a folder of YAMLs when a folder of
that name exists in the working directory, so do not run it from a folder holding a ``sureon/`` build.
"""

import argparse
from pathlib import Path

from builders.arguments import positive_int
from builders.prompt import format_messages, frame_protocol, select_frames
from builders.sureon.categories import BY_CODE, MCQ, OPEN, ORDERING
from recipes.evaluation.runner import check_counts
from recipes.evaluation.sureon.evaluate import score_all, summarize
from recipes.export.frames import FrameStore
from recipes.export.sureon_benchmark import accuracy_categories, load_sureon_split, metric_names, metric_value
from recipes.export.task_files import FunctionTag, task_yaml, write_json, write_utils_shim


COMMAND = "sureon export lmms-eval"
BASE = "_sureon_base.yaml"
MODEL_NAME = "lmms-eval"
DEFAULT_MAX_NEW_TOKENS = 512  # sureon eval sureon's default
TASK_MODES = {"sureon_visual": ("visual",), "sureon_blind": ("blind",), "sureon": ("visual", "blind")}


# --- the task's functions (the exported utils.py re-exports them) ---------------------------------------------------


def _with_mode(docs, mode: str):
    return docs.add_column("mode", [mode] * len(docs))


def docs_in_modes(modes: tuple[str, ...], media_root: str | None = None, max_frames: int | None = None):
    """A task's ``process_docs``: every question once per condition; frames stored as files (a training config's
    layout) are found in the build (:class:`recipes.export.frames.FrameStore`) and decoded like embedded ones; at
    most ``max_frames`` per clip (:func:`builders.prompt.select_frames`, as ``sureon eval sureon --max-frames``)."""

    def process_docs(docs):
        from datasets import Image, List, concatenate_datasets

        from builders.hub import frames_are_files

        if media_root is not None and frames_are_files(docs.features):
            store = FrameStore(Path(media_root))
            docs = docs.map(lambda doc: {"frames": store.paths(doc["frames"], doc["question_id"])})
            docs = docs.cast_column("frames", List(Image()))
        if max_frames:
            docs = docs.map(lambda doc: {k: select_frames(doc, max_frames)[k] for k in ("frames", "frame_timestamps")})
        return concatenate_datasets([_with_mode(docs, mode) for mode in modes])

    return process_docs


def _messages(doc: dict) -> list[dict]:
    return format_messages(doc, blind=doc["mode"] == "blind", frames_as="images")


def doc_to_messages(doc: dict, lmms_eval_specific_kwargs: dict | None = None) -> list[dict]:
    """Our prompt in lmms-eval's chat protocol (``{"type": "image", "url": PIL}`` parts, in place)."""
    converted = []
    for message in _messages(doc):
        parts = [
            {"type": "image", "url": part["image"]} if part["type"] == "image" else part for part in message["content"]
        ]
        converted.append({"role": message["role"], "content": parts})
    return converted


def doc_to_visual(doc: dict) -> list:
    """The frames in prompt order; none for the blind condition."""
    return [part["image"] for message in _messages(doc) for part in message["content"] if part["type"] == "image"]


def doc_to_text(doc: dict, lmms_eval_specific_kwargs: dict | None = None) -> str:
    """Our prompt's text with ``<image k>`` where frame k goes (simple models, ``interleave_visuals=True``)."""
    text, count = [], 0
    for message in _messages(doc):
        for part in message["content"]:
            if part["type"] == "image":
                count += 1
                text.append(f"<image {count}>")
            else:
                text.append(part["text"])
    return "".join(text)


def doc_to_target(doc: dict) -> str:
    from builders.prompt import answer_target

    return answer_target(doc)


def prediction(doc: dict, output: str) -> dict:
    """Our runner's prediction record for one output (parsed and scored by its own code)."""
    record = {key: value for key, value in doc.items() if key not in ("frames", "mode")}
    return score_all([record], [doc["mode"]], {(doc["question_id"], doc["mode"]): output}, MODEL_NAME)[0]


def results_for(metrics: list[str]):
    """A task's ``process_results``: the prediction record under each of the task's metric names (lmms-eval wants
    exactly those keys; each aggregation reads what it needs)."""

    def process_results(doc: dict, results: list[str]) -> dict:
        record = prediction(doc, results[0])
        return {name: record for name in metrics}

    return process_results


def aggregation(metric: str):
    """The aggregation of one metric: ``mu_visual``, ``blind_EE``, ``mg``, ``mg_TO``, ... from :func:`summarize`."""

    def aggregate(predictions: list[dict]) -> float | None:
        modes = sorted({p["mode"] for p in predictions}, key=["visual", "blind"].index)
        return metric_value(summarize(predictions, modes), metric)

    aggregate.__name__ = f"aggregate_{metric}"
    return aggregate


# --- the export -----------------------------------------------------------------------------------------------------


def base_config(dataset: Path, config: str, split: str, max_new_tokens: int) -> dict:
    return {
        "dataset_path": str(dataset),
        "dataset_name": config,
        "test_split": split,
        "output_type": "generate_until",
        "doc_to_messages": FunctionTag("doc_to_messages"),
        "doc_to_visual": FunctionTag("doc_to_visual"),
        "doc_to_text": FunctionTag("doc_to_text"),
        "doc_to_target": FunctionTag("doc_to_target"),
        "generation_kwargs": {"max_new_tokens": max_new_tokens, "temperature": 0, "do_sample": False},
        "metadata": {"version": 1.0},
    }


PROCESS_DOCS = {
    "sureon_visual": "process_docs_visual",
    "sureon_blind": "process_docs_blind",
    "sureon": "process_docs_both",
}


def task_config(task: str, modes: tuple[str, ...], categories: list[str]) -> dict:
    return {
        "include": BASE,
        "task": task,
        "process_docs": FunctionTag(PROCESS_DOCS[task]),
        "process_results": FunctionTag(f"process_results_{task}"),
        "metric_list": [
            {"metric": name, "aggregation": FunctionTag(f"aggregate_{name}"), "higher_is_better": True}
            for name in metric_names(modes, categories)
        ],
        "metadata": {"version": 1.0, "conditions": list(modes)},
    }


def shim_lines(tasks: dict[str, list[str]], media_root: str | None = None, max_frames: int | None = None) -> list[str]:
    """Per task its ``process_docs`` and a ``process_results`` returning its metric names; one aggregation per
    metric."""
    lines = [
        f"{PROCESS_DOCS[task]} = docs_in_modes({TASK_MODES[task]!r}, {media_root!r}, {max_frames!r})" for task in tasks
    ]
    lines += [f"process_results_{task} = results_for({names!r})" for task, names in tasks.items()]
    lines += [f"aggregate_{name} = aggregation({name!r})" for name in sorted({n for v in tasks.values() for n in v})]
    return lines


def readme(dataset: str, config: str, tasks: dict[str, list[str]], rows: int, max_new_tokens: int) -> str:
    categories = sorted({name.split("_", 1)[1] for names in tasks.values() for name in names if "_" in name})
    return "\n".join(
        [
            "# Sureon for lmms-eval",
            "",
            f"Exported by `{COMMAND}` from `{dataset}` (config `{config}`, {rows} questions). Run:",
            "",
            "```bash",
            "python -m lmms_eval --model qwen3_vl --model_args pretrained=MODEL \\",
            "    --tasks sureon --include_path THIS_FOLDER --batch_size 1 --log_samples --output_path OUT",
            "```",
            "",
            "| task | conditions | metrics |",
            "| --- | --- | --- |",
            *(f"| `{task}` | {', '.join(TASK_MODES[task])} | {', '.join(names)} |" for task, names in tasks.items()),
            "",
            "μ (`mu_visual`, `mu_blind`) pools the accuracy-scored questions (multiple choice and temporal ordering, "
            "299 on the real benchmark); `<condition>_<category>` is one category's accuracy; `mg` = μ_visual − "
            "μ_blind and `mg_<category>`, in points. Categories here: " + ", ".join(categories) + ".",
            "",
            (
                "The prompt, the answer parser and the scores are `sureon eval sureon`'s (the task's `utils.py` "
                "imports them from the project). Sequence summaries (SM) are generated and logged but left to our "
                "LLM judge (`sureon eval sureon --judge-model`). Each logged sample's metric value is the prediction "
                "record `sureon eval sureon` writes to `predictions.jsonl`."
            ),
            "",
            (
                "For the same per-question outcomes as our runner, run it the way lmms-eval's Qwen3-VL runs: "
                "`sureon eval sureon --frames-as images --dtype bfloat16 --system-prompt "
                f'"You are a helpful assistant." --max-new-tokens {max_new_tokens}` (lmms-eval always sends a system '
                "message; this task generates up to that many tokens, greedily). Simple (non-chat) models need "
                "`interleave_visuals=True` so each frame sits after its timestamp tag."
            ),
            "",
            (
                "The dataset is read from the build folder by absolute path, with no Hub access: export again after "
                "moving it."
            ),
            "",
        ]
    )


def export_lmms_eval(
    dataset: str,
    out: Path,
    *,
    config: str = "bench",
    split: str = "test",
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
    overwrite: bool = False,
    max_frames: int | None = None,
) -> dict:
    from builders.hub import media_root
    from builders.outputs import staged_output

    check_counts(max_new_tokens=max_new_tokens)
    source, docs = load_sureon_split(dataset, config, split, "lmms-eval")
    root = media_root(source, docs)
    categories = accuracy_categories(docs)
    tasks = {task: metric_names(modes, categories) for task, modes in TASK_MODES.items()}
    out = Path(out)
    with staged_output(out, overwrite) as staging:
        functions = ["doc_to_messages", "doc_to_visual", "doc_to_text", "doc_to_target", "results_for", "aggregation"]
        functions.append("docs_in_modes")
        lines = shim_lines(tasks, str(root) if root else None, max_frames)
        write_utils_shim(staging, __name__, functions, COMMAND, extra_lines=lines)
        (staging / BASE).write_text(task_yaml(base_config(source, config, split, max_new_tokens)), encoding="utf-8")
        for task, modes in TASK_MODES.items():
            (staging / f"{task}.yaml").write_text(task_yaml(task_config(task, modes, categories)), "utf-8")
        known = [c for c in categories if c in BY_CODE]
        manifest = {
            "command": COMMAND,
            "dataset": str(source),
            "config": config,
            "split": split,
            "questions": len(docs),
            "accuracy_scored": sum(fmt in (MCQ, ORDERING) for fmt in docs["answer_format"]),
            "judged_not_scored": sum(fmt == OPEN for fmt in docs["answer_format"]),
            "categories": categories,
            "categories_outside_the_ten": [c for c in categories if c not in known],
            "max_new_tokens": max_new_tokens,
            "frames": frame_protocol(max_frames, max(map(len, docs["frame_timestamps"]), default=0)),
            "tasks": {task: {"conditions": list(TASK_MODES[task]), "metrics": names} for task, names in tasks.items()},
        }
        write_json(staging / "manifest.json", manifest)
        (staging / "README.md").write_text(readme(str(source), config, tasks, len(docs), max_new_tokens), "utf-8")
    return manifest


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--dataset", required=True, help="a local folder built by `sureon build sureon --videos`")
    parser.add_argument("--config", default="bench")
    parser.add_argument("--split", default="test")
    parser.add_argument("--out", required=True, type=Path, help="the task folder (pass it as --include_path)")
    parser.add_argument(
        "--max-new-tokens", type=positive_int, default=DEFAULT_MAX_NEW_TOKENS, help="generation budget"
    )
    parser.add_argument(
        "--max-frames",
        type=positive_int,
        help="at most this many frames per clip, evenly spaced (as sureon eval sureon --max-frames); default: every "
        "stored frame, the benchmark's protocol",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
    return parser


def run(args: argparse.Namespace) -> int:
    manifest = export_lmms_eval(
        args.dataset,
        args.out,
        config=args.config,
        split=args.split,
        max_new_tokens=args.max_new_tokens,
        overwrite=args.overwrite,
        max_frames=args.max_frames,
    )
    print(
        f"{manifest['questions']} questions ({manifest['accuracy_scored']} accuracy-scored, "
        f"{manifest['judged_not_scored']} left to the judge); tasks {', '.join(manifest['tasks'])}; wrote {args.out}"
    )
    return 0
