"""Tokens measured, not guessed: rows of the mixture (or synthetic clips) through the training collator, GRPO prompts
through the GRPO trainer's own encoding, with the recipe's frame count and pixel caps. Each SFT row also carries the
CPU seconds the collator took for it (``cpu_seconds``: the process's CPU time on one thread, as a dataloader worker
runs, from reading and decoding its frames to the batch tensors), which size the data loader (``plan/batching.py``'s
``loader_plan``). A worker also hands each batch to the training process, which ``benchmarks/sft_collator.py``
measures beside it (1.1-1.5x the collator's time for the 8B recipe's clips)."""

import io
import math
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np


PERCENTILES = (50, 90, 99, 100)
SYNTHETIC_TIMINGS = 3  # encodings of each synthetic row timed (the median kept): a single one is noisy


def plan_processor(model_name: str, processor_path: str | None, settings: dict):
    """The processor tokens are counted with, and a note when it is the stand-in."""
    from recipes.model_io.modeling import apply_pixel_caps, load_processor
    from recipes.training.architectures import standin_processor

    note = None
    if processor_path:
        processor = load_processor(processor_path)
    elif _on_disk(model_name, "tokenizer_config.json") and any(
        _on_disk(model_name, name) for name in ("processor_config.json", "preprocessor_config.json")
    ):
        processor = load_processor(model_name)
    else:
        processor = standin_processor()
        note = (
            f"{model_name}'s processor is not on disk: visual tokens use its published sizes (exact), text tokens a "
            "stand-in tokenizer (approximate); pass --processor DIR for exact text counts"
        )
    apply_pixel_caps(processor, settings.get("image_max_pixels"), settings.get("video_max_pixels"))
    return processor, note


def _on_disk(name_or_path: str, filename: str) -> bool:
    if Path(name_or_path).is_dir():
        return (Path(name_or_path) / filename).is_file()
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(name_or_path, filename), str)


def collator_for(processor, sources, settings: dict):
    from recipes.training.collator import SFTCollator

    return SFTCollator(
        processor,
        sources,
        blind=bool(settings.get("blind", False)),
        frames_as=settings.get("frames_as", "video"),
        max_frames=settings.get("max_frames", 8),
        system_prompt=settings.get("system_prompt"),
    )


def encoded_counts(encoded, merge: int) -> dict:
    """Tokens of one encoded example, those the loss scores, its vision-tower patches and their attention windows
    (one per frame pair)."""
    grids = [
        grid.tolist()
        for key in ("image_grid_thw", "video_grid_thw")
        if key in encoded.visual
        for grid in encoded.visual[key]
    ]
    patches = sum(t * h * w for t, h, w in grids)
    labels = getattr(encoded, "labels", None) or []
    return {
        "tokens": len(encoded.input_ids),
        # The positions the loss scores (TRL's fused LM head projects only these): the answer; a GRPO prompt has none
        "labelled": sum(1 for label in labels[1:] if label != -100),
        "visual_tokens": patches // (merge * merge),
        "vision_patches": patches,
        "windows": [h * w for t, h, w in grids for _ in range(t)],
    }


def measure_mixture(processor, mixture: list[dict], settings: dict, samples: int, seed: int) -> list[dict]:
    """Token counts of a seeded sample of the mixture's rows, each encoded by the training collator, and the CPU
    seconds of each: its encoding and its share of joining a batch of ``per_device_train_batch_size`` rows."""
    loaded, index = _load_mixture(mixture, seed)
    collator = collator_for(processor, loaded, settings)
    picked = np.random.default_rng(seed).choice(len(index), size=min(samples, len(index)), replace=False)
    merge = _merge_size(processor)
    batch_size = settings.get("per_device_train_batch_size") or 1
    counts, batch = [], []
    with one_thread():
        collator.encode(collator.example(index[int(picked[0])]))  # first use: imports, template compiled (untimed)
        for position in sorted(int(p) for p in picked):
            index_row = index[position]
            started = time.process_time()
            encoded = collator.encode(collator.example(index_row))
            count = {"source": loaded[index_row["source"]].source.label, **encoded_counts(encoded, merge)}
            batch.append((count, encoded, time.process_time() - started))
            if len(batch) == batch_size:
                counts += collated(collator, batch)
                batch = []
        counts += collated(collator, batch)
    return counts


def collated(collator, batch: list[tuple[dict, object, float]]) -> list[dict]:
    """The rows' counts with their ``cpu_seconds``: each row's encoding and its share of joining the batch (the
    padding and the batch's pixel tensors: 4 clips' pixels are 126 MiB, whose fresh pages cost the kernel too)."""
    if not batch:
        return []
    started = time.process_time()
    collator.collate([encoded for _, encoded, _ in batch])
    share = (time.process_time() - started) / len(batch)
    return [{**count, "cpu_seconds": seconds + share} for count, _, seconds in batch]


@contextmanager
def one_thread():
    """Torch on one thread, as PyTorch runs each dataloader worker (``torch.utils.data._utils.worker``:
    ``torch.set_num_threads(1)``): while the rows are timed here, and while the learning tests train tiny models
    (several times faster on one BLAS thread, what ``sureon reproduce`` runs them with)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _load_mixture(mixture: list[dict], seed: int):
    from recipes.training.mixture import build_mixture, parse_mixture

    try:
        loaded, index, _ = build_mixture(parse_mixture(mixture), seed=seed)
    except (FileNotFoundError, OSError, ConnectionError) as err:
        paths = ", ".join(str(entry.get("path")) for entry in mixture)
        raise FileNotFoundError(
            f"the recipe's data ({paths}) could not be loaded ({err}); build it first, or plan on synthetic frames "
            "with --synthetic-frames 768x432"
        ) from err
    return loaded, index


def synthetic_clip_row(number: int, size: tuple[int, int], frames: int) -> dict:
    """A video-QA row in the builders' schema with ``frames`` frames of ``size`` (a lecture clip's shape)."""
    from PIL import Image

    width, height = size
    start = 60.0 + 30 * number
    gradient = np.linspace(0, 255, width * height * 3, dtype=np.float32).reshape(height, width, 3)
    return {
        "question_id": f"synthetic_{number:05d}",
        "clip_id": f"synthetic_{start}_{start + 16}",
        "source_id": f"synthetic{number % 7}",
        "start": start,
        "end": start + 16,
        "category": "AD",
        "category_slug": "action_description",
        "question": "Which action does the surgeon perform on the cystic duct, and with which instrument?",
        "options": [
            "Clipping with a clip applier",
            "Cutting with scissors",
            "Blunt dissection with a grasper",
            "Cauterising with a hook",
            "Retracting with a grasper",
        ],
        "answer": "Clipping with a clip applier",
        "answer_index": 0,
        "answer_format": "mcq",
        "answer_order": [],
        "passes_blind_curation": True,
        "specialty": "General surgery",
        "subject": "Hepatobiliary",
        "procedure": "laparoscopic cholecystectomy",
        "transcript": "",
        "reasoning": "",
        "frames": [Image.fromarray(((gradient + 17 * (number + k)) % 256).astype(np.uint8)) for k in range(frames)],
        "frame_timestamps": [start + 2.0 * k for k in range(frames)],
        "blurred_regions": [[] for _ in range(frames)],
    }


def write_synthetic_clips(folder: Path, count: int, size: tuple[int, int], frames: int) -> Path:
    """``count`` synthetic video-QA rows (the builders' schema, JPEG frames of ``size``) as one parquet file."""
    from datasets import Dataset

    from builders.schema import video_qa_features

    rows = []
    for number in range(count):
        row = synthetic_clip_row(number, size, frames)
        rows.append({**row, "frames": [jpeg_bytes(frame) for frame in row["frames"]]})
    path = Path(folder) / "synthetic_clips.parquet"
    Dataset.from_list(rows, features=video_qa_features(with_frames=True)).to_parquet(str(path))
    return path


def measure_synthetic(processor, settings: dict, size: tuple[int, int]) -> list[dict]:
    """Token counts of one synthetic clip (``max_frames`` frames) and one image of ``size``, their frames stored as
    the builders store them (JPEG, quality 90), so that ``cpu_seconds`` includes decoding them; each row's CPU is
    timed in a batch of ``per_device_train_batch_size`` copies of it."""
    from recipes.training.mixture import to_example

    collator = collator_for(processor, [], settings)
    merge = _merge_size(processor)
    batch_size = settings.get("per_device_train_batch_size") or 1
    clip = synthetic_clip_row(0, size, settings.get("max_frames") or 8)
    clip["frames"] = [jpeg_bytes(frame) for frame in clip["frames"]]
    image_row = {
        "messages": [
            {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": clip["question"]}]},
            {"role": "assistant", "content": [{"type": "text", "text": clip["answer"]}]},
        ],
        "images": [clip["frames"][0]],
    }
    rows = []
    with one_thread():
        for label, row, fmt in (("synthetic clip", clip, "video_qa"), ("synthetic image", image_row, "messages")):
            example = to_example(
                row,
                fmt,
                blind=collator.blind,
                frames_as=collator.frames_as,
                system_prompt=collator.system_prompt,
            )
            collator.encode(example)  # first use: imports, template compiled (untimed)
            seconds = []
            for _ in range(SYNTHETIC_TIMINGS):  # a batch of the recipe's size of this row
                started = time.process_time()
                batch = [({}, collator.encode(example), 0.0) for _ in range(batch_size)]
                encoding = time.process_time() - started
                seconds.append(encoding / batch_size + collated(collator, batch)[0]["cpu_seconds"])
            rows.append(
                {
                    "source": f"{label} {size[0]}x{size[1]}",
                    **encoded_counts(batch[0][1], merge),
                    "cpu_seconds": float(np.median(seconds)),
                }
            )
    return rows


def jpeg_bytes(frame) -> dict:
    """A PIL frame as a build stores it: ``{"bytes": JPEG at quality 90, "path": None}``."""
    buffer = io.BytesIO()
    frame.save(buffer, format="JPEG", quality=90)
    return {"bytes": buffer.getvalue(), "path": None}


def grpo_settings(processor, settings: dict) -> dict:
    """The GRPO renderer's options of a recipe (``recipes/grpo.py``'s defaults where unset)."""
    from recipes.model_io.modeling import tokenizer_of

    return {
        "frames_as": settings.get("frames_as", "video"),
        "max_frames": settings.get("max_frames", 8),
        "system_prompt": settings.get("system_prompt"),
        "vision_language": processor is not tokenizer_of(processor),
    }


def measure_grpo_mixture(processor, mixture: list[dict], settings: dict, samples: int, seed: int) -> list[dict]:
    """Prompt tokens of a seeded sample of a GRPO recipe's checkable rows, each rendered by
    ``recipes.training.grpo_data`` and encoded by the GRPO trainer's own ``encode_row`` (what generation and the
    log-probability passes see: its clips as video or images, at ``max_frames``, with the pixel caps); each row's
    ``kind`` is its answer kind (``grpo_data.answer_kind``: what ``completion_budgets`` bound)."""
    from recipes.training.grpo_data import answer_kind, grpo_dataset
    from recipes.training.grpo_trainer import encode_row

    loaded, index = _load_mixture(mixture, seed)
    dataset, _ = grpo_dataset(loaded, index, **grpo_settings(processor, settings))
    sources = dataset.with_format(None)["source"]
    picked = np.random.default_rng(seed).choice(len(dataset), size=min(samples, len(dataset)), replace=False)
    merge = _merge_size(processor)
    counts = []
    for position in sorted(int(p) for p in picked):
        row = dataset[position]
        counts.append(
            {
                "source": loaded[sources[position]].source.label,
                "kind": answer_kind(row),
                **encoded_counts(encode_row(processor, row), merge),
            }
        )
    return counts


def measure_grpo_synthetic(processor, settings: dict, size: tuple[int, int]) -> list[dict]:
    """Prompt tokens of one synthetic clip (``max_frames`` frames of ``size``) as the GRPO trainer encodes it: a
    lettered question, so the kind mix is all ``letter`` (the Sureon-DB's own kind; the public corpus's grounded
    kinds are measured only from built rows, ``measure_grpo_mixture``)."""
    from recipes.training.grpo_data import answer_kind, grpo_row
    from recipes.training.grpo_trainer import encode_row

    clip = synthetic_clip_row(0, size, settings.get("max_frames") or 8)
    row = grpo_row(clip, **grpo_settings(processor, settings))
    counts = encoded_counts(encode_row(processor, row), _merge_size(processor))
    return [{"source": f"synthetic clip {size[0]}x{size[1]} (GRPO prompt)", "kind": answer_kind(row), **counts}]


def _merge_size(processor) -> int:
    return getattr(getattr(processor, "image_processor", None), "merge_size", 1) or 1


def percentiles(values: list[int]) -> dict[str, int]:
    return {f"p{p}": math.ceil(np.percentile(values, p)) for p in PERCENTILES}


def token_table(counts: list[dict]) -> list[dict]:
    """Per source and overall: rows measured and percentiles of tokens, visual tokens and vision patches."""
    groups: dict[str, list[dict]] = {}
    for count in counts:
        groups.setdefault(count["source"], []).append(count)
    if len(groups) > 1:
        groups["all"] = counts
    return [
        {
            "source": source,
            "rows": len(items),
            "tokens": percentiles([item["tokens"] for item in items]),
            "visual_tokens": percentiles([item["visual_tokens"] for item in items]),
            "vision_patches": percentiles([item["vision_patches"] for item in items]),
        }
        for source, items in groups.items()
    ]
