"""Stage 4 of the construction pipeline: expert review of the hardened validation set (the Sureon paper, B.5).

``store`` (accounts, assignments, the append-only decision log), ``assignment`` (who reviews what), ``reliability``
(agreement on the dual-reviewed subset), ``export`` (the approved ``bench`` config and the review reports) need
nothing beyond the core install; ``app`` (the reviewers' web UI) needs the ``review`` extra (Gradio).

:func:`run` carries out ``sureon review ACTION``. Every action opens ``--db`` with
:func:`~builders.pipeline.review.store.open_review_database` (only ``add-user`` of a new account may create it, and
only in an existing folder) and checks ``--dataset`` with :func:`~builders.pipeline.review.samples.check_dataset`
before any slow work, so a wrong path is one line naming it and the fix. ``backup --out`` equal to ``--db`` is
refused by the command line's general ``--out`` check. Imports are deferred, so importing the package stays cheap.
"""


def read_password() -> str:
    """The password from a prompt, or one line of stdin (scripts)."""
    import getpass
    import sys

    return getpass.getpass("password: ") if sys.stdin.isatty() else sys.stdin.readline().rstrip("\n")


def run(args) -> int:
    """``sureon review ACTION`` once its arguments are parsed (``sureon/cli.py`` only parses); see the docstring."""
    import json

    from builders.pipeline.review.store import open_review_database

    creating = args.action == "add-user" and not args.reset_password
    store = open_review_database(args.db, create=creating)
    if args.action == "add-user":
        password = read_password()
        if args.reset_password:
            store.set_password(args.username, password)
        else:
            store.add_user(args.username, password, admin=args.admin)
        print(f"{'updated' if args.reset_password else 'created'} {args.username} in {args.db}")
    elif args.action == "remove-user":
        store.remove_user(args.username)
        print(f"removed {args.username} from {args.db} (its decisions stay in the log)")
    elif args.action == "backup":
        print(f"backed up {args.db} to {store.backup(args.out)}")
    elif args.action == "assign":
        from builders.pipeline.review.assignment import assign
        from builders.pipeline.review.samples import load_samples

        samples = load_samples(args.dataset, args.config)
        taken = {a.sample_id for a in store.assignments()}
        todo = {sample_id: r["category"] for sample_id, r in samples.items() if sample_id not in taken}
        added = store.add_assignments(assign(todo, args.reviewers or store.users(), args.dual_fraction, args.seed))
        print(f"assigned {len(todo)} sample(s) ({added} assignments); {len(taken)} were already assigned")
    elif args.action == "serve":
        from builders.pipeline.review.server import ServerOptions, serve
        from builders.pipeline.review.store import SessionPolicy

        options = ServerOptions(
            args.host, args.port, tuple(args.server_name), tuple(args.trusted_proxy), args.tls_cert, args.tls_key
        )
        sessions = SessionPolicy(idle_s=args.session_idle_minutes * 60, max_age_s=args.session_max_hours * 3600)
        serve(args.dataset, args.db, args.videos, args.config, options, sessions)
    elif args.action == "export":
        from builders.pipeline.review.export import export_review

        print(export_review(args.dataset, store, args.out, args.config, args.overwrite).summary())
    else:
        from builders.pipeline.review.reliability import agreement_report, rated_pairs

        print(json.dumps(agreement_report(rated_pairs(store.assignments(), store.latest())), indent=2))
    return 0
