"""Bad input to `sureon review ...`: each mistake is one line naming the file and the fix, and loses nothing.

Cases of the bad-input table (``tests/bad_inputs/``), for the review commands: a ``--db``
that is no review database (a text file, a parquet file, a folder, another program's SQLite file), that does not
exist or lies in a folder that does not exist, for every action; a ``--dataset`` that does not exist or is not a built
Sureon dataset; ``serve`` on a port in use or with bad server options; ``backup --out`` over the database; and the
account mistakes. A case builds its own database (:func:`_review_db`) or borrows the session's builds; nothing here
reads a dataset's rows except the one ``assign`` case.
"""

import socket
import sqlite3
from contextlib import closing
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from sureon import cli

from . import BadInput, Inputs, run_cases


PASSWORD = "correct horse battery"
ACTIONS = ("add-user", "remove-user", "assign", "serve", "backup", "export", "agreement")


def _review_db(inputs: Inputs, *users: str) -> Path:
    """A review database with ``users`` (made through the library: one scrypt per user)."""
    from builders.pipeline.review.store import ReviewStore

    db = inputs.tmp / "review.sqlite"
    store = ReviewStore(db)
    for name in users:
        store.add_user(name, PASSWORD)
    return db


def _stdin(inputs: Inputs, text: str) -> None:
    """What `add-user` reads as the password (one line of stdin)."""
    import io

    inputs.fixture("monkeypatch").setattr("sys.stdin", io.StringIO(text))


def _not_a_db(kind: str):
    """A --db that is no review database: ``text``, ``parquet``, ``folder``, ``sqlite`` (another program's file),
    ``empty``, ``missing`` (does not exist) or ``nowhere`` (in a folder that does not exist)."""

    def make(inputs: Inputs) -> Path:
        path = inputs.tmp / f"db-{kind}"
        if kind == "text":
            path.write_text("alice,approve\n")
        elif kind == "parquet":
            pq.write_table(pa.table({"question_id": ["q1"]}), path)
        elif kind == "folder":
            path.mkdir()
            (path / "notes.txt").write_text("kept")
        elif kind == "sqlite":
            with closing(sqlite3.connect(path)) as conn:
                conn.execute("CREATE TABLE orders (id INTEGER)")
                conn.commit()
        elif kind == "empty":
            path.touch()
        elif kind == "nowhere":
            path = inputs.tmp / "no-such-folder" / "review.sqlite"
        return path

    return make


def _action(action: str, db, *extra: str):
    """`sureon review ACTION --db DB ...` with what each action needs besides (a dataset that is never reached)."""

    def argv(inputs: Inputs) -> list[str]:
        path = str(db(inputs))
        needs = {
            "add-user": ["alice"],
            "remove-user": ["alice"],
            "assign": ["--dataset", str(inputs.tmp / "dataset")],
            "serve": ["--dataset", str(inputs.tmp / "dataset")],
            "backup": ["--out", str(inputs.tmp / "backup.sqlite")],
            "export": ["--dataset", str(inputs.tmp / "dataset"), "--out", str(inputs.out)],
            "agreement": [],
        }[action]
        if action == "add-user":
            _stdin(inputs, PASSWORD + "\n")
        return ["review", action, *needs, "--db", path, *extra]

    return argv


DB_MISTAKES = [
    ("text", "--db is a text file", "not a review database"),
    ("parquet", "--db is a parquet file", "not a review database"),
    ("folder", "--db is a folder", "is a folder, not a review database"),
    ("sqlite", "--db is another program's SQLite file", "not a review database"),
    ("nowhere", "--db in a folder that does not exist", "does not exist"),
]
DB_CASES = [
    BadInput(f"review {action}", mistake, _action(action, _not_a_db(kind)), says)
    for action in ACTIONS
    for kind, mistake, says in DB_MISTAKES
]
DB_CASES += [
    BadInput(f"review {action}", "--db does not exist", _action(action, _not_a_db("missing")), "no review database")
    for action in ACTIONS
    if action != "add-user"
]
DB_CASES += [
    BadInput(f"review {action}", "--db is an empty file", _action(action, _not_a_db("empty")), "not a review database")
    for action in ("remove-user", "serve", "agreement")
]


def _with_db(action: str, *users: str, dataset=None, db_extra=()):
    """`sureon review ACTION` on a real review database with ``users``; ``dataset(inputs)`` gives --dataset."""

    def argv(inputs: Inputs) -> list[str]:
        db = _review_db(inputs, *users)
        line = ["review", action, "--db", str(db)]
        if dataset is not None:
            line += ["--dataset", str(dataset(inputs))]
        return line + [str(part(inputs)) if callable(part) else part for part in db_extra]

    return argv


def _missing_dataset(inputs: Inputs) -> Path:
    return inputs.tmp / "no-such-dataset"


def _release_folder(inputs: Inputs) -> Path:
    return inputs.release()  # the build's input, not a build


def _parquet_dataset(inputs: Inputs) -> Path:
    path = inputs.tmp / "validation.parquet"
    pq.write_table(pa.table({"question_id": ["q1"]}), path)
    return path


def _bench(inputs: Inputs) -> Path:
    return inputs.fixture("bench")  # a Sureon build with the bench config only


def _busy_port(inputs: Inputs) -> str:
    """A port another process listens on (held open for the case)."""
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    inputs.fixture("request").addfinalizer(holder.close)
    return str(holder.getsockname()[1])


def _text_file(name: str):
    def make(inputs: Inputs) -> Path:
        path = inputs.tmp / name
        path.write_text("not a PEM file\n")
        return path

    return make


DATASET_CASES = [
    BadInput(
        f"review {action}",
        "--dataset does not exist",
        _with_db(action, dataset=_missing_dataset, db_extra=extra),
        "does not exist",
    )
    for action, extra in (("assign", ()), ("serve", ()), ("export", ("--out", lambda i: i.out)))
]
DATASET_CASES += [
    BadInput(
        f"review {action}",
        "--dataset is the release folder, not a build",
        _with_db(action, dataset=_release_folder, db_extra=extra),
        "is not a built Sureon dataset",
    )
    for action, extra in (("assign", ()), ("serve", ()), ("export", ("--out", lambda i: i.out)))
]
DATASET_CASES += [
    BadInput(
        f"review {action}",
        "--dataset is a parquet file",
        _with_db(action, dataset=_parquet_dataset, db_extra=extra),
        "is a file, not a dataset folder",
    )
    for action, extra in (("assign", ()), ("serve", ()), ("export", ("--out", lambda i: i.out)))
]
DATASET_CASES += [
    BadInput(
        f"review {action}",
        "--dataset is a Sureon build without the validation pool",
        _with_db(action, dataset=_bench, db_extra=extra),
        "has no config 'validation_curated' (it has: bench)",
    )
    for action, extra in (("assign", ()), ("serve", ()), ("export", ("--out", lambda i: i.out)))
]


def _serve(*extra):
    """`sureon review serve` on a real database and the bench build (its card only is read before the mistake)."""
    return _with_db("serve", dataset=_bench, db_extra=("--config", "bench", *extra))


SERVE_CASES = [
    BadInput(
        "review serve", "--port in use", _serve("--port", _busy_port), "is already in use: choose another --port"
    ),
    BadInput(
        "review serve",
        "--host is not an address of this machine",
        _serve("--host", "192.0.2.1", "--port", "7861"),
        "is not an address of this machine",
    ),
    BadInput(
        "review serve", "--port out of range", _serve("--port", "70000"), "70000 is not an integer from 1 to 65535"
    ),
    BadInput("review serve", "--host 0.0.0.0 without --server-name", _serve("--host", "0.0.0.0"), "--server-name"),
    BadInput(
        "review serve",
        "--trusted-proxy is a host name",
        _serve("--trusted-proxy", "proxy.example"),
        "not an IP address",
    ),
    BadInput("review serve", "--tls-cert without --tls-key", _serve("--tls-cert", _text_file("c.pem")), "go together"),
    BadInput(
        "review serve",
        "--tls-cert does not exist",
        _serve("--tls-cert", lambda i: i.tmp / "none.pem", "--tls-key", _text_file("k.pem")),
        "is not a file",
    ),
    BadInput(
        "review serve",
        "--tls-cert is not PEM",
        _serve("--tls-cert", _text_file("c.pem"), "--tls-key", _text_file("k.pem")),
        "cannot be loaded",
    ),
    BadInput(
        "review serve", "--videos does not exist", _serve("--videos", lambda i: i.tmp / "no-videos"), "is not a folder"
    ),
    BadInput(
        "review serve", "--session-idle-minutes 0", _serve("--session-idle-minutes", "0"), "--session-idle-minutes"
    ),
]


def _backup_over(target):
    def argv(inputs: Inputs) -> list[str]:
        db = _review_db(inputs, "alice")
        out = target(inputs, db)
        return ["review", "backup", "--db", str(db), "--out", str(out)]

    return argv


def _older_backup(inputs: Inputs, db: Path) -> Path:
    out = inputs.tmp / "backup.sqlite"
    out.write_bytes(db.read_bytes())
    return out


ACCOUNT_CASES = [
    BadInput("review backup", "--out is the --db", _backup_over(lambda i, db: db), "is the input --db"),
    BadInput("review backup", "--out is an older backup", _backup_over(_older_backup), "back up to a new file name"),
    BadInput(
        "review export",
        "--out is the --db",
        _with_db("export", dataset=_bench, db_extra=("--out", lambda i: i.tmp / "review.sqlite")),
        "is the input --db",
    ),
    BadInput(
        "review export",
        "--out inside the --dataset",
        _with_db("export", dataset=_bench, db_extra=("--out", lambda i: i.fixture("bench") / "verified")),
        "lies inside the input --dataset",
    ),
]


def _add_user(name: str, password: str, *users: str, extra=()):
    def argv(inputs: Inputs) -> list[str]:
        db = _review_db(inputs, *users)
        _stdin(inputs, password + "\n")
        return ["review", "add-user", name, "--db", str(db), *extra]

    return argv


ACCOUNT_CASES += [
    BadInput("review add-user", "a username with spaces", _add_user("bad name", PASSWORD), "must be 1-64 letters"),
    BadInput("review add-user", "a short password", _add_user("alice", "short"), "at least 8 characters"),
    BadInput("review add-user", "an existing account", _add_user("alice", PASSWORD, "alice"), "already exists"),
    BadInput(
        "review add-user",
        "--reset-password of an unknown account",
        _add_user("bob", PASSWORD, "alice", extra=("--reset-password",)),
        "no user 'bob'",
    ),
    BadInput(
        "review add-user",
        "--reset-password with a --db that does not exist",
        _action("add-user", _not_a_db("missing"), "--reset-password"),
        "no review database",
    ),
    BadInput(
        "review remove-user",
        "an unknown account",
        lambda i: ["review", "remove-user", "bob", "--db", str(_review_db(i, "alice"))],
        "no user 'bob'",
    ),
    BadInput(
        "review assign",
        "--reviewers without an account",
        _with_db("assign", "alice", dataset=lambda i: i.fixture("sureon_build").out, db_extra=("--reviewers", "zed")),
        "no account for reviewer(s) ['zed']",
    ),
    BadInput(
        "review assign",
        "--dual-fraction above 1",
        _with_db("assign", "alice", dataset=_bench, db_extra=("--dual-fraction", "2")),
        "--dual-fraction",
    ),
]

CASES = DB_CASES + DATASET_CASES + SERVE_CASES + ACCOUNT_CASES


test_bad_input = run_cases(CASES)


def test_a_port_in_use_is_refused_before_the_log_says_it_serves(bench, tmp_path, request, caplog, capsys):
    from builders.pipeline.review.store import ReviewStore

    ReviewStore(tmp_path / "review.sqlite").add_user("alice", PASSWORD)
    inputs = Inputs(tmp_path, request)
    port = _busy_port(inputs)
    caplog.set_level("INFO")
    argv = ["review", "serve", "--db", str(tmp_path / "review.sqlite"), "--dataset", str(bench), "--config", "bench"]
    assert cli.main([*argv, "--port", port]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"port {port} on 127.0.0.1 is already in use" in err, err
    assert not [r for r in caplog.records if "serving" in r.getMessage()]


def test_nothing_is_created_by_a_refused_db(tmp_path, capsys):
    """A --db mistake leaves no database (nor -wal/-shm) behind: only add-user creates one, in an existing folder."""
    typo = str(tmp_path / "typo.sqlite")
    for action in (["remove-user", "alice"], ["agreement"], ["backup", "--out", str(tmp_path / "copy.sqlite")]):
        assert cli.main(["review", *action, "--db", typo]) == 2
    assert cli.main(["review", "add-user", "alice", "--db", str(tmp_path / "typo" / "review.sqlite")]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == []
