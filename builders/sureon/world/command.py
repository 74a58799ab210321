"""``sureon world``: write a world from a settings file and command-line overrides, and say how to build it."""

from dataclasses import replace
from pathlib import Path

from builders.arguments import key_values, seed
from builders.errors import InputError
from builders.sureon.world.config import SHORTCUT_KINDS, WorldConfig, config_json, load_config
from builders.sureon.world.vocabulary import ALL_CODES
from builders.sureon.world.write import write_world


def add_arguments(parser) -> None:
    parser.add_argument("--out", type=Path, required=True, help="folder for release/, videos/, world.json, ...")
    parser.add_argument("--config", type=Path, help="world settings (YAML or a world's world.json)")
    parser.add_argument("--seed", type=seed)
    parser.add_argument(
        "--videos-per-split", nargs="+", metavar="SPLIT=N", help="source videos per split, e.g. train=60 test=20"
    )
    parser.add_argument("--categories", nargs="+", choices=ALL_CODES, help="category codes (default: all ten)")
    parser.add_argument(
        "--shortcut",
        action="append",
        metavar="SPLIT:KIND=SHARE",
        help=f"planted shortcut share, e.g. train:length=0.5 (kinds: {', '.join(SHORTCUT_KINDS)}); replaces the "
        "settings' shortcuts for the splits named",
    )
    parser.add_argument("--no-videos", action="store_true", help="write the release and ground truth only")


def _number(text: str, kind: type, option: str, where: str):
    try:
        return kind(text)
    except ValueError:
        raise InputError(f"{option} {where}: {text!r} is not a number") from None


def run(args) -> int:
    config = load_config(args.config, seed=args.seed)
    if args.videos_per_split:
        counts = {
            split: _number(n, int, "--videos-per-split", split)
            for split, n in key_values(args.videos_per_split, "--videos-per-split", "train=60").items()
        }
        config = WorldConfig.from_dict({**config_json(config), "videos": counts})
    if args.categories:
        config = replace(config, categories=tuple(args.categories))
    if args.shortcut:
        shortcuts: dict[str, dict[str, float]] = {}
        for spec in args.shortcut:
            split, sep, rest = spec.partition(":")
            if not sep:
                raise InputError(f"--shortcut {spec!r}: expected SPLIT:KIND=SHARE")
            shares = key_values([rest], "--shortcut", "train:length=0.5")
            shortcuts.setdefault(split, {}).update(
                {k: _number(v, float, "--shortcut", spec) for k, v in shares.items()}
            )
        config = WorldConfig.from_dict({**config_json(config), "shortcuts": {**config.shortcuts, **shortcuts}})
    summary = write_world(args.out, config, videos=not args.no_videos)
    for split, counts in summary["counts"].items():
        planted = ", ".join(f"{kind} {n}" for kind, n in counts["shortcuts"].items()) or "none"
        decoys = ", ".join(f"{kind} {n}" for kind, n in counts["decoys"].items()) or "none"
        print(
            f"{split}: {counts['questions']} questions over {counts['videos']} videos; shortcuts: {planted}; "
            f"decoys: {decoys}"
        )
    print(f"world written to {args.out} (release/, videos/, world.json, shortcuts.jsonl); build it with")
    print(f"  sureon build sureon --release {args.out}/release --videos {args.out}/videos --out BUILD")
    return 0
