"""The ``sureon`` command table (``sureon/cli.py``): ``sureon --help`` imports no command module, and every command's
``--help`` imports nothing heavy (torch, datasets, transformers, trl), so that asking is instant.

One subprocess asks for every command's help with those packages refused: an attempt to import one is recorded with
the module that made it (an optional ``try: import torch`` counts too, as it would load torch when installed), and
the refusal keeps the package out, so each command is judged on its own imports.
"""

import json
import subprocess
import sys

import pytest
from conftest import REPO

from sureon.cli import COMMANDS, GROUPS


HEAVY = ("torch", "datasets", "transformers", "trl")

ASK_FOR_HELP = """
import contextlib, importlib, io, json, sys

HEAVY = {heavy!r}
attempts = []


class RefuseHeavy:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] not in HEAVY:
            return None
        frame = sys._getframe(1)
        while frame and frame.f_globals.get("__name__", "").startswith(("importlib", "_frozen_importlib")):
            frame = frame.f_back
        attempts.append(f"{{name}} (imported by {{frame.f_globals.get('__name__') if frame else '?'}})")
        raise ImportError(f"{{name}} is refused while a parser is built")


sys.meta_path.insert(0, RefuseHeavy())
from sureon.cli import COMMANDS, main, make_parser


def ask(argv):
    attempts.clear()
    output = io.StringIO()
    try:
        with contextlib.redirect_stdout(output):
            main([*argv, "--help"])
    except SystemExit as stop:
        status = stop.code
    except Exception as error:  # an import that failed for want of a refused package
        status = repr(error)
    return {{"status": status, "heavy": sorted(set(attempts)), "help": output.getvalue()}}


report = {{"": ask([])}}
report[""]["modules"] = sorted(name for name in sys.modules if name.split(".")[0] in ("builders", "recipes",
    "public_converters") or name in ("sureon.reproduce",))
for command in COMMANDS:
    report[" ".join(command.words)] = ask(list(command.words))
sys.meta_path.pop(0)  # the modules that failed for want of a heavy package load now, to show their entry points
for command in COMMANDS:
    module = importlib.import_module(command.module)
    entry_points = [name for name in ("add_arguments", "run") if callable(getattr(module, name, None))]
    report[" ".join(command.words)]["entry_points"] = entry_points
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def help_report() -> dict:
    done = subprocess.run(
        [sys.executable, "-c", ASK_FOR_HELP.format(heavy=HEAVY)], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_sureon_help_lists_every_command_and_imports_none(help_report):
    top = help_report[""]
    assert top["status"] == 0 and not top["heavy"]
    # builders.outputs (standard library only) names the kinds of path each command's row says it writes
    expected = ["builders", "builders.errors", "builders.outputs"]
    assert top["modules"] == expected, "sureon --help imported a command module"
    for first_word in {command.words[0] for command in COMMANDS}:
        assert first_word in top["help"]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: " ".join(command.words))
def test_a_command_help_imports_nothing_heavy(help_report, command):
    report = help_report[" ".join(command.words)]
    assert not report["heavy"], f"`sureon {' '.join(command.words)} --help` imports {', '.join(report['heavy'])}"
    assert report["status"] == 0 and report["help"].startswith("usage: sureon " + " ".join(command.words))


@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: " ".join(command.words))
def test_every_command_module_has_add_arguments_and_run(help_report, command):
    assert help_report[" ".join(command.words)]["entry_points"] == ["add_arguments", "run"], command.module


def test_the_table_is_consistent():
    """Every command is named once, by one word or by a group's word and a second; every group is used."""
    words = [command.words for command in COMMANDS]
    assert len(words) == len(set(words)) and all(1 <= len(w) <= 2 for w in words)
    assert {w[0] for w in words if len(w) == 2} == set(GROUPS)
    assert not {w[0] for w in words if len(w) == 1} & set(GROUPS)
