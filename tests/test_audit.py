"""Tiny-model checks of blind scoring (R sampled trials from one generate call) and `sureon curate` / `sureon audit`
end to end on the demo Sureon release and the demo SurgiQ data."""

import json
from pathlib import Path

import pytest
from conftest import REPO, SAMPLE_RELEASE

from builders.prompt import format_messages
from builders.sureon.build import BuildOptions, build_sureon
from recipes.evaluation.inference import TransformersBackend
from sureon.cli import main as cli_main


@pytest.fixture(scope="module")
def module_tmp(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("audit")
    with pytest.MonkeyPatch.context() as patch:
        import datasets

        patch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp / "hf_datasets_cache")
        yield tmp


@pytest.fixture(scope="module")
def sureon_demo(module_tmp):
    """The demo release, annotation-only (guessers are blind: no frames needed)."""
    options = BuildOptions(release=SAMPLE_RELEASE, out=module_tmp / "sureon", configs=["train_all", "validation"])
    return build_sureon(options).out


@pytest.fixture(scope="module")
def surgiq_demo(module_tmp):
    source = REPO / "sample_data" / "surgiq" / "surgiq_sample.jsonl"
    assert cli_main(["build", "surgiq", "--source", str(source), "--out", str(module_tmp / "surgiq")]) == 0
    return module_tmp / "surgiq"


def blind_conversations(n=3):
    records = [
        {"question_id": f"q{i}", "start": 1.0, "end": 5.0, "question": f"Which step {i}?", "options": ["a", "b", "c"]}
        for i in range(n)
    ]
    return [format_messages(r, blind=True) for r in records]


def test_r_trials_come_from_one_seeded_generate_call(tiny_causal_lm, monkeypatch):
    backend = TransformersBackend(str(tiny_causal_lm), max_new_tokens=4, device="cpu")
    calls = []
    generate = backend.model.generate
    monkeypatch.setattr(backend.model, "generate", lambda **kw: calls.append(kw) or generate(**kw))
    conversations = blind_conversations()
    first = backend.sample(conversations, 5, 1.0, seed=123)
    assert len(calls) == 1 and calls[0]["generation_config"].num_return_sequences == 5
    assert calls[0]["generation_config"].do_sample and calls[0]["generation_config"].temperature == 1.0
    assert [len(answers) for answers in first] == [5, 5, 5]
    assert backend.sample(conversations, 5, 1.0, seed=123) == first  # seeded
    assert len({tuple(a) for a in first} | {tuple(a) for a in backend.sample(conversations, 5, 1.0, seed=7)}) > 1
    # Greedy generation is unchanged: deterministic, one answer per conversation, not sampled.
    greedy = backend.generate(conversations)
    assert greedy == backend.generate(conversations) and len(greedy) == 3
    assert not calls[-1]["generation_config"].do_sample
    with pytest.raises(ValueError, match="temperature above 0"):
        backend.sample(conversations, 5, 0.0, seed=1)


def guesser_spec(model, name="tiny"):
    return f"model={model},name={name},max_new_tokens=4,device=cpu"


def test_audit_on_the_demo_sureon_release(sureon_demo, tiny_causal_lm, tmp_path):
    out = tmp_path / "audit"
    argv = ["audit", "--dataset", str(sureon_demo), "--config", "validation", "--split", "validation"]
    argv += ["--guesser", guesser_spec(tiny_causal_lm), "--out", str(out)]
    assert cli_main(argv) == 0
    report = json.loads((out / "audit.json").read_text())
    assert {p.name for p in out.iterdir()} >= {"audit.md", "audit.json", "flagged.jsonl"} | {
        "length_gap.png",
        "consistency.png",
        "positions.png",
    }
    assert all((out / name).read_bytes()[:4] == b"\x89PNG" for name in ("length_gap.png", "consistency.png"))
    from datasets import load_dataset

    rows = load_dataset(str(sureon_demo), "validation", split="validation")
    summaries = [qid for qid, c in zip(rows["question_id"], rows["category"], strict=True) if c == "SM"]
    assert report["num_questions"] == len(rows) and report["not_audited"] == sorted(summaries)
    guesser = report["guessers"]["tiny"]
    assert sum(guesser["histogram"].values()) == report["audited"] == len(rows) - len(summaries)
    mcq = sum(bool(o) for o in rows["options"])
    assert sum(sum(g["counts"].values()) for g in report["positions"].values()) == mcq
    assert report["shortcuts"]["group_key"] == "category" and report["shortcuts"]["num_questions"] == mcq
    flagged = [json.loads(line) for line in (out / "flagged.jsonl").read_text().splitlines()]
    assert len(flagged) == guesser["flagged"]
    assert "Blind-answerability audit" in (out / "audit.md").read_text()

    # A rerun scores nothing anew: every pass is in the cache.
    cache = Path(f"{out}.cache") / "scores.jsonl"
    before = cache.read_text()
    assert cli_main([*argv, "--overwrite"]) == 0
    assert cache.read_text() == before and json.loads((out / "audit.json").read_text()) == report


def test_audit_on_the_demo_surgiq_data(surgiq_demo, tiny_causal_lm, tmp_path):
    out = tmp_path / "audit"
    argv = ["audit", "--dataset", str(surgiq_demo), "--config", "default", "--split", "test"]
    assert cli_main([*argv, "--guesser", guesser_spec(tiny_causal_lm), "--trials", "3", "--out", str(out)]) == 0
    report = json.loads((out / "audit.json").read_text())
    assert report["not_audited"] == [] and report["guessers"]["tiny"]["histogram"].keys() == {
        "0/3",
        "1/3",
        "2/3",
        "3/3",
    }
    # The SurgiQ sample's correct options are the longer ones: the audit must see that shortcut.
    assert report["length_gap"]["mean_gap_words"] > 0
    assert report["shortcuts"]["baselines"]["longest_option"]["accuracy"] > report["shortcuts"]["random"]
    assert (out / "length_gap.png").exists()


def test_curate_validation_with_hardening_writes_flags_and_tables(sureon_demo, tiny_causal_lm, tmp_path):
    from datasets import load_dataset

    out = tmp_path / "curated"
    argv = ["curate", "--dataset", str(sureon_demo), "--config", "validation", "--split", "validation"]
    argv += ["--guesser", guesser_spec(tiny_causal_lm, "base"), "--harden-guesser", guesser_spec(tiny_causal_lm)]
    argv += ["--held-out-guesser", guesser_spec(tiny_causal_lm, "held-out"), "--attempts", "4", "--out", str(out)]
    assert cli_main(argv) == 0
    source = load_dataset(str(sureon_demo), "validation", split="validation")
    curated = load_dataset(str(out), "validation", split="validation")
    assert curated["question_id"] == source["question_id"]  # every question in, every question out, flagged
    assert None not in curated["passes_blind_curation"]
    decisions = [json.loads(line) for line in (out / "decisions.jsonl").read_text().splitlines()]
    assert [d["passes"] for d in decisions] == curated["passes_blind_curation"]
    report = json.loads((out / "curation_report.json").read_text())
    assert report["survival"]["after curation"]["Total"]["count"] == sum(curated["passes_blind_curation"])
    hardened = load_dataset(str(out), "validation_hardened", split="validation")
    assert report["survival"]["after hardening"]["Total"]["count"] == len(hardened)
    assert report["hardening"]["kept"] + report["hardening"]["discarded"] == sum(curated["passes_blind_curation"])
    assert set(report["blind_accuracy"]) == {"tiny", "held-out"}
    assert all(
        1 <= a <= 4 for a, c in zip(hardened["hardening_attempts"], hardened["category"], strict=True) if c != "SM"
    )
    assert "Survival per category" in (out / "curation_report.md").read_text()


def test_an_openai_guesser_answers_r_seeded_requests_per_question(sureon_demo, tmp_path, monkeypatch):
    from fake_chat_server import FakeChatServer, Reply, last_user_text

    monkeypatch.setenv("TEST_GUESSER_KEY", "sk-guesser-secret")

    def script(body, index):  # knows the answer to the "Irrigating" question only; everything else: B
        text = last_user_text(body)
        assert "Frame at" not in text and all(p["type"] == "text" for p in body["messages"][-1]["content"])
        letter = next((line[0] for line in text.splitlines() if line[1:] == ". Irrigating"), "B")
        return Reply(content=f"Answer: {letter}")

    out = tmp_path / "audit"
    with FakeChatServer(script) as server:
        spec = f"model=fake-llm,backend=openai,base_url={server.url},api_key_env=TEST_GUESSER_KEY,name=hosted"
        argv = ["audit", "--dataset", str(sureon_demo), "--config", "validation", "--split", "validation"]
        argv += ["--guesser", spec, "--temperature", "0.7", "--out", str(out)]
        assert cli_main(argv) == 0
        first_round = len(server.requests)
        assert cli_main([*argv, "--overwrite"]) == 0
        assert len(server.requests) == first_round  # everything cached
    report = json.loads((out / "audit.json").read_text())
    assert first_round == 5 * report["audited"]
    prompts: dict[str, list] = {}
    for body in server.requests:
        prompts.setdefault(last_user_text(body), []).append(body)
    assert all(len(bodies) == 5 and len({b["seed"] for b in bodies}) == 5 for bodies in prompts.values())
    assert {b["temperature"] for b in server.requests} == {0.7}
    assert {h["Authorization"] for h in server.headers} == {"Bearer sk-guesser-secret"}
    assert "sk-guesser-secret" not in "".join(p.read_text() for p in out.glob("*.*") if p.suffix in (".md", ".json"))
    flagged = [json.loads(line)["consistency"] for line in (out / "flagged.jsonl").read_text().splitlines()]
    assert report["guessers"]["hosted"]["flagged"] == len(flagged) >= 1 and set(flagged) == {1.0}


def test_curate_training_folds_from_guessers_trained_with_the_recipe(sureon_demo, tiny_causal_lm, tmp_path):
    import shutil

    from datasets import load_dataset

    from builders.sureon.folds import assign_folds

    rows = load_dataset(str(sureon_demo), "train_all", split="train")
    videos = dict(zip(rows["source_id"], rows["subject"], strict=True))
    with pytest.warns(UserWarning, match="not stratified"):  # the demo has three videos of three subjects
        folds = assign_folds(videos, 2, 42)
    specs = []
    for fold in (0, 1):  # what `recipes/sft.py --fold k --num-folds 2` leaves next to the weights
        folder = tmp_path / f"guesser-f{fold}"
        shutil.copytree(tiny_causal_lm, folder)
        (folder / "training_complete.json").write_text(json.dumps({"fold": fold, "num_folds": 2}))
        (folder / "folds.json").write_text(json.dumps(folds))
        specs += ["--guesser", f"model={folder},max_new_tokens=4,device=cpu"]
    out = tmp_path / "db"
    argv = ["curate", "--dataset", str(sureon_demo), "--config", "train_all", "--split", "train", "--num-folds", "2"]
    assert cli_main([*argv, *specs, "--out", str(out)]) == 0
    report = json.loads((out / "curation_report.json").read_text())
    assert {f: (r["videos"], r["questions"]) for f, r in report["folds"].items()} == {
        str(f): (sum(v == f for v in folds.values()), sum(folds[s] == f for s in rows["source_id"])) for f in (0, 1)
    }
    for decision in map(json.loads, (out / "decisions.jsonl").read_text().splitlines()):
        fold = folds[rows["source_id"][rows["question_id"].index(decision["question_id"])]]
        assert decision["fold"] == fold
        assert set(decision["scores"]) in (set(), {f"guesser-f{fold}"})  # SM: unscored; else only its fold's guesser
    curated = load_dataset(str(out), "train_all", split="train")
    assert len(curated) == len(rows) and None not in curated["passes_blind_curation"]


def test_audit_reads_the_raw_release_and_names_a_bad_row(tmp_path):
    from recipes.curation.audit import load_mcq, normalise_row

    records = load_mcq(str(SAMPLE_RELEASE), None, "validation")
    mcq = [r for r in records if r["options"]]
    assert mcq and all(r["options"][r["answer_index"]] == r["answer"] for r in mcq)  # from the structs' flags
    ordering = [r for r in records if r["category"] == "TO"]
    assert ordering and all(sorted(r["answer_order"]) == list("ABC"[: len(r["answer_order"])]) for r in ordering)
    assert [r["category"] for r in records if not r["options"] and not r["answer_order"]] == ["SM"]
    with pytest.raises(ValueError, match=r"data.jsonl row 3: answer 'E' matches no option"):
        normalise_row({"question": "Q?", "options": ["a", "b"], "answer": "E"}, 3, "data.jsonl")
