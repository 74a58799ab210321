"""Near-duplicate search: finds the planted duplicates and nothing else, agrees with an all-pairs reference, reads
MedQA- / MedMCQA- / PubMedQA-style files, and its dedupe list feeds the builder."""

import csv
import json
import random

import pytest
from conftest import REPO

from builders.surgiq.near_duplicates import NgramIndex, find_near_duplicates, ngrams, normalise, read_external
from builders.surgiq.reader import read_id_list, read_surgiq
from sureon.cli import main as cli_main


SAMPLE_DIR = REPO / "sample_data" / "surgiq"
TEMPLATE = "All of the following are true EXCEPT:"


def random_question(rng: random.Random, vocabulary: list[str], low: int = 20, high: int = 70) -> str:
    return " ".join(rng.choice(vocabulary) for _ in range(rng.randint(low, high))) + "?"


@pytest.fixture(scope="module")
def synthetic():
    """300 SurgiQ-like questions (60 start with a shared EXCEPT stem) and 1,000 external ones with planted pairs."""
    rng = random.Random(7)
    vocabulary = [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9))) for _ in range(3000)
    ]
    surgiq = [{"id": f"sq{i:03d}", "question": random_question(rng, vocabulary)} for i in range(300)]
    for record in surgiq[:60]:
        record["question"] = f"{TEMPLATE} {record['question']}"
    external = [random_question(rng, vocabulary) for _ in range(1000)]
    words = surgiq[142]["question"].split()
    substituted = [("XYZ" if i in (10, 25, 40) else w) for i, w in enumerate(words)]
    quarter = " ".join(surgiq[250]["question"].split()[:12]) + " " + random_question(rng, vocabulary, 40, 40)
    planted = {
        "exact": (surgiq[65]["question"], "sq065"),
        "case and punctuation": (surgiq[117]["question"].upper().replace(" ", " , "), "sq117"),
        "three words changed": (" ".join(substituted), "sq142"),
        "first half only": (" ".join(surgiq[199]["question"].split()[:20]), "sq199"),
        "a template question": (f"{TEMPLATE} {random_question(rng, vocabulary)}", None),
        "a quarter shared": (quarter, None),
    }
    ids = [f"ext{i:04d}" for i in range(len(external))]
    for name, (text, _) in planted.items():
        ids.append(f"planted: {name}")
        external.append(text)
    expected = {(sq, f"planted: {name}") for name, (_, sq) in planted.items() if sq}
    return surgiq, ids, external, expected


def all_pairs(surgiq, external_ids, external, threshold=0.5):
    """The reference: every pair's overlap coefficient from Python sets."""
    external_grams = [ngrams(t) for t in external]
    found = set()
    for record in surgiq:
        a = ngrams(record["question"])
        for eid, b in zip(external_ids, external_grams, strict=True):
            if a and b and len(a & b) >= threshold * min(len(a), len(b)):
                found.add((record["id"], eid))
    return found


def write_external(tmp_path, ids, texts):
    path = tmp_path / "external.jsonl"
    path.write_text("".join(json.dumps({"id": i, "question": t}) + "\n" for i, t in zip(ids, texts, strict=True)))
    return path


@pytest.mark.parametrize("max_df", [50, 0])
def test_finds_the_planted_duplicates_and_nothing_else(synthetic, tmp_path, max_df):
    surgiq, ids, external, expected = synthetic
    matches, counts, _ = find_near_duplicates(surgiq, [write_external(tmp_path, ids, external)], max_df=max_df)
    assert {(m.surgiq_id, m.external_id) for m in matches} == expected
    assert list(counts.values()) == [len(external)]
    by_pair = {(m.surgiq_id, m.external_id): m for m in matches}
    assert by_pair[("sq065", "planted: exact")].overlap == 1.0
    assert by_pair[("sq117", "planted: case and punctuation")].overlap == 1.0
    assert by_pair[("sq199", "planted: first half only")].overlap == 1.0
    assert 0.5 <= by_pair[("sq142", "planted: three words changed")].overlap < 1.0
    assert [m.overlap for m in matches] == sorted((m.overlap for m in matches), reverse=True)


def test_the_template_stem_is_frequent_but_counted(synthetic):
    surgiq, _, _, _ = synthetic
    index = NgramIndex([r["id"] for r in surgiq], [r["question"] for r in surgiq], max_df=50)
    stem = " ".join(normalise(TEMPLATE)[:5])
    assert not index.rare[index.vocabulary[stem]]  # in 60 questions: it nominates no pairs
    # a question that is the stem plus one SurgiQ question's words is found, with the stem counted as shared
    ((_, q, shared, q_size, e_size),) = index.search([surgiq[3]["question"]])
    assert index.ids[q] == "sq003" and shared == q_size == e_size


def test_agrees_with_all_pairs_at_a_low_threshold(synthetic):
    surgiq, ids, external, _ = synthetic
    index = NgramIndex([r["id"] for r in surgiq], [r["question"] for r in surgiq], max_df=0)
    found = {(index.ids[q], ids[e]) for e, q, *_ in index.search(external, threshold=0.1)}
    assert found == all_pairs(surgiq, ids, external, threshold=0.1)
    assert ("sq250", "planted: a quarter shared") in found


def test_normalisation():
    assert normalise("A 78-year-old WOMAN, (café)!") == ["a", "78", "year", "old", "woman", "café"]
    assert ngrams("Too short here") == {"too short here"}
    assert ngrams("one two three four five six") == {"one two three four five", "two three four five six"}


def test_reads_medmcqa_csv_and_pubmedqa_json(tmp_path):
    medmcqa = tmp_path / "medmcqa.csv"
    with medmcqa.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, ["id", "question", "opa", "opb", "opc", "opd", "cop"])
        writer.writeheader()
        writer.writerow({"id": "m1", "question": "Which nerve?", "opa": "a", "opb": "b", "opc": "c", "opd": "d"})
    assert read_external(medmcqa) == (["m1"], ["Which nerve?"])
    pubmedqa = tmp_path / "ori_pqal.json"
    pubmedqa.write_text(json.dumps({"2171": {"QUESTION": "Does it work?", "final_decision": "yes"}}))
    assert read_external(pubmedqa) == (["2171"], ["Does it work?"])
    no_id = tmp_path / "stems.jsonl"
    no_id.write_text(json.dumps({"stem": "A?"}) + "\n")
    assert read_external(no_id) == (["stems.jsonl line 1"], ["A?"])
    with pytest.raises(ValueError, match="no question column"):
        read_external(tmp_path / "ori_pqal.json", question_column="text")


def test_external_files_that_cannot_be_read_name_the_file_and_line(tmp_path):
    """External banks come from many sources: one saved as Latin-1, cut short, or empty is named with its line."""
    latin = tmp_path / "medqa.jsonl"
    latin.write_bytes(b'{"id": "1", "question": "Which?"}\n{"id": "2", "question": "Caf\xe9?"}\n')
    with pytest.raises(ValueError, match=r"medqa\.jsonl line 2, column 29: byte 0xe9 is not UTF-8"):
        read_external(latin)
    cut = tmp_path / "cut.jsonl"
    cut.write_text('{"id": "1", "question": "Which?"}\n{"id": "2", "question": "Wh\n')
    with pytest.raises(ValueError, match=r"cut\.jsonl line 2, column \d+: not valid JSON"):
        read_external(cut)
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(ValueError, match=r"empty\.csv: holds no questions"):
        read_external(tmp_path / "empty.csv")


def test_cli_flags_the_sample_duplicates_and_the_build_applies_the_list(tmp_path, capsys):
    source, external = SAMPLE_DIR / "surgiq_sample.jsonl", SAMPLE_DIR / "external_sample.jsonl"
    out = tmp_path / "near"
    argv = ["near-duplicates", "surgiq", "--source", str(source), "--against", str(external), "--out", str(out)]
    assert cli_main(argv) == 0
    assert "2 flagged pair(s), 2 SurgiQ question(s) (6.67%)" in capsys.readouterr().out
    assert read_id_list(out / "dedupe_ids.txt") == ["surgiq_0002", "surgiq_0015"]  # not the EXCEPT-stem question
    with (out / "flagged_pairs.csv").open() as handle:
        pairs = list(csv.DictReader(handle))
    assert [(p["surgiq_id"], p["external_id"], p["overlap"]) for p in pairs] == [
        ("surgiq_0002", "medqa_like_000", "1.0000"),
        ("surgiq_0015", "medqa_like_001", "1.0000"),
    ]
    records, _ = read_surgiq([source])
    assert pairs[1]["surgiq_question"] == records[15]["question"]
    built = tmp_path / "surgiq"
    assert cli_main(["build", "surgiq", "--source", str(source), "--exclude-ids", str(out / "dedupe_ids.txt"),
                     "--out", str(built)]) == 0  # fmt: skip
    manifest = json.loads((built / "build_manifest.json").read_text())
    assert manifest["configs"]["default"]["written"] == 28
