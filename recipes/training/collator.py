"""The training collator: mixture rows -> padded model inputs with labels on the assistant answer only.

Why our own (see ``docs/training_notes.md``): TRL has no video input, and Qwen3-VL's time markers
are only right when pre-sampled frames come with their video metadata. Each example is encoded as
``processor(prompt with its images / video)`` followed by the tokenized answer (the chat template's assistant
turn), so the labels mask the whole prompt, the visual tokens and the padding (-100) and keep the answer and its
end-of-turn token.

``encoded_cache_mb`` keeps encoded examples in memory (this process's; each dataloader worker has its own), up to that
many megabytes, so that a row drawn again in a later epoch skips the chat template, the tokenizer and the image
processor: encoding is deterministic per row. It pays where rows are revisited and encoding costs as much as the step:
measured on the tiny recipes of ``recipes/tiny/`` on one CPU thread, the collator took ~40 % of a video SFT step and
~15 % of a blind guesser's. Off by default: an 8-frame clip of the 8B recipe encodes to tens of megabytes.

``uniform_vision_calls`` makes every batch run the vision tower exactly once for images and once for videos: a batch
without images (or videos) gets a one-token dummy image (or video) appended after the padding, with attention mask 0
and label -100, so it changes no output and no gradient but keeps the collective calls the same on every rank.
That is what stops DeepSpeed ZeRO-3 from hanging when ranks draw different modalities, and lets DDP run without
``find_unused_parameters``.
"""

import json
import logging
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path

import torch

from builders.errors import InputError
from builders.hub import resolve_frames
from recipes.model_io.chat_inputs import VISUAL_KEYS, flatten_text, processor_inputs, render_chat, split_visuals
from recipes.model_io.modeling import tokenizer_of
from recipes.training.mixture import Example, LoadedSource, to_example


logger = logging.getLogger(__name__)


@dataclass
class EncodedExample:
    input_ids: list[int]
    labels: list[int]
    mm_token_type_ids: list[int] | None = None
    visual: dict[str, torch.Tensor] = field(default_factory=dict)
    refused: bool = False  # longer than max_length: one masked padding token stands in for it

    def nbytes(self) -> int:
        """About what the example holds in memory: 8 bytes a token id, label and type, and its visual tensors."""
        tokens = len(self.input_ids) * (3 if self.mm_token_type_ids is not None else 2)
        return 8 * tokens + sum(tensor.nbytes for tensor in self.visual.values())


@dataclass
class SFTCollator:
    """Collates ``{"source", "row"}`` index rows of a mixture (see ``recipes.training.mixture``) into a training
    batch."""

    processor: object
    sources: list[LoadedSource]
    blind: bool = False
    frames_as: str = "video"
    max_frames: int | None = 8
    max_length: int | None = None
    uniform_vision_calls: bool = False
    system_prompt: str | None = None
    encoded_cache_mb: float = 0.0
    refused_rows_log: str | None = None  # a folder: the rows longer than max_length, one JSONL file per process

    def __post_init__(self):
        self.tokenizer = tokenizer_of(self.processor)
        self.is_vlm = self.processor is not self.tokenizer
        if self.tokenizer.pad_token_id is None:
            raise InputError(
                "the tokenizer has no pad token: set one (e.g. tokenizer.pad_token = tokenizer.eos_token)"
            )
        self._encoded: dict[tuple[int, int], EncodedExample] = {}
        self._encoded_bytes = 0
        self._refused_any = False

    def example(self, index_row: dict) -> Example:
        item = self.sources[index_row["source"]]
        row = item.dataset[int(index_row["row"])]
        try:
            row = resolve_frames(row, item.media_root)
            return to_example(
                row, item.format, blind=self.blind, frames_as=self.frames_as, system_prompt=self.system_prompt
            )
        except (KeyError, ValueError) as err:
            raise InputError(f"{item.source.label} row {index_row['row']}: {err}") from err

    def completion_text(self, prompt_messages: list[dict], prompt_text: str, target: str) -> str:
        """The assistant turn as the chat template writes it after the prompt (answer + end-of-turn)."""
        answer = {"role": "assistant", "content": target}
        if self.is_vlm:
            answer = {"role": "assistant", "content": [{"type": "text", "text": target}]}
        full = render_chat(self.processor, prompt_messages + [answer], add_generation_prompt=False)
        if full.startswith(prompt_text):
            return full[len(prompt_text) :]
        return target + (self.tokenizer.eos_token or "")

    def encode(self, example: Example) -> EncodedExample:
        """The prompt as evaluation and GRPO encode it (:func:`recipes.model_io.chat_inputs.processor_inputs`), then
        the tokenized answer."""
        messages, images, videos = split_visuals(example.prompt, self.max_frames)
        if not self.is_vlm:
            messages = flatten_text(messages)
        prompt_text = render_chat(self.processor, messages, add_generation_prompt=True)
        completion = self.completion_text(messages, prompt_text, example.target)
        completion_ids = self.tokenizer(completion, add_special_tokens=False)["input_ids"]
        encoded = processor_inputs(self.processor, [messages], [images], videos)
        prompt_ids = encoded["input_ids"][0].tolist()
        token_types = encoded.get("mm_token_type_ids") if self.is_vlm else None
        token_types = token_types[0].tolist() + [0] * len(completion_ids) if token_types is not None else None
        visual = {key: encoded[key] for key in VISUAL_KEYS if key in encoded}
        labels = [-100] * len(prompt_ids) + completion_ids
        return EncodedExample(prompt_ids + completion_ids, labels, token_types, visual)

    def encoded(self, index_row: dict) -> EncodedExample:
        """``encode(example(index_row))``, from the cache when it holds the row (``encoded_cache_mb``); a row longer
        than ``max_length`` becomes an empty row (:meth:`refuse`)."""
        key = (int(index_row["source"]), int(index_row["row"]))
        cached = self._encoded.get(key)
        if cached is not None:
            return cached
        example = self.example(index_row)
        item = self.encode(example)
        if self.max_length is not None and len(item.input_ids) > self.max_length:
            item = self.refuse(index_row, example.key, item)
        size = item.nbytes()
        if self._encoded_bytes + size <= self.encoded_cache_mb * 2**20:
            self._encoded[key] = item
            self._encoded_bytes += size
        return item

    def refuse(self, index_row: dict, key: str, item: EncodedExample) -> EncodedExample:
        """A row longer than ``max_length`` is never cut (a cut inside a video's tokens breaks Qwen3-VL's match of
        features to tokens, and a cut answer trains on half a label): it trains as one masked padding token, which
        scores nothing and changes no gradient, and is listed in ``refused_rows_log`` (one file per process, dataloader
        workers included), which the run's record counts (:func:`refused_rows`). TRL 1.16's SFT loss divides by the
        labelled tokens of the whole step clamped at 1 (``SFTTrainer.compute_loss``), so even a step of refused rows
        only is a zero loss, not a NaN."""
        visual = sum(1 for kind in item.mm_token_type_ids or [] if kind)
        label = self.sources[int(index_row["source"])].source.label
        entry = {"source": label, "row": int(index_row["row"]), "key": key, "tokens": len(item.input_ids)}
        entry["visual_tokens"] = visual
        if not self._refused_any:
            logger.warning(
                "%s row %s: %d tokens (%d of them visual) exceed max_length=%d: the row is refused (not cut) and "
                "counted in the run's record; raise max_length or lower max_frames / the pixel caps to train on it",
                label,
                entry["row"],
                entry["tokens"],
                visual,
                self.max_length,
            )
            self._refused_any = True
        if self.refused_rows_log is not None:
            folder = Path(self.refused_rows_log)
            folder.mkdir(parents=True, exist_ok=True)
            with (folder / f"{socket.gethostname()}-{os.getpid()}.jsonl").open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(entry) + "\n")
        types = [0] if item.mm_token_type_ids is not None else None
        return EncodedExample([self.tokenizer.pad_token_id], [-100], types, {}, refused=True)

    def __call__(self, index_rows: list[dict]) -> dict[str, torch.Tensor]:
        return self.collate([self.encoded(index_row) for index_row in index_rows])

    def collate(self, encoded: list[EncodedExample]) -> dict[str, torch.Tensor]:
        """Encoded examples as one batch: padded, their visual tensors joined, the dummy visuals appended (what
        ``sureon plan`` times for a row beside its encoding)."""
        batch = self.pad(encoded)
        for key in VISUAL_KEYS:
            parts = [item.visual[key] for item in encoded if key in item.visual]
            if parts:
                batch[key] = torch.cat(parts)
        if self.uniform_vision_calls and self.is_vlm:
            if "pixel_values" not in batch:
                self.append_dummy(batch, "image")
            if "pixel_values_videos" not in batch:
                self.append_dummy(batch, "video")
        return batch

    def pad(self, encoded: list[EncodedExample]) -> dict[str, torch.Tensor]:
        width = max(len(item.input_ids) for item in encoded)
        pad_id = self.tokenizer.pad_token_id
        batch = {
            "input_ids": torch.full((len(encoded), width), pad_id, dtype=torch.long),
            "attention_mask": torch.zeros((len(encoded), width), dtype=torch.long),
            "labels": torch.full((len(encoded), width), -100, dtype=torch.long),
        }
        with_types = all(item.mm_token_type_ids is not None for item in encoded) and self.is_vlm
        if with_types:
            batch["mm_token_type_ids"] = torch.zeros((len(encoded), width), dtype=torch.int)
        for i, item in enumerate(encoded):
            n = len(item.input_ids)
            batch["input_ids"][i, :n] = torch.tensor(item.input_ids)
            batch["attention_mask"][i, :n] = 1
            batch["labels"][i, :n] = torch.tensor(item.labels)
            if with_types:
                batch["mm_token_type_ids"][i, :n] = torch.tensor(item.mm_token_type_ids, dtype=torch.int)
        return batch

    def append_dummy(self, batch: dict[str, torch.Tensor], kind: str) -> None:
        append_dummy_visual(batch, self.processor, kind)


def append_dummy_visual(batch: dict[str, torch.Tensor], processor, kind: str) -> int:
    """A one-token black image or video after the last row's padding: masked, unlabelled, never seen; returns the
    columns appended. Its grid comes last and its tokens last in row-major order, so the real visuals keep their
    features, and its masked tokens leave every row's positions as they were. (The SFT collator's
    ``uniform_vision_calls``, and the GRPO trainer's: ``recipes.training.grpo_trainer``.)"""
    device = batch["input_ids"].device
    tokenizer = tokenizer_of(processor)
    source = processor.image_processor if kind == "image" else processor.video_processor
    merge, patch, temporal = source.merge_size, source.patch_size, source.temporal_patch_size
    grid = torch.tensor([[1, merge, merge]], device=device)
    pixels = torch.zeros(merge * merge, 3 * temporal * patch * patch, device=device)
    pad_token = "<|image_pad|>" if kind == "image" else "<|video_pad|>"
    pad_token = getattr(processor, f"{kind}_token", pad_token)
    tokens = [
        processor.vision_start_token_id,
        tokenizer.convert_tokens_to_ids(pad_token),
        processor.vision_end_token_id,
    ]
    rows = batch["input_ids"].shape[0]
    extra = torch.full((rows, len(tokens)), tokenizer.pad_token_id, dtype=torch.long, device=device)
    extra[-1] = torch.tensor(tokens, device=device)
    batch["input_ids"] = torch.cat([batch["input_ids"], extra], dim=1)
    batch["attention_mask"] = torch.cat([batch["attention_mask"], torch.zeros_like(extra)], dim=1)
    if "labels" in batch:
        batch["labels"] = torch.cat([batch["labels"], torch.full_like(extra, -100)], dim=1)
    if "mm_token_type_ids" in batch:
        types = torch.zeros((rows, len(tokens)), dtype=batch["mm_token_type_ids"].dtype, device=device)
        types[-1, 1] = 1 if kind == "image" else 2
        batch["mm_token_type_ids"] = torch.cat([batch["mm_token_type_ids"], types], dim=1)
    key, grid_key = (
        ("pixel_values", "image_grid_thw") if kind == "image" else ("pixel_values_videos", "video_grid_thw")
    )
    if key in batch:
        raise InputError(f"a dummy {kind} is only for a batch without one")
    batch[key] = pixels
    batch[grid_key] = grid
    return len(tokens)


def refused_rows(folder: str | Path) -> list[dict]:
    """The rows a run refused for their length (``SFTCollator.refused_rows_log``), each once, in a stable order."""
    rows = {}
    for path in sorted(Path(folder).glob("*.jsonl")) if Path(folder).is_dir() else []:
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                entry = json.loads(line)
                rows[(entry["source"], entry["row"])] = entry
            except (json.JSONDecodeError, KeyError, TypeError):
                continue  # a line a killed process left half-written
    return [rows[key] for key in sorted(rows)]
