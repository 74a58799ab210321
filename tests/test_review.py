"""Expert review (stage 4): the decision store, assignment, agreement statistics and the conservative export."""

import itertools
import json
import multiprocessing
import sqlite3
import threading
from collections import Counter
from contextlib import closing

import pytest
from scipy.stats import chisquare

from builders.pipeline.review.assignment import assign
from builders.pipeline.review.export import export_review
from builders.pipeline.review.reliability import agreement, agreement_report, rated_pairs
from builders.pipeline.review.samples import load_samples
from builders.pipeline.review.store import Assignment, ReviewStore


PASSWORD = "correct horse battery"
TRICKY_NOTE = "Not visible: <script>alert('x')</script> & \"quoted\"\nsecond line — ünïcödé  "


@pytest.fixture
def store(tmp_path):
    store = ReviewStore(tmp_path / "review.sqlite")
    for name in ("alice", "bob", "carol"):
        store.add_user(name, PASSWORD)
    return store


def assigned(store, pairs, mode="single"):
    store.add_assignments([Assignment(sample, reviewer, mode) for sample, reviewer in pairs])
    return store


# -- accounts ---------------------------------------------------------------------------------------------------


def test_passwords_are_salted_hashes_never_stored_in_clear(store):
    assert store.authenticate("alice", PASSWORD)
    assert not store.authenticate("alice", PASSWORD + "!")
    assert not store.authenticate("mallory", PASSWORD)
    query = "SELECT username, salt, password_hash FROM users"
    rows = {name: (salt, digest) for name, salt, digest in sqlite3.connect(store.path).execute(query)}
    assert rows["alice"][0] != rows["bob"][0] and rows["alice"][1] != rows["bob"][1]  # same password, other salt
    assert PASSWORD.encode() not in store.path.read_bytes()
    store.set_password("alice", "another long password")
    assert store.authenticate("alice", "another long password") and not store.authenticate("alice", PASSWORD)


def test_account_rules(store):
    with pytest.raises(ValueError, match="already exists"):
        store.add_user("alice", PASSWORD)
    with pytest.raises(ValueError, match="at least 8"):
        store.add_user("dave", "short")
    with pytest.raises(ValueError, match="username"):
        store.add_user("robert'); DROP TABLE users;--", PASSWORD)
    assert store.users() == ["alice", "bob", "carol"]


def test_a_database_from_before_account_removal_opens_and_removal_keeps_the_decisions(tmp_path):
    db = tmp_path / "old.sqlite"
    with closing(sqlite3.connect(db)) as conn:  # the users table as it was before remove-user existed
        conn.execute(
            "CREATE TABLE users (username TEXT PRIMARY KEY, salt BLOB NOT NULL, password_hash BLOB NOT NULL, "
            "kdf TEXT NOT NULL, is_admin INTEGER NOT NULL DEFAULT 0, created_at TEXT NOT NULL)"
        )
    store = ReviewStore(db)
    store.add_user("alice", PASSWORD)
    assigned(store, [("q1", "alice")]).record("alice", "q1", "approve")
    store.remove_user("alice")
    assert store.users() == [] and not store.authenticate("alice", PASSWORD)
    assert [d.reviewer for d in store.log()] == ["alice"]
    with pytest.raises(ValueError, match="no user"):
        store.set_password("alice", "a new long password")


# -- the decision log -------------------------------------------------------------------------------------------


def test_decision_log_is_append_only_and_the_last_decision_wins(store):
    assigned(store, [("q1", "alice"), ("q1", "bob")], mode="dual")
    store.record("alice", "q1", "reject", ["inaccurate"], "wrong instrument")
    store.record("alice", "q1", "approve")
    store.record("bob", "q1", "flag", ["ambiguous", "other"], "")
    assert [d.decision for d in store.log()] == ["reject", "approve", "flag"]
    latest = store.latest()
    assert latest["alice", "q1"].decision == "approve" and latest["bob", "q1"].tags == ("ambiguous", "other")
    with sqlite3.connect(store.path) as conn:
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            conn.execute("UPDATE decisions SET decision = 'approve'")
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            conn.execute("DELETE FROM decisions")
    assert len(store.log()) == 3


def test_no_anonymous_or_unassigned_writes_and_a_rejection_needs_a_note(store):
    assigned(store, [("q1", "alice")])
    with pytest.raises(PermissionError, match="no account"):
        store.record("mallory", "q1", "approve")
    with pytest.raises(PermissionError, match="not assigned"):
        store.record("bob", "q1", "approve")
    for note in ("", "   \n"):
        with pytest.raises(ValueError, match="note"):
            store.record("alice", "q1", "reject", ["inaccurate"], note)
    with pytest.raises(ValueError, match="reason tag"):
        store.record("alice", "q1", "flag", ["boring"], "x")
    with pytest.raises(ValueError, match="decision"):
        store.record("alice", "q1", "maybe")
    with pytest.raises(ValueError, match="no account"):
        store.add_assignments([Assignment("q2", "mallory", "single")])
    assert store.log() == []


def test_a_reviewer_reads_only_their_own_decisions(store):
    assigned(store, [("q1", "alice"), ("q1", "bob")], mode="dual")
    store.record("alice", "q1", "approve")
    store.record("bob", "q1", "reject", [], "the answer is B")
    assert [(d.reviewer, d.decision) for d in store.log("alice")] == [("alice", "approve")]
    assert list(store.latest("bob")) == [("bob", "q1")]


def test_restart_keeps_everything_verbatim(store):
    assigned(store, [("q1", "alice")])
    before = store.record("alice", "q1", "reject", ["not_visible"], TRICKY_NOTE)
    reopened = ReviewStore(store.path)
    assert reopened.log() == [before] and reopened.log()[0].note == TRICKY_NOTE
    assert reopened.authenticate("alice", PASSWORD) and reopened.assignments() == store.assignments()


def _write_decisions(db, reviewer, samples):
    store = ReviewStore(db)
    for sample in samples:
        store.record(reviewer, sample, "reject", ["other"], f"{TRICKY_NOTE}{reviewer}/{sample}")


def test_concurrent_threads_and_processes_lose_and_duplicate_nothing(tmp_path):
    store = ReviewStore(tmp_path / "review.sqlite")
    reviewers = [f"r{i}" for i in range(8)]
    samples = [f"q{i}" for i in range(25)]
    for name in reviewers:
        store.add_user(name, PASSWORD)
    store.add_assignments([Assignment(s, r, "single") for r in reviewers for s in samples])
    threads = [threading.Thread(target=_write_decisions, args=(store.path, r, samples)) for r in reviewers[:4]]
    processes = [
        multiprocessing.get_context("fork").Process(target=_write_decisions, args=(store.path, r, samples))
        for r in reviewers[4:]
    ]
    for worker in processes + threads:  # fork before any thread runs: a forked child must not inherit held locks
        worker.start()
    for worker in threads + processes:
        worker.join()
    assert all(p.exitcode == 0 for p in processes)
    log = store.log()
    assert Counter((d.reviewer, d.sample_id) for d in log) == Counter(itertools.product(reviewers, samples))
    assert all(d.note == f"{TRICKY_NOTE}{d.reviewer}/{d.sample_id}" for d in log)


# -- assignment -------------------------------------------------------------------------------------------------


def typed_samples(sizes: dict[str, int]) -> dict[str, str]:
    return {f"{qa_type}-{i:03d}": qa_type for qa_type, n in sizes.items() for i in range(n)}


def test_single_assignment_is_balanced_within_every_type_and_deterministic():
    samples = typed_samples({"AD": 10, "F": 7, "TO": 5})
    reviewers = ["ana", "ben", "cleo", "dan"]
    result = assign(samples, reviewers, seed="s")
    assert Counter(a.sample_id for a in result) == Counter(list(samples))  # every sample exactly once
    for qa_type in ("AD", "F", "TO"):
        load = Counter(a.reviewer for a in result if samples[a.sample_id] == qa_type)
        assert max(load.values()) - min(load.get(r, 0) for r in reviewers) <= 1
    totals = Counter(a.reviewer for a in result)
    assert max(totals.values()) - min(totals.values()) <= 1
    assert assign(dict(reversed(samples.items())), list(reversed(reviewers)), seed="s") == result
    assert assign(samples, reviewers, seed="other") != result


def test_each_sample_reviewer_is_uniform_over_the_panel():
    samples = typed_samples({"AD": 3, "F": 2})
    reviewers = ["ana", "ben", "cleo", "dan"]
    draws = {sample: Counter() for sample in samples}
    for seed in range(400):
        for a in assign(samples, reviewers, seed=str(seed)):
            draws[a.sample_id][a.reviewer] += 1
    for counts in draws.values():
        assert chisquare([counts[r] for r in reviewers]).pvalue > 1e-3


def test_dual_subset_is_stratified_with_pairs_balanced_over_all_pairings():
    samples = typed_samples({"AD": 30, "F": 30})
    reviewers = ["ana", "ben", "cleo", "dan"]
    result = assign(samples, reviewers, dual_fraction=0.4, seed="s")
    dual = [a for a in result if a.mode == "dual"]
    by_sample = {}
    for a in dual:
        by_sample.setdefault(a.sample_id, []).append(a.reviewer)
    assert Counter(samples[s] for s in by_sample) == {"AD": 12, "F": 12}
    pairs = Counter(tuple(sorted(names)) for names in by_sample.values())
    assert set(pairs) == set(itertools.combinations(reviewers, 2)) and max(pairs.values()) - min(pairs.values()) <= 1
    assert not {a.sample_id for a in result if a.mode == "single"} & set(by_sample)
    assert len(result) == 36 + 2 * 24
    with pytest.raises(ValueError, match="two reviewers"):
        assign(samples, ["ana"], dual_fraction=0.1)


# -- reliability ------------------------------------------------------------------------------------------------


def test_kappa_and_agreement_match_hand_computed_values():
    # 2x2 example: 20 yes/yes, 5 yes/no, 10 no/yes, 15 no/no. po = 35/50 = .7, pe = .5*.6 + .5*.4 = .5, kappa = .4
    first = ["keep"] * 25 + ["discard"] * 25
    second = ["keep"] * 20 + ["discard"] * 5 + ["keep"] * 10 + ["discard"] * 15
    binary = agreement(first, second, ["keep", "discard"])
    assert binary.percent_agreement == pytest.approx(0.7) and binary.cohen_kappa == pytest.approx(0.4)
    low, high = binary.cohen_kappa_ci95
    assert low < 0.4 < high
    # 3 labels: po = .7; marginals a 6/4, b 3/3, c 1/3 -> pe = .36, kappa = .34/.64;
    # Fleiss: pooled p = .5, .3, .2 -> pe = .38, kappa = .32/.62; alpha: n = 10, 6, 4 of 20 -> De = 1 - 132/380
    three = agreement(list("aaaaabbbca"), list("aaaabbbccc"), ["a", "b", "c"])
    assert three.percent_agreement == pytest.approx(0.7)
    assert three.cohen_kappa == pytest.approx(0.34 / 0.64)
    assert three.fleiss_kappa == pytest.approx(0.32 / 0.62)
    assert three.krippendorff_alpha == pytest.approx(1 - 0.3 / (1 - 132 / 380))


def test_kappa_is_none_when_undefined_and_empty_input_is_reported_as_such():
    same = agreement(["approve"] * 5, ["approve"] * 5, ["approve", "reject", "flag"])
    assert same.percent_agreement == 1.0 and same.cohen_kappa is None and same.krippendorff_alpha is None
    assert agreement([], [], ["keep", "discard"]).n_items == 0


def test_agreement_uses_only_completed_dual_reviews_and_the_decisions_in_force(store):
    dual = [("q1", "alice"), ("q1", "bob"), ("q2", "bob"), ("q2", "carol"), ("q3", "alice"), ("q3", "carol")]
    assigned(store, dual, mode="dual")
    assigned(store, [("q4", "alice")])
    store.record("bob", "q1", "reject", [], "no")
    store.record("alice", "q1", "approve")
    store.record("bob", "q1", "approve")  # bob changed his mind: agreement
    store.record("carol", "q2", "flag", ["ambiguous"], "")
    store.record("bob", "q2", "approve")
    store.record("alice", "q3", "approve")  # carol has not decided q3
    store.record("alice", "q4", "approve")
    pairs = rated_pairs(store.assignments(), store.latest())
    assert [(p.sample_id, p.first, p.second, p.first_decision, p.second_decision) for p in pairs] == [
        ("q1", "alice", "bob", "approve", "approve"),
        ("q2", "bob", "carol", "approve", "flag"),
    ]
    report = agreement_report(pairs)
    assert report["n_items"] == 2 and report["decision"]["percent_agreement"] == 0.5
    assert report["retention"]["percent_agreement"] == 0.5
    assert set(report["per_pair"]) == {"alice + bob", "bob + carol"}


# -- export -----------------------------------------------------------------------------------------------------


@pytest.fixture
def reviewed(sureon_build, store):
    """The built validation pool reviewed so that every verdict occurs (ids in dataset order)."""
    ids = list(load_samples(sureon_build.out))
    assert len(ids) >= 7
    assigned(store, [(ids[0], "alice"), (ids[1], "bob"), (ids[2], "carol")])
    assigned(store, [(s, r) for s in ids[3:7] for r in ("alice", "bob")], mode="dual")
    store.record("alice", ids[0], "reject", ["inaccurate"], "first look: wrong")
    store.record("alice", ids[0], "approve")  # changed mind: approved
    store.record("bob", ids[1], "reject", ["not_visible", "other"], TRICKY_NOTE)
    store.record("carol", ids[2], "flag", [], "")
    for sample, second in zip(ids[3:6], ("approve", "reject", "flag"), strict=True):
        store.record("alice", sample, "approve")
        store.record("bob", sample, second, ["ambiguous"] if second != "approve" else [], "two correct options")
    store.record("alice", ids[6], "approve")  # bob has not decided: pending
    return sureon_build.out, store, ids


def test_export_keeps_only_unanimous_approvals_and_reconciles(reviewed, tmp_path):
    from datasets import load_dataset

    dataset_dir, store, ids = reviewed
    report = export_review(dataset_dir, store, tmp_path / "verified")
    total = len(ids)
    assert report.counts == {"approved": 2, "rejected": 2, "flagged": 2, "pending": 1, "unassigned": total - 7}
    bench = load_dataset(str(tmp_path / "verified"), "bench", split="test")
    assert bench["question_id"] == [ids[0], ids[3]]
    source = load_dataset(str(dataset_dir), "validation_curated", split="validation")
    assert bench.features == source.features
    original = source.filter(lambda r: r["question_id"] == ids[3])[0]
    assert bench[1]["frames"][0].tobytes() == original["frames"][0].tobytes()
    assert bench[1]["options"] == original["options"]

    saved = json.loads((tmp_path / "verified" / "review_report.json").read_text())
    total_row = saved["per_category"][-1]
    assert total_row == {
        "category": "total",
        "reviewed": 6,
        "approved": 2,
        "rejected": 4,
        "flagged": 2,
        "pending": total - 6,
        "approval_rate": pytest.approx(2 / 6),
    }
    assert sum(row["reviewed"] for row in saved["per_category"][:-1]) == 6
    discarded = {entry["question_id"]: entry for entry in saved["discarded"]}
    assert set(discarded) == {ids[1], ids[2], ids[4], ids[5]}
    assert discarded[ids[1]]["decisions"][0]["note"] == TRICKY_NOTE
    assert discarded[ids[2]]["status"] == "flagged" and discarded[ids[4]]["status"] == "rejected"
    assert saved["rejection_reasons"] == {"ambiguous": 2, "not_visible": 1, "other": 1, "untagged": 1}
    assert saved["agreement"]["n_items"] == 3
    assert saved["agreement"]["decision"]["percent_agreement"] == pytest.approx(1 / 3)
    assert set(saved["pending"]) == {ids[6], *ids[7:]}
    assert "| total | 6 | 2 | 4 | 33.3% |" in (tmp_path / "verified" / "review_report.md").read_text()
    with pytest.raises(FileExistsError):
        export_review(dataset_dir, store, tmp_path / "verified")


def test_cli_creates_accounts_assigns_and_exports(sureon_build, tmp_path, monkeypatch, capsys):
    import io

    from sureon.cli import main

    db = tmp_path / "review.sqlite"
    for name in ("ana", "ben"):
        monkeypatch.setattr("sys.stdin", io.StringIO(PASSWORD + "\n"))
        assert main(["review", "add-user", name, "--db", str(db)]) == 0
    args = ["--db", str(db), "--dataset", str(sureon_build.out)]
    assert main(["review", "assign", *args, "--dual-fraction", "1"]) == 0
    assert main(["review", "assign", *args]) == 0  # nothing new to assign
    store = ReviewStore(db)
    assert store.authenticate("ana", PASSWORD)
    samples = load_samples(sureon_build.out)
    assert Counter(a.sample_id for a in store.assignments()) == {s: 2 for s in samples}
    for a in store.assignments():
        store.record(a.reviewer, a.sample_id, "approve")
    assert main(["review", "export", *args, "--out", str(tmp_path / "out")]) == 0
    assert main(["review", "agreement", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert f"approved {len(samples)}" in out and '"n_items": ' + str(len(samples)) in out
