"""The samples under review: one config of a built Sureon dataset (by default ``validation_curated``, the hardened
validation pool the surgeons verify), read with ``datasets`` from the local Hub-layout folder.

:func:`check_dataset` reads only the dataset card (the README's YAML header) and runs before anything slow, so a
``--dataset`` that does not exist, is a file, is not a build (a release folder, a parquet file) or lacks the config is
one line naming it and the fix; :func:`load_config` then also refuses a config without the columns the review
shows (another dataset's build) and names the folder when a built file cannot be read."""

from pathlib import Path

import yaml
from datasets import Dataset, Features, Image, List, load_dataset

from builders.errors import InputError
from builders.pipeline.review import DEFAULT_CONFIG


FRAME_COLUMNS = ("frames", "frame_timestamps")
# what the review app shows and filters by, and the export writes back: a Sureon build has them all
REVIEW_COLUMNS = (
    "question_id",
    "source_id",
    "start",
    "end",
    "category",
    "question",
    "options",
    "answer",
    "answer_index",
    "answer_format",
    "specialty",
    "procedure",
    "transcript",
)
BUILD_HINT = "give the folder of a built Sureon dataset (`sureon build sureon --out DIR`)"
# what datasets raises for a build whose files are missing, truncated or of another format
UNREADABLE = {
    "DatasetGenerationError",
    "ArrowInvalid",
    "ArrowTypeError",
    "DataFilesNotFoundError",
    "EmptyDatasetError",
}


def dataset_configs(dataset_dir: Path) -> list[str] | None:
    """The config names a built dataset's card declares (the YAML header of its README.md); None without one."""
    try:
        text = (dataset_dir / "README.md").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---" or "---" not in (line.strip() for line in lines[1:]):
        return None
    header = lines[1 : 1 + [line.strip() for line in lines[1:]].index("---")]
    try:
        card = yaml.safe_load("\n".join(header))
    except yaml.YAMLError:
        return None
    configs = card.get("configs") if isinstance(card, dict) else None
    if not isinstance(configs, list):
        return None
    return [str(c["config_name"]) for c in configs if isinstance(c, dict) and "config_name" in c]


def check_dataset(dataset_dir: str | Path, config: str = DEFAULT_CONFIG) -> None:
    """Refuse, from the dataset card alone, a ``--dataset`` that is no built dataset or lacks ``config``."""
    dataset_dir = Path(dataset_dir)
    if not dataset_dir.exists():
        raise InputError(f"--dataset {dataset_dir} does not exist: {BUILD_HINT}")
    if not dataset_dir.is_dir():
        raise InputError(f"--dataset {dataset_dir} is a file, not a dataset folder: {BUILD_HINT}")
    configs = dataset_configs(dataset_dir)
    if configs is None:
        raise InputError(
            f"--dataset {dataset_dir} is not a built Sureon dataset (no README.md declaring its configs; a release "
            f"folder is the input of the build, not its output): {BUILD_HINT}"
        )
    if config not in configs:
        raise InputError(
            f"--dataset {dataset_dir} has no config {config!r} (it has: {', '.join(configs) or 'none'}): review reads "
            f"the validation pool of a Sureon build; choose another --config, or {BUILD_HINT}"
        )


def load_config(dataset_dir: str | Path, config: str = DEFAULT_CONFIG) -> tuple[Dataset, str]:
    """The config's only split and its name; images stay undecoded (bytes), so rows re-encode unchanged."""
    dataset_dir = Path(dataset_dir)
    check_dataset(dataset_dir, config)
    try:
        splits = load_dataset(str(dataset_dir), config)
    except Exception as err:
        names = {cls.__name__ for cls in type(err).__mro__}
        if not names & UNREADABLE:
            raise
        detail = str(err.__cause__ or err).strip().splitlines() or [type(err).__name__]
        raise InputError(
            f"--dataset {dataset_dir} [{config}]: a built file cannot be read ({detail[0]}): it is truncated or not "
            "a Sureon build's; rebuild it"
        ) from err
    if len(splits) != 1:
        raise InputError(f"config {config!r} of {dataset_dir} has splits {list(splits)}; review needs exactly one")
    (split, dataset), *_ = splits.items()
    missing = [column for column in REVIEW_COLUMNS if column not in dataset.column_names]
    if missing:
        raise InputError(
            f"--dataset {dataset_dir} [{config}] is not a Sureon build: it lacks the column(s) {', '.join(missing)}; "
            f"{BUILD_HINT}"
        )
    return dataset.cast(with_decode(dataset.features, False)), split


def with_decode(features: Features, decode: bool) -> Features:
    """``features`` with every image (also inside lists) set to decode or not."""

    def convert(feature):
        if isinstance(feature, Image):
            return Image(decode=decode)
        if isinstance(feature, List):
            return List(convert(feature.feature), length=feature.length)
        return feature

    return Features({name: convert(feature) for name, feature in features.items()})


def load_samples(dataset_dir: str | Path, config: str = DEFAULT_CONFIG) -> dict[str, dict]:
    """``question_id -> record`` without frames (what the review app shows); duplicate ids are an error."""
    dataset, _ = load_config(dataset_dir, config)
    dataset = dataset.remove_columns([c for c in FRAME_COLUMNS if c in dataset.column_names])
    samples: dict[str, dict] = {}
    for index, record in enumerate(dataset):
        if record["question_id"] in samples:
            raise InputError(f"{dataset_dir} [{config}] row {index}: question_id {record['question_id']} repeats")
        samples[record["question_id"]] = record
    return samples
