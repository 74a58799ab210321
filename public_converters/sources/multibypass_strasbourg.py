"""MultiBypass140, Strasbourg centre (StrasBypass70): 70 LRYGB videos with phases and steps; reader in
``_multibypass140``.

Only the official fold 0 is offered, read from the release's split pickles: ``docs/sources/multibypass140.md``
lists the Strasbourg validation videos of every fold but none of the test lists, so folds 1-4 cannot be written down
as data here.
"""

from pathlib import Path

from public_converters.sources._multibypass140 import PHASES, STEPS, read_centre
from public_converters.spec import SourceSpec


def read(root: Path, labels):
    return read_centre(root, labels, "strasbourg", "StrasBypass70", "SBP")


SPEC = SourceSpec(
    name="multibypass_strasbourg",
    title="MultiBypass-Strasbourg",
    procedure="laparoscopic roux-en-y gastric bypass",
    branches=("clip",),
    capabilities=frozenset({"has_phase", "has_step"}),
    labels={"phase": PHASES, "step": STEPS},
    read=read,
    homepage="https://github.com/CAMMA-public/MultiBypass140",
    license="CC BY-NC-SA 4.0",
    unconfirmed=(
        "video frame rate (25 fps assumed)",
        "folds 1-4 (test lists not available; fold 0 is read from the pickles)",
    ),
)
