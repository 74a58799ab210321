"""Benchmark the training collator (recipes/training/collator.py) on 8-frame clips at Qwen3-VL's real processor sizes.

For the same batches of video-QA rows (8 JPEG frames of 640x360 each, as the Sureon builder writes them), this times

- the collator: index rows -> dataset rows (JPEG decode) -> the one prompt formatter -> chat template -> processor
  -> answer tokens, labels, padding (what the trainer calls for every batch);
- the baselines, work any video collator has to do: reading the rows (the JPEG decode of their frames), and the
  processor alone on the same rendered prompt texts and already-decoded frames,

and prints the collator's time per sample and its ratios against the processor alone and against row reading +
processor, measured in the same run (the second ratio is the collator's own overhead: formatting, templates,
labels). The processor uses Qwen3-VL's default image and video sizes with a tiny tokenizer (nothing is downloaded).

    python benchmarks/sft_collator.py [--samples 32] [--batch-size 4] [--repeats 3] [--workdir build/bench]
"""

import argparse
import io
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from PIL import Image


REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.timing import parse_with_quick  # noqa: E402
from builders.schema import video_qa_features  # noqa: E402
from recipes.training.chat_inputs import media_kwargs, split_visuals  # noqa: E402
from recipes.training.collator import SFTCollator  # noqa: E402
from recipes.training.mixture import MixtureSource, build_mixture  # noqa: E402
from recipes.training.tiny_models import QWEN3_VL_TEMPLATE, train_tokenizer, trl_chat_template  # noqa: E402


def jpeg(seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 255, (360, 640, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def write_dataset(folder: Path, samples: int) -> Path:
    from datasets import Dataset

    rows = []
    for i in range(samples):
        start = 30.0 + 20 * i
        rows.append(
            {
                "question_id": f"bench_{i:04d}",
                "clip_id": f"video_{start}_{start + 8}",
                "source_id": f"video{i % 4}",
                "start": start,
                "end": start + 8,
                "category": "AD",
                "category_slug": "action_description",
                "question": "What action is being performed on the cystic duct?",
                "options": ["Clipping", "Cutting", "Dissecting", "Retracting"],
                "answer": "Clipping",
                "answer_index": 0,
                "answer_format": "mcq",
                "answer_order": [],
                "passes_blind_curation": True,
                "specialty": "General",
                "subject": "Hepatobiliary",
                "procedure": "cholecystectomy",
                "transcript": "",
                "reasoning": "",
                "frames": [{"bytes": jpeg(8 * i + k), "path": None} for k in range(8)],
                "frame_timestamps": [start + 0.5 + k for k in range(8)],
                "blurred_regions": [[] for _ in range(8)],  # the frame columns hold it since blurring (schema.py)
            }
        )
    path = folder / "bench-clips.parquet"
    Dataset.from_list(rows, features=video_qa_features(with_frames=True)).to_parquet(str(path))
    return path


def real_sized_processor():
    from transformers import Qwen2VLImageProcessor, Qwen3VLProcessor, Qwen3VLVideoProcessor

    processor = Qwen3VLProcessor(
        image_processor=Qwen2VLImageProcessor(patch_size=16, merge_size=2),
        video_processor=Qwen3VLVideoProcessor(cap_pixels_per_frame=True),
        tokenizer=train_tokenizer(),
        chat_template=trl_chat_template(QWEN3_VL_TEMPLATE),
    )
    return processor


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=REPO / "build" / "bench")
    args = parse_with_quick(parser, argv, {"samples": 2, "batch_size": 2, "repeats": 1})
    args.workdir.mkdir(parents=True, exist_ok=True)
    data = write_dataset(args.workdir, args.samples)
    loaded, index, _ = build_mixture([MixtureSource(path="parquet", data_files=str(data), format="video_qa")])
    processor = real_sized_processor()
    collator = SFTCollator(processor, loaded, uniform_vision_calls=True)
    batches = [
        [index[i] for i in range(start, min(start + args.batch_size, len(index)))]
        for start in range(0, len(index), args.batch_size)
    ]
    # Baseline inputs: the same prompts, rendered once, with frames decoded once (not timed).
    prepared = []
    for batch in batches:
        texts, images, videos = [], [], []
        for row in batch:
            messages, row_images, row_videos = split_visuals(collator.example(row).prompt)
            texts.append(processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))
            images += row_images
            videos += row_videos
        prepared.append((texts, media_kwargs(images, videos)))

    def run_collator():
        for batch in batches:
            collator(batch)

    def run_processor():
        for texts, kwargs in prepared:
            processor(text=texts, padding=True, return_tensors="pt", **kwargs)

    def run_reading():
        for batch in batches:
            for row in batch:
                loaded[row["source"]].dataset[row["row"]]

    timings = {"collator": [], "processor only": [], "row reading": []}
    steps = (("collator", run_collator), ("processor only", run_processor), ("row reading", run_reading))
    for _ in range(args.repeats):
        for name, function in steps:
            start = time.perf_counter()
            function()
            timings[name].append((time.perf_counter() - start) / args.samples)
    collator_time = statistics.median(timings["collator"])
    baseline = statistics.median(timings["processor only"])
    reading = statistics.median(timings["row reading"])
    tokens = collator(batches[0])["pixel_values_videos"].shape[0] // 4 // len(batches[0])
    print(f"{args.samples} clips x 8 frames (640x360 JPEG), batch {args.batch_size}, ~{tokens} visual tokens per clip")
    print(f"collator:       {1000 * collator_time:8.1f} ms per sample ({1 / collator_time:6.1f} samples/s)")
    print(f"processor only: {1000 * baseline:8.1f} ms per sample ({1 / baseline:6.1f} samples/s)")
    print(f"row reading:    {1000 * reading:8.1f} ms per sample (JPEG decode of 8 frames)")
    print(f"ratio collator / processor only: {collator_time / baseline:.2f}x")
    print(f"ratio collator / (row reading + processor): {collator_time / (reading + baseline):.2f}x")


if __name__ == "__main__":
    main()
