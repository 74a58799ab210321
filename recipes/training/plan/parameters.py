"""Parameters of the architecture built on the ``meta`` device, grouped and frozen as training does."""

from builders.errors import InputError


# Decoder layers and vision blocks: the units FSDP wraps (accelerate_configs/fsdp.yaml) and checkpointing recomputes.
BLOCK_CLASSES = ("Qwen3VLTextDecoderLayer", "Qwen3VLVisionBlock", "Qwen3DecoderLayer")


def meta_model(config):
    from recipes.training.architectures import build_model

    return build_model(config, device="meta")


def parameter_counts(model, frozen: set[str], lora: dict | None = None) -> dict[str, dict[str, int]]:
    """``{group: {"trainable", "frozen"}}`` as training sets them; with ``lora`` the base is frozen and
    ``adapters`` holds the adapter parameters (r x (in + out) per targeted linear)."""
    from recipes.training.freezing import apply_freezing

    if lora is None:
        counts = apply_freezing(model, frozen)
        return {
            group: {"trainable": c.get("trainable", 0), "frozen": c.get("frozen", 0)} for group, c in counts.items()
        }
    import torch

    counts = apply_freezing(model, set())
    counts = {
        group: {"trainable": 0, "frozen": c.get("trainable", 0) + c.get("frozen", 0)} for group, c in counts.items()
    }
    targets, rank = set(lora["targets"]), int(lora["r"])
    adapters = sum(
        rank * (module.in_features + module.out_features)
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Linear) and name.rsplit(".", 1)[-1] in targets
    )
    if not adapters:
        raise InputError(f"lora_target_modules {sorted(targets)} match no linear layer of the model")
    counts["adapters"] = {"trainable": adapters, "frozen": 0}
    return counts


def largest_layer_parameters(model) -> int:
    """The most parameters one module holds itself: DeepSpeed's ``largest_layer_params`` (the embedding here)."""
    return max(sum(p.numel() for p in module.parameters(recurse=False)) for module in model.modules())


def block_parameters(model) -> tuple[int, int]:
    """(largest wrapped block, the FSDP root unit: everything outside the blocks)."""
    blocks = [module for module in model.modules() if type(module).__name__ in BLOCK_CLASSES]
    in_blocks = sum(p.numel() for block in blocks for p in block.parameters())
    largest = max((sum(p.numel() for p in block.parameters()) for block in blocks), default=0)
    return largest, sum(p.numel() for p in model.parameters()) - in_blocks
