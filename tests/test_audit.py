"""Tiny-model checks of blind scoring (R sampled trials from one generate call) and `sureon curate` / `sureon audit`
end to end on the demo Sureon release and the demo SurgiQ data."""

import json
from pathlib import Path

import pytest
from conftest import REPO, SAMPLE_RELEASE

from builders.cli import main as cli_main
from builders.prompt import format_messages
from builders.sureon import BuildOptions, build_sureon
from recipes.inference import TransformersBackend


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
