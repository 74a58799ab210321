"""A tiny HeiCo Sigmoid Resection: two surgeries (see ``_heico`` for what each exercises)."""

from pathlib import Path

from public_converters.samples._heico import bad_inputs, warned_inputs, write_procedure


def write(root: Path) -> None:
    write_procedure(root, "Sigmoid Resection")


BAD_INPUTS = bad_inputs("Sigmoid Resection")
WARNED_INPUTS = warned_inputs("Sigmoid Resection")
