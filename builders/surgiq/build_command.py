"""``sureon build surgiq``: the command line of :mod:`builders.surgiq.build`, and the source options it shares with
``sureon near-duplicates surgiq`` (both read the same question files the same way).

Apart from the builder so that the parser loads nothing heavy; the builder and the reader load when a command runs.
"""

from pathlib import Path

from builders.arguments import byte_size


def add_source_arguments(parser) -> None:
    """The SurgiQ source files and how to read their columns and values."""
    parser.add_argument("--source", required=True, nargs="+", type=Path, help="JSON, JSONL, CSV or parquet file(s)")
    parser.add_argument("--column", action="append", metavar="FIELD=COLUMN", help="map a field to a source column")
    parser.add_argument("--columns-file", help="YAML file of field: column mappings")
    parser.add_argument(
        "--alias", action="append", metavar="FIELD:VALUE=CANONICAL", help="accept another spelling of a value"
    )


def source_reading(args):
    """``(column mapping, value aliases)`` of :func:`add_source_arguments`' options, checked."""
    from builders.surgiq.reader import SurgiqColumns, parse_aliases

    return SurgiqColumns.from_cli(args.column, args.columns_file), parse_aliases(args.alias)


def add_arguments(parser) -> None:
    add_source_arguments(parser)
    parser.add_argument("--out", required=True, type=Path, help="output folder (Hub layout)")
    parser.add_argument("--exclude-ids", type=Path, help="dedupe list: ids to leave out (one per line, # comments)")
    parser.add_argument(
        "--configs", nargs="+", choices=["default", "shuffled"], help="configs to build (default: both)"
    )
    parser.add_argument("--max-shard-size", type=byte_size, default="500MB", help="parquet shard size, e.g. 500MB")
    parser.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")


def run(args) -> int:
    from builders.surgiq.build import BuildOptions, build_surgiq

    mapping, aliases = source_reading(args)
    report = build_surgiq(
        BuildOptions(
            sources=args.source,
            out=args.out,
            mapping=mapping,
            aliases=aliases,
            exclude_ids=args.exclude_ids,
            configs=args.configs,
            overwrite=args.overwrite,
            max_shard_bytes=args.max_shard_size,
        )
    )
    print(report.summary())
    print(f'Load it with: datasets.load_dataset("{args.out}", "default", split="test")')
    return 0
