"""``sureon build sureon``: the command line of :mod:`builders.sureon.build`.

Apart from the builder so that the parser is built from light modules only (the configs' names come from
:mod:`builders.sureon.configs`, the frame defaults from :class:`~builders.sureon.frames.FramePolicy`); the builder
and its datasets / pyarrow load when the command runs.
"""

from pathlib import Path

from builders.arguments import byte_size, int_range, non_negative_int, positive_int
from builders.sureon.configs import BLURRED_BY_DEFAULT, CONFIGS, FRAMES_LAYOUTS, MISSING_VIDEO_MODES
from builders.sureon.frames import DECODE_DEVICES, FramePolicy


def add_arguments(parser) -> None:
    parser.add_argument("--release", required=True, type=Path, help="the downloaded release folder (parquet files)")
    parser.add_argument("--videos", type=Path, help="folder of source videos named <source_id>.<ext>")
    parser.add_argument("--out", required=True, type=Path, help="output folder (Hub layout)")
    parser.add_argument(
        "--configs", nargs="+", choices=list(CONFIGS), help="configs to build (default: all available)"
    )
    parser.add_argument("--column", action="append", metavar="FIELD=COLUMN", help="map a field to a release column")
    parser.add_argument("--columns-file", help="YAML file of field: column mappings")
    parser.add_argument("--on-missing-video", choices=MISSING_VIDEO_MODES, default="error")
    parser.add_argument("--max-frames", type=positive_int, default=FramePolicy.max_frames)
    parser.add_argument("--min-frames", type=positive_int, default=FramePolicy.min_frames)
    parser.add_argument(
        "--max-side", type=non_negative_int, default=FramePolicy.max_side, help="longest JPEG side (0: keep)"
    )
    parser.add_argument("--jpeg-quality", type=int_range(1, 100), default=FramePolicy.jpeg_quality)
    parser.add_argument(
        "--blur",
        default="text,faces",
        help="blur before encoding: text (OCR), faces, detector=PATH (YOLO weights); default text,faces",
    )
    parser.add_argument(
        "--blur-configs",
        nargs="+",
        choices=list(CONFIGS),
        default=list(BLURRED_BY_DEFAULT),
        help="configs whose frames are blurred (default: the evaluation configs)",
    )
    parser.add_argument("--no-blur", action="store_true", help="blur nothing (the card then says so)")
    parser.add_argument("--cache-dir", type=Path, help="frame cache (default: ~/.cache/sureon/frames)")
    parser.add_argument("--num-workers", type=positive_int, default=1, help="videos decoded in parallel")
    parser.add_argument(
        "--decode-device",
        choices=DECODE_DEVICES,
        default="auto",
        help="decode on torchcodec's CUDA device or the CPU (auto: the GPU when torch sees one)",
    )
    parser.add_argument(
        "--frames-layout",
        choices=FRAMES_LAYOUTS,
        default="files",
        help="frames of the training configs (db, train_all): JPEG files under media/, each stored once, rows holding "
        "relative paths (default), or embedded in every row; bench and the validation configs always embed",
    )
    parser.add_argument(
        "--shuffle-options", action="store_true", help="reorder stored options with a seed from question_id"
    )
    parser.add_argument("--max-shard-size", type=byte_size, default="500MB", help="parquet shard size, e.g. 500MB")
    parser.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")


def run(args) -> int:
    from builders.blur import BlurSettings
    from builders.sureon.build import BuildOptions, build_sureon, default_cache_dir
    from builders.sureon.release import ColumnMapping

    options = BuildOptions(
        release=args.release,
        out=args.out,
        videos=args.videos,
        configs=args.configs,
        mapping=ColumnMapping.from_cli(args.column, args.columns_file),
        on_missing_video=args.on_missing_video,
        policy=FramePolicy(args.max_frames, args.min_frames, args.max_side or None, args.jpeg_quality),
        blur=None if args.no_blur else BlurSettings.parse(args.blur),
        blur_configs=tuple(args.blur_configs),
        cache_dir=args.cache_dir or default_cache_dir(),
        num_workers=args.num_workers,
        decode_device=args.decode_device,
        frames_layout=args.frames_layout,
        shuffle_options=args.shuffle_options,
        overwrite=args.overwrite,
        max_shard_bytes=args.max_shard_size,
    )
    report = build_sureon(options)
    print(report.summary())
    loadable = next(config.name for config in report.configs if config.written)
    print(f'Load it with: datasets.load_dataset("{args.out}", "{loadable}")')
    return 0
