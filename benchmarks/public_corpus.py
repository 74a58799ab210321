"""Benchmark the public-corpus build (public_converters/) on a CholecSeg8k-shaped source at the real frame size.

It writes ``--frames`` frames of 854x480 with watershed class masks (six classes over the three seg-to-box policies)
in CholecSeg8k's native layout, then prints

- seg-to-box time per mask as a ratio against decoding the same PNG masks alone (the floor any converter pays),
- templating throughput: QA records per second over the source's image items, and over the clip items of a
  synthetic two-hour Cholec80-style timeline (phases and tool intervals, no media),
- the speed-up of the whole build (read, seg-to-box, media check, templating, JPEG frames, parquet) with
  ``--num-proc 2`` over ``--num-proc 1``, each from an empty media cache.

    python benchmarks/public_corpus.py [--frames 160] [--repeats 3]
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image


REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.timing import best_of, parse_with_quick  # noqa: E402
from public_converters.build import BuildOptions, build_public  # noqa: E402
from public_converters.clips import SamplingConfig  # noqa: E402
from public_converters.items import clip_items, context_for, image_items  # noqa: E402
from public_converters.normalise import Normalised, convert_masks, normalise_source  # noqa: E402
from public_converters.normalise import observed_capabilities as capabilities_of  # noqa: E402
from public_converters.schema import Segment, SourceTables, Video  # noqa: E402
from public_converters.seg_to_box import load_image  # noqa: E402
from public_converters.sources.cholec80 import PHASES, TOOLS  # noqa: E402
from public_converters.spec import get_source  # noqa: E402
from public_converters.templating import load_templates, render  # noqa: E402


WIDTH, HEIGHT = 854, 480


def write_source(root: Path, frames: int) -> None:
    """CholecSeg8k layout: ``videoNN/videoNN_SSSSS/frame_<k>_endo.png`` + ``..._watershed_mask.png``."""
    rng = np.random.default_rng(0)
    ys, xs = np.mgrid[0:HEIGHT, 0:WIDTH]
    for index in range(frames):
        video, position = (1, 9, 12, 17)[index % 4], index // 4
        start = 80 * (position // 80 + 1)  # clips of 80 consecutive frames, named by their first frame
        frame = start + position % 80
        clip = root / f"video{video:02d}" / f"video{video:02d}_{start:05d}"
        clip.mkdir(parents=True, exist_ok=True)
        mask = np.full((HEIGHT, WIDTH), 11, dtype=np.uint8)  # abdominal wall (semantic)
        mask[:, :40] = 50
        cx, cy = rng.integers(150, 700), rng.integers(100, 380)
        mask[(xs - cx) ** 2 / 120**2 + (ys - cy) ** 2 / 70**2 < 1] = 22  # gallbladder (single)
        mask[(xs - cx - 200) ** 2 + (ys - 60) ** 2 < 40**2] = 21  # liver (single)
        for _ in range(3):  # blood pools (components)
            bx, by = rng.integers(60, 800), rng.integers(30, 450)
            mask[(xs - bx) ** 2 + (ys - by) ** 2 < rng.integers(8, 25) ** 2] = 24
        mask[300:420, 600:640] = 31  # grasper (components)
        mask[[0, -1], :] = 255
        mask[:, [0, -1]] = 255
        image = np.dstack([(xs * 255 // WIDTH), (ys * 255 // HEIGHT), mask]).astype(np.uint8)
        Image.fromarray(image).save(clip / f"frame_{frame}_endo.png")
        Image.fromarray(mask).save(clip / f"frame_{frame}_endo_watershed_mask.png")


def seg_to_box_ratio(root: Path, repeats: int) -> tuple[float, float]:
    spec = get_source("cholecseg8k")
    tables = spec.read(root, spec.mapper())
    labels = {label for mask in tables.masks for label in mask.palette.values() if label}
    kinds = {label: spec.mapper().kind_of(label) or "anatomy" for label in labels}
    canonical = {label: spec.labels[kinds[label]][label] for label in labels}
    policies = {label: spec.mask_policies[label] for label in labels}
    decode = best_of(repeats, lambda: [np.asarray(load_image(root / m.path)) for m in tables.masks])
    convert = best_of(repeats, lambda: convert_masks(tables.masks, root, policies, kinds, canonical))
    return convert / len(tables.masks), convert / decode


def long_timeline() -> Normalised:
    """Two hours of Cholec80-style annotation: seven phases, tool intervals; no media is touched by templating."""
    fps, total = 25, 2 * 3600 * 25
    phases = list(PHASES.values())
    bounds = np.linspace(0, total, len(phases) + 1).astype(int)
    segments = [
        Segment("video01", "phase", p, int(a), int(b) - 1) for p, a, b in zip(phases, bounds, bounds[1:], strict=False)
    ]
    for n, tool in enumerate(TOOLS.values()):
        for start in range(n * 500, total - 1500, 9000):
            segments.append(Segment("video01", "tool", tool, start, start + 1200))
    tables = SourceTables(
        videos=[Video("video01", "train", fps, total, video_path="videos/video01.mp4")], segments=segments
    )
    return Normalised(get_source("cholec80"), Path("."), tables, "endonet")


def records_per_second(normalised: Normalised, branch: str, repeats: int) -> tuple[int, float]:
    if branch == "image":
        items, _ = image_items(normalised)
    else:
        items, _ = clip_items(normalised, SamplingConfig(max_per_video=None))
    ctx, capabilities, templates = context_for(normalised), capabilities_of(normalised.tables), load_templates(branch)
    count = sum(len(render(item, templates, ctx, capabilities)) for item in items)
    seconds = best_of(repeats, lambda: [render(item, templates, ctx, capabilities) for item in items])
    return len(items), 2 * count / seconds  # two records (template, instruction) per QA


def build_seconds(root: Path, work: Path, num_proc: int) -> float:
    start = time.perf_counter()
    build_public(
        BuildOptions(
            sources={"cholecseg8k": root},
            out=work / f"out{num_proc}",
            cache_dir=work / f"cache{num_proc}",
            num_proc=num_proc,
        )
    )
    return time.perf_counter() - start


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=160)
    parser.add_argument("--repeats", type=int, default=3)
    args = parse_with_quick(parser, argv, {"frames": 6, "repeats": 1})
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        root = work / "cholecseg8k"
        write_source(root, args.frames)
        per_mask, ratio = seg_to_box_ratio(root, args.repeats)
        print(f"seg-to-box: {1000 * per_mask:.1f} ms per {WIDTH}x{HEIGHT} mask = {ratio:.2f}x PNG decode alone")
        items, rate = records_per_second(normalise_source(get_source("cholecseg8k"), root), "image", args.repeats)
        print(f"templating, image branch: {rate:,.0f} QA records/s over {items} frames")
        items, rate = records_per_second(long_timeline(), "clip", args.repeats)
        print(f"templating, clip branch: {rate:,.0f} QA records/s over {items} clips of a 2-hour video")
        build_public(BuildOptions(sources={"cholecseg8k": root}, out=work / "warm", cache_dir=work / "warm-cache"))
        one, two = build_seconds(root, work, 1), build_seconds(root, work, 2)
        print(
            f"whole build of {args.frames} frames: {one:.1f} s with --num-proc 1, {two:.1f} s with --num-proc 2 "
            f"= {one / two:.2f}x speed-up"
        )


if __name__ == "__main__":
    main()
