"""Report of the public perception benchmarks (the Sureon paper, Appendix D.3, Table 5) from JSONL prediction files.

    sureon report public results/sureon-vlm/public/predictions.jsonl \
        "GPT-5.1=results/gpt51/public/predictions.jsonl" --out results/table5 \
        --exclude-videos cholec80:clip=cholec80_overlap.txt

One JSON object per line, one line per query (the public-benchmark runner writes them; so can any other tool)::

    {"model": "Sureon-VLM",              # optional when the file is named on the command line (NAME=PATH)
     "benchmark": "cholec80",            # dataset name, compared lowercase
     "task": "phase",                    # phase | step | action | cvs | tool_localization
     "input_mode": "frame",              # frame | clip (clip: 8 frames at stride 4 ending on the keyframe)
     "video_id": "video41",
     "frame_index": 1200,                # the keyframe, in the source video's frame numbering
     "prediction": "CalotTriangleDissection",   # the parsed label (phase/step/action) or yes/no (cvs); null if
                                                # the output could not be parsed (counted wrong)
     "reference": "CalotTriangleDissection",    # the ground truth (phase/step/action label, cvs yes/no)
     "labels": ["calot triangle dissection", ...],  # phase/step/action, optional: the benchmark's closed label set
                                                # (the same list on every record of a benchmark; without it the
                                                # classes are the labels the references use, and the report says so)
     "criterion": "C1",                  # cvs only: C1, C2 or C3
     "boxes": [{"label": "grasper", "bbox": [x1, y1, x2, y2]}],       # tool_localization: predicted, pixels;
                                                                       # null if unparseable
     "reference_boxes": [{"label": "Grasper", "bbox": [x1, y1, x2, y2]}],  # tool_localization: ground truth
     "raw_output": "..."}                # optional, kept by the runner for inspection

``sureon eval public`` writes this format from the ``bench-*`` configs of a public build. VLMEvalKit's prediction
tables (``.xlsx`` / ``.tsv``) of the benchmarks ``sureon export vlmevalkit`` writes are read as well, each output
parsed as ``sureon eval public`` parses it (``recipes/evaluation/prediction_tables.py``). The report prints the Sureon
paper's Table 5 first: (a) video-averaged macro-F1 on Cholec80 phase, HeiChole phase and HeiChole action per model and
input mode ("Model (clip)" rows), (b) Cholec80's accuracy, precision and recall, and beside it, labelled, precision,
recall and Jaccard in the Cholec80 / M2CAI challenge script's convention (the script many published Cholec80 tables
use; ``metrics.py`` says how the two differ), (c) Endoscapes-CVS per criterion, and mAP50 per localisation benchmark,
with the paper's printed rows beside ours (``--paper``, default ``paper_results/sureon_paper_table5.json``; our copy of
the paper prints only (a)).

The report groups records by (model, benchmark, task, input mode): recognition tasks get video-averaged macro-F1,
accuracy, precision and recall, and the challenge convention's precision, recall and Jaccard; ``cvs``
per-criterion accuracy and their mean; ``tool_localization`` mAP50. Videos
listed with ``--exclude-videos BENCHMARK[:MODE]=FILE`` are left out of that benchmark (and mode) and counted in the
report. The Sureon paper leaves 17 Cholec80 videos that overlap Endoscapes and CholecT50 out of Cholec80 clip
evaluation without naming them: supply your list (one video id per line).
"""

import argparse
import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from builders.arguments import key_value
from builders.errors import InputError
from recipes.evaluation.prediction_tables import is_prediction_table, records_of
from recipes.evaluation.public.metrics import cvs_accuracy, map50, parse_yes_no, read_video_list, video_averaged_scores
from recipes.evaluation.reporting import (
    contamination_section,
    frames_labels,
    load_run_settings,
    markdown_table,
    marked,
    named_path,
    pct,
    runs_table,
    write_report,
)
from recipes.evaluation.sureon.metrics import PredictionError, read_jsonl


PAPER_TABLE5 = Path(__file__).parents[1] / "paper_results" / "sureon_paper_table5.json"
# Table 5 (a)'s columns: (benchmark, task) and the input modes it has
TABLE5_COLUMNS = {
    "cholec80_phase": ("cholec80", "phase"),
    "heichole_phase": ("heichole", "phase"),
    "heichole_action": ("heichole", "action"),
}
RECOGNITION = ("phase", "step", "action")
CVS = "cvs"
LOCALISATION = "tool_localization"
TASKS = (*RECOGNITION, CVS, LOCALISATION)
INPUT_MODES = ("frame", "clip")
CHALLENGE_METRICS = ("precision", "recall", "jaccard")
SEED_NOTE = (
    "The Sureon paper's convention (Table 5): within a video the classes are its references and in-set predictions, "
    "so a phase predicted but absent from the video's ground truth counts 0. Label set: `benchmark` is the closed set "
    "the records carry, `references` the labels their references use (records without `labels`)."
)
CHALLENGE_NOTE = (
    "Cholec80 / M2CAI challenge convention (strict boundaries): per phase per video over the phases of the video's "
    "ground truth, mean over videos per phase, mean over phases, as the script many published Cholec80 tables use"
)
_REQUIRED = ("benchmark", "task", "input_mode", "video_id", "frame_index")


@dataclass
class Group:
    """The records of one (model, benchmark, task, input mode)."""

    rows: list[dict] = field(default_factory=list)
    excluded_rows: int = 0
    excluded_videos: set[str] = field(default_factory=set)


def _boxes(value, where: str, name: str) -> list[tuple[str, list[float]]]:
    if not isinstance(value, list):
        raise PredictionError(f"{where}: {name} must be a list of {{label, bbox}} objects, got {value!r}")
    boxes = []
    for box in value:
        bbox = box.get("bbox") if isinstance(box, dict) else None
        if (
            not isinstance(bbox, list)
            or len(bbox) != 4
            or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in bbox)
            or not isinstance(box.get("label"), str)
        ):
            raise PredictionError(f"{where}: {name} entry {box!r} needs a label and bbox [x_min, y_min, x_max, y_max]")
        boxes.append((box["label"], bbox))
    return boxes


def validate(row: dict, where: str) -> dict:
    """A record checked for its task's fields; returns the fields the metrics read."""
    if not isinstance(row, dict):
        raise PredictionError(f"{where}: a prediction must be a JSON object")
    missing = [name for name in _REQUIRED if name not in row]
    if missing:
        raise PredictionError(f"{where}: missing field(s) {', '.join(missing)} (see sureon report public --help)")
    task, mode = row["task"], row["input_mode"]
    if task not in TASKS:
        raise PredictionError(f"{where}: task {task!r} is not one of {', '.join(TASKS)}")
    if mode not in INPUT_MODES:
        raise PredictionError(f"{where}: input_mode {mode!r} is neither 'frame' nor 'clip'")
    if isinstance(row["frame_index"], bool) or not isinstance(row["frame_index"], int):
        raise PredictionError(f"{where}: frame_index must be an integer, got {row['frame_index']!r}")
    record = {
        "benchmark": str(row["benchmark"]).lower(),
        "task": task,
        "input_mode": mode,
        "video_id": str(row["video_id"]),
        "frame_index": row["frame_index"],
    }
    if task == LOCALISATION:
        if "reference_boxes" not in row or "boxes" not in row:
            raise PredictionError(f"{where}: tool_localization needs reference_boxes and boxes (null if unparseable)")
        record["references"] = _boxes(row["reference_boxes"], where, "reference_boxes")
        record["predictions"] = None if row["boxes"] is None else _boxes(row["boxes"], where, "boxes")
        return record
    if "reference" not in row or "prediction" not in row:
        raise PredictionError(f"{where}: {task} needs reference and prediction (null if unparseable)")
    if task == CVS:
        reference = parse_yes_no(row["reference"])
        if reference is None:
            raise PredictionError(f"{where}: cvs reference {row['reference']!r} is not yes/no")
        if not row.get("criterion"):
            raise PredictionError(f"{where}: cvs needs a criterion (C1, C2 or C3)")
        record |= {"criterion": str(row["criterion"]).upper(), "reference": reference}
        record["prediction"] = parse_yes_no(row["prediction"])
        return record
    if row["reference"] is None:
        raise PredictionError(f"{where}: reference is null; a frame without ground truth cannot be scored")
    labels = row.get("labels")
    if labels is not None and (
        not isinstance(labels, list) or not labels or not all(isinstance(v, str) for v in labels)
    ):
        raise PredictionError(f"{where}: labels must be the benchmark's label set, a non-empty list of strings")
    prediction = row["prediction"]
    return record | {
        "reference": str(row["reference"]),
        "prediction": None if prediction is None else str(prediction),
        "labels": None if labels is None else tuple(sorted(labels)),
    }


def parse_exclusions(specs: list[str] | None) -> dict[tuple[str, str | None], set[str]]:
    """``["cholec80:clip=FILE", ...]`` -> ``{("cholec80", "clip"): {video ids}}``; no mode means every mode."""
    exclusions: dict[tuple[str, str | None], set[str]] = {}
    for spec in specs or []:
        target, path = key_value(spec, "--exclude-videos", "cholec80:clip=FILE")
        benchmark, _, mode = target.partition(":")
        if not benchmark or (mode and mode not in INPUT_MODES):
            raise InputError(f"--exclude-videos {spec!r}: write BENCHMARK=FILE or BENCHMARK:frame|clip=FILE")
        exclusions[(benchmark.lower(), mode or None)] = set(read_video_list(path))
    return exclusions


def load_groups(specs: list[str], exclusions: dict) -> dict[tuple[str, str, str, str], Group]:
    groups: dict[tuple[str, str, str, str], Group] = defaultdict(Group)
    seen: dict[tuple, str] = {}
    for spec in specs:
        name, path = named_path(spec)
        rows = records_of(path, name, "public") if is_prediction_table(path) else read_jsonl(path)
        read = 0
        for where, row in rows:
            read += 1
            record = validate(row, where)
            model = name or row.get("model")
            if not model:
                raise PredictionError(f"{where}: no model field; name the file on the command line (NAME={path})")
            key = (str(model), record["benchmark"], record["task"], record["input_mode"])
            identity = (*key, record["video_id"], record["frame_index"], record.get("criterion"))
            if identity in seen:
                raise PredictionError(f"{where}: the same query as {seen[identity]} (model, video, frame, task, mode)")
            seen[identity] = where
            group = groups[key]
            excluded = exclusions.get((record["benchmark"], record["input_mode"]), set()) | exclusions.get(
                (record["benchmark"], None), set()
            )
            if record["video_id"] in excluded:
                group.excluded_rows += 1
                group.excluded_videos.add(record["video_id"])
            else:
                group.rows.append(record)
        if not read:
            raise InputError(f"{path}: no predictions in the file")
    if not groups:
        raise InputError("no predictions in the given files")
    return dict(groups)


def score_group(task: str, rows: list[dict]) -> dict:
    """The metrics of one group's records; a recognition group is scored over the label set its records carry."""
    if task == LOCALISATION:
        images = sorted(rows, key=lambda r: (r["video_id"], r["frame_index"]))
        return map50(images)
    if task == CVS:
        return cvs_accuracy(
            [r["criterion"] for r in rows], [r["reference"] for r in rows], [r["prediction"] for r in rows]
        )
    label_sets = {r["labels"] for r in rows}
    if len(label_sets) > 1:
        raise PredictionError(
            f"{rows[0]['benchmark']} {task} ({rows[0]['input_mode']}): the records carry {len(label_sets)} different "
            "label sets (or some carry none); every record of a benchmark needs the same labels list"
        )
    try:
        return video_averaged_scores(
            [r["video_id"] for r in rows],
            [r["reference"] for r in rows],
            [r["prediction"] for r in rows],
            labels=label_sets.pop(),
        )
    except ValueError as error:
        raise PredictionError(f"{rows[0]['benchmark']} {task} ({rows[0]['input_mode']}): {error}") from None


def table5(results: list[dict], paper: dict | None) -> dict:
    """The Sureon paper's Table 5 from scored groups: (a) macro-F1 per model and input mode on its three columns, (b)
    the Cholec80 detail, (c) Endoscapes-CVS per criterion, and mAP50 per localisation benchmark; the paper's rows
    beside ours where our copy prints them (only (a))."""
    ordered = sorted(
        results, key=lambda r: (r["model"], r["benchmark"], r["task"], INPUT_MODES.index(r["input_mode"]))
    )
    scored = {(r["model"], r["benchmark"], r["task"], r["input_mode"]): r["metrics"] for r in ordered if r["metrics"]}
    flagged = {(r["model"], r["benchmark"], r["task"], r["input_mode"]) for r in results if r.get("contaminated")}
    runs = sorted(
        {(model, mode) for model, _, task, mode in scored if task in RECOGNITION or task == CVS},
        key=lambda run: (run[0], INPUT_MODES.index(run[1])),
    )
    part_a = []
    for model, mode in runs:
        cells = {
            column: (scored.get((model, benchmark, task, mode)) or {}).get("f1")
            for column, (benchmark, task) in TABLE5_COLUMNS.items()
        }
        if any(v is not None for v in cells.values()):
            contaminated = any((model, *column, mode) in flagged for column in TABLE5_COLUMNS.values())
            part_a.append({"model": model, "input_mode": mode, "from": "predictions", "contaminated": contaminated})
            part_a[-1] |= cells
    part_b = [
        {"model": model, "input_mode": mode, "from": "predictions"}
        | {"contaminated": (model, benchmark, task, mode) in flagged}
        | {k: m[k] for k in ("accuracy", "precision", "recall", "f1")}
        | {f"challenge_{k}": m["challenge"][k] for k in CHALLENGE_METRICS}
        for (model, benchmark, task, mode), m in scored.items()
        if benchmark == "cholec80" and task == "phase"
    ]
    part_c = [
        {"model": model, "input_mode": mode, "from": "predictions"}
        | {"contaminated": (model, benchmark, task, mode) in flagged}
        | {c: m["per_criterion"].get(c) for c in ("C1", "C2", "C3")}
        | {"mean": m["macro"]}
        for (model, benchmark, task, mode), m in scored.items()
        if benchmark == "endoscapes" and task == CVS
    ]
    localisation = [
        {"model": model, "benchmark": benchmark, "input_mode": mode, "map50": m["map50"], "images": m["images"]}
        | {"contaminated": (model, benchmark, task, mode) in flagged}
        for (model, benchmark, task, mode), m in scored.items()
        if task == LOCALISATION
    ]
    if paper:
        part_a = [{**row, "from": "paper"} for row in paper["rows"]] + part_a
    return {"a": part_a, "b": part_b, "c": part_c, "map50": localisation, "paper_note": (paper or {}).get("note")}


def _cell(value: float | None, origin: str) -> str:
    """Our numbers to one decimal; the paper's as printed (55.33 stays 55.33)."""
    return pct(value) if origin != "paper" or value is None else str(value)


def _run_name(row: dict, frames: dict[str, str]) -> str:
    """A Table 5 row's method: the model, its input mode, how its clips were shown where the runs differ in it
    (``frames``: :func:`recipes.evaluation.reporting.frames_labels`), and the mark of a model trained on the rows
    scored."""
    name = row["model"] + (" (clip)" if row["input_mode"] == "clip" else "")
    return marked(name, bool(row.get("contaminated")), frames.get(row["model"]))


def render_table5(tables: dict, runs: dict[str, dict]) -> list[str]:
    """Table 5's parts; ``runs``: the report's run settings, which say how each run's clips were shown."""
    frames = frames_labels(runs)
    parts = ["## Table 5 (the Sureon paper, Section 4)"]
    if tables["a"]:
        rows = [
            [_run_name(r, frames), r["from"]] + [_cell(r.get(column), r["from"]) for column in TABLE5_COLUMNS]
            for r in tables["a"]
        ]
        header = ["Method", "numbers from", "Cholec80", "HeiChole Phase", "HeiChole Action"]
        parts += ["(a) Macro-F1 (%), video-averaged", markdown_table(header, rows)]
    if tables["b"]:
        rows = [
            [_run_name(r, frames)] + [pct(r[k]) for k in ("accuracy", "precision", "recall", "f1")]
            for r in tables["b"]
        ]
        header = ["Method", "Accuracy", "Precision", "Recall", "Macro-F1"]
        parts += ["(b) Cholec80 phase, video-averaged (%)", markdown_table(header, rows)]
        rows = [
            [_run_name(r, frames), pct(r["accuracy"])] + [pct(r[f"challenge_{k}"]) for k in CHALLENGE_METRICS]
            for r in tables["b"]
        ]
        header = ["Method", "Accuracy", "Precision (challenge)", "Recall (challenge)", "Jaccard (challenge)"]
        parts += [f"(b) Cholec80 phase, {CHALLENGE_NOTE} (%)", markdown_table(header, rows)]
    if tables["c"]:
        rows = [[_run_name(r, frames)] + [pct(r[k]) for k in ("C1", "C2", "C3", "mean")] for r in tables["c"]]
        parts += [
            "(c) Endoscapes-CVS criterion accuracy (%)",
            markdown_table(["Method", "C1", "C2", "C3", "Mean"], rows),
        ]
    if tables["map50"]:
        rows = [[_run_name(r, frames), r["benchmark"], str(r["images"]), pct(r["map50"])] for r in tables["map50"]]
        parts += ["Tool localisation mAP50 (%)", markdown_table(["Method", "Benchmark", "images", "mAP50"], rows)]
    if tables["paper_note"]:
        parts.append(f"Paper numbers: {tables['paper_note']}")
    return parts


def build_report(
    groups: dict[tuple[str, str, str, str], Group],
    exclusions: dict,
    paper: dict | None = None,
    runs: dict[str, dict] | None = None,
) -> dict:
    results = []
    # the (model, benchmark, task, input mode) groups whose run found the model trained on their rows
    contaminated = {
        (name, str(found["benchmark"]).lower(), found["task"], found["input_mode"])
        for name, run in (runs or {}).items()
        for finding in run.get("contamination") or []
        for found in [finding.get("reported_as") or {}]
        if {"benchmark", "task", "input_mode"} <= set(found)
    }
    for (model, benchmark, task, mode), group in sorted(groups.items()):
        entry = {
            "model": model,
            "benchmark": benchmark,
            "task": task,
            "input_mode": mode,
            "records": len(group.rows) + group.excluded_rows,
            "excluded_records": group.excluded_rows,
            "excluded_videos": sorted(group.excluded_videos),
            "contaminated": (model, benchmark, task, mode) in contaminated,
        }
        entry["metrics"] = score_group(task, group.rows) if group.rows else None
        results.append(entry)
    return {
        "benchmark": "public",
        "exclusions": {f"{b}:{m}" if m else b: sorted(ids) for (b, m), ids in exclusions.items()},
        "results": results,
        "table5": table5(results, paper),
        "runs": {name: settings for name, settings in (runs or {}).items() if name in {r["model"] for r in results}},
    }


def render_markdown(data: dict) -> str:
    recognition, challenge, cvs, localisation, empty = [], [], [], [], []
    frames = frames_labels(data.get("runs") or {})
    for r in data["results"]:
        m = r["metrics"]
        label = marked(r["model"], r["contaminated"], frames.get(r["model"]))
        head = [label, r["benchmark"], r["task"], r["input_mode"]]
        if m is None:
            empty.append(head + [str(r["records"])])
        elif r["task"] in RECOGNITION:
            scores = [pct(m[k]) for k in ("f1", "accuracy", "precision", "recall")]
            label_set = f"{m['label_set']} ({m['classes']})"
            recognition.append(head + [str(m["videos"]), str(m["frames"])] + scores + [str(m["misses"]), label_set])
            agreed = m["challenge"]
            cells = [pct(m["accuracy"])] + [pct(agreed[k]) for k in CHALLENGE_METRICS]
            challenge.append(head + [str(m["videos"]), str(agreed["phases"])] + cells)
        elif r["task"] == CVS:
            per = m["per_criterion"]
            cells = [pct(per.get(c)) for c in ("C1", "C2", "C3")] + [pct(m["macro"])]
            cvs.append(head[:2] + head[3:] + [str(sum(m["n"].values()))] + cells + [str(m["misses"])])
        else:
            boxes = f"{m['predicted_boxes']} ({m['ignored_labels']} unknown labels)"
            localisation.append(head[:2] + head[3:] + [str(m["images"]), pct(m["map50"]), boxes, str(m["misses"])])
    parts = ["# Public perception benchmarks report"]
    if "table5" in data:
        parts += render_table5(data["table5"], data.get("runs") or {})
    if recognition:
        header = ["Model", "Benchmark", "Task", "Input", "videos", "frames", "Macro-F1", "Accuracy", "Precision"]
        header += ["Recall", "unparsed or out of set", "label set (classes)"]
        parts += [
            "## Recognition (video-averaged: per-video macro scores averaged over videos; %)",
            SEED_NOTE,
            markdown_table(header, recognition),
        ]
        header = ["Model", "Benchmark", "Task", "Input", "videos", "classes averaged", "Accuracy", "Precision"]
        header += ["Recall", "Jaccard"]
        parts += [f"## Recognition, {CHALLENGE_NOTE} (%)", markdown_table(header, challenge)]
        for r in data["results"]:  # the script prints its per-phase table; papers often do too
            if r["task"] == "phase" and r["metrics"]:
                per_phase = r["metrics"]["challenge"]["per_phase"]
                rows = [
                    [name, str(p["videos"])] + [pct(p[k]) for k in CHALLENGE_METRICS] for name, p in per_phase.items()
                ]
                parts += [f"Per phase (challenge convention), {r['model']} on {r['benchmark']} ({r['input_mode']}):"]
                parts += [markdown_table(["phase", "videos", "Precision", "Recall", "Jaccard"], rows)]
    if cvs:
        header = ["Model", "Benchmark", "Input", "answers", "C1", "C2", "C3", "Mean", "unparsed"]
        parts += ["## Critical view of safety (per-criterion accuracy, %)", markdown_table(header, cvs)]
    if localisation:
        header = ["Model", "Benchmark", "Input", "images", "mAP50", "predicted boxes", "unparsed"]
        parts += [
            "## Tool localisation (COCO AP at IoU 0.50, constant box score; %)",
            markdown_table(header, localisation),
        ]
        for r in data["results"]:
            if r["task"] == LOCALISATION and r["metrics"]:
                rows = [[name, pct(ap)] for name, ap in r["metrics"]["per_class"].items()]
                parts += [f"AP50 per class, {r['model']} on {r['benchmark']} ({r['input_mode']}):"]
                parts += [markdown_table(["class", "AP50"], rows)]
    excluded = [r for r in data["results"] if r["excluded_records"]]
    if data["exclusions"]:
        lines = [f"- {target}: {len(ids)} listed video(s)" for target, ids in data["exclusions"].items()]
        lines += [
            f"- {r['model']}, {r['benchmark']} {r['task']} ({r['input_mode']}): {r['excluded_records']} record(s) "
            f"from {len(r['excluded_videos'])} video(s) excluded"
            for r in excluded
        ]
        parts += ["## Excluded videos", "\n".join(lines)]
    parts += contamination_section(data.get("runs") or {})
    if data.get("runs"):
        parts += ["## Runs (from each run's summary.json)", runs_table(data["runs"])]
    if empty:
        parts += [
            "## Groups left with no records after exclusions",
            markdown_table(["Model", "Benchmark", "Task", "Input", "records"], empty),
        ]
    return "\n\n".join(parts) + "\n"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("predictions", nargs="+", metavar="PRED", help="public-benchmark JSONL, or NAME=PATH")
    parser.add_argument("--out", required=True, type=Path, help="report folder")
    parser.add_argument(
        "--exclude-videos",
        action="append",
        metavar="BENCHMARK[:MODE]=FILE",
        help="leave the listed videos out, e.g. cholec80:clip=overlap.txt (one video id per line)",
    )
    parser.add_argument(
        "--paper",
        type=Path,
        default=PAPER_TABLE5,
        help="the Sureon paper's Table 5 numbers (JSON) printed beside ours",
    )
    parser.add_argument("--no-paper", action="store_true", help="print our numbers only")
    parser.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return parser


def report_from_arguments(args: argparse.Namespace) -> Path:
    """The report folder the command's arguments ask for, written; its path."""
    exclusions = parse_exclusions(args.exclude_videos)
    paper = None if getattr(args, "no_paper", False) else json.loads(Path(args.paper).read_text(encoding="utf-8"))
    runs = load_run_settings(args.predictions)
    data = build_report(load_groups(args.predictions, exclusions), exclusions, paper, runs)
    return write_report(args.out, render_markdown(data), data, args.overwrite)


def run(args: argparse.Namespace) -> int:
    out = report_from_arguments(args)
    data = json.loads((out / "report.json").read_text(encoding="utf-8"))
    print("\n\n".join(render_table5(data["table5"], data.get("runs") or {})))
    print(f"Wrote {out / 'report.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(run(make_parser().parse_args()))
