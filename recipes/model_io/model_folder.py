"""A model folder checked from its files before anything loads, for every command that loads one: ``sureon eval``,
``sureon curate --guesser``, ``sureon audit --guesser``, and the training scripts' ``model_name_or_path``.

:func:`check_model_path` refuses, from the file listing (and ``config.json``) alone, a local-looking model path that
does not exist, or a folder that holds no model it can load: no ``config.json``, no weights, a sharded checkpoint
missing a shard, a LoRA adapter (named with its base model and how to merge it; a LoRA run's ``output_dir`` holds the
merged model, :mod:`recipes.training.run`), a model without its processor or tokenizer files; a Hub id is left to the
Hub, except one offline mode cannot reach (not in the cache while ``HF_HUB_OFFLINE`` is set). Each used to be a
transformers traceback once loading had started (``Unrecognized model``, ``Can't load image processor``).
"""

import json
from pathlib import Path

from builders.errors import InputError
from builders.hub import looks_local, model_weight_files


# A sharded checkpoint's index (transformers' SAFE_WEIGHTS_INDEX_NAME, WEIGHTS_INDEX_NAME).
WEIGHT_INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
# What a saved processor leaves beside the weights (transformers 5.25's names: PROCESSOR_NAME, IMAGE_PROCESSOR_NAME,
# VIDEO_PROCESSOR_NAME in transformers/utils/__init__.py): a vision-language model needs one of them.
PROCESSOR_FILES = ("processor_config.json", "preprocessor_config.json", "video_preprocessor_config.json")
# A tokenizer is tokenizer.json (the fast tokenizer, all in one), or tokenizer_config.json with a vocabulary file of
# its kind (BPE vocab.json + merges.txt, WordPiece vocab.txt, SentencePiece or tiktoken *.model, *.tiktoken).
VOCABULARY_FILES = ("vocab.json", "vocab.txt", "*.model", "*.tiktoken")
MERGE_CALL = "PeftModel.from_pretrained(base, ADAPTER).merge_and_unload().save_pretrained(OUT)"


class NotAWeightIndex(ValueError):
    """A ``*.index.json`` beside the weights that is not the index transformers writes."""


def sharded_weights(folder: Path) -> tuple[str, list[str], list[str]] | None:
    """``(index file name, the shards it lists, those missing)`` of a sharded checkpoint, None when ``folder`` has no
    weight index; :class:`NotAWeightIndex` when its index cannot be read."""
    for index_name in WEIGHT_INDEXES:
        index = folder / index_name
        if index.is_file():
            try:
                shards = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
            except (json.JSONDecodeError, KeyError, TypeError, AttributeError, UnicodeDecodeError):
                raise NotAWeightIndex(f"{index_name} is not a weight index") from None
            return index_name, shards, [shard for shard in shards if not (folder / shard).is_file()]
    return None


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
    try:
        sharded = sharded_weights(folder)
    except NotAWeightIndex as err:
        raise InputError(f"{label}: {err}: copy the model again") from None
    if sharded is not None and sharded[2]:
        index_name, shards, missing = sharded
        raise InputError(
            f"{label}: {len(missing)} of the {len(shards)} weight shards {index_name} lists are missing "
            f"(e.g. {missing[0]}): an incomplete copy or download; copy the model again"
        )
    if sharded is None and not weights:
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
