"""Whether a model was trained on the rows it is scored on, read from the training record stored with its weights.

``recipes/sft.py`` and ``recipes/grpo.py`` write ``training_complete.json`` beside the weights (read through
:func:`recipes.model_io.run_record.read_run_record`); its ``mixture`` lists every source the run trained on (``path``,
``name`` = the config, ``split``). A model trained from another run, a later stage of a multi-stage run or GRPO from
an SFT run, names that run as its ``model``, whose record is read in turn (a local folder, or a Hub id when the record
says ``started_from_sft``). A source is the evaluated rows when:

- it is the same build, config and split: the same folder (both local, compared resolved; a relative path in a
  record is taken from the working directory, as the recipes take it when launched) or the same Hub id (both on the
  Hub); a local build and a Hub id are never taken for one another;
- or, both being local folders, its rows share question ids with the evaluated rows: a copy of the build elsewhere, a
  rebuild, another config or split holding the same questions. Only the id column of the source's parquet files is
  read; a Hub source is not downloaded for it, and a source folder that is not on this machine is not checked.

``sureon eval`` then prints a warning and writes the findings into ``summary.json`` (``contamination``; SurgiQ's
``report.json``), and ``sureon report sureon`` / ``report public`` mark the model's rows "trained on the evaluated
rows". Scores of such a model measure memory, not what the benchmark measures.
"""

import sys
from collections.abc import Iterable
from pathlib import Path

from builders.hub import looks_local


MAX_RECORDS = 16  # training records followed from the evaluated weights back to the first run (a cycle stops too)
EXAMPLES = 5  # shared question ids listed per finding


def training_sources(model: str, revision: str | None = None) -> list[dict]:
    """Every mixture source the weights were trained on, through the runs they were trained from: ``[{"trained_in":
    the run's folder or id, "stage": its stage name, "source": the mixture entry}]``; empty for a model no recipe
    trained."""
    sources: list[dict] = []
    seen: set[str] = set()
    current: str | None = str(model)
    while current and current not in seen and len(seen) < MAX_RECORDS:
        seen.add(current)
        record = _record(current, revision)
        if not isinstance(record, dict):
            break
        for entry in record.get("mixture") or []:
            if isinstance(entry, dict) and entry.get("path"):
                stage = record.get("stage") or record.get("name")
                sources.append({"trained_in": current, "stage": stage, "source": entry})
        parent = record.get("model")
        if not isinstance(parent, str) or not (Path(parent).expanduser().is_dir() or record.get("started_from_sft")):
            break
        current, revision = parent, None
    return sources


def _record(name: str, revision: str | None) -> dict | None:
    """:func:`recipes.model_io.run_record.read_run_record`, except for a name that is neither a folder here nor a Hub
    id, and for a Hub model whose record offline mode cannot read (never downloaded): the system prompt's lookup of the
    same file has already warned that it is unknown."""
    from recipes.model_io.run_record import COMPLETE_MARKER, read_run_record

    if not Path(name).expanduser().is_dir():
        from huggingface_hub import constants, try_to_load_from_cache
        from huggingface_hub.utils import HFValidationError, validate_repo_id

        try:
            validate_repo_id(name)
        except HFValidationError:
            return None  # neither a folder here nor a Hub id: no record to read
        cached = try_to_load_from_cache(name, COMPLETE_MARKER, revision=revision)
        if constants.is_offline_mode() and not isinstance(cached, str):
            return None
    return read_run_record(name, revision)


def _local(path: str) -> Path | None:
    """The resolved folder of a local build, None for a Hub id."""
    return Path(path).expanduser().resolve() if looks_local(path) else None


def _same_build(source: str, evaluated: str) -> bool:
    source_folder, evaluated_folder = _local(source), _local(evaluated)
    if source_folder is None and evaluated_folder is None:
        return source.lower() == evaluated.lower()  # Hub ids are case-insensitive
    return source_folder is not None and source_folder == evaluated_folder


def _shared_ids(folder: Path, config: str | None, split: str, column: str, evaluated: set[str]) -> set[str]:
    """The ``evaluated`` ids that a local build's config and split also holds, read from the id column of its parquet
    files alone; none when the build, the config, the split or the column is not there."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from builders.build_loading import data_files

    if not folder.is_dir() or not evaluated:
        return set()
    wanted = pa.array(sorted(evaluated), type=pa.string())
    shared: set[str] = set()
    for path in data_files(str(folder), config, split):
        try:
            if column not in pq.read_schema(path).names:
                continue
            ids = pq.read_table(path, columns=[column]).column(column).cast(pa.string())
        except (OSError, pa.ArrowException):  # an unreadable file of a training source: no id to compare
            continue
        shared.update(ids.filter(pc.is_in(ids, value_set=wanted)).to_pylist())
    return shared


def _label(source: dict) -> str:
    return ":".join(str(part) for part in (source["path"], source.get("name"), source.get("split", "train")) if part)


def find_contamination(
    model: str,
    revision: str | None,
    dataset: str,
    config: str | None,
    split: str,
    question_ids: Iterable[str],
    id_field: str = "question_id",
) -> list[dict]:
    """The training sources of ``model`` that are the rows being scored (``dataset``, ``config``, ``split``, the
    evaluated ``question_ids``), as the module docstring says; one JSON-ready finding each."""
    evaluated_ids = {str(qid) for qid in question_ids}
    findings = []
    for item in training_sources(model, revision):
        source = item["source"]
        path = str(source["path"])
        same_rows = (
            (source.get("name") or "default") == (config or "default")
            and source.get("split", "train") == split
            and _same_build(path, str(dataset))
        )
        shared: set[str] = set()
        if not same_rows and _local(path) is not None and _local(str(dataset)) is not None:
            column = (source.get("columns") or {}).get(id_field, id_field)
            shared = _shared_ids(_local(path), source.get("name"), source.get("split", "train"), column, evaluated_ids)
        if not (same_rows or shared):
            continue
        finding = {
            "dataset": str(dataset),
            "config": config,
            "split": split,
            "trained_in": item["trained_in"],
            "stage": item["stage"],
            "source": _label(source),
            "match": "same build, config and split" if same_rows else "shared question ids",
            "questions": len(evaluated_ids),
            "shared_questions": len(evaluated_ids) if same_rows else len(shared),
        }
        if not same_rows:
            finding["examples"] = sorted(shared)[:EXAMPLES]
        findings.append(finding)
    return findings


def describe(finding: dict) -> str:
    """One finding in words."""
    where = f"trained in {finding['trained_in']}" + (f" (stage {finding['stage']})" if finding.get("stage") else "")
    if finding["match"] == "same build, config and split":
        return f"it trained on {finding['source']}, the rows scored ({where})"
    return (
        f"{finding['shared_questions']} of the {finding['questions']} questions scored are in its training source "
        f"{finding['source']} (e.g. {', '.join(finding['examples'][:2])}; {where})"
    )


def warn(model: str, findings: list[dict], recorded_in: str = "summary.json") -> None:
    """Print the one warning line a contaminated evaluation gets (stderr), before anything is generated."""
    if not findings:
        return
    first = findings[0]
    more = f"; {len(findings) - 1} more in {recorded_in}" if len(findings) > 1 else ""
    print(
        f"warning: {model} was trained on the rows it is scored on: {describe(first)}{more}; its scores on "
        f"{first['dataset']} ({first['config'] or 'default'}/{first['split']}) are not held out (recorded under "
        f"contamination in {recorded_in})",
        file=sys.stderr,
    )
