"""``sureon review ACTION``: accounts, assignments, the web app, backups, exports and agreement, one function each.

Every action opens ``--db`` with :func:`~builders.pipeline.review.store.open_review_database` (only ``add-user`` of a
new account may create it, and only in an existing folder) and checks ``--dataset`` with
:func:`~builders.pipeline.review.samples.check_dataset` before any slow work, so a wrong path is one line naming it
and the fix. ``backup --out`` equal to ``--db`` is refused by the command line's general ``--out`` check. The parser
loads nothing heavy: the store, the samples (datasets) and the app (Gradio) load when an action runs.
"""

import json
from pathlib import Path

from builders.arguments import fraction, int_range, positive_float
from builders.pipeline.review import DEFAULT_CONFIG


def add_arguments(parser) -> None:
    actions = parser.add_subparsers(dest="action", required=True)

    def action(name: str, help_text: str, dataset: bool = False):
        parser = actions.add_parser(name, help=help_text, description=help_text)
        parser.add_argument(
            "--db", required=True, type=Path, help="the review database (SQLite; `add-user` creates a new one)"
        )
        if dataset:
            parser.add_argument("--dataset", required=True, type=Path, help="a built Sureon dataset folder")
            parser.add_argument("--config", default=DEFAULT_CONFIG, help="the config under review")
        return parser

    add_user = action("add-user", "create a reviewer account (the password is read from stdin or a prompt)")
    add_user.add_argument("username")
    add_user.add_argument("--admin", action="store_true")
    add_user.add_argument(
        "--reset-password",
        action="store_true",
        help="set a new password of an existing account (ends its open sessions in the running app)",
    )
    remove_user = action("remove-user", "remove an account: it cannot log in, its sessions end, its decisions stay")
    remove_user.add_argument("username")
    backup = action("backup", "copy the database while the app runs (SQLite's online backup, mode 0600)")
    backup.add_argument("--out", required=True, type=Path, help="the new backup file")
    assign = action("assign", "assign unassigned samples to reviewers (balanced, seeded)", dataset=True)
    assign.add_argument("--reviewers", nargs="+", help="usernames (default: every account)")
    assign.add_argument("--dual-fraction", type=fraction, default=0.0, help="share of each type reviewed twice")
    assign.add_argument("--seed", default="sureon-review")
    serve = action("serve", "start the review web app", dataset=True)
    serve.add_argument("--videos", type=Path, help="folder of source videos named <source_id>.<ext>")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: this machine only)")
    serve.add_argument("--port", type=int_range(1, 65535), default=7860)
    serve.add_argument(
        "--server-name",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name reviewers reach the app by (repeatable); requests for any other Host are refused",
    )
    serve.add_argument(
        "--trusted-proxy",
        action="append",
        default=[],
        metavar="ADDR",
        help="address or network of a reverse proxy whose X-Forwarded-For/-Proto are believed (repeatable); "
        "from anyone else they are ignored. The client is the rightmost X-Forwarded-For entry that is not a "
        "trusted proxy",
    )
    serve.add_argument("--tls-cert", type=Path, help="serve HTTPS with this certificate (PEM); needs --tls-key")
    serve.add_argument("--tls-key", type=Path, help="the certificate's private key (PEM)")
    serve.add_argument(
        "--session-idle-minutes", type=positive_float, default=30.0, help="log out after this long idle"
    )
    serve.add_argument(
        "--session-max-hours", type=positive_float, default=12.0, help="log out this long after logging in"
    )
    export = action("export", "write the approved bench config and the review reports", dataset=True)
    export.add_argument("--out", required=True, type=Path)
    export.add_argument("--overwrite", action="store_true")
    action("agreement", "print inter-rater agreement on the dual-reviewed subset (JSON)")


def read_password() -> str:
    """The password from a prompt, or one line of stdin (scripts)."""
    import getpass
    import sys

    return getpass.getpass("password: ") if sys.stdin.isatty() else sys.stdin.readline().rstrip("\n")


def add_user(args, store) -> None:
    password = read_password()
    if args.reset_password:
        store.set_password(args.username, password)
    else:
        store.add_user(args.username, password, admin=args.admin)
    print(f"{'updated' if args.reset_password else 'created'} {args.username} in {args.db}")


def remove_user(args, store) -> None:
    store.remove_user(args.username)
    print(f"removed {args.username} from {args.db} (its decisions stay in the log)")


def backup(args, store) -> None:
    print(f"backed up {args.db} to {store.backup(args.out)}")


def assign(args, store) -> None:
    from builders.pipeline.review.assignment import assign as balanced_assignments
    from builders.pipeline.review.samples import load_samples

    samples = load_samples(args.dataset, args.config)
    taken = {a.sample_id for a in store.assignments()}
    todo = {sample_id: r["category"] for sample_id, r in samples.items() if sample_id not in taken}
    added = store.add_assignments(
        balanced_assignments(todo, args.reviewers or store.users(), args.dual_fraction, args.seed)
    )
    print(f"assigned {len(todo)} sample(s) ({added} assignments); {len(taken)} were already assigned")


def serve(args, store) -> None:
    from builders.pipeline.review.accounts import SessionPolicy
    from builders.pipeline.review.network import ServerOptions
    from builders.pipeline.review.server import serve as serve_app

    options = ServerOptions(
        args.host, args.port, tuple(args.server_name), tuple(args.trusted_proxy), args.tls_cert, args.tls_key
    )
    sessions = SessionPolicy(idle_s=args.session_idle_minutes * 60, max_age_s=args.session_max_hours * 3600)
    serve_app(args.dataset, args.db, args.videos, args.config, options, sessions)


def export(args, store) -> None:
    from builders.pipeline.review.export import export_review

    print(export_review(args.dataset, store, args.out, args.config, args.overwrite).summary())


def agreement(args, store) -> None:
    from builders.pipeline.review.reliability import agreement_report, rated_pairs

    print(json.dumps(agreement_report(rated_pairs(store.assignments(), store.latest())), indent=2))


ACTIONS = {
    "add-user": add_user,
    "remove-user": remove_user,
    "backup": backup,
    "assign": assign,
    "serve": serve,
    "export": export,
    "agreement": agreement,
}


def run(args) -> int:
    from builders.pipeline.review.store import open_review_database

    creating = args.action == "add-user" and not args.reset_password
    ACTIONS[args.action](args, open_review_database(args.db, create=creating))
    return 0
