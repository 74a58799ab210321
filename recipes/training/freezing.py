"""Which parameters train: every parameter is put in exactly one group (vision tower, projector, LLM) by name, and
``requires_grad`` is set on each one explicitly.

Explicit, because freezing by module is leaky: with a frozen vision tower, Qwen3-VL's ``visual.pos_embed`` kept
training in other projects (LlamaFactory PR 10139). A parameter that matches no group is an error naming it, so a
new architecture cannot slip a trainable tensor past the freeze options.

Counts are of each parameter's full size, :func:`parameter_size`: under DeepSpeed ZeRO-3 with ``zero3_init_flag:
true`` (``accelerate_configs/zero3.yaml``) transformers loads the model inside ``deepspeed.zero.Init``, which leaves
every parameter on every rank a 0-element placeholder (``numel() == 0``) and keeps its full size in ``ds_numel``.
"""

import re
from collections import Counter

from builders.errors import InputError


GROUPS = ("vision_tower", "projector", "llm")
_PROJECTOR = re.compile(r"(^|\.)(visual\.(merger|deepstack_merger_list)|multi_modal_projector|mm_projector)(\.|$)")
_VISION = re.compile(r"(^|\.)(visual|vision_tower|vision_model)\.")
_LLM = re.compile(r"(^|\.)(language_model|lm_head|embed_tokens)(\.|$)")


def parameter_group(name: str, vision_language: bool) -> str:
    if not vision_language:
        return "llm"
    if _PROJECTOR.search(name):
        return "projector"
    if _VISION.search(name):
        return "vision_tower"
    if _LLM.search(name):
        return "llm"
    raise InputError(
        f"parameter {name!r} belongs to no group (vision_tower, projector, llm): extend recipes/training/freezing.py"
    )


def parameter_size(parameter) -> int:
    """The number of elements ``parameter`` has in the model, also when ZeRO-3 has partitioned it (``ds_numel``)."""
    return getattr(parameter, "ds_numel", None) or parameter.numel()


def trainable_parameter_count(model) -> int:
    """The number of trainable elements in ``model`` (full sizes under ZeRO-3, adapters only under LoRA)."""
    return sum(parameter_size(parameter) for parameter in model.parameters() if parameter.requires_grad)


def apply_freezing(model, frozen: set[str]) -> dict[str, dict[str, int]]:
    """Freeze the groups in ``frozen``, unfreeze the rest; returns parameter counts per group and state."""
    unknown = set(frozen) - set(GROUPS)
    if unknown:
        raise InputError(f"unknown parameter groups {sorted(unknown)}; choose from {GROUPS}")
    vision_language = getattr(model.config, "vision_config", None) is not None
    counts: dict[str, Counter] = {group: Counter() for group in GROUPS}
    for name, parameter in model.named_parameters():
        group = parameter_group(name, vision_language)
        parameter.requires_grad_(group not in frozen)
        counts[group]["trainable" if parameter.requires_grad else "frozen"] += parameter_size(parameter)
    if not any(counts[group]["trainable"] for group in GROUPS):
        raise InputError("every parameter is frozen: nothing would train")
    return {group: dict(counts[group]) for group in GROUPS if counts[group]}


def trainable_parameter_names(model) -> list[str]:
    return [name for name, parameter in model.named_parameters() if parameter.requires_grad]
