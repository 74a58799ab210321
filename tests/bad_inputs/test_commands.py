"""Every command a user can type has its bad inputs in the table (a new command needs its cases), the launch scripts
``recipes/sft.py`` and ``recipes/grpo.py`` included."""

import argparse

from sureon.cli import make_parser

from . import (
    LAUNCH_SCRIPTS,
    test_build_public,
    test_build_sureon,
    test_models,
    test_plan_and_surgiq,
    test_review,
    test_training,
    test_written_paths,
)


def leaf_commands(parser: argparse.ArgumentParser, prefix: str = "") -> set[str]:
    """``{"build sureon", "eval surgiq", "plan", ...}``: every command line's words up to its options."""
    subparsers = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    if not subparsers:
        return {prefix.strip()}
    return {
        command
        for name, child in subparsers[0].choices.items()
        for command in leaf_commands(child, f"{prefix} {name}")
    }


def test_every_command_has_bad_input_cases():
    covered = {
        case.command
        for module in (
            test_build_sureon,
            test_build_public,
            test_plan_and_surgiq,
            test_models,
            test_review,
            test_training,
            test_written_paths,
        )
        for case in module.CASES
    }
    commands = leaf_commands(make_parser()) | set(LAUNCH_SCRIPTS)
    assert len(commands) > 30
    assert not commands - covered, f"commands without bad-input cases: {sorted(commands - covered)}"
    assert not covered - commands, f"cases of commands that do not exist: {sorted(covered - commands)}"
