"""The VLMEvalKit side of ``sureon export vlmevalkit``: the dataset class and its launcher, copied as it is into each
export folder as ``run_vlmevalkit.py`` and run there, in VLMEvalKit's own environment.

    python EXPORT/run_vlmevalkit.py --data Sureon --model MODEL          (any argument of VLMEvalKit's run.py)
    python EXPORT/run_vlmevalkit.py --config config.json --work-dir results/vlmeval
    torchrun --nproc-per-node 8 EXPORT/run_vlmevalkit.py --config config.json

:func:`main` adds :func:`register`'s class to ``vlmeval.dataset`` (its ``DATASET_CLASSES``, which ``build_dataset``
and ``--config``'s ``"class"`` look up) and then runs VLMEvalKit's own ``vlmeval.run.main`` with every argument it
was given; nothing of VLMEvalKit is copied or changed. The class shows each row as the project's formatter renders it
over the export's frames (:func:`vlmevalkit_message`) and its ``evaluate`` scores VLMEvalKit's prediction table with
the project's parser and metrics (:func:`score_predictions`).

VLMEvalKit's environment is not the project's (``tests/vlmevalkit_venv.sh``: VLMEvalKit, and the packages the
project's scoring needs, but not the project): when the project is not installed there, :func:`main` first puts the
checkout the folder was exported from (``manifest.json``'s ``project_root``) on ``sys.path``. So the top of this file
imports the standard library alone, and each function imports the project code it calls (VLMEvalKit's own modules
only where it registers).
"""

import importlib.util
import json
import sys
from pathlib import Path


MANIFEST = "manifest.json"
CLASS_NAME = "SureonDataset"
SUREON, PUBLIC = "sureon", "public"  # a dataset's kind: the Sureon benchmark or a public one


def frames_root(export: Path, entry: dict) -> Path:
    """A dataset's frame folder: absolute (the build's) or relative to the export folder."""
    root = Path(entry["frames_root"])
    return root if root.is_absolute() else export / root


def frame_paths(row: dict, root: Path) -> list[str]:
    """A TSV row's frames as absolute paths (none for a blind row)."""
    return [str(root / name) for name in json.loads(row["image_path"] or "[]")]


def vlmevalkit_message(row: dict, root: Path) -> list[dict]:
    """A TSV row's prompt in VLMEvalKit's message format (``[{"type": "text"|"image", "value": ...}]``, in order):
    :func:`builders.prompt.format_messages` of the build's record with the row's frames, blind for a blind row."""
    from builders.prompt import format_messages
    from recipes.evaluation.prediction_tables import MODE_COLUMN, RECORD_COLUMN

    record = json.loads(row[RECORD_COLUMN]) | {"frames": frame_paths(row, root)}
    blind = row[MODE_COLUMN] == "blind"
    (message,) = format_messages(record, blind=blind, frames_as="images")
    return [
        {"type": "image", "value": part["image"]}
        if part["type"] == "image"
        else {"type": "text", "value": part["text"]}
        for part in message["content"]
    ]


# --- scoring (the dataset class's evaluate) --------------------------------------------------------------------------


def _table_model(path: Path, dataset: str) -> str:
    from recipes.evaluation.prediction_tables import table_model_name

    name = table_model_name(path)
    if name is None:
        stem = path.stem
        name = stem[: -len(dataset) - 1] if stem.endswith(f"_{dataset}") else stem
    return name


def score_predictions(eval_file: str | Path, dataset: str, entry: dict) -> dict:
    """Score VLMEvalKit's prediction table of one exported dataset with the project's parser and metrics; write the
    prediction records (``*_sureon_predictions.jsonl``) and the returned metrics (``*_score.json``) beside it."""
    from builders.errors import InputError
    from builders.outputs import write_atomic
    from recipes.evaluation.prediction_tables import public_records, read_table, sureon_records

    path = Path(eval_file)
    model = _table_model(path, dataset)
    rows = read_table(path)
    if len(rows) != entry["rows"]:
        raise InputError(
            f"{path}: {len(rows)} predictions for the {entry['rows']} rows of {dataset}; the scores need every row "
            "(rerun VLMEvalKit without --limit)"
        )
    if entry["kind"] == SUREON:
        records = [record for _, record in sureon_records(path, model, rows)]
        metrics = sureon_metrics(records, entry)
    else:
        records = [record for _, record in public_records(path, model, rows)]
        metrics = public_metrics(records, str(path))
    lines = "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records)
    write_atomic(path.with_name(f"{path.stem}_sureon_predictions.jsonl"), lines)
    write_atomic(path.with_name(f"{path.stem}_score.json"), json.dumps(metrics, indent=2) + "\n")
    return metrics


def sureon_metrics(records: list[dict], entry: dict) -> dict:
    """μ per condition, accuracy per category and (both conditions) MG, as ``sureon eval sureon`` summarises them."""
    from builders.errors import InputError
    from recipes.evaluation.sureon.evaluate import PREDICTION_FIELDS, summarize
    from recipes.export.sureon_benchmark import metric_names, metric_value

    modes = tuple(entry["modes"])
    seen = {(r["question_id"], r["mode"]) for r in records}
    if len(seen) != len(records) or {r["mode"] for r in records} != set(modes):
        raise InputError(f"the predictions do not hold each question once per condition {', '.join(modes)}")
    for record in records:
        missing = [name for name in PREDICTION_FIELDS if name not in record]
        if missing:
            raise InputError(f"{record['question_id']}: prediction record without {', '.join(missing)}")
    summary = summarize(records, list(modes))
    return {name: metric_value(summary, name) for name in metric_names(modes, entry["categories"])}


def public_metrics(records: list[dict], where: str) -> dict:
    """The benchmark's Table 5 metrics (video-averaged F1 and the challenge convention, CVS accuracy, or mAP50)."""
    from recipes.evaluation.public.report import CVS, LOCALISATION, score_group, validate

    validated = [validate(record, f"{where}:{record['question_id']}") for record in records]
    task = validated[0]["task"]
    scores = score_group(task, validated)
    if task == LOCALISATION:
        return {key: scores[key] for key in ("map50", "images", "predicted_boxes", "misses")}
    if task == CVS:
        return scores["per_criterion"] | {"mean": scores["macro"], "misses": scores["misses"]}
    flat = {key: scores[key] for key in ("f1", "accuracy", "precision", "recall", "videos", "frames", "misses")}
    return flat | {f"challenge_{key}": scores["challenge"][key] for key in ("precision", "recall", "jaccard")}


# --- registration and launch -----------------------------------------------------------------------------------------


def register(folder: str | Path) -> type:
    """Add the export's dataset class to ``vlmeval.dataset``: found by ``build_dataset`` (``--data NAME``) and by a
    ``--config`` entry ``{"class": "SureonDataset", "dataset": NAME}``. Idempotent."""
    import pandas as pd
    import vlmeval.dataset as registry
    from vlmeval.dataset.image_base import ImageBaseDataset

    from builders.errors import InputError
    from recipes.evaluation.prediction_tables import read_table

    folder = Path(folder).resolve()
    manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    entries = manifest["datasets"]

    class SureonDataset(ImageBaseDataset):
        """The datasets of one ``sureon export vlmevalkit`` folder; prompts and scores are the project's."""

        TYPE = "VQA"  # free-form outputs, parsed by our own code (no VLMEvalKit MCQ matching or judge)
        MODALITY = "IMAGE"
        force_use_dataset_prompt = True  # VLMEvalKit's inference then never asks a model for its own prompt

        def __init__(self, dataset: str = next(iter(entries)), **kwargs):
            if dataset not in entries:
                raise InputError(f"{dataset}: not a dataset of {folder} ({', '.join(entries)})")
            self.dataset_name = dataset
            self.entry = entries[dataset]
            self.frames_root = frames_root(folder, self.entry)
            self.img_root = str(self.frames_root)
            self.data_path = str(folder / self.entry["tsv"])
            data = pd.DataFrame(read_table(self.data_path), dtype=object)
            data["index"] = [int(index) for index in data["index"]]
            self.data = data
            self.skip_noimg = False
            self.meta_only = True
            self.post_build(dataset)

        @classmethod
        def supported_datasets(cls):
            return list(entries)

        def dump_image(self, line):
            return frame_paths(dict(line), self.frames_root)

        def build_prompt(self, line):
            if isinstance(line, int):
                line = self.data.iloc[line]
            return vlmevalkit_message(dict(line), self.frames_root)

        def evaluate(self, eval_file, **judge_kwargs):
            return score_predictions(eval_file, self.dataset_name, self.entry)

        @classmethod
        def report_primary_metric(cls, metrics):
            """The first metric (μ of the first condition, a public benchmark's headline score) in VLMEvalKit's
            run summary, rather than its name-based guess."""
            first = next(iter(metrics or {}), None)
            return {first: metrics[first]} if first is not None and metrics[first] is not None else {}

    for old in [c for c in registry.DATASET_CLASSES if c.__name__ == CLASS_NAME]:
        registry.DATASET_CLASSES.remove(old)
    registry.DATASET_CLASSES.append(SureonDataset)
    registry.SUPPORTED_DATASETS.extend(name for name in entries if name not in registry.SUPPORTED_DATASETS)
    setattr(registry, CLASS_NAME, SureonDataset)
    return SureonDataset


def main() -> None:
    """The export's launcher: the project on ``sys.path`` when it is not installed here, this folder's datasets
    registered, then VLMEvalKit's ``run.py`` with this command's arguments."""
    folder = Path(__file__).resolve().parent
    if importlib.util.find_spec("recipes") is None:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        sys.path.insert(0, manifest["project_root"])
    register(folder)
    from vlmeval.run import load_env
    from vlmeval.run import main as run_vlmevalkit

    load_env()
    run_vlmevalkit()


if __name__ == "__main__":
    main()
