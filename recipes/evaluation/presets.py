"""Model presets: how each model of the Sureon paper's Table 3 is run, kept as data, one YAML file per model in
``models/``.

    sureon eval sureon --preset gpt-5.1-high --dataset build/sureon --out results/gpt-5.1 --judge-model gpt-5.1
    sureon eval sureon --preset qwen3-vl-32b-thinking --max-new-tokens 8192 ...   (a flag beats the preset)
    sureon eval public --preset molmo2-8b --dataset build/public --benchmark bench-... --out results/molmo2/public
    sureon eval sureon --list-presets

One file per model (rather than one file for all) so that each model's settings are read, reviewed and changed on
their own, and so that a user adds a model by writing one file: ``--preset path/to/my-model.yaml`` takes any file in
the same format. The preset's name is its file name without ``.yaml``.

A preset gives the Hub id (or endpoint model name) and revision, the backend, dtype, how frames are sent, the most
frames a prompt may hold, the generation budget (thinking models need thousands of tokens), the request fields of an
API model (GPT-5.1: ``reasoning_effort: high``) and notes on the chat template. Ids that could not be checked against
the Hub or the provider's documentation say ``unconfirmed: true``; ``source`` says where each id was read.

Keys (required ones starred): description*, paper_row (the Table 3 row reproduced; the report puts the run beside
it), model*, revision, unconfirmed, source*, backend* (transformers, vllm, openai), dtype, frames_as (auto, images,
video), max_frames, max_new_tokens*, max_tokens_field (max_tokens, max_completion_tokens), request_params (a mapping;
null drops a field), base_url, api_key_env (the variable's name, never a key), system_prompt, template and notes
(free text). Each key that names an option (``SETTINGS``) fills that option unless the command line gives it.

Files are read with ``yaml.safe_load`` and checked before any work: an unknown key, a missing one, a value of the
wrong type or outside its choices stops the run with one line naming the file and the key.
"""

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from builders.errors import InputError
from recipes.evaluation.inference import BACKENDS, MAX_TOKENS_FIELDS


PRESETS_DIR = Path(__file__).parent / "models"
FRAMES_AS = ("auto", "images", "video")
# Body fields the client owns: a request parameter may not replace the prompt, the model or the reply's shape.
RESERVED_REQUEST_FIELDS = frozenset({"model", "messages", "stream"})


@dataclass(frozen=True)
class Field:
    types: tuple[type, ...]
    required: bool = False
    choices: tuple | None = None
    default: object = None


def _text(required: bool = False) -> Field:
    return Field((str,), required)


def _optional_text() -> Field:
    return Field((str, type(None)))


FIELDS: dict[str, Field] = {
    "description": _text(required=True),
    # the Sureon paper's Table 3 row this preset reproduces (the report sets them side by side)
    "paper_row": _optional_text(),
    "model": _text(required=True),
    "revision": _optional_text(),
    "unconfirmed": Field((bool,), default=False),
    "source": _text(required=True),
    "backend": Field((str,), required=True, choices=BACKENDS),
    "dtype": _optional_text(),
    "frames_as": Field((str,), choices=FRAMES_AS, default="auto"),
    "max_frames": Field((int, type(None))),
    "max_new_tokens": Field((int,), required=True),
    "max_tokens_field": Field((str,), choices=MAX_TOKENS_FIELDS, default="max_tokens"),
    "request_params": Field((dict,), default={}),
    "base_url": _optional_text(),
    "api_key_env": _optional_text(),
    "system_prompt": _optional_text(),
    "template": Field((str,), default=""),
    "notes": Field((str,), default=""),
}
# The preset keys that set a command-line option of the same name (``dest``); the rest describe the model.
SETTINGS = (
    "model",
    "revision",
    "backend",
    "dtype",
    "frames_as",
    "max_frames",
    "max_new_tokens",
    "max_tokens_field",
    "base_url",
    "api_key_env",
)
_TYPE_NAMES = {str: "a string", int: "an integer", bool: "true or false", dict: "a mapping", type(None): "null"}


@dataclass(frozen=True)
class Preset:
    name: str
    path: Path
    values: dict = field(default_factory=dict)

    def __getitem__(self, key: str):
        return self.values[key]


def check_request_params(params: dict, where: str) -> dict:
    """``params`` unchanged, or a ValueError naming ``where`` for a field the client owns or a non-string key."""
    for key in params:
        if not isinstance(key, str) or not key:
            raise InputError(f"{where}: request parameter names must be non-empty strings, got {key!r}")
        if key in RESERVED_REQUEST_FIELDS:
            raise InputError(
                f"{where}: request parameter {key!r} is set by the evaluation itself "
                f"(reserved: {', '.join(sorted(RESERVED_REQUEST_FIELDS))})"
            )
    return params


def _check(values: dict, path: Path) -> dict:
    unknown = sorted(set(values) - set(FIELDS))
    if unknown:
        raise InputError(f"{path}: unknown key {unknown[0]!r} (known keys: {', '.join(FIELDS)})")
    missing = [key for key, spec in FIELDS.items() if spec.required and key not in values]
    if missing:
        raise InputError(f"{path}: missing key(s) {', '.join(missing)}")
    checked = {}
    for key, spec in FIELDS.items():
        value = values.get(key, spec.default)
        if isinstance(value, bool) and bool not in spec.types or not isinstance(value, spec.types):
            expected = " or ".join(_TYPE_NAMES[t] for t in spec.types)
            raise InputError(f"{path}: key {key!r} must be {expected}, got {value!r} ({type(value).__name__})")
        if spec.choices is not None and value not in spec.choices:
            raise InputError(f"{path}: key {key!r} must be one of {', '.join(spec.choices)}, got {value!r}")
        if isinstance(value, int) and not isinstance(value, bool) and value < 1:
            raise InputError(f"{path}: key {key!r} must be at least 1, got {value}")
        checked[key] = dict(value) if isinstance(value, dict) else value
    check_request_params(checked["request_params"], f"{path}: request_params")
    return checked


def preset_files() -> dict[str, Path]:
    return {path.stem: path for path in sorted(PRESETS_DIR.glob("*.yaml"))}


def load_preset(name_or_path: str | Path) -> Preset:
    """The preset named ``name_or_path`` (a file stem in ``models/``) or stored at that path, validated."""
    text = str(name_or_path)
    files = preset_files()
    if text in files:
        path = files[text]
    elif text.endswith((".yaml", ".yml")) or Path(text).is_file():
        path = Path(text)
        if not path.is_file():
            raise FileNotFoundError(f"--preset {text}: no such file")
    else:
        raise InputError(
            f"--preset {text}: no such preset; choose one of {', '.join(files)} (--list-presets), or give a YAML file"
        )
    try:
        values = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise InputError(f"{path}: not valid YAML ({err})") from None
    if not isinstance(values, dict):
        raise InputError(f"{path}: a preset is a mapping of keys to values, got {type(values).__name__}")
    return Preset(path.stem, path, _check(values, path))


def load_all() -> list[Preset]:
    return [load_preset(path) for path in preset_files().values()]


def render_list(presets: list[Preset]) -> str:
    """The ``--list-presets`` table: name, the Table 3 row, model id, backend, budget; unconfirmed ids marked."""
    rows = [("preset", "Table 3 row", "model", "backend", "max new tokens")]
    for preset in presets:
        model = preset["model"] + (" (unconfirmed id)" if preset["unconfirmed"] else "")
        row = preset["paper_row"] or "—"
        rows.append((preset.name, row, model, preset["backend"], str(preset["max_new_tokens"])))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    return "\n".join(lines) + f"\n\n{len(presets)} presets in {PRESETS_DIR}; use one with --preset NAME"
