"""``sureon push``: upload a build as a dataset repo, or a finished training run as a model repo
(:func:`builders.hub.push_folder`, loaded when the command runs). The repo type is read from the folder; only folders
sureon wrote are pushed, and what a push refuses or leaves out is in :func:`builders.hub.pushed_kind`."""

from pathlib import Path


def add_arguments(parser) -> None:
    parser.add_argument("folder", type=Path, help="a build (`sureon build`) or a finished training run's output_dir")
    parser.add_argument("--repo-id", required=True, help="ORG/NAME")
    parser.add_argument(
        "--repo-type",
        choices=("model", "dataset"),
        help="default: read from the folder (a build is a dataset, a training run a model); given, it must agree",
    )
    parser.add_argument("--private", action="store_true", help="create the repo private (default: public)")


def run(args) -> int:
    from builders.hub import push_folder

    url = push_folder(args.folder, args.repo_id, private=args.private, repo_type=args.repo_type)
    print(f"Pushed {args.folder} to {url}")
    return 0
