"""The bad-input table: per command, each mistake a user makes, and what the user must see.

This folder is the one place that lists them: one module per group of commands (``test_build_sureon.py``: `build
sureon`, `world`, `videos fetch`, `pipeline`; ``test_build_public.py``; ``test_plan_and_surgiq.py``: `plan`, `build
surgiq`, `near-duplicates`; ``test_models.py``: `eval`, `report`, `curate`, `audit`, `shortcuts`, `export`, `push`;
``test_review.py``; ``test_training.py``: the launch scripts ``recipes/sft.py`` and ``recipes/grpo.py``;
``test_written_paths.py``: a cache or side output at, inside or around an input, for the builds and `pipeline`), each
holding its ``CASES``: the command, the mistake, the command line, the exit status it must end with, a phrase its
message must contain, and what it may leave behind (nothing at ``--out``, or at a launch script's ``--output_dir``,
unless a case documents a partial output). ``test_commands.py`` checks that every command of ``sureon`` and every
launch script has cases. Every case runs ``sureon`` (``sureon.cli.main``) or the launch script (its ``cli``) in this
process, and :func:`check_bad_input` checks what a user would see:

- the exit status, and that the message holds the phrase;
- no traceback: a user's mistake is one line (``error: ...``, or argparse's own ``error: argument ...``);
- nothing at ``--out`` afterwards, and no staging folder beside it;
- every input is untouched: the files of every existing path among the arguments are the same before and after
  (for a launch script, the recipe's model and mixture folders too).

A case builds its inputs in its own folder from the :class:`Inputs` it is given (the sample release, the sample
videos, tiny models, ...), so a case reads like the command a user typed.
"""

import hashlib
import importlib
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from sample_data.make_sample_release import release_rows, write_release
from sureon import cli


REPO = Path(__file__).resolve().parents[2]
SAMPLE_RELEASE = REPO / "sample_data" / "sureon_release"


class Inputs:
    """What a case may use: ``tmp`` (its own folder) and the session's shared, read-only fixtures."""

    def __init__(self, tmp: Path, request: pytest.FixtureRequest):
        self.tmp = tmp
        self._request = request

    def fixture(self, name: str):
        return self._request.getfixturevalue(name)

    @property
    def videos(self) -> Path:
        """A private copy of the sample videos (a case may point --out at it, or cut one short)."""
        return self.fixture("videos_copy")

    def release(self, edit: Callable[[dict[str, list[dict]]], None] | None = None, schema=None, name="release"):
        """The sample release, with ``edit(rows)`` applied to its rows first; ``schema`` None keeps the release's."""
        rows = release_rows()
        if edit is not None:
            edit(rows)
        if schema is None and edit is None:
            out = self.tmp / name
            shutil.copytree(SAMPLE_RELEASE, out)
            return out
        return write_release(self.tmp / name, rows, schema if schema is not None else _inferred_or_release(rows))

    @property
    def out(self) -> Path:
        return self.tmp / "out"


def _inferred_or_release(rows):
    from builders.sureon.release import RELEASE_SCHEMA

    try:
        for split_rows in rows.values():
            pa.Table.from_pylist(split_rows, schema=RELEASE_SCHEMA)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
        return False  # write_release infers a schema for rows the release schema cannot hold
    return RELEASE_SCHEMA


@dataclass(frozen=True)
class BadInput:
    command: str  # the sub-command, as typed after `sureon`
    mistake: str  # what the user did wrong
    argv: Callable[[Inputs], list[str]]  # the whole command line after `sureon`, given the case's inputs
    says: str  # a phrase the message must contain (case-insensitive)
    status: int = 2  # 2: a user error (argparse's own status too)
    leaves: str = ""  # "" : nothing at --out afterwards; else what partial output is documented, and where


LAUNCH_SCRIPTS = ("recipes/sft.py", "recipes/grpo.py")


def _out_of(argv: list[str]) -> Path | None:
    for option in ("--out", "--output_dir"):
        if option in argv:
            return Path(argv[argv.index(option) + 1])
    return None


def _recipe_inputs(argv: list[str]) -> list[Path]:
    """The local paths a launch script's recipe names: its model and every mixture source (stages' too)."""
    if "--config" not in argv:
        return []
    try:
        recipe = yaml.safe_load(Path(argv[argv.index("--config") + 1]).read_text())
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return []
    if not isinstance(recipe, dict):
        return []
    mixtures = [recipe.get("dataset_mixture")] + [stage.get("dataset_mixture") for stage in recipe.get("stages") or []]
    paths = [recipe.get("model_name_or_path")] + [
        entry.get("path") for mixture in mixtures for entry in mixture or [] if isinstance(entry, dict)
    ]
    return [Path(path) for path in paths if isinstance(path, str) and Path(path).is_absolute() and Path(path).exists()]


def _run(command: str, argv: list[str]) -> int:
    """``sureon ARGV``, or a launch script's ``cli(ARGV)`` for a case of ``recipes/sft.py`` / ``recipes/grpo.py``."""
    if command in LAUNCH_SCRIPTS:
        script = importlib.import_module(command.removesuffix(".py").replace("/", "."))
        return script.cli(argv)
    return cli.main(argv)


def _snapshot(paths: list[Path]) -> dict[str, str]:
    """Every file under ``paths``: its content digest (inputs must come out of a failed command unchanged)."""
    state = {}
    for root in paths:
        for path in [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file()):
            state[str(path)] = hashlib.blake2b(path.read_bytes(), digest_size=16).hexdigest()
    return state


def check_bad_input(case: BadInput, tmp_path: Path, request, capsys) -> None:
    """Run ``case`` and check what a user would see (the module docstring)."""
    inputs = Inputs(tmp_path, request)
    argv = case.argv(inputs)
    out = _out_of(argv)
    existed_before = out is not None and out.exists()
    # the case's own files: every input is an absolute path (a command word such as `build` is none, even where the
    # working directory holds a build/ folder)
    parsed_inputs = [
        Path(value) for value in argv if Path(value).is_absolute() and Path(value).exists() and Path(value) != out
    ]
    parsed_inputs += [path for path in _recipe_inputs(argv) if path != out and path not in parsed_inputs]
    if existed_before:
        parsed_inputs.append(out)  # an --out that is an input must survive too
    before = _snapshot(parsed_inputs)

    try:
        status = _run(case.command, argv)
    except SystemExit as exit:  # argparse refuses a bad option value so
        status = exit.code
    err = capsys.readouterr().err

    assert status == case.status, err
    assert "Traceback" not in err, err
    assert case.says.lower() in " ".join(err.split()).lower(), err
    assert "error:" in err, err
    assert _snapshot(parsed_inputs) == before, "an input changed"
    if out is not None and not case.leaves:
        assert out.exists() == existed_before, f"{out} was left behind"
        leftovers = [p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")]
        assert not leftovers, leftovers


def run_cases(cases: list[BadInput]):
    """The parametrised test of a module's ``cases``."""

    @pytest.mark.parametrize("case", cases, ids=[f"{c.command}: {c.mistake}" for c in cases])
    def test_bad_input(case: BadInput, tmp_path, request, capsys):
        check_bad_input(case, tmp_path, request, capsys)

    return test_bad_input
