"""``sureon push``: upload a built folder to the Hub as a dataset repo (:func:`builders.hub.push_folder`, loaded when
the command runs)."""

from pathlib import Path


def add_arguments(parser) -> None:
    parser.add_argument("folder", type=Path)
    parser.add_argument("--repo-id", required=True, help="ORG/NAME")
    parser.add_argument("--private", action="store_true")


def run(args) -> int:
    from builders.hub import push_folder

    url = push_folder(args.folder, args.repo_id, private=args.private)
    print(f"Pushed {args.folder} to {url}")
    return 0
