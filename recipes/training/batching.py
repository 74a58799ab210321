"""Length-grouped SFT batches: rows of about the same length share a micro-batch, so little of what the GPUs compute
is padding, while every optimizer step keeps the mixture's proportions and the random seed fixes the batches.

A recipe turns it on with transformers' own key, ``train_sampling_strategy: group_by_length`` (transformers 5.25 has no
``group_by_length`` field any more: ``TrainingArguments.train_sampling_strategy`` replaced it). transformers'
``LengthGroupedSampler`` is not used: it reads each row's ``input_ids`` (our index rows are ``{source, row}``, encoded
only in the collator), it sorts each "megabatch" of 50 x ``per_device_train_batch_size x accumulation`` rows longest
first, so one optimizer step holds only clips and a later one only images (the proportions hold over the megabatch,
not the step), its megabatch changes with the accumulation and so with the number of ranks, and its shuffle draws
from the global torch generator. Here (:func:`grouped_order`):

- each epoch is a permutation of the index, seeded by ``(seed, epoch)``: the mixture's proportions over the epoch are
  exact, and the same seed gives the same order on every rank and on resume;
- the permutation is cut into windows of :data:`STEPS_PER_WINDOW` optimizer steps (``global_batch_size`` rows each);
  a window is sorted by length, longest first, and cut into micro-batches of ``per_device_train_batch_size`` rows,
  so only the few micro-batches that straddle two lengths (a clip beside images) pad much;
- the window's micro-batches are dealt to its steps in turn (the first to step 1, the second to step 2, ...), so each
  step holds micro-batches from the whole range of lengths: clips, images and text rows in the window's
  proportions; the steps' order in the window is shuffled; within a step the micro-batches stay longest first, so
  the ranks, which take a step's micro-batches in turn (accelerate's ``BatchSamplerShard``), compute micro-batches
  of about the same length at the same time.

The sequence depends on the lengths, the random seed, the epoch, ``global_batch_size`` and
``per_device_train_batch_size`` only: on any number of ranks an optimizer step trains the same rows in the same
micro-batches; what the rank count changes is which rank computes which micro-batch (micro-batch ``j`` of a step on
rank ``j % ranks``, in accumulation slot ``j // ranks``). A recipe that gives ``gradient_accumulation_steps`` instead
of ``global_batch_size`` makes its global batch, and so its steps, depend on the ranks.

A row's length is known without decoding a frame (:func:`row_lengths`): its text through the chat template and the
tokenizer, and its visual tokens from each image's header size through the processor's own resize rule and
placeholder expansion (Qwen3-VL's per-frame ``<t seconds>`` markers included): equal to the collator's count for the
Qwen-VL processors and text-only models (``tests/test_sft_batching.py`` checks it row by row on the sample build).
"""

import functools
import logging
import math
import os
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch


logger = logging.getLogger(__name__)

GROUPED = "group_by_length"  # the TrainingArguments.train_sampling_strategy that turns these batches on
STEPS_PER_WINDOW = 16  # optimizer steps sorted together: 1,024 rows of the 8B recipes (64 a step)
VISUAL_COLUMNS = ("frames", "images")  # where a row's pictures are (video_qa; messages and prompt_completion)
ROWS_READ_AT_ONCE = 1024
EXIF_ORIENTATION = 0x0112
TRANSPOSED_ORIENTATIONS = (5, 6, 7, 8)  # the EXIF orientations that swap width and height (datasets applies them)


def grouped_order(lengths, *, batch_size: int, global_batch_size: int, seed: int, epoch: int = 0) -> list[int]:
    """The index positions of one epoch in the order the trainer should draw them (module docstring)."""
    if batch_size < 1 or global_batch_size % batch_size:
        raise ValueError(f"global batch {global_batch_size} is not a whole number of micro-batches of {batch_size}")
    lengths = np.asarray(lengths)
    rng = np.random.default_rng([seed, epoch])
    order = rng.permutation(len(lengths))
    window_rows = STEPS_PER_WINDOW * global_batch_size
    drawn: list[int] = []
    for start in range(0, len(order), window_rows):
        window = order[start : start + window_rows]
        window = window[np.argsort(-lengths[window], kind="stable")]  # ties keep the shuffled order
        micro_batches = [window[i : i + batch_size].tolist() for i in range(0, len(window), batch_size)]
        steps = math.ceil(len(window) / global_batch_size)
        dealt = [micro_batches[step::steps] for step in range(steps)]
        step_order = rng.permutation(steps).tolist()
        # Only the epoch's last window can end on a short micro-batch: its step goes last, so that every other
        # micro-batch of the epoch stays whole when the trainer cuts the sequence into per_device batches.
        holder = (len(micro_batches) - 1) % steps
        if len(micro_batches[-1]) < batch_size:
            step_order.remove(holder)
            step_order.append(holder)
        for step in step_order:
            drawn += [position for micro_batch in dealt[step] for position in micro_batch]
    return drawn


class GroupedSampler(torch.utils.data.Sampler):
    """The trainer's sampler for ``train_sampling_strategy: group_by_length``: :func:`grouped_order` of the epoch.

    It has no ``generator``, so accelerate leaves it as it is (it seeds and synchronises a sampler's generator
    across ranks, ``prepare_data_loader``); ``set_epoch``, which the trainer and accelerate call before each epoch,
    reshuffles.
    """

    def __init__(self, lengths: list[int], *, batch_size: int, global_batch_size: int, seed: int):
        self.lengths = lengths
        self.batch_size = batch_size
        self.global_batch_size = global_batch_size
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return len(self.lengths)

    def __iter__(self) -> Iterator[int]:
        return iter(
            grouped_order(
                self.lengths,
                batch_size=self.batch_size,
                global_batch_size=self.global_batch_size,
                seed=self.seed,
                epoch=self.epoch,
            )
        )


def use_grouped_batches(trainer, lengths: list[int]) -> GroupedSampler:
    """Make ``trainer`` draw its training rows through :class:`GroupedSampler`: transformers asks
    ``Trainer._get_train_sampler`` for the sampler when it builds the training loader (``get_train_dataloader``), and
    this trainer's answers with ours. The global batch is the step's rows over every rank, as the launch derives the
    accumulation from ``global_batch_size``."""
    args = trainer.args
    sampler = GroupedSampler(
        lengths,
        batch_size=args.train_batch_size,
        global_batch_size=args.train_batch_size * args.gradient_accumulation_steps * max(1, args.world_size),
        seed=args.data_seed if args.data_seed is not None else args.seed,
    )
    trainer._get_train_sampler = lambda train_dataset=None: sampler
    return sampler


# --- a row's length without its frames -----------------------------------------------------------------------------


def row_lengths(collator, index, *, processes: int = 1, chunk_rows: int = ROWS_READ_AT_ONCE) -> list[int]:
    """The tokens the collator will give each row of the mixture's ``index`` (``{source, row}``), no frame decoded:
    what :meth:`recipes.training.collator.SFTCollator.encoded` returns, a row over ``max_length`` counting as the one
    masked token it trains as. Each distinct row is counted once (a source of weight 3 appears three times), in
    chunks of ``chunk_rows`` spread over ``processes`` forked processes (the mixture is read, not copied: its Arrow
    files are memory-mapped)."""
    started = time.perf_counter()
    sources, rows = list(index["source"]), list(index["row"])
    chunks = []
    for source in sorted(set(sources)):
        wanted = sorted({row for s, row in zip(sources, rows, strict=True) if s == source})
        chunks += [(source, wanted[i : i + chunk_rows]) for i in range(0, len(wanted), chunk_rows)]
    if processes > 1 and len(chunks) > 1:
        from concurrent.futures import ProcessPoolExecutor
        from multiprocessing import get_context

        pool = ProcessPoolExecutor(
            min(processes, len(chunks)), mp_context=get_context("fork"), initializer=_adopt, initargs=(collator,)
        )
        with pool:
            counted_chunks = list(pool.map(_adopted_chunk, chunks))
    else:
        counted_chunks = [_chunk_lengths(collator, source, chunk) for source, chunk in chunks]
    counted = {
        (source, row): length
        for (source, chunk), lengths in zip(chunks, counted_chunks, strict=True)
        for row, length in zip(chunk, lengths, strict=True)
    }
    logger.info(
        "length-grouped batches: %d rows counted in %.1f s (%d processes) without decoding a frame",
        len(counted),
        time.perf_counter() - started,
        processes,
    )
    return [counted[(s, row)] for s, row in zip(sources, rows, strict=True)]


def counting_processes() -> int:
    """The processes the lengths are counted with: every core of this machine (one process per machine counts, the
    other ranks wait for its cache: :func:`cached_row_lengths`)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def lengths_fingerprint(collator, index) -> str:
    """What a row's length depends on: the index (which rows, in which order), each source's data (``datasets``'
    fingerprint of the loaded split) and the encoding (the collator's settings, the processor's sizes, the tokenizer
    and its chat template)."""
    import hashlib
    import json

    digest = hashlib.blake2b(digest_size=12)
    for column in ("source", "row"):
        digest.update(np.asarray(index[column], dtype=np.int64).tobytes())
    processor = collator.processor
    settings = {
        "sources": [(item.source.label, getattr(item.dataset, "_fingerprint", None)) for item in collator.sources],
        "collator": [collator.blind, collator.frames_as, collator.max_frames, collator.max_length],
        "system_prompt": collator.system_prompt,
        "sizes": [
            dict(getattr(getattr(processor, name, None), "size", None) or {})
            for name in ("image_processor", "video_processor")
        ],
        "tokens": len(collator.tokenizer),
        "template": getattr(processor, "chat_template", None) or getattr(collator.tokenizer, "chat_template", None),
    }
    digest.update(json.dumps(settings, sort_keys=True, default=str).encode())
    return digest.hexdigest()


def cached_row_lengths(collator, index, folder: str | Path) -> list[int]:
    """:func:`row_lengths`, kept in ``folder`` (the stage's output folder) under the fingerprint of what they depend
    on, so that a restarted or resumed run reads them back instead of counting again (the 8B mixture's ~5.6 M rows:
    1-3.5 CPU hours). Call it with the main process first (``TrainingArguments.main_process_first``): the others
    then find the file it wrote."""
    from builders.outputs import atomic_file

    path = Path(folder) / f"row_lengths-{lengths_fingerprint(collator, index)}.npy"
    if path.is_file():
        lengths = np.load(path)
        if len(lengths) == len(index):
            logger.info("length-grouped batches: %d row lengths read back from %s", len(lengths), path)
            return lengths.tolist()
    lengths = row_lengths(collator, index, processes=counting_processes())
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path) as partial, partial.open("wb") as handle:
        np.save(handle, np.asarray(lengths, dtype=np.int64))
    return lengths


_ADOPTED: list = []  # the collator a forked counting process works for (set by its pool's initializer)


def _adopt(collator) -> None:
    _ADOPTED[:] = [collator]


def _adopted_chunk(chunk: tuple[int, list[int]]) -> list[int]:
    return _chunk_lengths(_ADOPTED[0], *chunk)


def _chunk_lengths(collator, position: int, rows: list[int]) -> list[int]:
    """The lengths of ``rows`` of source ``position``: each row's texts built one by one, tokenized together."""
    from builders.errors import InputError
    from builders.hub import resolve_frames
    from recipes.training.mixture import to_example

    item = collator.sources[position]
    prompts, completions, expansions = [], [], []
    for row, values in _rows_without_pixels(item.dataset, rows):
        try:
            values = resolve_frames(values, item.media_root)
            example = to_example(
                values,
                item.format,
                blind=collator.blind,
                frames_as=collator.frames_as,
                system_prompt=collator.system_prompt,
            )
        except (KeyError, ValueError) as err:
            raise InputError(f"{item.source.label} row {row}: {err}") from err
        prompt, completion, expansion = example_texts(collator, example)
        prompts.append(prompt)
        completions.append(completion)
        expansions.append(expansion)
    tokenize = collator.tokenizer
    prompt_ids = tokenize(prompts, add_special_tokens=False)["input_ids"] if prompts else []
    completion_ids = tokenize(completions, add_special_tokens=False)["input_ids"] if completions else []
    lengths = []
    for prompt, completion, expansion in zip(prompt_ids, completion_ids, expansions, strict=True):
        length = len(prompt) + len(completion) + expansion
        if collator.max_length is not None and length > collator.max_length:
            length = 1  # refused: it trains as one masked padding token (SFTCollator.refuse)
        lengths.append(length)
    return lengths


def _rows_without_pixels(dataset, rows: list[int]) -> Iterator[tuple[int, dict]]:
    """``(row, values)`` of the wanted rows, read as Arrow slices: every column as Python values except the pictures,
    each left as its path or as the stored bytes, unread (memory-mapped) beyond the header a size needs."""
    table = dataset.with_format("arrow")
    wanted = iter(rows)
    row = next(wanted, None)
    while row is not None:
        start = row
        chunk = table[start : start + ROWS_READ_AT_ONCE]
        visual = [name for name in VISUAL_COLUMNS if name in chunk.column_names]
        plain = chunk.drop_columns(visual).to_pylist()
        while row is not None and row < start + len(plain):
            values = dict(plain[row - start])
            for name in visual:
                values[name] = _stored_pictures(chunk.column(name)[row - start])
            yield row, values
            row = next(wanted, None)


def _stored_pictures(cell) -> list | None:
    """A list cell of pictures as stored: paths as strings, embedded images as zero-copy Arrow buffers."""
    import pyarrow as pa

    if not cell.is_valid:
        return None
    values = cell.values
    if not pa.types.is_struct(values.type):
        return values.to_pylist()
    stored, paths = values.field("bytes"), values.field("path")
    return [stored[i].as_buffer() if stored[i].is_valid else paths[i].as_py() for i in range(len(values))]


def picture_size(stored) -> tuple[int, int]:
    """``(width, height)`` of a stored picture as the collator will see it, from its header: PIL opens lazily and
    decodes no pixel until asked (EXIF rotation applied, as ``datasets`` applies it when it decodes)."""
    import io

    from PIL import Image

    if isinstance(stored, dict):  # datasets' {"bytes", "path"}
        stored = stored["bytes"] if stored.get("bytes") else stored["path"]
    if isinstance(stored, str | Path):
        return _file_picture_size(str(stored))
    if isinstance(stored, Image.Image):
        return _oriented_size(stored)
    # A file object with every method PIL's format probes call (once all its plugins are registered, some read lines).
    with Image.open(io.BytesIO(memoryview(stored))) as image:
        return _oriented_size(image)


@functools.lru_cache(maxsize=2**16)
def _file_picture_size(path: str) -> tuple[int, int]:
    """A frame file's size, read once: the public corpus stores each frame once for the many questions on it."""
    from PIL import Image

    with Image.open(path) as image:
        return _oriented_size(image)


def _oriented_size(image) -> tuple[int, int]:
    width, height = image.size
    if image.getexif().get(EXIF_ORIENTATION) in TRANSPOSED_ORIENTATIONS:
        width, height = height, width
    return width, height


def example_texts(collator, example) -> tuple[str, str, int]:
    """What ``collator.encode(example)`` tokenizes, with the pictures left unread: the prompt as the chat template
    renders it, each picture's placeholder expanded as the processor expands it (:func:`expanded_prompt`), and the
    answer; plus the placeholder tokens the prompt's text leaves out (each run written as one token)."""
    from recipes.model_io.chat_inputs import flatten_text, render_chat, split_visuals

    messages, images, videos = split_visuals(example.prompt, collator.max_frames, load=lambda stored: stored)
    if not collator.is_vlm:
        messages = flatten_text(messages)
    prompt = render_chat(collator.processor, messages, add_generation_prompt=True)
    completion = collator.completion_text(messages, prompt, example.target)
    left_out = 0
    if collator.is_vlm and (images or videos):
        prompt, left_out = expanded_prompt(collator.processor, prompt, images, videos)
    return prompt, completion, left_out


def expanded_prompt(processor, text: str, images: list, videos: list[dict]) -> tuple[str, int]:
    """``text`` with each image and video placeholder replaced as the processor replaces it (its own
    ``replace_image_token`` / ``replace_video_token`` and ``get_text_with_replacements``: Qwen3-VL's ``<t seconds>``
    and vision markers around each frame pair), from the patches its image and video processors' own resize rule
    gives the pictures' header sizes (``get_number_of_image_patches``, ``get_num_of_video_patches``); and the
    placeholder tokens left out of the text. Each run of placeholder tokens (1,344 for a clip of the 8B recipe) is
    written as one token and the rest counted: a special token is split out before the text around it is tokenized,
    so the count is the same, and the text stays short. The replace methods read a grid's product only (per
    temporal patch, for a video), so each grid is given as ``[t, 1, merge**2]``: one token per run."""
    from transformers.video_utils import VideoMetadata

    from builders.errors import InputError
    from recipes.model_io.chat_inputs import video_metadata

    try:
        merged = processor.image_processor.merge_size**2
        left_out = sum(
            processor.image_processor.get_number_of_image_patches(*reversed(picture_size(image)), {}) // merged - 1
            for image in images
        )
        video_kwargs = {}
        if hasattr(type(processor.video_processor), "cap_pixels_per_frame"):
            video_kwargs["cap_pixels_per_frame"] = True  # as chat_inputs.processor_inputs asks
        temporal = getattr(processor.video_processor, "temporal_patch_size", 1) if videos else 1
        video_merged = processor.video_processor.merge_size**2 if videos else 1
        video_grids = []
        for video in videos:
            width, height = picture_size(video["frames"][0])  # a video's frames share one size (they are stacked)
            frames = len(video["frames"])
            patches = processor.video_processor.get_num_of_video_patches(frames, height, width, video_kwargs)
            steps = -(-frames // temporal)
            left_out += patches // video_merged - steps
            video_grids.append([steps, 1, video_merged])
        image_inputs = {"image_grid_thw": torch.tensor([[1, 1, merged]] * len(images))}
        video_inputs = {
            "video_grid_thw": torch.tensor(video_grids),
            "video_metadata": [VideoMetadata(**video_metadata(video["timestamps"])) for video in videos],
        }
        image_text = [processor.replace_image_token(image_inputs, i) for i in range(len(images))]
        video_text = [processor.replace_video_token(video_inputs, i) for i in range(len(videos))]
        expanded, _ = processor.get_text_with_replacements([text], image_text, video_text)
    except (AttributeError, NotImplementedError, TypeError) as err:
        raise InputError(
            f"train_sampling_strategy: {GROUPED} needs each row's length before its frames are decoded, and "
            f"{type(processor).__name__} cannot count a picture's tokens from its size ({err}): train with "
            "train_sampling_strategy: random"
        ) from err
    return expanded[0], left_out
