"""Bad input to ``sureon plan``, ``sureon build surgiq`` and ``sureon near-duplicates surgiq``: each mistake a new
user makes is one line naming the file (and the row or key) and the fix, and leaves nothing behind.

The cases join the one table of ``tests/bad_inputs/`` (same :class:`BadInput`, same checks); the launch scripts
``recipes/sft.py`` and ``recipes/grpo.py``, not ``sureon`` sub-commands, have theirs in ``tests/test_sft.py`` and
``tests/test_grpo.py``. A recipe case never loads a model: the recipe is refused when it is read.
"""

import copy
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from sample_data.make_surgiq_sample import external_rows, surgiq_rows

from . import BadInput, Inputs, run_cases


REPO = Path(__file__).resolve().parents[2]
SFT_RECIPE = REPO / "recipes" / "qwen3-vl-8b" / "sft" / "config_sureon_vlm.yaml"
GRPO_RECIPE = REPO / "recipes" / "qwen3-vl-8b" / "grpo" / "config_sureon_grpo.yaml"
TWO_STAGE = REPO / "recipes" / "qwen3-vl-8b" / "sft" / "config_two_stage.yaml"
SURGIQ_SAMPLE = REPO / "sample_data" / "surgiq" / "surgiq_sample.jsonl"


# ---- sureon plan ----------------------------------------------------------------------------------------------------


def _recipe(edit=None, *, base=SFT_RECIPE, text: str | bytes | None = None, synthetic_frames: bool = True):
    """`sureon plan` of the shipped recipe with ``edit(recipe)`` applied (or of ``text`` as it stands), on synthetic
    frames, so that no data is needed (unless ``synthetic_frames`` is False: the recipe's data is read)."""

    def argv(inputs: Inputs) -> list[str]:
        path = inputs.tmp / "recipe.yaml"
        if text is not None:
            path.write_bytes(text if isinstance(text, bytes) else text.encode())
        else:
            recipe = yaml.safe_load(base.read_text())
            edit(recipe)
            path.write_text(yaml.safe_dump(recipe, sort_keys=False))
        return ["plan", "--config", str(path)] + (["--synthetic-frames", "768x432"] if synthetic_frames else [])

    return argv


def _set(**values):
    return lambda recipe: recipe.update(values)


def _drop(key):
    return lambda recipe: recipe.pop(key)


def _stage(index, **values):
    return lambda recipe: recipe["stages"][index].update(values)


def _source(**values):
    return lambda recipe: recipe["dataset_mixture"][0].update(values)


def _plan(*extra: str):
    return lambda inputs: ["plan", "--config", str(SFT_RECIPE), *extra]


def _plan_of_a_build(inputs: Inputs) -> list[str]:
    """`sureon plan` of a recipe whose data is a build in the case's folder (SurgiQ's sample, built)."""
    from builders.surgiq.build import BuildOptions, build_surgiq

    build = build_surgiq(BuildOptions(sources=[SURGIQ_SAMPLE], out=inputs.tmp / "build", configs=["default"])).out
    return _recipe(_source(path=str(build)))(inputs)


PLAN = [
    BadInput(
        "plan",
        "a misspelt key (per_device_train_bach_size)",
        _recipe(_set(per_device_train_bach_size=2)),
        "unknown key 'per_device_train_bach_size' (did you mean 'per_device_train_batch_size'?)",
    ),
    BadInput("plan", "max_frames: eight", _recipe(_set(max_frames="eight")), "max_frames: 'eight' is not an integer"),
    BadInput(
        "plan",
        "a negative learning rate",
        _recipe(_set(learning_rate=-1e-5)),
        "learning_rate: -1e-05 is not a number greater than 0",
    ),
    BadInput(
        "plan",
        "a batch size of 0",
        _recipe(_set(per_device_train_batch_size=0)),
        "per_device_train_batch_size: 0 is not an integer of at least 1",
    ),
    BadInput(
        "plan",
        "save_strategy: no, unquoted (YAML reads False)",
        _recipe(text=SFT_RECIPE.read_text().replace("save_strategy: steps", "save_strategy: no")),
        "quote the text",
    ),
    BadInput(
        "plan",
        "an unknown lr_scheduler_type",
        _recipe(_set(lr_scheduler_type="cosin")),
        "lr_scheduler_type: 'cosin' is not one of",
    ),
    BadInput("plan", "frames_as: clip", _recipe(_set(frames_as="clip")), "frames_as: 'clip' is not one of"),
    BadInput(
        "plan",
        "no model_name_or_path",
        _recipe(_drop("model_name_or_path")),
        "model_name_or_path is missing",
    ),
    BadInput("plan", "no dataset_mixture", _recipe(_drop("dataset_mixture")), "no dataset_mixture"),
    BadInput(
        "plan",
        "data under build/ not built yet (never looked up on the Hub as the id build/nope)",
        _recipe(_set(dataset_mixture=[{"path": "build/nope", "name": "db"}]), synthetic_frames=False),
        "its data build/nope does not exist (a local path, not a Hub id): build it first (`sureon build sureon --out "
        "build/nope ...`)",
    ),
    BadInput(
        "plan",
        "a misspelt key in a dataset_mixture source",
        _recipe(_source(wieght=2)),
        "dataset_mixture[0]: unknown key 'wieght' (did you mean 'weight'?)",
    ),
    BadInput(
        "plan",
        "a negative source weight",
        _recipe(_source(weight=-1)),
        "dataset_mixture[0]: weight: -1 is not a number greater than 0",
    ),
    BadInput(
        "plan",
        "a misspelt key in a stage",
        _recipe(_stage(1, lerning_rate=1e-6), base=TWO_STAGE),
        "stage 'sureon': unknown key 'lerning_rate' (did you mean 'learning_rate'?)",
    ),
    BadInput(
        "plan",
        "a stage that changes the model",
        _recipe(_stage(1, model_name_or_path="other"), base=TWO_STAGE),
        "cannot change between stages",
    ),
    BadInput(
        "plan",
        "a stage without its data",
        _recipe(lambda r: r["stages"][0].pop("dataset_mixture"), base=TWO_STAGE),
        "stage 'public': no dataset_mixture",
    ),
    BadInput(
        "plan",
        "reward_weights of another length",
        _recipe(_set(reward_weights=[1.0]), base=GRPO_RECIPE),
        "reward_weights: 1 weights for 6 reward_funcs",
    ),
    BadInput(
        "plan", "the recipe is not YAML", _recipe(text="model: [a\nb: c\n"), "not YAML (line 2: expected ',' or ']'"
    ),
    BadInput("plan", "the recipe is empty", _recipe(text=""), "the file is empty"),
    BadInput("plan", "the recipe is a YAML list", _recipe(text="- a\n- b\n"), "got a YAML list"),
    BadInput(
        "plan",
        "the recipe is not UTF-8",
        _recipe(text=b"model_name_or_path: Qwen/Qwen3-VL-8B-Instruct\nhardware: 4\xd7 H200\n"),
        "line 2 is not UTF-8",
    ),
    BadInput(
        "plan",
        "the recipe does not exist",
        lambda i: ["plan", "--config", str(i.tmp / "nope.yaml")],
        "nope.yaml: no such file",
    ),
    BadInput("plan", "--num-gpus 0", _plan("--num-gpus", "0"), "--num-gpus: 0 is not an integer of at least 1"),
    BadInput(
        "plan", "--gpu-memory -80", _plan("--gpu-memory", "-80"), "--gpu-memory: -80 is not a number greater than 0"
    ),
    BadInput("plan", "--samples 0", _plan("--samples", "0"), "--samples: 0 is not an integer of at least 1"),
    BadInput("plan", "--rows 0", _plan("--rows", "0"), "--rows: 0 is not an integer of at least 1"),
    BadInput("plan", "--hbm-tbps 0", _plan("--hbm-tbps", "0"), "--hbm-tbps: 0 is not a number greater than 0"),
    BadInput(
        "plan", "--interconnect-gbps -1", _plan("--interconnect-gbps", "-1"), "--interconnect-gbps: -1 is not a number"
    ),
    BadInput("plan", "--assumed-mfu 40 (a percent)", _plan("--assumed-mfu", "40"), "--assumed-mfu: 40 is not"),
    BadInput("plan", "--synthetic-frames 768", _plan("--synthetic-frames", "768"), "--synthetic-frames: '768'"),
    BadInput("plan", "--synthetic-frames 0x432", _plan("--synthetic-frames", "0x432"), "with positive sizes"),
    BadInput(
        "plan",
        "--json is the recipe itself",
        lambda i: ["plan", "--config", str(_recipe(_set())(i)[2]), "--json", str(i.tmp / "recipe.yaml")],
        "recipe.yaml is the input --config",
    ),
    BadInput(
        "plan",
        "--json the README.md of the build the recipe trains on (the card was overwritten)",
        lambda i: _plan_of_a_build(i) + ["--json", str(i.tmp / "build" / "README.md")],
        "README.md lies inside the input train dataset_mixture[0] of",
    ),
    BadInput(
        "plan",
        "--json a file of the user's",
        lambda i: _plan("--json", str(_write("notes.json", b'{"mine": true}\n')(i)))(i),
        "notes.json is a file sureon did not write",
    ),
    BadInput(
        "plan",
        "--json a folder",
        lambda i: _plan("--json", str(i.tmp))(i),
        "is a folder: give the path of a file",
    ),
    BadInput(
        "plan",
        "--processor folder does not exist",
        lambda i: ["plan", "--config", str(SFT_RECIPE), "--processor", str(i.tmp / "nope")],
        "--processor",
    ),
    BadInput(
        "plan",
        "global_batch_size beside gradient_accumulation_steps",
        _recipe(_set(gradient_accumulation_steps=4)),
        "global_batch_size and gradient_accumulation_steps both set the accumulation",
    ),
    BadInput(
        "plan",
        "a stage's accumulation beside the recipe's global batch",
        _recipe(_stage(1, gradient_accumulation_steps=2), base=TWO_STAGE),
        "both set the accumulation",
    ),
    BadInput(
        "plan",
        "--num-gpus that cannot split the global batch",
        lambda i: _plan("--num-gpus", "3", "--synthetic-frames", "768x432")(i),
        "global_batch_size 64 is not a multiple of per_device_train_batch_size 4 × 3 rank(s)",
    ),
    BadInput("plan", "global_batch_size: 0", _recipe(_set(global_batch_size=0)), "global_batch_size: 0 is not"),
]


# ---- sureon build surgiq / near-duplicates surgiq -------------------------------------------------------------------


def _rows(edit=None) -> list[dict]:
    rows = copy.deepcopy(surgiq_rows())
    if edit is not None:
        edit(rows)
    return rows


def _jsonl(rows) -> bytes:
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


def _latin1_jsonl() -> bytes:
    """The sample with its second row saved as Latin-1 (an accented letter in its question)."""
    lines = _jsonl(_rows()).split(b"\n")
    lines[1] = lines[1].replace(b'"question": "', '"question": "Cr\u00e8me: '.encode("latin-1"), 1)
    return b"\n".join(lines)


def _latin1_csv() -> bytes:
    header = "id,question,A,B,C,D,answer,domain,question_type\n"
    good = "q1,Which approach?,open,laparoscopic,robotic,none,B,general surgery,best option\n"
    bad = "q2,Which caf\u00e9?,open,laparoscopic,robotic,none,B,general surgery,best option\n"
    return header.encode() + good.encode() + bad.encode("latin-1")


def _bad_utf8_parquet(path: Path) -> None:
    """Parquet whose second question is not UTF-8 (pyarrow writes such strings unchecked)."""
    raw = pa.array([b"Which approach?", b"Which caf\xe9?"], pa.binary())
    questions = pa.Array.from_buffers(pa.string(), len(raw), raw.buffers())
    rows = _rows()[:2]
    table = pa.table({name: [row[name] for row in rows] for name in rows[0] if name != "question"})
    pq.write_table(table.append_column("question", questions), path)


def _write(name: str, content):
    """A source file in the case's folder: bytes as they are, rows as JSON Lines, a callable given the path."""

    def write(inputs: Inputs) -> Path:
        path = inputs.tmp / name
        if callable(content):
            content(path)
        else:
            path.write_bytes(content if isinstance(content, bytes) else _jsonl(content))
        return path

    return write


def _build(source, *extra: str, files: dict | None = None):
    """`sureon build surgiq --source SOURCE ... --out OUT`; ``files`` writes more files first (``{name: content}``),
    and ``{tmp}`` in ``extra`` is the case's folder."""

    def argv(inputs: Inputs) -> list[str]:
        for name, content in (files or {}).items():
            _write(name, content)(inputs)
        sources = [str(source(inputs))] if callable(source) else [str(inputs.tmp / name) for name in source]
        more = [part.replace("{tmp}", str(inputs.tmp)) for part in extra]
        return ["build", "surgiq", "--source", *sources, *more, "--out", str(inputs.out)]

    return argv


def _near(against, *extra: str, source=None):
    """`sureon near-duplicates surgiq --source SOURCE --against AGAINST --out OUT`."""

    def argv(inputs: Inputs) -> list[str]:
        surgiq = source(inputs) if source else _write("surgiq.jsonl", _rows())(inputs)
        more = [part.replace("{tmp}", str(inputs.tmp)) for part in extra]
        return [
            "near-duplicates",
            "surgiq",
            "--source",
            str(surgiq),
            "--against",
            str(against(inputs)),
            *more,
            "--out",
            str(inputs.out),
        ]

    return argv


def _options(count: int):
    def edit(rows):
        rows[2]["options"] = (rows[2]["options"] + ["Another option", "Yet another"])[:count]

    return edit


def _answer(value):
    def edit(rows):
        rows[1]["answer"] = value

    return edit


def _duplicate_id(rows):
    rows[3]["id"] = rows[0]["id"]


def _all_ids(path: Path) -> None:
    path.write_text("".join(row["id"] + "\n" for row in _rows()))


BUILD_SURGIQ = [
    BadInput(
        "build surgiq",
        "a JSONL source saved as Latin-1",
        _build(_write("surgiq.jsonl", _latin1_jsonl())),
        "surgiq.jsonl line 2, column",
    ),
    BadInput(
        "build surgiq",
        "a CSV source saved as Latin-1",
        _build(_write("surgiq.csv", _latin1_csv())),
        "surgiq.csv line 3, column 13: byte 0xe9 is not UTF-8; save the file as UTF-8",
    ),
    BadInput(
        "build surgiq",
        "a JSON source saved as Latin-1",
        _build(_write("surgiq.json", json.dumps(_rows(), indent=1).replace("?", "\u00e9", 1).encode("latin-1"))),
        "is not UTF-8",
    ),
    BadInput(
        "build surgiq",
        "a parquet source whose text is not UTF-8",
        _build(_write("surgiq.parquet", _bad_utf8_parquet)),
        "surgiq.parquet row 1 column 'question': its text is not UTF-8",
    ),
    BadInput(
        "build surgiq",
        "a malformed JSON line",
        _build(_write("surgiq.jsonl", _jsonl(_rows()[:2]) + b'{"id": "x", "question": \n' + _jsonl(_rows()[2:]))),
        "surgiq.jsonl line 3, column 25: not valid JSON",
    ),
    BadInput("build surgiq", "an empty source file", _build(_write("surgiq.jsonl", b"")), "holds no questions"),
    BadInput(
        "build surgiq",
        "--out a folder name too long for datasets' cache files (built, then unloadable)",
        lambda i: _build(_write("surgiq.jsonl", _rows()))(i)[:-1] + [str(i.tmp / ("s" * 230))],
        "a folder name of 230 bytes is too long for `datasets`",
    ),
    BadInput(
        "build surgiq",
        "a CSV source with a header only",
        _build(_write("surgiq.csv", b"id,question,options,answer,domain,question_type\n")),
        "holds no questions",
    ),
    BadInput(
        "build surgiq",
        "a CSV row with an unquoted comma",
        _build(_write("surgiq.csv", _latin1_csv().rsplit(b"\n", 2)[0] + b"\nq3,A, B or C?,x,y,z,w,A,exam,negative\n")),
        "line 3: 10 fields, the header has 9; quote fields that hold a comma",
    ),
    BadInput(
        "build surgiq",
        "a question with 3 options",
        _build(_write("surgiq.jsonl", _rows(_options(3)))),
        "surgiq.jsonl line 3 question_id='surgiq_0002': 3 non-empty options, SurgiQ needs exactly 4",
    ),
    BadInput(
        "build surgiq",
        "a question with 5 options",
        _build(_write("surgiq.jsonl", _rows(_options(5)))),
        "line 3 question_id='surgiq_0002': 5 non-empty options",
    ),
    BadInput(
        "build surgiq",
        "an answer not among A-D",
        _build(_write("surgiq.jsonl", _rows(_answer("E")))),
        "line 2 question_id='surgiq_0001': answer 'E' matches no option text or letter",
    ),
    BadInput(
        "build surgiq",
        "two questions with the same id",
        _build(_write("surgiq.jsonl", _rows(_duplicate_id))),
        "line 4 question_id='surgiq_0000': duplicate id (first at surgiq.jsonl line 1)",
    ),
    BadInput(
        "build surgiq",
        "the same source given twice",
        _build(["surgiq.jsonl", "surgiq.jsonl"], files={"surgiq.jsonl": _rows()}),
        "is given twice in --source",
    ),
    BadInput(
        "build surgiq",
        "--source does not exist",
        _build(lambda i: i.tmp / "nope.jsonl"),
        "nope.jsonl: no such file",
    ),
    BadInput(
        "build surgiq",
        "--exclude-ids file does not exist",
        _build(_write("surgiq.jsonl", _rows()), "--exclude-ids", "{tmp}/dedupe_ids.txt"),
        "--exclude-ids",
    ),
    BadInput(
        "build surgiq",
        "--exclude-ids lists every question",
        _build(
            ["surgiq.jsonl"], "--exclude-ids", "{tmp}/ids.txt", files={"surgiq.jsonl": _rows(), "ids.txt": _all_ids}
        ),
        "questions of the sources are listed in --exclude-ids",
    ),
    BadInput(
        "build surgiq",
        "--columns-file is not YAML",
        _build(
            ["surgiq.jsonl"],
            "--columns-file",
            "{tmp}/cols.yaml",
            files={"surgiq.jsonl": _rows(), "cols.yaml": b"question: stem\noptions: [a, b\n"},
        ),
        "cols.yaml: not YAML (line 3",
    ),
    BadInput(
        "build surgiq",
        "--columns-file does not exist",
        _build(["surgiq.jsonl"], "--columns-file", "{tmp}/cols.yaml", files={"surgiq.jsonl": _rows()}),
        "cols.yaml: no such file",
    ),
    BadInput(
        "build surgiq",
        "--columns-file is a YAML list",
        _build(
            ["surgiq.jsonl"],
            "--columns-file",
            "{tmp}/cols.yaml",
            files={"surgiq.jsonl": _rows(), "cols.yaml": b"- question: stem\n"},
        ),
        "cols.yaml: expected a mapping of key: value, got a YAML list",
    ),
    BadInput(
        "build surgiq",
        "--columns-file names an unknown field",
        _build(
            ["surgiq.jsonl"],
            "--columns-file",
            "{tmp}/cols.yaml",
            files={"surgiq.jsonl": _rows(), "cols.yaml": b"questoin: stem\n"},
        ),
        "(did you mean 'question'?)",
    ),
    BadInput(
        "build surgiq",
        "--column switches a required field off",
        _build(_write("surgiq.jsonl", _rows()), "--column", "answer=none"),
        "answer is required and cannot be none",
    ),
]

NEAR_DUPLICATES = [
    BadInput(
        "near-duplicates surgiq",
        "--against saved as Latin-1",
        _near(_write("medqa.jsonl", _latin1_jsonl())),
        "medqa.jsonl line 2, column",
    ),
    BadInput(
        "near-duplicates surgiq",
        "--against with a malformed JSON line",
        _near(_write("medqa.jsonl", _jsonl(external_rows()[:1]) + b"{not json}\n")),
        "medqa.jsonl line 2, column 2: not valid JSON",
    ),
    BadInput(
        "near-duplicates surgiq",
        "--against is empty",
        _near(_write("medqa.jsonl", b"\n")),
        "medqa.jsonl: holds no questions",
    ),
    BadInput(
        "near-duplicates surgiq",
        "--against does not exist",
        _near(lambda i: i.tmp / "medqa.jsonl"),
        "medqa.jsonl: no such file",
    ),
    BadInput(
        "near-duplicates surgiq",
        "--against has no question column",
        _near(_write("medqa.jsonl", [{"id": "1", "stem_text": "Which?"}])),
        "no question column",
    ),
    BadInput(
        "near-duplicates surgiq",
        "--source saved as Latin-1",
        _near(_write("medqa.jsonl", external_rows()), source=_write("surgiq.jsonl", _latin1_jsonl())),
        "surgiq.jsonl line 2, column",
    ),
    BadInput(
        "near-duplicates surgiq",
        "--columns-file is not YAML",
        _near(_write("medqa.jsonl", external_rows()), "--columns-file", str(REPO / "README.md")),
        "README.md: not YAML (line",
    ),
]

CASES = PLAN + BUILD_SURGIQ + NEAR_DUPLICATES


test_bad_input = run_cases(CASES)
