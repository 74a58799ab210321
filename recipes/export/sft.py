"""``sureon export sft``: our training rows as files for other fine-tuning frameworks, frames by path.

    sureon export sft --format swift --dataset build/sureon --config db --out build/exports/sureon_db.jsonl
    sureon export sft --format llava --dataset build/public --config clip --out build/exports/public_clip.json

Every row is rendered by the project's one prompt formatter (:func:`builders.prompt.format_messages`, frames as
tagged images) and its answer by :func:`builders.prompt.answer_target`, so the text is exactly the text our own
training sees: the clip's time range, ``Frame at HH:MM:SS.ss:`` before each frame, the question, the lettered
options and the instruction. Each image part becomes the framework's ``<image>`` placeholder, in order:

- ``swift`` (ms-swift's standard keys; JSON Lines): ``{"messages": [{"role": "user", "content": "...<image>..."},
  {"role": "assistant", "content": "B"}], "images": [paths], "id": ...}``. Our mixture reader reads these rows back
  (``format: messages``; ``<image>`` in string content is filled from ``images``).
- ``llava`` (LLaVA and Qwen's qwen-vl-finetune; one JSON list): ``{"id": ..., "image": [paths], "conversations":
  [{"from": "human", "value": "...<image>..."}, {"from": "gpt", "value": "B"}]}``.

Frames (:class:`recipes.export.frames.FrameStore`, as every export places them): a Sureon build's embedded JPEG bytes
are written once each under ``<out stem>_frames/``, named by their content hash (the same frame in several questions
is one file), and referenced by absolute path. Frames a build holds as files (a public corpus build's ``media/``, a
``files``-layout config) are referenced where they are (absolute paths).
Frames are not passed as a ``videos`` entry: the per-frame timestamps are then no longer in the text, and ms-swift's
handling of frame-list videos for Qwen3-VL timestamps is a known open issue (modelscope/ms-swift#6523).

Without ``--config`` a Sureon build exports ``db`` (Sureon-DB); a public-corpus build needs ``--config image`` or
``--config clip``. The benchmark (``bench``, the public ``bench-*``), the validation pools and any split other than
``train`` are evaluation data: exporting them as training rows is refused unless ``--allow-evaluation-data`` says so.

``OUT.manifest.json`` reconciles the counts (rows read = written; nothing is skipped: a row that cannot be written
is an error naming it). The output is written atomically; two exports of the same build are byte-identical. An
existing OUT (or its manifest) is replaced only with ``--overwrite``, and only if it is an export sureon wrote there,
unchanged since (:func:`builders.outputs.write_owned_file`): a file of yours of that name is never replaced.
"""

import argparse
import json
from pathlib import Path

from builders.arguments import positive_int
from builders.errors import InputError
from builders.hub import check_build_path, media_root
from builders.outputs import check_file_replaceable, check_output_location, write_owned_file
from builders.prompt import answer_target, format_messages
from recipes.export.frames import FrameStore, undecoded


COMMAND = "sureon export sft"
MANIFEST_KIND = f"{COMMAND} manifest"  # the kinds of file --out and OUT.manifest.json are (builders.outputs)
FORMATS = ("swift", "llava")
IMAGE_TOKEN = "<image>"


def render(record: dict, where: str, max_frames: int | None = None) -> tuple[str, list, str]:
    """``(user text with <image> placeholders, frames in order, assistant target)`` of one video-QA record, at most
    ``max_frames`` frames of each clip (the ones ``recipes/sft.py`` keeps under the same ``max_frames``)."""
    (message,) = format_messages(record, frames_as="images", max_frames=max_frames)
    text, frames = [], []
    for part in message["content"]:
        if part["type"] == "image":
            text.append(IMAGE_TOKEN)
            frames.append(part["image"])
        elif IMAGE_TOKEN in part["text"]:
            raise InputError(f"{where}: the text holds a literal {IMAGE_TOKEN!r}, which would shift the images")
        else:
            text.append(part["text"])
    return "".join(text), frames, answer_target(record)


def swift_row(key: str, text: str, images: list[str], target: str) -> dict:
    messages = [{"role": "user", "content": text}, {"role": "assistant", "content": target}]
    return {"id": key, "messages": messages, "images": images}


def llava_row(key: str, text: str, images: list[str], target: str) -> dict:
    conversations = [{"from": "human", "value": text}, {"from": "gpt", "value": target}]
    return {"id": key, "image": images, "conversations": conversations}


ROW_WRITERS = {"swift": swift_row, "llava": llava_row}


def load_rows(dataset: str, config: str | None, split: str):
    """The split with frames undecoded (JPEG bytes or paths), so they are written as stored, never re-encoded, and
    the folder relative frame paths resolve against (:func:`builders.hub.media_root`: a local build, or a Hub build's
    media/)."""
    from builders.build_loading import load_build

    rows = load_build(dataset, config, split)
    return undecoded(rows), media_root(dataset, rows)


def training_config(dataset: str, config: str | None, split: str, allow_evaluation_data: bool = False) -> str:
    """The config to export: ``config``, else ``db`` for a Sureon build; evaluation data is refused unless allowed
    (the benchmark scored as training rows would inflate every score measured on it)."""
    from builders.sureon.configs import is_evaluation_data

    if config is None:
        from builders.build_loading import build_configs

        names = build_configs(dataset)
        if "db" not in names:
            raise InputError(
                f"{dataset} has no db config (configs: {', '.join(names)}): give --config, e.g. --config image or "
                "--config clip for a public-corpus build"
            )
        config = "db"
    if is_evaluation_data(config, split) and not allow_evaluation_data:
        raise InputError(
            f"{dataset} ({config}/{split}) is evaluation data (the benchmark or a validation pool): export a training "
            "config (db or train_all; image or clip of a public build) with --split train, or pass "
            "--allow-evaluation-data to export it anyway"
        )
    return config


def export_sft(
    dataset: str,
    out: Path,
    *,
    fmt: str,
    config: str | None = None,
    split: str = "train",
    overwrite: bool = False,
    allow_evaluation_data: bool = False,
    max_frames: int | None = None,
) -> dict:
    """Write ``out`` (and its frames and manifest); returns the manifest."""
    from tqdm.auto import tqdm

    if fmt not in FORMATS:
        raise InputError(f"--format must be one of {FORMATS}, got {fmt!r}")
    out = Path(out).resolve()
    manifest_path, frames_folder = out.with_name(f"{out.name}.manifest.json"), out.with_name(f"{out.stem}_frames")
    check_file_replaceable(out, kind=COMMAND, overwrite=overwrite)
    check_file_replaceable(manifest_path, kind=MANIFEST_KIND, overwrite=overwrite, option="--out's manifest")
    for option, written in (("--out's manifest", manifest_path), ("--out's frames folder", frames_folder)):
        check_output_location(written, {"--dataset": dataset}, option)
    check_build_path(dataset)
    config = training_config(dataset, config, split, allow_evaluation_data)
    rows, media_root = load_rows(dataset, config, split)
    if "question" not in rows.column_names:
        raise InputError(f"{dataset} ({config}/{split}) is not a video-QA build: columns {rows.column_names}")
    store = FrameStore(media_root, frames_folder)
    write_row = ROW_WRITERS[fmt]
    exported, with_frames = [], 0
    for number, record in enumerate(tqdm(rows, desc=f"export {fmt}", unit="row")):
        key = str(record.get("question_id") or record.get("qa_id") or number)
        where = f"{dataset} ({config}/{split}) row {number} ({key})"
        text, frames, target = render(record, where, max_frames)
        images = store.paths(frames, where)
        with_frames += bool(images)
        exported.append(write_row(key, text, images, target))
    if len(exported) != len(rows):
        raise AssertionError(f"{len(rows)} rows read but {len(exported)} written")
    if fmt == "swift":
        body = "".join(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n" for row in exported)
    else:
        body = json.dumps(exported, ensure_ascii=False, indent=1, sort_keys=True) + "\n"
    manifest = {
        "command": COMMAND,
        "format": fmt,
        "dataset": str(dataset),
        "config": config,
        "split": split,
        "rows_read": len(rows),
        "rows_written": len(exported),
        "rows_skipped": 0,
        "rows_with_frames": with_frames,
        "max_frames": max_frames,
        "frames_folder": str(store.folder),
        "frame_files": len(store.written),
    }
    write_owned_file(out, body, kind=COMMAND, overwrite=overwrite)
    write_owned_file(manifest_path, json.dumps(manifest, indent=2), kind=MANIFEST_KIND, overwrite=overwrite)
    return manifest


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--format", required=True, choices=FORMATS, help="swift (JSONL) or llava (JSON list)")
    parser.add_argument("--dataset", required=True, help="a Sureon or public-corpus build folder (or a Hub id)")
    parser.add_argument(
        "--config", help="default db for a Sureon build (or train_all); image or clip for a public-corpus build"
    )
    parser.add_argument("--split", default="train")
    parser.add_argument(
        "--allow-evaluation-data",
        action="store_true",
        help="export a benchmark or validation config (or a non-train split) anyway; never train on it by mistake",
    )
    parser.add_argument("--out", required=True, type=Path, help="the training file (frames go to <stem>_frames/)")
    parser.add_argument(
        "--max-frames",
        type=positive_int,
        help="at most this many frames per clip, evenly spaced (those recipes/sft.py keeps under the same max_frames)",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
    return parser


def run(args: argparse.Namespace) -> int:
    manifest = export_sft(
        args.dataset,
        args.out,
        fmt=args.format,
        config=args.config,
        split=args.split,
        overwrite=args.overwrite,
        allow_evaluation_data=args.allow_evaluation_data,
        max_frames=args.max_frames,
    )
    print(
        f"{manifest['rows_read']} rows read = {manifest['rows_written']} written + {manifest['rows_skipped']} "
        f"skipped ({manifest['rows_with_frames']} with frames; {manifest['frame_files']} frame files in "
        f"{manifest['frames_folder']}); wrote {args.out}"
    )
    return 0
