"""What the model-side commands read, checked before anything slow: a built dataset, a model, a guesser's endpoint.

``sureon eval``, ``curate``, ``audit``, ``shortcuts`` and ``export`` all read a build and most of them a model. A
mistake in either used to surface late and in someone else's words: a relative ``--dataset`` that does not exist as
"Couldn't reach 'build/sureon' on the Hub", a model folder that does not exist as "Repo id must be in the form...",
a truncated parquet shard as a ``DatasetGenerationError`` traceback, a config or split the build lacks as a
``ValueError`` traceback, each after the data (or the model) had been loading for a while. Here each becomes one line
that names the thing and the fix (a :class:`builders.errors.InputError`):

- :func:`load_build` is the one loader of a build: a local-looking path that does not exist is refused before
  ``datasets`` retries it as a Hub id; an id that is neither a folder nor on the Hub says both; a config or split
  the build lacks names the ones it has (and, given ``expected``, which build the command wants); a file that cannot
  be read is named, found from the parquet footers of the config's files once loading failed (nothing is read twice
  on the way to a good build).
- :func:`check_model_path` refuses, from the file listing alone, a local-looking model path that does not exist, or a
  folder that holds no model (no ``config.json``, no weights, a sharded checkpoint missing a shard); a Hub id
  is left to the Hub, except one offline mode cannot reach (not in the cache while ``HF_HUB_OFFLINE`` is set).
"""

import json
from pathlib import Path

from builders.errors import InputError, UserError
from builders.hub import check_build_path, looks_local


WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.pt", "*.pth")
WEIGHT_INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")


# ---- a built dataset -----------------------------------------------------------------------------------------------


def load_build(
    dataset: str | Path,
    config: str | None = None,
    split: str = "test",
    *,
    expected: str = "",
    option: str = "--dataset",
    **kwargs,
):
    """``datasets.load_dataset(dataset, config, split=split)`` with every mistake one line (module docstring).

    ``expected`` says which build the command reads, e.g. "a SurgiQ build (`sureon build surgiq`)": it is added to
    the message when a config is missing, the usual sign of the wrong kind of build."""
    from datasets import load_dataset
    from datasets.exceptions import DatasetNotFoundError

    check_build_path(dataset, option)
    name = str(dataset)
    try:
        return load_dataset(name, config, split=split, **kwargs)
    except UserError:
        raise
    except ValueError as err:
        problem = _config_or_split_problem(name, config, split, str(err), expected)
        if problem is None:
            raise
        raise InputError(problem) from None
    except Exception as err:
        names = {cls.__name__ for cls in type(err).__mro__}
        if names & {"DatasetGenerationError", "ArrowInvalid", "ArrowTypeError"}:
            raise InputError(_unreadable(name, config, split, err)) from err
        if not Path(name).expanduser().exists() and isinstance(err, ConnectionError | DatasetNotFoundError):
            raise InputError(_nowhere(option, name, err)) from err
        raise


def build_configs(dataset: str | Path, option: str = "--dataset") -> list[str]:
    """The configs a build's card declares, with :func:`load_build`'s messages for a build that is not there."""
    from datasets import get_dataset_config_names
    from datasets.exceptions import DatasetNotFoundError

    check_build_path(dataset, option)
    name = str(dataset)
    try:
        return get_dataset_config_names(name)
    except UserError:
        raise
    except Exception as err:
        if not Path(name).expanduser().exists() and isinstance(err, ConnectionError | DatasetNotFoundError):
            raise InputError(_nowhere(option, name, err)) from err
        raise


def _nowhere(option: str, name: str, err: BaseException) -> str:
    """An id that is no local folder and that the Hub did not give either (offline, unknown, private)."""
    return (
        f"{option} {name}: no such folder, and no Hub dataset of that id could be read ({_first_line(err)}): "
        "check the path, or build it first"
    )


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def _config_or_split_problem(dataset: str, config: str | None, split: str, text: str, expected: str) -> str | None:
    """The message for ``datasets``' ValueError on a config or split the build lacks; ``None`` for any other."""
    from datasets import get_dataset_config_names, get_dataset_split_names

    wanted = f": {expected}" if expected else ""
    if text.startswith(("BuilderConfig", "Config name is missing")):
        configs = get_dataset_config_names(dataset)
        if config is None:
            return f"{dataset} has several configs ({', '.join(configs)}): choose one with --config"
        return f"{dataset} has no config {config!r} (it has: {', '.join(configs)}){wanted}"
    if text.startswith("Unknown split"):
        splits = get_dataset_split_names(dataset, config)
        return f"{dataset} ({config or 'default'}) has no split {split!r} (it has: {', '.join(splits)}): give --split"
    return None


def data_files(dataset: str, config: str | None) -> list[str]:
    """The files of a local build's config, as ``datasets`` resolves them from its card (no data is read)."""
    from datasets import load_dataset_builder

    try:
        resolved = load_dataset_builder(dataset, config).config.data_files or {}
    except Exception:  # noqa: BLE001 - only used to name the culprit of an error already being reported
        return []
    return [str(path) for files in resolved.values() for path in files]


def unreadable_file(files: list[str]) -> tuple[str, str] | None:
    """``(file, why)`` of the first parquet file whose footer (else whose data) cannot be read; ``None`` if all
    can."""
    import pyarrow.parquet as pq

    parquet = [path for path in files if path.endswith(".parquet") and Path(path).is_file()]
    for read in (pq.read_metadata, pq.read_table):
        for path in parquet:
            try:
                read(path)
            except Exception as err:  # noqa: BLE001 - any failure to read it is what is being looked for
                return path, _first_line(err)
    return None


def _unreadable(dataset: str, config: str | None, split: str, err: BaseException) -> str:
    found = unreadable_file(data_files(dataset, config))
    if found is not None:
        path, why = found
        return f"the built dataset {dataset} has an unreadable file {path} (truncated?): rebuild it ({why})"
    detail = _first_line(err.__cause__ or err)
    return (
        f"the built dataset {dataset} ({config or 'default'}/{split}) cannot be read ({detail}): a file is truncated "
        "or not this dataset's format; rebuild it"
    )


# ---- a model -------------------------------------------------------------------------------------------------------


def check_model_path(model: str | Path, option: str = "--model", revision: str | None = None) -> None:
    """Refuse a model that cannot load, before anything loads: a local-looking path that does not exist, a file, a
    folder without ``config.json`` or weights, or a Hub id offline mode cannot reach. Looks at names only.
    ``option`` names where the model was given: ``--model``, or ``--guesser model=`` (ending in ``=``: no space)."""
    text = str(model)
    label = f"{option}{text}" if option.endswith("=") else f"{option} {text}"
    path = Path(text).expanduser()
    if path.is_dir():
        _check_model_folder(path, label)
    elif path.exists():
        raise InputError(f"{label} is a file: give the model's folder (config.json and weights) or a Hub id")
    elif looks_local(text):
        raise InputError(f"{label}: no such model folder (a local path, not a Hub id): check the path")
    else:
        from huggingface_hub import constants, try_to_load_from_cache

        if constants.is_offline_mode() and not isinstance(
            try_to_load_from_cache(text, "config.json", revision=revision), str
        ):
            raise InputError(
                f"{label}: no such local folder, and the Hub id is not in the Hugging Face cache while "
                "HF_HUB_OFFLINE is set: check the path, or go online once to download it"
            )


def _check_model_folder(folder: Path, label: str) -> None:
    if not (folder / "config.json").is_file():
        checkpoints = sorted(p.name for p in folder.glob("checkpoint-*") if p.is_dir())
        hint = (
            f"a training run's folder without its final model? it holds {', '.join(checkpoints[-3:])}: give one"
            if checkpoints
            else "not a saved model (save_pretrained writes config.json beside the weights)"
        )
        raise InputError(f"{label}: the folder has no config.json: {hint}")
    for index_name in WEIGHT_INDEXES:
        index = folder / index_name
        if index.is_file():
            try:
                shards = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
            except (json.JSONDecodeError, KeyError, TypeError, AttributeError, UnicodeDecodeError):
                raise InputError(f"{label}: {index_name} is not a weight index: copy the model again") from None
            missing = [shard for shard in shards if not (folder / shard).is_file()]
            if missing:
                raise InputError(
                    f"{label}: {len(missing)} of the {len(shards)} weight shards {index_name} lists are missing "
                    f"(e.g. {missing[0]}): an incomplete copy or download; copy the model again"
                )
            return
    if not any(any(folder.glob(pattern)) for pattern in WEIGHT_PATTERNS):
        raise InputError(
            f"{label}: config.json but no weights (*.safetensors or pytorch_model*.bin): an incomplete copy, or a "
            "training run that never saved; copy the model again or give its checkpoint"
        )
