"""``sureon build public``: the command line of the public corpus build (:mod:`public_converters.build`), kept apart
from it so that ``--help`` loads nothing heavy (the build imports ``datasets`` and the readers)."""

from pathlib import Path

from builders.arguments import byte_size, key_values, non_negative_int, positive_float, positive_int
from builders.errors import InputError
from builders.hub import DEFAULT_MAX_SHARD_BYTES
from public_converters.benchmarks import BENCH_FPS
from public_converters.clips import SamplingConfig
from public_converters.source_folders import source_folders
from public_converters.spec import registry


SHOWN_WARNINGS = 5  # cases of a warning printed per source (the manifest lists them all)


def add_arguments(parser) -> None:
    defaults = SamplingConfig()
    parser.add_argument(
        "--source",
        action="append",
        metavar="NAME=DIR",
        help=f"a source and its local folder, repeatable; NAME is one of: {', '.join(registry())}",
    )
    parser.add_argument(
        "--source-root", type=Path, help="a folder whose sub-folders are named after sources (each one is built)"
    )
    parser.add_argument("--out", required=True, type=Path, help="output folder (Hub layout)")
    parser.add_argument("--split-variant", action="append", metavar="NAME=VARIANT", help="an official split variant")
    parser.add_argument(
        "--num-proc", type=positive_int, default=1, help="processes for seg-to-box, templating and media"
    )
    parser.add_argument("--cache-dir", type=Path, help="media cache (default: OUT.cache next to OUT)")
    parser.add_argument(
        "--max-side", type=non_negative_int, default=768, help="longest side of the written JPEGs (0: keep)"
    )
    parser.add_argument(
        "--min-clip-seconds", type=positive_float, default=defaults.min_seconds, help="shortest strategic clip"
    )
    parser.add_argument(
        "--max-clip-seconds", type=positive_float, default=defaults.max_seconds, help="longest strategic clip"
    )
    parser.add_argument(
        "--grid-fps", type=positive_float, default=defaults.grid_fps, help="frame grid of grounded windows"
    )
    parser.add_argument(
        "--max-grounded-per-video",
        type=non_negative_int,
        default=defaults.max_per_video,
        help="grounded windows kept per video (a seeded subset; 0: none)",
    )
    parser.add_argument("--paraphrase", action="store_true", help="add the LLM paraphrase version (C.4)")
    parser.add_argument("--base-url", help="OpenAI-compatible endpoint for --paraphrase (default: $OPENAI_BASE_URL)")
    parser.add_argument("--image-model", default="Qwen/Qwen3.5-9B", help="paraphraser of image QAs")
    parser.add_argument("--clip-model", default="Qwen/Qwen3-VL-8B-Instruct", help="paraphraser of clip QAs")
    parser.add_argument("--max-concurrency", type=positive_int, default=64, help="paraphrase requests in flight")
    parser.add_argument("--llm-cache", type=Path, help="SQLite paraphrase cache (default: OUT.llm_cache.sqlite)")
    parser.add_argument(
        "--max-shard-size",
        type=byte_size,
        default=DEFAULT_MAX_SHARD_BYTES,
        help="parquet shard size, e.g. 500MB (or a number of bytes)",
    )
    parser.add_argument(
        "--no-benchmarks", action="store_true", help="do not write the bench-* configs (public benchmarks, D.3)"
    )
    parser.add_argument(
        "--bench-fps",
        type=positive_float,
        default=BENCH_FPS,
        help="frame grid of the benchmark configs (the Sureon paper: 1 fps)",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")


def run(args) -> int:
    from dataclasses import replace

    from public_converters.build import BuildOptions, build_public

    if args.min_clip_seconds > args.max_clip_seconds:
        raise InputError(
            f"--min-clip-seconds {args.min_clip_seconds:g} is more than --max-clip-seconds {args.max_clip_seconds:g}: "
            "the shortest clip cannot be longer than the longest; swap them or raise --max-clip-seconds"
        )
    sources = source_folders(args.source, args.source_root)
    client, settings = None, None
    if args.paraphrase:
        from builders.llm import LLMClient
        from public_converters.paraphrase import DEFAULT_SETTINGS

        cache = args.llm_cache or args.out.with_name(f"{args.out.name}.llm_cache.sqlite")
        client = LLMClient(base_url=args.base_url, cache=cache, max_concurrency=args.max_concurrency, progress=True)
        settings = {
            "image": replace(DEFAULT_SETTINGS["image"], model=args.image_model),
            "clip": replace(DEFAULT_SETTINGS["clip"], model=args.clip_model),
        }
    options = BuildOptions(
        sources=sources,
        out=args.out,
        cache_dir=args.cache_dir,
        overwrite=args.overwrite,
        num_proc=args.num_proc,
        split_variants=key_values(args.split_variant, "--split-variant", "hemoset=third-party"),
        sampling=SamplingConfig(
            args.min_clip_seconds,
            args.max_clip_seconds,
            grid_fps=args.grid_fps,
            max_per_video=args.max_grounded_per_video,
        ),
        max_side=args.max_side or None,
        paraphrase_client=client,
        paraphrase_settings=settings,
        max_shard_bytes=args.max_shard_size,
        benchmarks=not args.no_benchmarks,
        bench_fps=args.bench_fps,
    )
    manifest = build_public(options)
    for name, info in manifest["sources"].items():
        counts = ", ".join(f"{b}: {w['items']} items, {w['qas']} QAs" for b, w in info["branches_written"].items())
        print(f"{name}: {counts or 'nothing written'}")
        for config, entry in info.get("benchmarks", {}).items():
            print(
                f"  {config}: {entry.get('rows', 0)} rows"
                + (f" ({entry['not written']})" if "not written" in entry else "")
            )
        for kind, entry in info.get("warnings", {}).items():
            if entry["count"] == 1 and not entry["cases"][0]["file"]:
                print(f"  warning: {kind}: {entry['cases'][0]['message']}")
                continue
            print(f"  warning: {kind}: {entry['count']} (manifest.json lists them under 'warnings')")
            for case in entry["cases"][:SHOWN_WARNINGS]:
                where = f"{options.sources[name] / case['file']}: " if case["file"] else ""
                print(f"    {where}{case['message']}")
            if entry["count"] > SHOWN_WARNINGS:
                print(f"    ... and {entry['count'] - SHOWN_WARNINGS} more")
    if client is not None:
        print(client.ledger.summary())
    print(f'Load it with: datasets.load_dataset("{args.out}", "{manifest["configs"][0]["config_name"]}")')
    return 0
