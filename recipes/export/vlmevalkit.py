"""``sureon export vlmevalkit``: the Sureon benchmark and the public benchmarks (Table 5) as VLMEvalKit datasets.

    sureon export vlmevalkit --dataset build/sureon --public build/public --out build/exports/vlmeval_sureon
    python build/exports/vlmeval_sureon/run_vlmevalkit.py --config my_models_and_sureon.json --work-dir results/vlmeval
    sureon report sureon results/vlmeval/MODEL/MODEL_Sureon.xlsx --out results/vlmeval_table3

VLMEvalKit (PyPI ``ms-vlmeval`` 0.0.20; ``make vlmevalkit_venv`` builds it in an environment of its own) reads each
dataset from a TSV (``vlmeval/dataset/image_base.py``: ``index``, ``question``, option columns ``A``..., ``answer``,
``category``, ``l2-category``, ``split``, then ``image`` in base64 or ``image_path``). An unregistered TSV would be
loaded as VLMEvalKit's custom MCQ dataset, with its own prompt and its own answer matching (an LLM judge that falls
back to exact matching, with a warning, when unreachable: ``vlmeval/dataset/image_mcq.py``, VLMEvalKit issue 305):
not the paper's protocol. So the export registers a dataset class of its own, the smallest registration VLMEvalKit
has: ``run_vlmevalkit.py`` in the export folder, a copy of :mod:`recipes.export.vlmevalkit_dataset` (the dataset
class and its launcher, which run in VLMEvalKit's environment; this module is the host side that writes the export),
adds the class to ``vlmeval.dataset`` and then runs VLMEvalKit's own ``vlmeval.run.main`` with every argument it was
given; nothing of VLMEvalKit is copied or changed.

The datasets (``--name`` prefixes them, default ``Sureon``):

- ``Sureon_visual``, ``Sureon_blind`` and ``Sureon`` (every question in both conditions, with the multimodal gain):
  the Sureon build's split (``--config bench``), all its categories. A row's prompt is the project's one formatter
  (:func:`builders.prompt.format_messages`, frames as tagged images): the clip's time range, each of the build's
  frames after its ``Frame at HH:MM:SS.ss:`` tag, the question, the lettered options and the instruction; the blind
  rows are the same call with ``blind=True`` and hold no frame. The dataset sets ``force_use_dataset_prompt``, so
  no model replaces the prompt with its own.
- ``Sureon_bench-<source>-<task>-<mode>``, one per ``bench-*`` config of a public build (``--public``), prompted as
  ``sureon eval public`` prompts them (a frame row shows its frame, a clip row its 8 tagged frames).

Frames are the build's own files, never re-sampled: a dataset is an image dataset whose rows hold the frames the
build sampled (``image_path``, relative to the dataset's frame folder), not a video dataset (VLMEvalKit's video
datasets sample ``nframe`` frames or ``fps`` themselves). Frames embedded in the build are written once, byte for
byte, under ``frames/`` (:class:`recipes.export.frames.FrameStore`: named by their content); frames the build stores
as files (a public build's ``media/``, a ``files``-layout config) are read from the build folder by absolute path
(export again after moving it). The TSVs keep VLMEvalKit's columns for people who read them, and add
``question_id``, ``mode``, ``answer_format``, ``frame_timestamps`` and ``sureon_record`` (the build's row as JSON,
every field but the frames), which is what scoring reads.

Scoring is the project's: the dataset's ``evaluate``
(:func:`recipes.export.vlmevalkit_dataset.score_predictions`) reads VLMEvalKit's prediction table
(:mod:`recipes.evaluation.prediction_tables`, the reader ``sureon report`` uses too) and scores each output as
``sureon eval`` does: Sureon answers by :func:`recipes.evaluation.sureon.evaluate.score_all` (option letter, exact
temporal order) and :func:`summarize` (μ over the accuracy-scored questions, each category, MG = μ_visual − μ_blind in
points), named as the lmms-eval export names them (``mu_visual``, ``visual_AD``, ``mg``, ``mg_TO``, ...); public
answers by :func:`recipes.evaluation.public.evaluate.prediction_record` and Table 5's metrics
(:func:`recipes.evaluation.public.report.score_group`). Beside the table it writes
``MODEL_DATASET_sureon_predictions.jsonl`` (``sureon eval``'s records) and ``MODEL_DATASET_score.json`` (what it
returns, which VLMEvalKit prints). Sequence summaries (SM) are generated but not judged here: their grade is our strict
LLM judge's (``sureon eval sureon --judge-model``), and ``sureon report sureon`` lists them as not judged.

What equals ``sureon eval sureon`` and what does not: the prompt text, the frames, the parser and the metrics are the
same code. The model call is VLMEvalKit's: its Qwen3-VL class (``Qwen3VLChat``) resizes images with
``qwen_vl_utils`` before its processor (ours lets the processor resize), sends a system message only when its config
sets ``system_prompt`` (ours sends the one a model was trained with) and samples with its config's ``temperature``,
``top_p``, ``top_k`` (ours decodes greedily); compare with ``sureon eval sureon --frames-as images``, which shows
frames as VLMEvalKit does (our runner's default for Qwen3-VL is one video with the true timestamps). On the sample
build's 192x108 frames the slow test (``tests/test_export_vlmevalkit.py``) found every output identical.
"""

import argparse
import json
import os
import shutil
from pathlib import Path

from builders.arguments import positive_int
from builders.errors import InputError
from builders.options import LETTERS
from builders.prompt import answer_target, question_text
from builders.sureon.categories import BY_CODE, MCQ, OPEN, ORDERING
from recipes.evaluation.prediction_tables import MODE_COLUMN, RECORD_COLUMN
from recipes.export import vlmevalkit_dataset
from recipes.export.frames import FrameStore, undecoded
from recipes.export.task_files import PROJECT_ROOT, write_json
from recipes.export.vlmevalkit_dataset import CLASS_NAME, MANIFEST, PUBLIC, SUREON


COMMAND = "sureon export vlmevalkit"
LAUNCHER = "run_vlmevalkit.py"  # the copy of recipes/export/vlmevalkit_dataset.py in each export
FRAMES = "frames"
CONDITIONS = {"visual": ("visual",), "blind": ("blind",), "": ("visual", "blind")}  # dataset name suffix -> modes
BASE_COLUMNS = ["index", "question"]
TAIL_COLUMNS = ["answer", "category", "l2-category", "split", "question_id", MODE_COLUMN, "answer_format"]
TAIL_COLUMNS += ["frame_timestamps", "image_path", RECORD_COLUMN]


def frame_files(docs, build: Path, out: Path, folder: str) -> tuple[str, list[list[str]]]:
    """Where each row's frames lie: ``(root, paths relative to it per row)``. Frames stored as files stay in the build
    (root: its absolute path; a missing file is an error naming it); embedded frames are written once each to
    ``out/folder`` (root: ``folder``, relative to the export, so the export moves with its frames)."""
    from builders.hub import frames_are_files, media_root

    in_build = frames_are_files(docs.features)
    root = build if in_build else out / folder
    store = FrameStore(media_root(build, docs), out / folder)
    names = [
        [os.path.relpath(path, root) for path in store.paths(row["frames"], row["question_id"])]
        for row in undecoded(docs.select_columns(["question_id", "frames"]))
    ]
    return (str(build) if in_build else folder), names


# --- rows ---------------------------------------------------------------------------------------------------------


def _text_record(row: dict) -> dict:
    return {key: value for key, value in row.items() if key != "frames"}


def _json(value) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def tsv_row(index: int, record: dict, mode: str, frames: list[str], options_width: int) -> dict:
    """One TSV row: VLMEvalKit's columns, then ours (``sureon_record`` is what the prompt and the scoring read)."""
    options = list(record.get("options") or [])
    category = record.get("category") or record.get("task") or ""
    known = BY_CODE.get(category)
    visual = mode == "visual"
    row = {"index": str(index), "question": question_text(record)}
    row |= {LETTERS[k]: (str(options[k]) if k < len(options) else "") for k in range(options_width)}
    row |= {
        "answer": answer_target(record),
        "category": category,
        "l2-category": known.group if known else str(record.get("benchmark") or ""),
        "split": str(record.get("split") or "test"),
        "question_id": record["question_id"],
        MODE_COLUMN: mode,
        "answer_format": str(record.get("answer_format") or ""),
        "frame_timestamps": _json(list(record.get("frame_timestamps") or []) if visual else []),
        "image_path": _json(frames if visual else []),
        RECORD_COLUMN: _json(record),
    }
    return row


def write_tsv(path: Path, rows: list[dict], columns: list[str]) -> None:
    """Tab-separated, every field quoted (as VLMEvalKit's own ``dump`` writes TSVs; newlines stay inside quotes)."""
    import csv

    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t", quoting=csv.QUOTE_ALL, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([[row.get(column, "") for column in columns] for row in rows])


# --- the export ------------------------------------------------------------------------------------------------------


def export_sureon(
    dataset: str, out: Path, name: str, config: str, split: str, max_frames: int | None = None
) -> dict[str, dict]:
    """The three Sureon datasets (visual, blind, both); returns their manifest entries. ``max_frames``: the frames
    of each clip shown, chosen by the function training and ``sureon eval sureon --max-frames`` use."""
    from builders.prompt import frame_protocol, select_frames
    from recipes.export.sureon_benchmark import accuracy_categories, load_sureon_split

    source, docs = load_sureon_split(dataset, config, split, "VLMEvalKit")
    root, frames = frame_files(docs, source, out, f"{FRAMES}/{name}")
    records = [_text_record(row) for row in docs.select_columns([c for c in docs.column_names if c != "frames"])]
    stored = max((len(listed) for listed in frames), default=0)
    chosen = [select_frames(r | {"frames": listed}, max_frames) for r, listed in zip(records, frames, strict=True)]
    frames = [c["frames"] for c in chosen]
    records = [_text_record(c) for c in chosen]
    categories = accuracy_categories(docs)
    width = max((len(r.get("options") or []) for r in records), default=0)
    columns = BASE_COLUMNS + list(LETTERS[:width]) + TAIL_COLUMNS
    entries = {}
    for suffix, modes in CONDITIONS.items():
        dataset_name = f"{name}_{suffix}" if suffix else name
        shown = [(mode, record, listed) for mode in modes for record, listed in zip(records, frames, strict=True)]
        rows = [tsv_row(index, record, mode, listed, width) for index, (mode, record, listed) in enumerate(shown)]
        write_tsv(out / f"{dataset_name}.tsv", rows, columns)
        entries[dataset_name] = {
            "kind": SUREON,
            "tsv": f"{dataset_name}.tsv",
            "frames_root": root,
            "modes": list(modes),
            "rows": len(rows),
            "questions": len(records),
            "accuracy_scored": sum(r["answer_format"] in (MCQ, ORDERING) for r in records),
            "judged_not_scored": sum(r["answer_format"] == OPEN for r in records),
            "categories": categories,
            "source": {"dataset": str(source), "config": config, "split": split},
            "frames": frame_protocol(max_frames, stored),
        }
    return entries


def public_benchmarks(build: Path) -> list[str]:
    """The ``bench-*`` configs a public build lists in its manifest.json."""
    if not build.is_dir():
        what = "no such folder" if not build.exists() else "not a folder"
        raise InputError(f"--public {build}: {what} (VLMEvalKit datasets are exported from a local build)")
    manifest = build / "manifest.json"
    if not manifest.is_file():
        raise InputError(f"{build}: no manifest.json; is it a folder written by `sureon build public`?")
    try:
        configs = [c["config_name"] for c in json.loads(manifest.read_text(encoding="utf-8")).get("configs", [])]
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError, KeyError, TypeError) as err:
        raise InputError(f"{manifest}: not the manifest `sureon build public` writes ({err}): rebuild it") from None
    benchmarks = [c for c in configs if c.startswith("bench-")]
    if not benchmarks:
        raise InputError(f"{build}: no bench-* configs (built with --no-benchmarks?)")
    return benchmarks


def export_public(build: str, out: Path, name: str, benchmarks: list[str] | None) -> dict[str, dict]:
    """One dataset per public benchmark config; returns their manifest entries."""
    from recipes.evaluation.public.evaluate import load_benchmark

    source = Path(build).resolve()
    entries = {}
    for benchmark in benchmarks or public_benchmarks(source):
        docs = load_benchmark(source, benchmark, None)
        root, frames = frame_files(docs, source, out, f"{FRAMES}/{benchmark}")
        records = [_text_record(row) for row in docs.select_columns([c for c in docs.column_names if c != "frames"])]
        rows = [
            tsv_row(index, record, "visual", frame_list, 0)
            for index, (record, frame_list) in enumerate(zip(records, frames, strict=True))
        ]
        dataset_name = f"{name}_{benchmark}"
        write_tsv(out / f"{dataset_name}.tsv", rows, BASE_COLUMNS + TAIL_COLUMNS)
        entries[dataset_name] = {
            "kind": PUBLIC,
            "tsv": f"{dataset_name}.tsv",
            "frames_root": root,
            "modes": ["visual"],
            "rows": len(rows),
            "task": records[0]["task"] if records else None,
            "source": {"dataset": str(source), "config": benchmark, "split": "test"},
        }
    return entries


def readme(manifest: dict) -> str:
    rows = [
        f"| `{name}` | {entry['kind']} | {', '.join(entry['modes'])} | {entry['rows']} |"
        for name, entry in manifest["datasets"].items()
    ]
    first = next(iter(manifest["datasets"]))
    return "\n".join(
        [
            "# Sureon datasets for VLMEvalKit",
            "",
            (
                f"Exported by `{COMMAND}`. Run them with VLMEvalKit's own `run.py` through the launcher here, which "
                "registers the datasets (class `SureonDataset`) first:"
            ),
            "",
            "```bash",
            f"python {LAUNCHER} --data {first} --model MODEL --work-dir OUT",
            f"python {LAUNCHER} --config config.json --work-dir OUT",
            f'# config.json: "data": {{"{first}": {{"class": "{CLASS_NAME}", "dataset": "{first}"}}}}, "model": ...',
            "```",
            "",
            "| dataset | benchmark | conditions | rows |",
            "| --- | --- | --- | --- |",
            *rows,
            "",
            (
                "Prompts are the project's formatter over the build's own frames (tagged with their timestamps; "
                "the blind condition shows none), and each dataset's `evaluate` scores VLMEvalKit's predictions with "
                "the project's parser and metrics: μ per condition, accuracy per category and MG (`mu_visual`, "
                "`visual_AD`, `mg`, ...) for Sureon, Table 5's metrics for a public benchmark. Sequence summaries "
                "are generated but left to the project's judge. Beside each prediction table it writes "
                "`*_sureon_predictions.jsonl` (what `sureon eval` writes) and `*_score.json`; `sureon report "
                "sureon|public` reads either file, or the table itself, for intervals, McNemar and the paper's tables."
            ),
            "",
            "Frames stored as files are read from the build by absolute path: export again after moving it.",
            "",
        ]
    )


def export_vlmevalkit(
    out: Path,
    *,
    dataset: str | None = None,
    public: str | None = None,
    benchmarks: list[str] | None = None,
    name: str = "Sureon",
    config: str = "bench",
    split: str = "test",
    overwrite: bool = False,
    max_frames: int | None = None,
) -> dict:
    from builders.outputs import staged_output

    if dataset is None and public is None:
        raise InputError("nothing to export: give --dataset (a Sureon build), --public (a public build) or both")
    if benchmarks and public is None:
        raise InputError("--benchmark names configs of a public build: give --public too")
    if not name.replace("_", "").replace("-", "").isalnum():
        raise InputError(f"--name {name!r}: letters, digits, - and _ only (it names files and VLMEvalKit datasets)")
    from builders.hub import check_build_path
    from recipes.evaluation.public.evaluate import check_benchmarks

    if dataset is not None:
        check_build_path(dataset, "--dataset")
    if public is not None:
        check_build_path(public, "--public")
        names = benchmarks or public_benchmarks(Path(public).expanduser().resolve())
        check_benchmarks(Path(public), names, option="--public")
    out = Path(out)
    with staged_output(out, overwrite) as staging:
        entries = export_sureon(dataset, staging, name, config, split, max_frames) if dataset is not None else {}
        if public is not None:
            entries |= export_public(public, staging, name, benchmarks)
        # project_root: the checkout the launcher imports where the project is not installed
        manifest = {"command": COMMAND, "vlmevalkit": "ms-vlmeval 0.0.20", "project_root": str(PROJECT_ROOT)}
        manifest["datasets"] = entries
        write_json(staging / MANIFEST, manifest)
        shutil.copyfile(vlmevalkit_dataset.__file__, staging / LAUNCHER)
        (staging / "README.md").write_text(readme(manifest), encoding="utf-8")
    return manifest


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--dataset", help="a local Sureon build with frames (`sureon build sureon --videos`)")
    parser.add_argument("--config", default="bench", help="the Sureon build's config")
    parser.add_argument("--split", default="test", help="the Sureon build's split")
    parser.add_argument("--public", help="a local public build (`sureon build public`): its bench-* configs")
    parser.add_argument(
        "--benchmark", dest="benchmarks", nargs="+", metavar="NAME", help="bench-* configs (default: all of them)"
    )
    parser.add_argument(
        "--max-frames",
        type=positive_int,
        help="frames shown per Sureon clip, chosen as training and `sureon eval sureon --max-frames` choose them "
        "(default: every frame the build stored, the benchmark's protocol)",
    )
    parser.add_argument("--name", default="Sureon", help="dataset name prefix (default Sureon)")
    parser.add_argument("--out", required=True, type=Path, help="the export folder (TSVs, frames, launcher)")
    parser.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
    return parser


def run(args: argparse.Namespace) -> int:
    manifest = export_vlmevalkit(
        args.out,
        dataset=args.dataset,
        public=args.public,
        benchmarks=args.benchmarks,
        name=args.name,
        config=args.config,
        split=args.split,
        overwrite=args.overwrite,
        max_frames=args.max_frames,
    )
    for dataset_name, entry in manifest["datasets"].items():
        print(f"{dataset_name}: {entry['rows']} rows ({', '.join(entry['modes'])})")
    print(f"Wrote {args.out}; run: python {args.out / LAUNCHER} --data DATASET --model MODEL")
    return 0
