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
- A local build whose ``README.md`` was lost (the dataset card declaring its configs) is told so, rather than read by
  ``datasets`` as one ``default`` config of every parquet file and then told it is not the build it is.
- :func:`check_model_path` refuses, from the file listing (and ``config.json``) alone, a local-looking model path that
  does not exist, or a folder that holds no model it can load: no ``config.json``, no weights, a sharded checkpoint
  missing a shard, a LoRA adapter (named with its base model and how to merge it), a model without its processor or
  tokenizer files; a Hub id is left to the Hub, except one offline mode cannot reach (not in the cache while
  ``HF_HUB_OFFLINE`` is set).
"""

import json
from pathlib import Path

from builders.errors import InputError, UserError
from builders.hub import BUILD_MANIFESTS, check_build_path, looks_local, model_weight_files
from builders.outputs import MARKER


WEIGHT_INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
# What a saved processor leaves beside the weights (transformers 5.25's names: PROCESSOR_NAME, IMAGE_PROCESSOR_NAME,
# VIDEO_PROCESSOR_NAME in transformers/utils/__init__.py): a vision-language model needs one of them.
PROCESSOR_FILES = ("processor_config.json", "preprocessor_config.json", "video_preprocessor_config.json")
# A tokenizer is tokenizer.json (the fast tokenizer, all in one), or tokenizer_config.json with a vocabulary file of
# its kind (BPE vocab.json + merges.txt, WordPiece vocab.txt, SentencePiece or tiktoken *.model, *.tiktoken).
VOCABULARY_FILES = ("vocab.json", "vocab.txt", "*.model", "*.tiktoken")
MERGE_CALL = "PeftModel.from_pretrained(base, ADAPTER).merge_and_unload().save_pretrained(OUT)"


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
    check_card(dataset, option)
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
    check_card(dataset, option)
    name = str(dataset)
    try:
        return get_dataset_config_names(name)
    except UserError:
        raise
    except Exception as err:
        if not Path(name).expanduser().exists() and isinstance(err, ConnectionError | DatasetNotFoundError):
            raise InputError(_nowhere(option, name, err)) from err
        raise


def check_card(dataset: str | Path, option: str = "--dataset") -> None:
    """Refuse a local build that lost its README.md: without the card, ``datasets`` reads every parquet file of the
    folder as one ``default`` config. A build is known by sureon's marker or its manifest; any other folder (a
    release's ``data/`` shards, a user's parquet files) is left to ``datasets``, which reads a folder without a card
    by its file names."""
    folder = Path(dataset).expanduser()
    if not folder.is_dir() or (folder / "README.md").is_file():
        return
    if (folder / MARKER).is_file() or any((folder / name).is_file() for name in BUILD_MANIFESTS):
        raise InputError(
            f"{option} {dataset} has no README.md, the dataset card that declares the build's configs (without it "
            "every parquet file reads as one config): it was lost in a copy; copy the whole build folder again, or "
            "rebuild it"
        )


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


def data_files(dataset: str, config: str | None, split: str | None = None) -> list[str]:
    """The files of a local build's config (of one ``split``, or all), as ``datasets`` resolves them from its card (no
    data is read); none when the build or config cannot be resolved."""
    from datasets import load_dataset_builder

    try:
        resolved = load_dataset_builder(dataset, config).config.data_files or {}
    except Exception:  # noqa: BLE001 - used to name the culprit of an error, or to look for shared rows: best effort
        return []
    return [str(path) for name, files in resolved.items() if split in (None, name) for path in files]


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
    weights = model_weight_files(folder)
    if (folder / "adapter_config.json").is_file() and not weights:
        raise InputError(f"{label}: {_adapter(folder)}")
    if not (folder / "config.json").is_file():
        raise InputError(f"{label}: the folder has no config.json: {_no_model_hint(folder)}")
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
            break
    else:
        if not weights:
            raise InputError(
                f"{label}: config.json but no weights (*.safetensors or pytorch_model*.bin): an incomplete copy, or a "
                "training run that never saved; copy the model again or give its checkpoint"
            )
    _check_processor_files(folder, label)


def _adapter(folder: Path) -> str:
    """A LoRA adapter folder in words: its base model and the two ways to a model that loads."""
    try:
        config = json.loads((folder / "adapter_config.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        config = {}
    base = config.get("base_model_name_or_path") if isinstance(config, dict) else None
    return (
        f"a LoRA adapter (adapter_config.json, no model weights) of the base model {base or '(not named)'}, not a "
        "model: give the training run's output_dir, which holds the merged model, or merge it into its base first: "
        f"{MERGE_CALL} with base loaded from {base or 'the base model'}, and the processor saved to OUT"
    )


def _full_model(folder: Path) -> bool:
    return (folder / "config.json").is_file() and bool(model_weight_files(folder) or any(folder.glob("*.index.json")))


def _no_model_hint(folder: Path) -> str:
    """What a folder without config.json is likely to be: a training run that has not saved its final model (the
    checkpoints that hold a full model named; a LoRA run's checkpoints hold adapters), or no saved model at all."""
    checkpoints = sorted(
        (path for path in folder.glob("checkpoint-*") if path.is_dir()),
        key=lambda path: (len(path.name), path.name),  # checkpoint-10 after checkpoint-9
    )
    if not checkpoints:
        return "not a saved model (save_pretrained writes config.json beside the weights)"
    full = [path.name for path in checkpoints if _full_model(path)]
    if full:
        return (
            f"a training run's folder without its final model? its checkpoints {', '.join(full[-3:])} hold full "
            "models: give one, or let the run finish"
        )
    recent = ", ".join(path.name for path in checkpoints[-3:])
    if any((path / "adapter_config.json").is_file() for path in checkpoints):
        return (
            f"a LoRA training run's folder without its final model: its checkpoints ({recent}) hold adapters, not "
            "models; let the run finish (its output_dir then holds the merged model), or merge a checkpoint into its "
            f"base: {MERGE_CALL}"
        )
    return f"a training run's folder without its final model, and its checkpoints ({recent}) hold none: let it finish"


def _check_processor_files(folder: Path, label: str) -> None:
    """A model with its weights but not what turns a prompt into its inputs (transformers fails on it only once the
    loading has started): from config.json, a vision-language model (a ``vision_config``) needs its processor files
    and its tokenizer files, a text-only model its tokenizer files."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise InputError(f"{label}: config.json is not a model config (not JSON): copy the model again") from None
    vision = isinstance(config, dict) and config.get("vision_config") is not None
    names = {path.name for path in folder.iterdir() if path.is_file()}
    has_vocabulary = any(any(folder.glob(pattern)) for pattern in VOCABULARY_FILES)
    missing = []
    if vision and not names & set(PROCESSOR_FILES):
        missing.append(f"processor files ({' / '.join(PROCESSOR_FILES)})")
    if "tokenizer.json" not in names and not ("tokenizer_config.json" in names and has_vocabulary):
        missing.append("tokenizer files (tokenizer.json, or tokenizer_config.json with its vocabulary)")
    if missing:
        kind = "a vision-language model (vision_config)" if vision else "a text-only model"
        raise InputError(
            f"{label}: config.json and weights of {kind} but no {' and no '.join(missing)}: save_pretrained of the "
            "model alone leaves them out; save the processor (or tokenizer) into the folder too, or copy them from "
            "the model it was trained from"
        )
