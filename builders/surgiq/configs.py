"""The SurgiQ build's config names, light enough for any module to read (``sureon build surgiq`` writes them; a
missing build's message names the builder from them: :func:`builders.hub.build_command`)."""

from dataclasses import dataclass


@dataclass(frozen=True)
class ConfigSpec:
    name: str
    description: str
    shuffled: bool


CONFIGS = {
    spec.name: spec
    for spec in (
        ConfigSpec("default", "the stored option order, kept fixed across evaluations (the paper's setting)", False),
        ConfigSpec("shuffled", "options permuted with a seed from the question id (answer-order robustness)", True),
    )
}
