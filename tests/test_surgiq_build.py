"""SurgiQ builder: every source layout, the column mapping and its named errors, the two configs, the position
balance in the report and card, dedupe lists, and byte-identical rebuilds."""

import copy
import csv
import json
import re
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from conftest import REPO
from datasets import get_dataset_config_names, load_dataset

from builders.options import LETTERS
from builders.surgiq.build import PAPER_ANSWER_POSITION, BuildOptions, build_surgiq
from builders.surgiq.reader import SurgiqColumns, SurgiqError, parse_aliases, read_surgiq
from sample_data.make_surgiq_sample import external_rows, surgiq_rows
from sureon.cli import main as cli_main


SAMPLE = REPO / "sample_data" / "surgiq" / "surgiq_sample.jsonl"
CANONICAL_TYPES = {"case-based": "case_based", "best-option": "best_option"}


@pytest.fixture
def rows():
    return copy.deepcopy(surgiq_rows())


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def write_json(path, data):
    path.write_text(json.dumps(data))
    return path


def write_csv(path, rows):
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def letter_columns(rows, answer_as_text=False):
    """The same questions with one column per option letter (A..D) and, optionally, the answer as its text."""
    out = []
    for row in rows:
        flat = {k: v for k, v in row.items() if k != "options"}
        flat.update({LETTERS[i]: text for i, text in enumerate(row["options"])})
        if answer_as_text:
            flat["answer"] = row["options"][LETTERS.index(row["answer"])]
        out.append(flat)
    return out


def build(tmp_path, sources, name="out", **kwargs):
    return build_surgiq(BuildOptions(sources=list(sources), out=tmp_path / name, **kwargs))


def record_view(records):
    return [{k: v for k, v in r.items() if not k.startswith("_")} for r in records]


def test_every_source_layout_reads_to_the_same_records(tmp_path, rows):
    reference, _ = read_surgiq([write_jsonl(tmp_path / "a.jsonl", rows)])
    as_letters = letter_columns(rows)
    layouts = {
        "json list": write_json(tmp_path / "b.json", rows),
        "json wrapped": write_json(tmp_path / "c.json", {"questions": rows}),
        "json keyed by id": write_json(
            tmp_path / "i.json", {r["id"]: {k: v for k, v in r.items() if k != "id"} for r in rows}
        ),
        "csv A-D columns": write_csv(tmp_path / "d.csv", as_letters),
        "csv answer as text": write_csv(tmp_path / "e.csv", letter_columns(rows, answer_as_text=True)),
        "csv JSON options": write_csv(tmp_path / "f.csv", [r | {"options": json.dumps(r["options"])} for r in rows]),
        "parquet A-D": tmp_path / "g.parquet",
        "jsonl letter dict, lowercase answer": write_jsonl(
            tmp_path / "h.jsonl",
            [
                r | {"options": dict(zip("ABCD", r["options"], strict=True)), "answer": r["answer"].lower()}
                for r in rows
            ],
        ),
    }
    pq.write_table(pa.Table.from_pylist(as_letters), tmp_path / "g.parquet")
    for name, path in layouts.items():
        records, extras = read_surgiq([path])
        assert record_view(records) == record_view(reference), name
        assert extras == ["source_ref"], name


def test_records_match_the_source_rows(rows, tmp_path):
    records, _ = read_surgiq([write_jsonl(tmp_path / "a.jsonl", rows)])
    for record, row in zip(records, rows, strict=True):
        assert record["options"] == row["options"]
        assert (
            record["answer"] == row["answer"]
            and record["options"][record["answer_index"]] == (row["options"][LETTERS.index(row["answer"])])
        )
        assert record["domain"] == row["domain"].lower().replace(" ", "_")
        assert record["question_type"] == CANONICAL_TYPES.get(row["question_type"], row["question_type"])
        assert record["_extras"] == {"source_ref": row["source_ref"]}


def test_mapping_errors_name_the_row_and_the_value(tmp_path, rows):
    rows[0]["domain"] = "Cardiology"
    rows[1]["question_type"] = "true/false"
    rows[2]["options"] = rows[2]["options"][:3]
    rows[3]["options"].append("A fifth option")
    rows[4]["answer"] = "Something else entirely"
    rows[5]["source_type"] = "podcast"
    rows[6]["answer"] = "E"
    rows[8]["id"] = rows[7]["id"]
    path = write_jsonl(tmp_path / "bad.jsonl", rows)
    with pytest.raises(SurgiqError) as err:
        read_surgiq([path])
    message = str(err.value)
    assert message.startswith(f"8 row(s) of {path} cannot be read")
    expected = [
        "bad.jsonl line 1 question_id='surgiq_0000': unknown domain 'Cardiology'",
        "bad.jsonl line 2 question_id='surgiq_0001': unknown question_type 'true/false'",
        "bad.jsonl line 3 question_id='surgiq_0002': 3 non-empty options, SurgiQ needs exactly 4",
        "bad.jsonl line 4 question_id='surgiq_0003': 5 non-empty options",
        "bad.jsonl line 5 question_id='surgiq_0004': answer 'Something else entirely' matches no option",
        "bad.jsonl line 6 question_id='surgiq_0005': unknown source_type 'podcast'",
        "bad.jsonl line 7 question_id='surgiq_0006': answer 'E' matches no option",
        "bad.jsonl line 9 question_id='surgiq_0007': duplicate id (first at bad.jsonl line 8)",
    ]
    for line in expected:
        assert line in message, line


def test_csv_errors_give_the_file_line(tmp_path, rows):
    flat = letter_columns(rows)
    flat[3]["D"] = ""
    with pytest.raises(SurgiqError, match=r"bad\.csv line 5 question_id='surgiq_0003': 3 non-empty options"):
        read_surgiq([write_csv(tmp_path / "bad.csv", flat)])


@pytest.mark.parametrize("layout", ["jsonl", "json", "csv", "parquet"])
def test_text_that_is_not_utf8_names_the_file_and_line(tmp_path, rows, layout):
    """A source saved as Latin-1 (or parquet strings that are not UTF-8) is refused naming the file and where, never a
    bare codec error; a BOM at the start of a UTF-8 file is accepted."""
    rows[1]["question"] = "Caf\u00e9 au lait: " + rows[1]["question"]
    path = tmp_path / f"latin1.{layout}"
    if layout == "jsonl":
        path.write_bytes("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("latin-1"))
        where = r"latin1\.jsonl line 2, column \d+: byte 0xe9 is not UTF-8"
    elif layout == "json":
        path.write_bytes(json.dumps(rows, ensure_ascii=False, indent=1).encode("latin-1"))
        where = r"latin1\.json line \d+, column \d+: byte 0xe9 is not UTF-8"
    elif layout == "csv":
        path.write_bytes(write_csv(tmp_path / "utf8.csv", letter_columns(rows)).read_text().encode("latin-1"))
        where = r"latin1\.csv line 3, column \d+: byte 0xe9 is not UTF-8"
    else:
        table = pa.Table.from_pylist(rows)
        latin = pa.array([row["question"].encode("latin-1") for row in rows], pa.binary())
        broken = pa.Array.from_buffers(pa.string(), len(latin), latin.buffers())
        pq.write_table(table.set_column(table.column_names.index("question"), "question", broken), path)
        where = r"latin1\.parquet row 1 column 'question': its text is not UTF-8"
    with pytest.raises(SurgiqError, match=where):
        read_surgiq([path])
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + write_jsonl(tmp_path / "plain.jsonl", rows).read_bytes())
    assert len(read_surgiq([bom])[0]) == len(rows)


def test_malformed_and_empty_files_name_the_file(tmp_path, rows):
    lines = [json.dumps(r) for r in rows]
    lines[4] = lines[4][:-1]  # the closing brace lost
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join(lines) + "\n")
    with pytest.raises(SurgiqError, match=r"broken\.jsonl line 5, column \d+: not valid JSON"):
        read_surgiq([broken])
    for name, content in {
        "empty.jsonl": "",
        "blank.jsonl": "\n\n",
        "empty.json": "[]",
        "header.csv": "id,question\n",
    }.items():
        (tmp_path / name).write_text(content)
        with pytest.raises(SurgiqError, match=f"{name}: holds no questions"):
            read_surgiq([tmp_path / name])
    (tmp_path / "not.parquet").write_text("id,question\n")
    with pytest.raises(SurgiqError, match=r"not\.parquet: not a readable parquet file"):
        read_surgiq([tmp_path / "not.parquet"])


def test_excluding_every_question_is_refused_before_anything_is_written(tmp_path, rows):
    source = write_jsonl(tmp_path / "a.jsonl", rows)
    ids = tmp_path / "ids.txt"
    ids.write_text("".join(r["id"] + "\n" for r in rows))
    with pytest.raises(SurgiqError, match=f"all {len(rows)} questions of the sources are listed in --exclude-ids"):
        build(tmp_path, [source], exclude_ids=ids)
    with pytest.raises(SurgiqError, match="--exclude-ids .*nope.txt: no such file"):
        build(tmp_path, [source], exclude_ids=tmp_path / "nope.txt")
    assert not (tmp_path / "out").exists()


def test_columns_files_that_cannot_be_read_name_the_file_and_line(tmp_path):
    cases = {
        "not_yaml.yaml": ("question: stem\noptions: [a, b\n", r"not_yaml\.yaml: not YAML \(line 3"),
        "list.yaml": ("- question: stem\n", r"list\.yaml: expected a mapping of key: value, got a YAML list"),
        "typo.yaml": ("questoin: stem\n", r"did you mean 'question'\?"),
        "nested.yaml": ("question: {a: b}\n", r"question: \{'a': 'b'\} is not a column name"),
        "required.yaml": ("id: none\n", "id is required and cannot be none"),
    }
    for name, (text, message) in cases.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(SurgiqError, match=message):
            SurgiqColumns.from_cli(None, str(tmp_path / name))
    with pytest.raises(SurgiqError, match=r"missing\.yaml: no such file"):
        SurgiqColumns.from_cli(None, str(tmp_path / "missing.yaml"))
    (tmp_path / "numbers.yaml").write_text("question: 2024\n")
    assert SurgiqColumns.from_cli(None, str(tmp_path / "numbers.yaml")).question == "2024"


def test_missing_columns_and_mapping(tmp_path, rows):
    renamed = [{("stem" if k == "question" else k): v for k, v in r.items()} for r in rows]
    path = write_jsonl(tmp_path / "renamed.jsonl", renamed)
    with pytest.raises(SurgiqError, match=r"missing required column\(s\): question \(column 'question'\)"):
        read_surgiq([path])
    records, _ = read_surgiq([path], SurgiqColumns.from_cli(["question=stem"]))
    assert [r["question"] for r in records] == [r["question"] for r in rows]
    with pytest.raises(SurgiqError, match="unknown mapping field"):
        SurgiqColumns.from_cli(["stem=question"])
    no_options = write_jsonl(tmp_path / "none.jsonl", [{k: v for k, v in r.items() if k != "options"} for r in rows])
    with pytest.raises(SurgiqError, match="no options column 'options' and no per-letter columns"):
        read_surgiq([no_options])


def test_declared_option_columns_and_aliases(tmp_path, rows):
    flat = []
    for row in letter_columns(rows):
        flat.append({("choice " + k if k in "ABCD" else k): v for k, v in row.items()} | {"domain": "Ortho"})
    path = write_csv(tmp_path / "x.csv", flat)
    mapping = SurgiqColumns.from_cli(["options=none", "option_columns=choice A,choice B,choice C,choice D"])
    with pytest.raises(SurgiqError, match="unknown domain 'Ortho'"):
        read_surgiq([path], mapping)
    records, _ = read_surgiq([path], mapping, parse_aliases(["domain:Ortho=orthopedic_surgery"]))
    assert {r["domain"] for r in records} == {"orthopedic_surgery"}
    assert [r["options"] for r in records] == [r["options"] for r in rows]
    with pytest.raises(SurgiqError, match="is not a domain"):
        parse_aliases(["domain:Ortho=orthopedics_dept"])


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("surgiq")
    return build_surgiq(BuildOptions(sources=[SAMPLE], out=tmp / "surgiq"))


def load(folder, config):
    return load_dataset(str(folder), config, split="test")


def test_configs_round_trip_through_load_dataset(built):
    assert get_dataset_config_names(str(built.out)) == ["default", "shuffled"]
    for config in ("default", "shuffled"):
        ds = load(built.out, config)
        assert len(ds) == len(surgiq_rows()) and len(set(ds["id"])) == len(ds)
        assert ds.features["options"].feature.dtype == "string"
        assert "source_ref" in ds.column_names


def test_default_keeps_the_stored_order(built):
    for record, row in zip(load(built.out, "default"), surgiq_rows(), strict=True):
        assert record["options"] == row["options"] and record["answer"] == row["answer"]
        assert record["option_order"] == [0, 1, 2, 3]


def test_shuffled_keeps_the_correct_answer_text_and_permutes(built):
    default = {r["id"]: r for r in load(built.out, "default")}
    moved = 0
    for record in load(built.out, "shuffled"):
        stored = default[record["id"]]
        assert sorted(record["option_order"]) == [0, 1, 2, 3]
        assert record["options"] == [stored["options"][i] for i in record["option_order"]]
        assert record["options"][record["answer_index"]] == stored["options"][stored["answer_index"]]
        assert record["answer"] == LETTERS[record["answer_index"]]
        assert record["question"] == stored["question"] and record["domain"] == stored["domain"]
        moved += record["answer_index"] != stored["answer_index"]
    assert moved > len(default) / 2


def test_rebuilds_are_byte_identical(built, tmp_path):
    again = build(tmp_path, [SAMPLE])
    for path in sorted(p for p in built.out.rglob("*") if p.is_file()):
        relative = path.relative_to(built.out)
        assert (again.out / relative).read_bytes() == path.read_bytes(), relative


def test_answer_position_balance_in_report_manifest_and_card(built):
    manifest = json.loads((built.out / "build_manifest.json").read_text())
    card = (built.out / "README.md").read_text()
    for report in built.configs:
        counts = Counter(load(built.out, report.name)["answer"])
        expected = {x: round(100 * counts[x] / report.written, 1) for x in "ABCD"}
        assert report.answer_position == expected == manifest["stats"][report.name]["answer_pct"]
        cells = " |".join(f" {expected[x]}" for x in "ABCD")
        assert f"| `{report.name}` |{cells} |" in card
        assert " ".join(f"{x} {expected[x]:.1f}" for x in "ABCD") in built.summary()
    default = manifest["stats"]["default"]["answer_position"]
    assert default == {"A": 8, "B": 8, "C": 7, "D": 7}  # the sample is balanced by construction
    paper = " |".join(f" {PAPER_ANSWER_POSITION[x]}" for x in "ABCD")
    assert f"| the paper's release |{paper} | - |" in card


def test_card_counts_equal_the_data(built):
    card = (built.out / "README.md").read_text()
    header = yaml.safe_load(card.split("---")[1])
    assert [c["config_name"] for c in header["configs"]] == ["default", "shuffled"]
    ds = load(built.out, "default")
    for domain, count in Counter(ds["domain"]).items():
        assert re.search(rf"\(`{domain}`\) \| {count} \| {100 * count / len(ds):.1f} \|", card), domain
    for qtype, count in Counter(ds["question_type"]).items():
        assert re.search(rf"\(`{qtype}`\) \| {count} \|", card), qtype
    assert (built.out / "assets" / "domain_type.png").stat().st_size > 1000


def test_exclude_ids_reconciles_and_warns_on_stale_ids(tmp_path):
    dedupe = tmp_path / "dedupe_ids.txt"
    dedupe.write_text("# reviewed\nsurgiq_0002  # overlap 1.00\n\nsurgiq_0015\nnot_an_id\n")
    report = build(tmp_path, [SAMPLE], exclude_ids=dedupe)
    manifest = json.loads((report.out / "build_manifest.json").read_text())
    for config in ("default", "shuffled"):
        entry = manifest["configs"][config]
        assert entry["read"] == 30 == entry["written"] + len(entry["skipped"])
        assert [s["id"] for s in entry["skipped"]] == ["surgiq_0002", "surgiq_0015"]
        assert "surgiq_0002" not in load(report.out, config)["id"]
    assert manifest["warnings"] == [f"1 id(s) of {dedupe} are not in the sources: ['not_an_id']"]


def test_cli_build_and_errors(tmp_path, capsys, rows):
    assert cli_main(["build", "surgiq", "--source", str(SAMPLE), "--out", str(tmp_path / "cli")]) == 0
    assert "answer position %" in capsys.readouterr().out
    rows[0]["domain"] = "Dermatology"
    bad = write_jsonl(tmp_path / "bad.jsonl", rows)
    assert cli_main(["build", "surgiq", "--source", str(bad), "--out", str(tmp_path / "bad")]) == 2
    assert "unknown domain 'Dermatology'" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()


def test_committed_sample_matches_its_generator():
    committed = [json.loads(line) for line in SAMPLE.read_text().splitlines()]
    assert committed == surgiq_rows()
    external = SAMPLE.parent / "external_sample.jsonl"
    assert [json.loads(line) for line in external.read_text().splitlines()] == external_rows()


def test_demo_target_builds_and_scores_the_surgiq_sample():
    makefile = (REPO / "Makefile").read_text()
    demo = makefile.split("\ndemo:")[1].split("\n\n")[0]
    assert "SURGIQ_SAMPLE := sample_data/surgiq" in makefile
    for step in (
        "sureon near-duplicates surgiq --source $(SURGIQ_SAMPLE)/surgiq_sample.jsonl",
        "sureon build surgiq --source $(SURGIQ_SAMPLE)/surgiq_sample.jsonl",
        "-m recipes.training.tiny_models --kind causal-lm --out $(DEMO_DIR)/tiny-causal-lm",
        "sureon eval surgiq --model $(DEMO_DIR)/tiny-causal-lm --dataset $(DEMO_DIR)/surgiq",
        "sureon report surgiq",
    ):
        assert step in demo, step
