"""Reading a YAML settings file a user wrote (a recipe, a world, a columns file, a preset), with one-line errors.

``yaml.safe_load`` only, never a loader that builds objects. A missing file, a file that is not UTF-8 or not YAML,
an empty file where settings are needed, or YAML that is not a mapping is an :class:`InputError` naming the file,
the line of the problem and what the file should hold.
"""

from pathlib import Path

import yaml

from builders.errors import InputError


def load_yaml_mapping(
    path: str | Path,
    what: str,
    example: str,
    *,
    allow_empty: bool = False,
    error: type[InputError] = InputError,
) -> dict:
    """The mapping in ``path``, a ``what`` (e.g. "training recipe"); ``example`` says what it should hold (e.g.
    "recipes/qwen3-vl-8b/sft/config_sureon_vlm.yaml" or "question: stem"). An empty file gives ``{}`` when
    ``allow_empty``; every problem is ``error`` naming the file."""
    path = Path(path)
    if not path.is_file():
        raise error(f"{what} {path}: no such file" + (" (it is a folder)" if path.is_dir() else ""))
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise error(
            f"{what} {path}: line {line} is not UTF-8 (byte {data[err.start]:#04x}); save it as UTF-8"
        ) from None
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        problem = (f"line {mark.line + 1}: " if mark else "") + (getattr(err, "problem", None) or str(err))
        raise error(f"{what} {path}: not YAML ({problem}); it should read like {example}") from None
    if loaded is None:
        if allow_empty:
            return {}
        raise error(f"{what} {path}: the file is empty; it should read like {example}")
    if not isinstance(loaded, dict):
        raise error(
            f"{what} {path}: expected a mapping of key: value, got a YAML {type(loaded).__name__}"
            + (" (a list: remove the leading dashes)" if isinstance(loaded, list) else "")
        )
    return loaded
