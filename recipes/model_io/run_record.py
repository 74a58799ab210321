"""``training_complete.json``: what a training run records beside its weights, defined once.

``recipes/sft.py`` writes one per stage and ``recipes/grpo.py`` one per run, last and atomically, so its presence
says the run finished (a restarted multi-stage run skips a stage that has one). It is read back wherever the weights
are used: GRPO started from an SFT run carries its system prompt over and names it on the card, ``sureon eval
sureon`` shows the frames it trained on (``max_frames``), every ``sureon eval`` checks the evaluated rows against its
``mixture`` (:mod:`recipes.evaluation.contamination`), and a blind guesser's ``fold`` tells curation which rows it
held out. ``docs/training/run_record.md`` lists the fields (``python -m recipes.model_io.run_record`` writes its
table). Each field below is written by the run kinds named beside it; :func:`run_record` refuses a record with a
field missing or one not defined here (a bug, caught by the tests), and :func:`read_run_record` returns every field,
None where an older run did not write it, and keeps a field a newer version wrote.
"""

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from builders.errors import InputError
from builders.outputs import TRAINING_COMPLETE, write_atomic


logger = logging.getLogger(__name__)

COMPLETE_MARKER = TRAINING_COMPLETE
SFT, GRPO = "sft", "grpo"


@dataclass(frozen=True)
class Field:
    meaning: str
    kinds: tuple[str, ...] = (SFT, GRPO)


FIELDS: dict[str, Field] = {
    "name": Field("the stage's name in a recipe with `stages` (null for a one-stage run), `grpo` for a GRPO run"),
    "stage": Field("`grpo`: the run kind, beside `name`, which contamination reports name", (GRPO,)),
    "model": Field("the model the run started from: a Hub id, a base model's folder or the previous run's folder"),
    "started_from_sft": Field("whether that model is a finished run of this project (it has this record)", (GRPO,)),
    "mixture": Field(
        "each mixture source as loaded: path, config, split, rows drawn (and, for GRPO, `rows_checkable`: rows "
        "with an answer a reward can check)"
    ),
    "allow_evaluation_data": Field("whether the recipe allowed evaluation rows in the mixture"),
    "fold": Field("the video-level fold a blind guesser held out (null when not a fold guesser)"),
    "num_folds": Field("how many folds the guessers split the videos into (null when not a fold guesser)"),
    "seed": Field("the training seed"),
    "blind": Field("trained without any visual input"),
    "system_prompt": Field("the system prompt rendered in every training prompt (what evaluation renders again)"),
    "vision_language": Field("whether the model has a vision tower"),
    "frames_as": Field("how a clip reached the model: `video` (one video with timestamps) or `images`"),
    "max_frames": Field("the most frames of a clip shown (`sureon eval sureon --max-frames` shows the same)"),
    "max_length": Field("the longest row in tokens, longer rows refused whole (null: unbounded)", (SFT,)),
    "rows_over_max_length": Field("rows refused for their length (listed in `rows_over_max_length/`)", (SFT,)),
    "rows_over_max_length_by_visual_tokens": Field("of those, rows over on their visual tokens alone", (SFT,)),
    "rewards": Field("the reward functions' names", (GRPO,)),
    "reward_weights": Field("their weights in the summed reward", (GRPO,)),
    "reward_means": Field("each reward's last logged mean (null when no row it applies to was drawn)", (GRPO,)),
    "num_generations": Field("completions sampled per prompt", (GRPO,)),
    "max_completion_length": Field("the longest completion in tokens", (GRPO,)),
    "completion_budgets": Field("per answer kind, the tokens a completion may take (null: off)", (GRPO,)),
    "share_prompt_prefill": Field("whether a prompt's copies shared its prefill and vision tower call", (GRPO,)),
    "share_prompt_in_training": Field("whether each prompt ran once in the training passes (packed)", (GRPO,)),
    "beta": Field("the KL coefficient", (GRPO,)),
    "loss_type": Field("TRL's GRPO loss normalisation", (GRPO,)),
    "use_vllm": Field("whether vLLM generated the completions", (GRPO,)),
    "vllm_mode": Field("vLLM's mode when it did (`server`, `colocate`), else null", (GRPO,)),
    "trainable": Field("trainable and total parameters, per part (vision tower, merger, language model)"),
    "attn_implementation": Field("the attention that ran (`flash_attention_2`, the Hub kernel's name, `sdpa`)"),
    "uniform_vision_calls": Field("whether every rank called the vision tower on every step (ZeRO-3's need)"),
    "resumed_from": Field("the checkpoint the run resumed from, null when it started fresh"),
    "global_step": Field("optimizer steps taken"),
    "world_size": Field("ranks the run trained on"),
    "train_loss": Field("the mean training loss the trainer reported"),
    "lora": Field("the LoRA target modules, null for full fine-tuning"),
    "adapter": Field("for a LoRA run, the adapter's folder inside the run's folder (`adapter`), else null"),
    "merged": Field("whether the run's folder holds the base with the adapter merged in"),
}


def run_record(kind: str, values: dict) -> dict:
    """The record a run of ``kind`` (``sft`` or ``grpo``) writes: exactly its fields, in the order defined here."""
    expected = [name for name, field in FIELDS.items() if kind in field.kinds]
    missing = [name for name in expected if name not in values]
    unknown = sorted(set(values) - set(expected))
    if missing or unknown:
        raise ValueError(f"a {kind} run record: fields missing {missing}, not defined for {kind} {unknown}")
    return {name: values[name] for name in expected}


def write_run_record(output_dir: str | Path, record: dict) -> Path:
    """Written last and atomically: its presence says the run finished."""
    return write_atomic(Path(output_dir) / COMPLETE_MARKER, json.dumps(record, indent=1, default=str))


def parse_run_record(text: str, where: str) -> dict:
    """A record's text read through the definition: every field (None where the run that wrote it had no such
    field yet), fields written by a newer version kept."""
    try:
        stored = json.loads(text)
    except json.JSONDecodeError as err:
        why = f"not JSON ({err.msg}, line {err.lineno}); the run that wrote it was cut short?"
        raise InputError(f"{where}: {why}") from None
    if not isinstance(stored, dict):
        raise InputError(f"{where}: a {type(stored).__name__}, not a training run's record (a JSON object)")
    return {**{name: None for name in FIELDS}, **stored}


def read_run_record(name_or_path: str, revision: str | None = None) -> dict | None:
    """The record stored with the weights (a local folder or a Hub repo), or None when the model was not trained by
    this project's scripts. A Hub repo that cannot be reached is reported and treated as None."""
    folder = Path(name_or_path)
    if folder.is_dir():
        marker = folder / COMPLETE_MARKER
        return parse_run_record(marker.read_text(encoding="utf-8"), str(marker)) if marker.is_file() else None
    if name_or_path.count("/") != 1:
        return None
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, HfHubHTTPError, LocalEntryNotFoundError

    try:
        path = Path(hf_hub_download(name_or_path, COMPLETE_MARKER, revision=revision))
    except EntryNotFoundError:
        return None
    except (LocalEntryNotFoundError, HfHubHTTPError, OSError) as err:
        logger.warning(
            "could not read %s from %s (%s): if it was trained with a system prompt, pass it explicitly",
            COMPLETE_MARKER,
            name_or_path,
            type(err).__name__,
        )
        return None
    return parse_run_record(path.read_text(encoding="utf-8"), f"{name_or_path}/{COMPLETE_MARKER}")


def fields_table() -> str:
    """The fields as the markdown table of ``docs/training/run_record.md``."""
    lines = ["| field | written by | meaning |", "| --- | --- | --- |"]
    lines += [f"| `{name}` | {', '.join(field.kinds)} | {field.meaning} |" for name, field in FIELDS.items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(fields_table(), end="")
