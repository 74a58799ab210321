"""HeiCo, Sigmoid Resection: 10 surgeries, 25-fps phases, ROBUST-MIS instrument masks; reader in ``_heico``."""

from public_converters.sources._heico import procedure_spec


SPEC = procedure_spec(
    "heico_sigmoid_resection",
    "HeiCo Sigmoid Resection",
    "laparoscopic sigmoid resection",
    "Sigmoid Resection",
    "sigmoid_resection",
)
