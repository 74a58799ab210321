"""HeiCo, Proctocolectomy: 10 surgeries, 25-fps phases, ROBUST-MIS instrument masks; reader in ``_heico``."""

from pathlib import Path

from public_converters.sources._heico import MASK_POLICIES, PHASES, TOOLS, read_procedure
from public_converters.spec import SourceSpec


def read(root: Path, labels):
    return read_procedure(root, labels, "Proctocolectomy", "proctocolectomy")


SPEC = SourceSpec(
    name="heico_proctocolectomy",
    title="HeiCo - Proctocolectomy",
    procedure="laparoscopic proctocolectomy",
    branches=("image", "clip"),
    capabilities=frozenset({"has_phase", "has_tool_presence", "has_tool_bbox", "has_masks"}),
    labels={"phase": PHASES, "tool": TOOLS},
    read=read,
    mask_policies=MASK_POLICIES,
    homepage="https://www.synapse.org/#!Synapse:syn21903917 (account, data use terms)",
    license="unknown",
    unconfirmed=(
        "frame folder name = frame number in the video",
        "frame folders directly under <n>/ or under 'Instrument segmentations/'",
        "test surgeries of EndoVis 2017 / ROBUST-MIS (all read as train)",
        "license",
    ),
)
