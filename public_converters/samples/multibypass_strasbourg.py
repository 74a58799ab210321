"""A tiny StrasBypass70: SBP01 (fold-0 train), SBP09 (validation, as in the official fold 0), SBP02 (test)."""

from pathlib import Path

from public_converters.samples._multibypass140 import bad_inputs, warned_inputs, write_centre


SPLITS = {"train": ["SBP01"], "val": ["SBP09"], "test": ["SBP02"]}


def write(root: Path) -> None:
    write_centre(root, "strasbourg", "StrasBypass70", SPLITS)


BAD_INPUTS = bad_inputs("strasbourg", "StrasBypass70", ["SBP01", "SBP09"])
WARNED_INPUTS = warned_inputs("strasbourg", "SBP01")
