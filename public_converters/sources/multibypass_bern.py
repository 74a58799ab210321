"""MultiBypass140, Bern centre (BernBypass70): 70 LRYGB videos with phases and steps; reader in ``_multibypass140``.

Split variants ``fold1``..``fold4``: the validation and test videos of the official folds as
``docs/sources/multibypass140.md`` lists them (read from the repository's pickles); the remaining 40 videos are taken
to be the training set (inferred: 10 + 20 + 40 = 70). The default split is fold 0, read from the release's pickles.
"""

from pathlib import Path

from public_converters.sources._multibypass140 import PHASES, STEPS, fold_variants, read_centre
from public_converters.spec import SourceSpec


FOLDS = {  # fold -> (validation, test) video numbers
    1: (
        (12, 18, 25, 35, 36, 41, 44, 49, 67, 69),
        (2, 3, 4, 7, 15, 16, 17, 27, 28, 32, 34, 37, 39, 43, 52, 53, 55, 56, 62, 70),
    ),
    2: (
        (8, 18, 23, 36, 41, 44, 47, 48, 60, 67),
        (3, 7, 12, 13, 15, 17, 19, 25, 27, 28, 30, 35, 43, 49, 52, 53, 56, 57, 68, 69),
    ),
    3: (
        (5, 8, 22, 23, 31, 38, 47, 48, 51, 60),
        (6, 12, 13, 14, 18, 19, 24, 25, 30, 35, 36, 41, 44, 49, 57, 61, 64, 67, 68, 69),
    ),
    4: (
        (5, 22, 29, 31, 33, 38, 45, 51, 54, 58),
        (1, 6, 8, 14, 18, 23, 24, 36, 41, 44, 46, 47, 48, 59, 60, 61, 63, 64, 65, 67),
    ),
}


def read(root: Path, labels):
    return read_centre(root, labels, "bern", "BernBypass70", "BBP")


SPEC = SourceSpec(
    name="multibypass_bern",
    title="MultiBypass-Bern",
    procedure="laparoscopic roux-en-y gastric bypass",
    branches=("clip",),
    capabilities=frozenset({"has_phase", "has_step"}),
    labels={"phase": PHASES, "step": STEPS},
    read=read,
    split_variants=fold_variants("BBP", FOLDS),
    homepage="https://github.com/CAMMA-public/MultiBypass140",
    license="CC BY-NC-SA 4.0",
    unconfirmed=(
        "video frame rate (25 fps assumed)",
        "folds 1-4: the training set is the 40 videos outside validation and test (inferred)",
    ),
)
