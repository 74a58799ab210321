"""A tiny HeiCo Proctocolectomy: two surgeries (see ``_heico`` for what each exercises)."""

from pathlib import Path

from public_converters.samples._heico import bad_inputs, warned_inputs, write_procedure


def write(root: Path) -> None:
    write_procedure(root, "Proctocolectomy")


BAD_INPUTS = bad_inputs("Proctocolectomy")
WARNED_INPUTS = warned_inputs("Proctocolectomy")
