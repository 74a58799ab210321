"""HeiCo, Proctocolectomy: 10 surgeries, 25-fps phases, ROBUST-MIS instrument masks; reader in ``_heico``."""

from public_converters.sources._heico import procedure_spec


SPEC = procedure_spec(
    "heico_proctocolectomy",
    "HeiCo - Proctocolectomy",
    "laparoscopic proctocolectomy",
    "Proctocolectomy",
    "proctocolectomy",
)
