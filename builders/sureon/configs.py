"""The Sureon configs a build writes (names are part of the contract) and the build's other choices, kept apart from
:mod:`builders.sureon.build` so that ``sureon build sureon --help`` and ``sureon videos fetch`` offer them without
loading the builder (pyarrow, datasets)."""

from dataclasses import dataclass

from builders.sureon.release import Release, ReleaseError


MISSING_VIDEO_MODES = ("error", "skip", "annotation-only")
BLURRED_BY_DEFAULT = ("bench", "validation", "validation_curated")  # the configs models are evaluated on
FRAMES_LAYOUTS = ("files", "embedded")


@dataclass(frozen=True)
class ConfigSpec:
    name: str
    split: str
    curated_only: bool
    description: str

    def frames_layout(self, requested: str) -> str:
        """``requested`` for the training configs; the others always embed (see :mod:`builders.sureon.build`)."""
        return requested if self.split == "train" else "embedded"


CONFIGS: dict[str, ConfigSpec] = {
    spec.name: spec
    for spec in (
        ConfigSpec("bench", "test", False, "the surgeon-verified benchmark (340 questions in the official release)"),
        ConfigSpec("db", "train", True, "Sureon-DB: training questions that pass blind curation"),
        ConfigSpec("train_all", "train", False, "every training question, before blind curation"),
        ConfigSpec("validation", "validation", False, "every validation question, before blind curation"),
        ConfigSpec("validation_curated", "validation", True, "validation questions that pass blind curation"),
    )
}


def is_evaluation_data(config: str | None, split: str) -> bool:
    """Whether a build's ``config``/``split`` is evaluation data, which training on would inflate every score measured
    on it: the Sureon benchmark and validation pools (any Sureon config whose split is not ``train``), the public
    corpus's benchmarks (``bench-*``), and any split other than ``train`` (a SurgiQ build's ``test`` among them).
    ``sureon export sft`` and the training recipes refuse it unless told otherwise."""
    config = config or ""
    sureon_evaluation = config in CONFIGS and CONFIGS[config].split != "train"
    return sureon_evaluation or config.startswith("bench") or split != "train"


def passes_curation(record: dict) -> bool:
    """In Sureon-DB and ``validation_curated``: passed blind curation; sequence summaries (flag null) pass through."""
    return record["passes_blind_curation"] is True or (
        record["passes_blind_curation"] is None and record["category"] == "SM"
    )


def select_configs(release: Release, requested: list[str] | None) -> list[ConfigSpec]:
    if requested:
        unknown = [name for name in requested if name not in CONFIGS]
        if unknown:
            raise ReleaseError(f"unknown config(s) {unknown}; choose from {list(CONFIGS)}")
        absent = [n for n in requested if CONFIGS[n].split not in release.splits]
        if absent:
            raise ReleaseError(f"config(s) {absent} need split(s) the release lacks (found {list(release.splits)})")
        return [CONFIGS[n] for n in CONFIGS if n in requested]
    return [spec for spec in CONFIGS.values() if spec.split in release.splits]
