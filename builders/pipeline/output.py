"""The pipeline's output folder: the release layout that ``sureon build sureon --release`` reads, plus a manifest.

``data/<split>-00000-of-00001.parquet`` holds the records (release columns first, then the pipeline's own columns,
which the Sureon builder carries through under their names); ``skipped.jsonl`` lists every sample not written, with
the reason; ``manifest.json`` the counts (in = written + skipped) and settings; ``usage.json`` the LLM accounting
(the only file that differs between a first run and a cached rerun). The folder is written atomically.
"""

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from builders.errors import InputError
from builders.options import LETTERS
from builders.outputs import staged_output
from builders.sureon.release import RELEASE_SCHEMA


# The release's columns (one schema, builders/sureon/release.py) plus where each clip lies in its source, which the
# release reader uses when present: a new video's clip ids need not be parsed back.
CLIP_FIELDS = [pa.field("source_id", pa.string()), pa.field("start", pa.float64()), pa.field("end", pa.float64())]
RELEASE_FIELDS = [*list(RELEASE_SCHEMA)[:2], *CLIP_FIELDS, *list(RELEASE_SCHEMA)[2:]]
SPLITS = ("train", "validation")


def lettered(options: list[str], answer: str) -> list[dict]:
    """Options as the release stores them: ``{letter, text, correct}`` structs."""
    return [{"letter": LETTERS[i], "text": text, "correct": text == answer} for i, text in enumerate(options)]


def read_stage_output(folder: Path) -> dict[str, list[dict]]:
    """Records per split of a pipeline output folder (or any release folder in the same layout)."""
    from builders.sureon.release import find_split_files

    if not Path(folder).is_dir():
        raise InputError(f"--input {folder}: no such folder; give a stage-1 output (`sureon pipeline stage1 --out`)")
    found = find_split_files(Path(folder))
    others = sorted(set(found) - set(SPLITS))
    if others:  # a benchmark is not refined: its rows would be read, paid for and not written
        raise InputError(
            f"--input {folder}: holds the split(s) {', '.join(others)} beside {' and '.join(SPLITS)}; the pipeline "
            f"refines a stage-1 output's {' and '.join(SPLITS)} splits only: give a folder without the others"
        )
    return {
        split: [row for path in files for row in pq.read_table(path).to_pylist()]
        for split, files in sorted(found.items())
    }


def stage1_view(release: Path, out: Path, overwrite: bool = False) -> Path:
    """A release's train and validation parquet files copied into ``out`` (the pipeline's input layout): what a
    release that also holds a benchmark (the official one, a synthetic world) offers stage 2 in place of a stage-1
    output. The release itself is left as it was."""
    import shutil

    from builders.outputs import staged_output
    from builders.sureon.release import find_split_files

    found = find_split_files(Path(release))
    if not any(found.get(split) for split in SPLITS):
        raise InputError(f"{release}: no {' or '.join(SPLITS)} split to refine")
    with staged_output(out, overwrite) as staging:
        for split in SPLITS:
            for path in found.get(split, []):
                target = staging / path.relative_to(release)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)
    return Path(out)


def write_stage_output(
    out: Path,
    records: dict[str, list[dict]],
    extra_fields: list[tuple[str, pa.DataType]],
    skipped: list[dict],
    manifest: dict,
    usage: dict,
    overwrite: bool = False,
) -> Path:
    """Write the folder atomically; records are sorted by ``question_id`` so the bytes never depend on timing."""
    schema = pa.schema(RELEASE_FIELDS + extra_fields)
    with staged_output(out, overwrite) as staging:
        (staging / "data").mkdir()
        for split in SPLITS:
            rows = sorted(records.get(split, []), key=lambda r: r["question_id"])
            table = pa.Table.from_pylist([{name: row.get(name) for name in schema.names} for row in rows], schema)
            pq.write_table(table, staging / "data" / f"{split}-00000-of-00001.parquet")
        with (staging / "skipped.jsonl").open("w") as handle:
            for entry in skipped:
                handle.write(json.dumps(entry, sort_keys=True, ensure_ascii=False) + "\n")
        (staging / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        (staging / "usage.json").write_text(json.dumps(usage, indent=1, sort_keys=True) + "\n")
    return Path(out)
