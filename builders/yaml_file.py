"""Reading a YAML settings file a user wrote (a recipe, a world, a columns file, a preset), with one-line errors.

``yaml.safe_load``'s loader only, never one that builds objects. A missing file, a file that is not UTF-8 or not
YAML, an empty file where settings are needed, YAML that is not a mapping, or a key written twice in one mapping is an
:class:`InputError` naming the file, the line of the problem and what the file should hold. YAML itself lets the last
of two equal keys win without a word: a recipe with ``learning_rate`` twice trained at whichever came last.
"""

from pathlib import Path

import yaml

from builders.errors import InputError


class _DuplicateKey(yaml.YAMLError):
    def __init__(self, key, first_line: int, line: int):
        where = f"line {line}" if first_line == line else f"lines {first_line} and {line}"
        super().__init__(f"line {line}: {key!r} is written twice ({where}): keep one")


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key written twice in one mapping (merge keys ``<<`` aside)."""

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                if key in seen:
                    raise _DuplicateKey(key, seen[key], line)
                seen[key] = line
            except TypeError:  # an unhashable key: the base class reports it
                continue
        return super().construct_mapping(node, deep=deep)


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
        loaded = yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader: builds no objects
    except _DuplicateKey as err:
        raise error(f"{what} {path}: {err}") from None
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
