"""A tiny BernBypass70: BBP01 (fold-0 train), BBP03 (validation, as in the official fold 0), BBP02 (test)."""

from pathlib import Path

from public_converters.samples._multibypass140 import bad_inputs, warned_inputs, write_centre


SPLITS = {"train": ["BBP01"], "val": ["BBP03"], "test": ["BBP02"]}


def write(root: Path) -> None:
    write_centre(root, "bern", "BernBypass70", SPLITS)


BAD_INPUTS = bad_inputs("bern", "BernBypass70", ["BBP01", "BBP03"])
WARNED_INPUTS = warned_inputs("bern", "BBP01")
