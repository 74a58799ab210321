"""Training data: a mixture of datasets given in the recipe YAML, turned into prompt + target examples.

A mixture is a list of sources, each ``load_dataset(path, name, split=...)`` of a local folder written by our
builders or a Hub id. Rows are never copied: the mixture is an index table (``source``, ``row``) that the trainer
shuffles, and the collator reads each row from its source when the batch is built, so frames stay in the memory-
mapped Arrow files until they are needed.

Three row formats are understood (``format: auto`` picks by columns):

- ``video_qa``: our video-QA schema (``builders.schema``), rendered by the project's one prompt formatter
  (``builders.prompt``); frames go in as one video carrying its timestamps, or as tagged images. The public corpus
  (``sureon build public``) uses the same path: its ``frames`` are paths relative to the dataset folder (each frame
  stored once), resolved against the local folder, or against the ``media/`` files of a Hub dataset fetched once
  (:func:`builders.hub.media_root`, the one resolution every reader of a build uses). So are the Sureon training
  configs' frames in the default ``--frames-layout files``.
- ``messages``: TRL's conversational format, the last message being the assistant target; ``{"type": "image"}``
  parts are filled from an ``images`` column in order. String content with ``<image>`` placeholders (ms-swift's
  format, as ``sureon export sft --format swift`` writes it) is read the same way, each placeholder in its place.
- ``prompt_completion``: TRL's prompt/completion format (strings or message lists), optional ``images``.

``weight`` scales a source: 0.25 keeps a seeded quarter of its rows, 3 repeats it three times, 2.5 twice plus a
seeded half. ``exclude_categories: [SM]`` drops those categories (guessers never see summaries). ``--fold k
--num-folds n`` keeps only rows whose video is outside fold ``k`` of the video-level, subject-stratified split
(``builders.sureon.folds``), for the cross-validated blind guessers.
"""

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from builders.build_loading import load_build
from builders.errors import InputError
from builders.hub import media_root
from builders.options import stable_seed
from builders.prompt import answer_target, format_messages
from builders.sureon.folds import assign_folds
from recipes.training.arguments import MixtureSource
from recipes.training.recipe_file import check_mixture


def parse_mixture(entries: Iterable[dict]) -> list[MixtureSource]:
    """Recipe YAML entries -> sources, checked as ``sureon plan`` checks them (``recipes.training.recipe_file``): an
    unknown key is an error naming it and the key likely meant (a typo must not be ignored), a value of the wrong
    type or out of range names the value and what it should be."""
    if entries is not None and not isinstance(entries, str | dict):
        entries = list(entries)
    problems: list[str] = []
    checked = check_mixture(entries, problems)
    if problems:
        raise InputError("; ".join(problems))
    sources = [MixtureSource(**entry) for entry in checked]
    if not sources:
        raise InputError("the dataset mixture is empty: give at least one source in dataset_mixture")
    return sources


def check_evaluation_data(sources: list[MixtureSource], allowed: bool) -> None:
    """Refuse a source that is evaluation data (the benchmark, a validation pool, a public ``bench-*``, any split but
    ``train``: :func:`builders.sureon.configs.is_evaluation_data`) unless the recipe says ``allow_evaluation_data:
    true``: a model trained on the test questions scores whatever it memorised, and nothing downstream would say so
    but the run's record."""
    from builders.sureon.configs import is_evaluation_data

    refused = [source.label for source in sources if is_evaluation_data(source.name, source.split)]
    if refused and not allowed:
        raise InputError(
            f"dataset_mixture: {', '.join(refused)} is evaluation data (the benchmark, a validation pool or a "
            "non-train split): training on it inflates every score measured on it; train on a training config "
            "(db or train_all; image or clip of a public build) with split train, or set allow_evaluation_data: true "
            "to train on it anyway (the run's record says so, and sureon eval warns when it scores those rows)"
        )


def check_frames(loaded: list["LoadedSource"], index) -> None:
    """Refuse clips without frames in a visual run: a build made with ``--on-missing-video annotation-only`` keeps the
    questions of a missing video without frames, and a visual recipe trained them as text while its card said
    "Frames per clip: 8" (evaluation refuses the same build). A clip is a row that names one (``clip_id``); a video-QA
    row that names none and has no frames is a text question, and trains as one. Counted from the Arrow columns: no
    frame is decoded."""
    import pyarrow.compute as pc

    problems = []
    for position, item in enumerate(loaded):
        columns = item.dataset.column_names
        if item.format != "video_qa" or "clip_id" not in columns:
            continue
        used = sorted({row for source, row in zip(index["source"], index["row"], strict=True) if source == position})
        clips = item.dataset.data.column("clip_id").to_pylist()
        if "frames" in columns:
            lengths = pc.list_value_length(item.dataset.data.column("frames")).to_pylist()
        else:
            lengths = [0] * len(clips)
        empty = [row for row in used if clips[row] and not lengths[row]]
        if empty:
            ids = item.dataset.select(empty[:3])["question_id"] if "question_id" in columns else []
            example = f" (e.g. {', '.join(map(str, ids))})" if ids else ""
            where = "" if "frames" in columns else ": it has no frames column"
            problems.append(f"{item.source.label}: {len(empty)} of {len(used)} rows have no frames{example}{where}")
    if problems:
        raise InputError(
            f"dataset_mixture: {'; '.join(problems)}: an annotation-only build, whose clips would train as text; "
            "rebuild it with --videos and --on-missing-video skip, or set blind: true for a text-only run"
        )


def detect_format(column_names: list[str], source: MixtureSource) -> str:
    if source.format != "auto":
        return source.format
    columns = set(column_names)
    if "messages" in columns:
        return "messages"
    if {"prompt", "completion"} <= columns:
        return "prompt_completion"
    if "question" in columns and ({"options", "answer"} & columns):
        return "video_qa"
    raise InputError(
        f"source {source.label}: cannot tell its format from columns {sorted(columns)}; "
        "set format: video_qa | messages | prompt_completion, or map columns with columns: {field: column}"
    )


@dataclass
class LoadedSource:
    source: MixtureSource
    dataset: Any
    format: str
    rows_available: int = 0
    rows_in_folds: int = 0
    rows_used: int = 0
    media_root: Path | None = None  # where relative frame paths (the public corpus's media/) resolve

    def summary(self) -> dict:
        return {
            **{k: v for k, v in asdict(self.source).items() if v not in (None, {}, [])},
            "format": self.format,
            "rows_available": self.rows_available,
            "rows_in_folds": self.rows_in_folds,
            "rows_used": self.rows_used,
        }


def load_source(source: MixtureSource):
    """A source through the one loader of builds (:func:`builders.build_loading.load_build`): a path, config or split
    that is not there is one line naming what the build has, before any weights load."""
    dataset = load_build(
        source.path,
        source.name,
        source.split,
        option="dataset_mixture source",
        revision=source.revision,
        data_files=source.data_files,
    )
    renames = {column: field_name for field_name, column in source.columns.items() if column != field_name}
    missing = [column for column in renames if column not in dataset.column_names]
    if missing:
        raise InputError(f"source {source.label}: mapped columns {missing} not found; it has {dataset.column_names}")
    if renames:
        dataset = dataset.rename_columns(renames)
    return LoadedSource(
        source,
        dataset,
        detect_format(dataset.column_names, source),
        media_root=media_root(source.path, dataset, source.revision),
    )


def weighted_rows(rows: list[int], weight: float, seed: int) -> list[int]:
    """Repeat ``rows`` ``floor(weight)`` times plus a seeded sample of the fractional part (order kept)."""
    whole, fraction = divmod(weight, 1)
    picked = rows * int(whole)
    extra = round(fraction * len(rows))
    if extra:
        rng = np.random.default_rng(seed)
        picked += sorted(rng.choice(rows, size=extra, replace=False).tolist())
    return picked


def fold_videos(loaded: list[LoadedSource]) -> dict[str, str]:
    """``{source_id: subject}`` over every video-QA source (folds are computed over the union of their videos)."""
    videos = {}
    for item in loaded:
        if item.format != "video_qa":
            continue
        if "source_id" not in item.dataset.column_names:
            raise InputError(f"source {item.source.label}: folds need a source_id column (the video of each row)")
        subjects = item.dataset["subject"] if "subject" in item.dataset.column_names else None
        for row, source_id in enumerate(item.dataset["source_id"]):
            videos.setdefault(source_id, (subjects[row] if subjects else None) or "unknown")
    return videos


def build_mixture(
    sources: list[MixtureSource], *, seed: int = 42, fold: int | None = None, num_folds: int = 4
) -> tuple[list[LoadedSource], Any, dict[str, int] | None]:
    """Load every source and build the (source, row) index table; returns it with the fold assignment used."""
    from datasets import Dataset

    loaded = [load_source(source) for source in sources]
    folds = None
    if fold is not None:
        if not 0 <= fold < num_folds:
            raise InputError(f"fold must be in 0..{num_folds - 1}, got {fold}")
        folds = assign_folds(fold_videos(loaded), num_folds=num_folds, seed=seed)
    source_column, row_column = [], []
    for position, item in enumerate(loaded):
        item.rows_available = len(item.dataset)
        rows = list(range(item.rows_available))
        if folds is not None and item.format == "video_qa":
            video_ids = item.dataset["source_id"]
            rows = [row for row in rows if folds[video_ids[row]] != fold]
        if item.source.exclude_categories:
            if "category" not in item.dataset.column_names:
                raise InputError(f"source {item.source.label}: exclude_categories needs a category column")
            categories, excluded = item.dataset["category"], set(item.source.exclude_categories)
            rows = [row for row in rows if categories[row] not in excluded]
        item.rows_in_folds = len(rows)
        rows = weighted_rows(rows, item.source.weight, stable_seed("mixture", item.source.label, str(seed)))
        if item.source.max_samples is not None:
            rows = rows[: item.source.max_samples]
        item.rows_used = len(rows)
        source_column += [position] * len(rows)
        row_column += rows
    if not row_column:
        raise InputError("the mixture selects no rows: check weights, max_samples and the fold")
    index = Dataset.from_dict({"source": source_column, "row": row_column})
    return loaded, index, folds


@dataclass
class Example:
    """One training example: the prompt messages (visuals inline) and the assistant target text."""

    prompt: list[dict]
    target: str
    key: str


IMAGE_PLACEHOLDER = "<image>"


def _placeholder_parts(content: str) -> list[dict]:
    """ms-swift / LLaVA string content -> content parts, each ``<image>`` an image placeholder in its place."""
    parts = []
    for position, piece in enumerate(content.split(IMAGE_PLACEHOLDER)):
        if position:
            parts.append({"type": "image", "image": None})
        if piece:
            parts.append({"type": "text", "text": piece})
    return parts


def _fill_images(messages: list[dict], images: list) -> list[dict]:
    images = list(images or [])
    filled = []
    for message in messages:
        content = message["content"]
        if isinstance(content, str) and IMAGE_PLACEHOLDER in content:
            content = _placeholder_parts(content)
        if isinstance(content, list):
            parts = []
            for part in content:
                if part.get("type") == "image" and part.get("image") is None:
                    if not images:
                        raise InputError("more image placeholders than images in the row")
                    part = {"type": "image", "image": images.pop(0)}
                parts.append(part)
            content = parts
        filled.append({**message, "content": content})
    if images:
        raise InputError(f"{len(images)} images in the row have no image placeholder in the messages")
    return filled


def _as_messages(value, role: str) -> list[dict]:
    return [{"role": role, "content": value}] if isinstance(value, str) else list(value)


def _drop_visuals(messages: list[dict]) -> list[dict]:
    stripped = []
    for message in messages:
        content = message["content"]
        if isinstance(content, list):
            content = [part for part in content if part.get("type") not in ("image", "video")]
        stripped.append({**message, "content": content})
    return stripped


def _text_of(messages: list[dict]) -> str:
    content = messages[-1]["content"]
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if part.get("type") == "text")


def to_example(row: dict, fmt: str, *, blind: bool, frames_as: str, system_prompt: str | None = None) -> Example:
    """A dataset row -> an ``Example``; ``blind`` removes all visual input and nothing else."""
    if fmt == "video_qa":
        key = str(row.get("question_id"))
        prompt = format_messages(row, blind=blind, frames_as=frames_as, system_prompt=system_prompt)
        return Example(prompt, answer_target(row), key)
    if fmt == "messages":
        messages = list(row["messages"])
        if not messages or messages[-1]["role"] != "assistant":
            raise InputError("a messages row must end with the assistant's answer")
        prompt = _fill_images(messages[:-1], row.get("images"))
        target = _text_of(messages[-1:])
    elif fmt == "prompt_completion":
        prompt = _fill_images(_as_messages(row["prompt"], "user"), row.get("images"))
        target = _text_of(_as_messages(row["completion"], "assistant"))
    else:
        raise InputError(f"unknown row format {fmt!r}")
    if blind:
        prompt = _drop_visuals(prompt)
    return Example(prompt, target, str(row.get("id", row.get("question_id", ""))))


def mixture_summary(loaded: list[LoadedSource]) -> list[dict]:
    return [item.summary() for item in loaded]


def total_rows(loaded: list[LoadedSource]) -> int:
    return sum(item.rows_used for item in loaded)
