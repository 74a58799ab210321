"""HeiCo, Rectal Resection: 10 surgeries, 25-fps phases, ROBUST-MIS instrument masks; reader in ``_heico``."""

from public_converters.sources._heico import procedure_spec


SPEC = procedure_spec(
    "heico_rectal_resection",
    "HeiCo - Rectal Resection",
    "laparoscopic rectal resection",
    "Rectal Resection",
    "rectal_resection",
)
