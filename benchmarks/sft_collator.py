"""Benchmark the training collator (recipes/training/collator.py) at the 8B recipe's real sizes: the CPU it needs per
sample, the cores that keeps the GPUs fed, and the padding of its batches, random against length-grouped.

Part 1, the loader. Rows stored as the builders store them (Sureon-DB clips of 8 JPEG frames of 768x432 at quality 90,
with a photographic texture; single images; text rows), through the collator with the recipe's ``max_frames`` and
pixel caps (read from ``recipes/qwen3-vl-8b/sft/config_sureon_vlm.yaml``) and Qwen3-VL's published processor sizes
(a stand-in tokenizer: nothing is downloaded), on one torch thread as each dataloader worker runs. Process CPU time
per sample, in batches of the recipe's ``per_device_train_batch_size``:

- in a dataloader worker, as the trainer runs it: collating and handing each batch to the training process;
- the collator in this process, split into row reading and decoding (``dataset[row]``: Arrow, then the JPEG decode
  of the frames), the processor alone (resize, normalise, patchify, tokenize) on the same rendered prompts and
  decoded frames, one row at a time as the collator calls it, and the rest (prompt formatter, chat template, answer
  tokens, labels, padding, joining the batch's tensors); and the share of it that is the kernel's (system time);

then the cores the loader needs at the plan's 18.6 samples/s on 4x H200 for ``config_sureon_vlm.yaml`` (every sample a
clip: the costliest case), and what storing the frames otherwise would save, each measured: raw uint8 frames (no
JPEG decode) and JPEG frames already at the processor's size (no resize).

Part 2, padding. Rows of the 8B mixture at their exact lengths (counted without decoding, as the length-grouped
batches count them: ``recipes/training/batching.py``), in the proportions of the Sureon paper's Table 13 and
Sureon-DB, drawn as the trainer draws them at the recipe's batch (4 a GPU, 64 a step): padded tokens over tokens
computed, random against grouped, and the grouped draw's bound ``(batch - 1) x (longest - shortest) / window tokens``.

    python benchmarks/sft_collator.py [--clips 16] [--rows 20000] [--repeats 3] [--workdir build/bench]
"""

import argparse
import io
import os
import statistics
import sys
import time
from pathlib import Path

import datasets
import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader


REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.timing import parse_with_quick  # noqa: E402
from builders.schema import video_qa_features  # noqa: E402
from recipes.model_io.chat_inputs import media_kwargs, render_chat, split_visuals  # noqa: E402
from recipes.model_io.modeling import apply_pixel_caps  # noqa: E402
from recipes.training.architectures import standin_processor  # noqa: E402
from recipes.training.batching import STEPS_PER_WINDOW, counting_processes, row_lengths  # noqa: E402
from recipes.training.collator import SFTCollator  # noqa: E402
from recipes.training.mixture import MixtureSource, build_mixture  # noqa: E402
from recipes.training.plan.batching import loader_plan, padding_share  # noqa: E402
from recipes.training.plan.tokens import one_thread  # noqa: E402
from recipes.training.recipe_file import SFT, read_recipe  # noqa: E402


RECIPE = REPO / "recipes" / "qwen3-vl-8b" / "sft" / "config_sureon_vlm.yaml"
GUESSER_RECIPE = REPO / "recipes" / "qwen3-vl-8b" / "guesser" / "config_refined.yaml"
PLANNED_SAMPLES_PER_SECOND = 18.6  # sureon plan's figure for the recipe on 4x H200 (docs/training/planning.md)
PLANNED_GPUS = 4
FRAME = (768, 432)  # what the Sureon builder stores from a 720p lecture (max_side 768)
QUESTION_WORDS = ("which", "instrument", "structure", "phase", "step", "action", "does", "the", "surgeon", "perform")


def photographic_frame(seed: int, size: tuple[int, int] = FRAME) -> np.ndarray:
    """A frame with a photograph's 1/f amplitude spectrum (smooth regions and edges), so that JPEG sizes and decode
    times are a video frame's, not a flat test pattern's (a few KB) or white noise's (hundreds of KB)."""
    width, height = size
    rng = np.random.default_rng(seed)
    fy, fx = np.fft.fftfreq(height)[:, None], np.fft.rfftfreq(width)[None, :]
    frequency = np.hypot(fx, fy)
    frequency[0, 0] = 1.0
    channels = []
    for _ in range(3):
        spectrum = (rng.normal(size=frequency.shape) + 1j * rng.normal(size=frequency.shape)) / frequency**1.4
        channel = np.fft.irfft2(spectrum, s=(height, width))
        channels.append((channel - channel.mean()) / channel.std() * 45 + 110)
    return np.clip(np.stack(channels, -1), 0, 255).astype(np.uint8)


def jpeg(pixels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def sentence(rng, low: int, high: int) -> str:
    return " ".join(rng.choice(QUESTION_WORDS, size=int(rng.integers(low, high + 1))).tolist())


def qa_row(number: int, frames: list, size_of_text: tuple[int, int], rng, clip: bool) -> dict:
    """A video-QA row in the builders' schema: a clip (``start`` set) or a single image, or text (no frames)."""
    start = 30.0 + 20 * number
    options = [sentence(rng, 2, 8) for _ in range(int(rng.integers(4, 8)))]
    return {
        "question_id": f"bench_{number:06d}",
        "clip_id": f"video_{start}_{start + 16}" if clip else "",
        "source_id": f"video{number % 5}",
        "start": start if clip else None,
        "end": start + 16 if clip else None,
        "category": "AD",
        "category_slug": "action_description",
        "question": sentence(rng, *size_of_text) + "?",
        "options": options,
        "answer": options[0],
        "answer_index": 0,
        "answer_format": "mcq",
        "answer_order": [],
        "passes_blind_curation": True,
        "specialty": "General",
        "subject": "Hepatobiliary",
        "procedure": "cholecystectomy",
        "transcript": "",
        "reasoning": "",
        "frames": frames,
        "frame_timestamps": [start + 2.0 * k for k in range(len(frames))],
        "blurred_regions": [[] for _ in frames],
    }


def write_rows(folder: Path, name: str, rows: list[dict]) -> MixtureSource:
    from datasets import Dataset

    path = folder / f"{name}.parquet"
    Dataset.from_list(rows, features=video_qa_features(with_frames=True)).to_parquet(str(path))
    return MixtureSource(path="parquet", data_files=str(path), format="video_qa")


def recipe_processor():
    """Qwen3-VL's published processor sizes with the recipe's pixel caps, and the recipe's frame count."""
    recipe = read_recipe(RECIPE, SFT)
    processor = standin_processor()
    apply_pixel_caps(processor, recipe.get("image_max_pixels"), recipe.get("video_max_pixels"))
    return processor, recipe.get("max_frames", 8), recipe.get("per_device_train_batch_size", 4)


def cpu_seconds(repeats: int, work) -> float:
    """The least process CPU time of ``repeats`` runs of ``work()`` (the least disturbed on a shared machine), after
    one untimed run (imports, caches, the allocator's first pages)."""
    work()
    spent = []
    for _ in range(repeats):
        started = time.process_time()
        work()
        spent.append(time.process_time() - started)
    return min(spent)


class StampedCollator:
    """The collator with the worker's CPU clock at each call put in the batch: between two calls a dataloader worker
    collates one batch and hands it to the training process (pickled into shared memory)."""

    def __init__(self, collator):
        self.collator = collator

    def __call__(self, index_rows):
        started = time.process_time()
        batch = self.collator(index_rows)
        batch["worker_cpu_clock"] = torch.tensor(started, dtype=torch.float64)
        return batch


def worker_seconds(collator, index, batch_size: int) -> float:
    """CPU seconds a sample costs a dataloader worker, as the trainer runs it (one worker, one torch thread)."""
    loader = DataLoader(index, batch_size=batch_size, collate_fn=StampedCollator(collator), num_workers=1)
    clocks = [float(batch["worker_cpu_clock"]) for batch in loader]
    return (clocks[-1] - clocks[0]) / (batch_size * (len(clocks) - 1))


def part_loader(args, processor, max_frames: int, batch_size: int) -> float:
    rng = np.random.default_rng(0)
    frames = [photographic_frame(seed) for seed in range(8)]
    encoded = [jpeg(pixels) for pixels in frames]
    clip_rows = [
        qa_row(i, [{"bytes": encoded[(i + k) % 8], "path": None} for k in range(8)], (8, 20), rng, True)
        for i in range(args.clips)
    ]
    image_rows = [qa_row(i, [{"bytes": encoded[i % 8], "path": None}], (8, 20), rng, False) for i in range(args.clips)]
    text_rows = [qa_row(i, [], (8, 20), rng, False) for i in range(args.clips)]
    results = {}
    for kind, rows in (("clip", clip_rows), ("image", image_rows), ("text", text_rows)):
        loaded, index, _ = build_mixture([write_rows(args.workdir, f"bench-{kind}", rows)])
        collator = SFTCollator(processor, loaded, max_frames=max_frames, uniform_vision_calls=True)
        batches = [
            [index[i] for i in range(start, min(start + batch_size, len(index)))]
            for start in range(0, len(index), batch_size)
        ]
        in_worker = worker_seconds(collator, index, batch_size)
        with one_thread():  # as PyTorch runs each dataloader worker
            prepared = []  # the processor's own input, one row at a time as the collator calls it (not timed)
            for i in range(len(index)):
                messages, images, videos = split_visuals(collator.example(index[i]).prompt, max_frames)
                kwargs = media_kwargs(images, videos)
                if videos:
                    kwargs["cap_pixels_per_frame"] = True
                prepared.append(([render_chat(processor, messages, add_generation_prompt=True)], kwargs))

            def collate(collator=collator, batches=batches):
                for batch in batches:
                    collator(batch)

            def process(prepared=prepared):
                for texts, kwargs in prepared:
                    processor(text=texts, padding=True, return_tensors="pt", add_special_tokens=False, **kwargs)

            def read(dataset=loaded[0].dataset, index=index):
                for i in range(len(index)):
                    dataset[int(index[i]["row"])]

            before = os.times()
            total = cpu_seconds(args.repeats, collate) / len(index)
            after = os.times()
            kernel = (after.system - before.system) / (after.user + after.system - before.user - before.system)
            reading = cpu_seconds(args.repeats, read) / len(index)
            processing = cpu_seconds(args.repeats, process) / len(index)
        results[kind] = (in_worker, total, reading, processing, kernel)

    print(
        f"part 1, the loader: CPU seconds per sample at the recipe's sizes (one torch thread, batch {batch_size}; "
        f"JPEG {statistics.mean(map(len, encoded)) / 1024:.0f} KB per {FRAME[0]}x{FRAME[1]} frame)"
    )
    header = f"{'row':6} {'in a worker':>11} {'collator':>9} {'read+decode':>12} {'processor':>10} {'rest':>7}"
    print(f"{header} {'kernel':>7}")
    for kind, (in_worker, total, reading, processing, kernel) in results.items():
        rest = max(total - reading - processing, 0.0)
        print(
            f"{kind:6} {1000 * in_worker:9.1f}ms {1000 * total:7.1f}ms {1000 * reading:10.1f}ms "
            f"{1000 * processing:8.1f}ms {1000 * rest:5.1f}ms {kernel:7.0%}"
        )
    clip, total, reading, processing, kernel = results["clip"]
    print(f"clip: ratio in a worker / the collator in process: {clip / total:.2f}x (handing the batch over)")
    print(f"clip: ratio collator / processor only: {total / processing:.2f}x")
    print(
        f"clip: read+decode is {reading / total:.0%} of the collator, the processor {processing / total:.0%}; "
        f"{kernel:.0%} of the collator's CPU is the kernel's (fresh pages for each batch's pixel tensors)"
    )
    plan = loader_plan(clip, PLANNED_SAMPLES_PER_SECOND, num_gpus=PLANNED_GPUS, cores=None)
    print(
        f"at the plan's {PLANNED_SAMPLES_PER_SECOND} samples/s on {PLANNED_GPUS} GPUs, every sample a clip: "
        f"{plan['cores_needed']:.2f} cores for the loader, {plan['cores_needed'] / PLANNED_GPUS:.2f} per GPU "
        f"(+1 for each rank's own process: {plan['cores_per_gpu_needed']:.2f}); "
        f"dataloader_num_workers for twice that load: {plan['workers_per_gpu']}"
    )
    part_stores(args, processor, frames, encoded, total)
    return clip


def part_stores(args, processor, frames: list[np.ndarray], encoded: list[bytes], clip: float):
    """What storing a clip's frames otherwise saves per sample: raw uint8 (no JPEG decode), or JPEG at the size the
    processor resizes to (no resize)."""
    from recipes.model_io.chat_inputs import video_metadata

    raw = [pixels.tobytes() for pixels in frames]
    height, width = frames[0].shape[:2]
    target = processor.video_processor.get_num_of_video_patches(8, height, width, {"cap_pixels_per_frame": True})
    merge = processor.video_processor.merge_size * processor.video_processor.patch_size
    # the processor's own rule puts 768x432 at 768x448 (432 rounds up to a multiple of 32)
    resized_height = round(height / merge) * merge
    presized = [jpeg(np.asarray(Image.fromarray(pixels).resize((width, resized_height)))) for pixels in frames]
    assert processor.video_processor.get_num_of_video_patches(8, resized_height, width, {}) == target

    def decode_jpeg(stored=encoded):
        return [Image.open(io.BytesIO(data)).convert("RGB") for data in stored]

    def decode_raw():
        return [Image.frombuffer("RGB", (width, height), data) for data in raw]

    def processor_on(decoded):
        video = {"frames": decoded, "timestamps": [2.0 * k for k in range(len(decoded))]}
        kwargs = media_kwargs([], [video])
        kwargs["video_metadata"] = [video_metadata(video["timestamps"])]
        return lambda: processor(
            text=["<|video_pad|>"], return_tensors="pt", add_special_tokens=False, cap_pixels_per_frame=True, **kwargs
        )

    with one_thread():
        jpeg_decode = cpu_seconds(args.repeats, decode_jpeg)
        raw_decode = cpu_seconds(args.repeats, decode_raw)
        as_stored = cpu_seconds(args.repeats, processor_on(decode_jpeg()))
        at_size = cpu_seconds(args.repeats, processor_on(decode_jpeg(presized)))
    kb = 1024 * len(frames)
    print("frames stored otherwise, per 8-frame clip:")
    print(
        f"  JPEG {width}x{height} (today): {sum(map(len, encoded)) / kb:.0f} KB a frame, "
        f"decode {1000 * jpeg_decode:.1f} ms"
    )
    print(
        f"  raw uint8: {len(raw[0]) / 1024:.0f} KB a frame ({len(raw[0]) * 8 / sum(map(len, encoded)):.0f}x the "
        f"bytes), decode {1000 * raw_decode:.2f} ms: saves {1000 * (jpeg_decode - raw_decode):.1f} ms, "
        f"{(jpeg_decode - raw_decode) / clip:.0%} of the collator's clip"
    )
    print(
        f"  JPEG at the processor's size {width}x{resized_height}: processor {1000 * at_size:.1f} ms against "
        f"{1000 * as_stored:.1f} ms (ratio {as_stored / at_size:.2f}x): saves {1000 * (as_stored - at_size):.1f} ms, "
        f"{(as_stored - at_size) / clip:.0%} of the collator's clip"
    )


def mixture_rows(args, processor, max_frames: int, clip_share: float) -> list[dict]:
    """Rows of the 8B mixture at their exact lengths (frames never decoded; each stored frame a tiny JPEG of the
    right size, only its header is read): Sureon-DB clips (8 frames, 768x432), the public corpus's clips (4-8
    frames at 16:9, 5:4 or 4:3), its single images at those shapes (its grounded questions list a vocabulary, hence
    longer texts), and 2% text rows; ``clip_share`` of the rows are clips (a tenth of them Sureon-DB's), or with
    ``clip_share`` 1 Sureon-DB's clips alone (``config_sureon_only.yaml``)."""
    rng = np.random.default_rng(1)
    shapes = [(768, 432), (768, 614), (768, 576)]
    tiny = {shape: jpeg(np.zeros((shape[1], shape[0], 3), np.uint8)) for shape in shapes}
    shares = [clip_share / 10, clip_share * 9 / 10, 0.98 - clip_share, 0.02] if clip_share < 1 else [1, 0, 0, 0]
    kinds = rng.choice(4, size=args.rows, p=shares)
    rows, sources = [], []
    for number, kind in enumerate(kinds):
        shape = shapes[0] if kind == 0 else shapes[int(rng.integers(len(shapes)))]
        frames = {0: 8, 1: int(rng.integers(4, 9)), 2: 1, 3: 0}[int(kind)]
        text = {0: (8, 30), 1: (6, 40), 2: (6, 120), 3: (20, 80)}[int(kind)]
        stored = [{"bytes": tiny[shape], "path": None}] * frames
        rows.append(qa_row(number, stored, text, rng, clip=kind in (0, 1)))
        sources.append(("Sureon-DB clip", "public clip", "public image", "text")[int(kind)])
    loaded, index, _ = build_mixture([write_rows(args.workdir, f"bench-mixture-{clip_share}", rows)])
    collator = SFTCollator(processor, loaded, max_frames=max_frames)
    processes = counting_processes()
    started = time.perf_counter()
    lengths = row_lengths(collator, index, processes=processes)
    rate = len(lengths) / (time.perf_counter() - started)
    print(f"  (lengths counted without decoding: {rate:,.0f} rows/s on {processes} processes)")
    return [{"tokens": length, "source": source} for length, source in zip(lengths, sources, strict=True)]


def guesser_rows(args, processor) -> list[dict]:
    """Sureon-DB's rows as the blind guessers read them (no frames: the question, its 4-7 options and the answer)."""
    rng = np.random.default_rng(2)
    rows = [qa_row(number, [], (8, 30), rng, clip=True) for number in range(max(args.rows // 4, 50))]
    loaded, index, _ = build_mixture([write_rows(args.workdir, "bench-guesser", rows)])
    lengths = row_lengths(SFTCollator(processor, loaded, blind=True), index, processes=counting_processes())
    return [{"tokens": length, "source": "Sureon-DB, blind"} for length in lengths]


def padding_line(label: str, rows: list[dict], batch_size: int, global_batch: int) -> None:
    tokens = [row["tokens"] for row in rows]
    random_share = padding_share(rows, batch_size, grouped=False, seed=0)
    grouped_share = padding_share(rows, batch_size, grouped=True, seed=0, global_batch_size=global_batch)
    window = min(STEPS_PER_WINDOW * global_batch, len(rows))
    bound = (batch_size - 1) * (max(tokens) - min(tokens)) / (window * float(np.mean(tokens)))
    print(
        f"{label:>12} {int(np.median(tokens)):7d}/{max(tokens):<7d} {random_share:7.1%} "
        f"{grouped_share:8.2%} {bound:6.1%} {random_share / max(grouped_share, 1e-9):13.0f}x"
    )


def part_padding(args, processor, max_frames: int, batch_size: int, global_batch: int) -> None:
    print(
        f"part 2, padding: {args.rows} rows of the 8B mixture, batch {batch_size} a GPU, {global_batch} a step "
        f"(grouped: windows of {STEPS_PER_WINDOW} steps)"
    )
    print(
        f"{'clip share':>12} {'tokens p50/max':>15} {'random':>7} {'grouped':>8} {'bound':>6} {'random/grouped':>14}"
    )
    for clip_share in args.clip_shares:
        padding_line(
            f"{clip_share:.0%}", mixture_rows(args, processor, max_frames, clip_share), batch_size, global_batch
        )
    padding_line("Sureon-DB", mixture_rows(args, processor, max_frames, 1.0), batch_size, global_batch)
    guesser = read_recipe(GUESSER_RECIPE, SFT)
    print(
        f"the blind guessers ({GUESSER_RECIPE.name}): batch {guesser['per_device_train_batch_size']} a GPU, "
        f"{guesser['global_batch_size']} a step"
    )
    padding_line(
        "blind", guesser_rows(args, processor), guesser["per_device_train_batch_size"], guesser["global_batch_size"]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=16, help="rows of each kind timed in part 1 (over a batch)")
    parser.add_argument("--rows", type=int, default=20000, help="rows of the mixture in part 2")
    parser.add_argument("--clip-shares", type=float, nargs="+", default=[0.13, 0.33, 0.5])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=REPO / "build" / "bench")
    args = parse_with_quick(parser, argv, {"clips": 5, "rows": 200, "repeats": 1, "clip_shares": [0.33]})
    args.workdir.mkdir(parents=True, exist_ok=True)
    datasets.disable_progress_bars()
    processor, max_frames, batch_size = recipe_processor()
    if args.clips <= batch_size:
        parser.error(f"--clips must be above the recipe's batch ({batch_size}): a worker's time is between batches")
    part_loader(args, processor, max_frames, batch_size)
    global_batch = read_recipe(RECIPE, SFT).get("global_batch_size", batch_size)
    part_padding(args, processor, max_frames, batch_size, global_batch)


if __name__ == "__main__":
    main()
