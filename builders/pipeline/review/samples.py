"""The samples under review: one config of a built Sureon dataset (by default ``validation_curated``, the hardened
validation pool the surgeons verify), read with ``datasets`` from the local Hub-layout folder."""

from pathlib import Path

from datasets import Dataset, Features, Image, List, load_dataset

from builders.errors import InputError


DEFAULT_CONFIG = "validation_curated"
FRAME_COLUMNS = ("frames", "frame_timestamps")


def load_config(dataset_dir: str | Path, config: str = DEFAULT_CONFIG) -> tuple[Dataset, str]:
    """The config's only split and its name; images stay undecoded (bytes), so rows re-encode unchanged."""
    dataset_dir = Path(dataset_dir)
    if not (dataset_dir / "README.md").is_file():
        raise FileNotFoundError(f"{dataset_dir} is not a built dataset (no README.md); build it with `sureon build`")
    splits = load_dataset(str(dataset_dir), config)
    if len(splits) != 1:
        raise InputError(f"config {config!r} of {dataset_dir} has splits {list(splits)}; review needs exactly one")
    (split, dataset), *_ = splits.items()
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
