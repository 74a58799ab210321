"""Blind-test curation (stage 3) with scripted guessers: a guesser that always finds the answer, one that never does,
one that finds it 2 times in 5, and one whose success depends on the options it is shown. They answer the real blind
prompt of :func:`builders.prompt.format_messages`, read back by the same parser the evaluation uses."""

import json
import re
from collections import Counter

import pytest

from builders.sureon.distractor_pool import clean_pool, is_diverse
from builders.sureon.folds import assign_folds
from recipes.curation.curate import apply_curation, check_fold_rule, curate, survival_table
from recipes.curation.guessers import FoldLeakError, Guesser, Sampling, ScoreCache, load_guesser
from recipes.curation.hardening import candidate_configurations, harden


SUBJECTS = ("Bariatric", "Colorectal", "Hernia")
CATEGORIES = ("AD", "EE", "SPI")


def make_records(videos_per_subject=4, per_video=3, pool_size=0):
    """MCQs over videos of three subjects (plus one SM summary per video), shaped like the release's records."""
    records = []
    for s, subject in enumerate(SUBJECTS):
        for v in range(videos_per_subject):
            source_id = f"vid-{subject[:3].lower()}-{v}"
            for q in range(per_video):
                qid = f"{source_id}-q{q}"
                answer = f"correct step {qid}"
                options = [answer, *(f"wrong {k} for {qid}" for k in range(3))]
                pool = [{"text": f"pool {k} for {qid}", "model": f"model-{k % 2}"} for k in range(pool_size)]
                records.append(
                    {
                        "question_id": qid,
                        "source_id": source_id,
                        "subject": subject,
                        "category": CATEGORIES[(s + v + q) % 3],
                        "question": f"What is being done in {qid}?",
                        "options": options,
                        "answer": answer,
                        "answer_index": 0,
                        "answer_order": [],
                        "answer_format": "mcq",
                        "start": 10.0,
                        "end": 20.0,
                        "distractor_pool": pool,
                    }
                )
            records.append(
                {
                    "question_id": f"{source_id}-sm",
                    "source_id": source_id,
                    "subject": subject,
                    "category": "SM",
                    "question": "Summarise the steps.",
                    "options": [],
                    "answer": "dissection, then stapling",
                    "answer_index": -1,
                    "answer_order": [],
                    "answer_format": "open",
                    "start": 0.0,
                    "end": 60.0,
                    "distractor_pool": [],
                }
            )
    return records


def read_prompt(conversation):
    """The question and lettered options back from the blind prompt (the only thing a guesser sees)."""
    text = "".join(part["text"] for part in conversation[-1]["content"] if part["type"] == "text")
    assert "Frame at" not in text and all(part["type"] == "text" for part in conversation[-1]["content"])
    question = re.search(r"Question: (.*)", text).group(1)
    options = dict(re.findall(r"^([A-Z])\. (.*)$", text, re.MULTILINE))
    return question, options


class ScriptedBackend:
    """Answers R trials per question in one ``sample`` call; ``hits(question, option_texts)`` of them are right."""

    batch_size = 4

    def __init__(self, answers: dict[str, str], hits, label="scripted"):
        self.answers, self.hits, self.label = answers, hits, label
        self.calls: list[tuple[int, int]] = []  # (questions, trials) per call
        self.seen: list[tuple[str, tuple[str, ...]]] = []  # (question, options) in the order asked

    def settings(self):
        return {"backend": self.label}

    def sample(self, conversations, num_samples, temperature, seed):
        assert temperature > 0
        self.calls.append((len(conversations), num_samples))
        outputs = []
        for conversation in conversations:
            question, options = read_prompt(conversation)
            self.seen.append((question, tuple(options.values())))
            right = next(letter for letter, text in options.items() if text == self.answers[question])
            wrong = next(letter for letter in options if letter != right)
            hits = self.hits(question, list(options.values()))
            outputs.append([f"Answer: {right}"] * hits + [f"({wrong})"] * (num_samples - hits))
        return outputs


def scripted(records, hits, name="g", **fields):
    answers = {r["question"]: r["answer"] for r in records}
    return Guesser(name, ScriptedBackend(answers, hits if callable(hits) else (lambda q, o: hits), name), **fields)


def asked(guesser):
    return {question for question, _ in guesser.backend.seen}


def test_consistency_score_tau_rule_and_summaries_passing_through(tmp_path):
    records = make_records(videos_per_subject=1)
    cache = ScoreCache(tmp_path / "scores.jsonl")
    always, never, twice = scripted(records, 5, "always"), scripted(records, 0, "never"), scripted(records, 2, "2of5")
    for guesser, expected_s, expected_pass in ((always, 1.0, False), (never, 0.0, True), (twice, 0.4, True)):
        curation = curate(records, [guesser], cache)
        mcq = [r["question_id"] for r in records if r["category"] != "SM"]
        assert {curation.scores[q][guesser.name] for q in mcq} == {expected_s}
        assert {curation.passes[q] for q in mcq} == {expected_pass}
        # SM is never sent to a guesser and always passes.
        assert not any("Summarise" in q for q in asked(guesser))
        assert all(curation.passes[r["question_id"]] for r in records if r["category"] == "SM")
    # tau is inclusive: S = 2/5 is removed at tau = 0.4; any guesser reaching tau removes the question.
    assert not any(curate(records, [twice], cache, tau=0.4).passes[q] for q in mcq)
    ensemble = curate(records, [never, twice, always], cache)
    assert not any(ensemble.passes[q] for q in mcq)
    flagged = apply_curation(records, ensemble)
    assert [r["passes_blind_curation"] for r in flagged] == [r["category"] == "SM" for r in records]
    assert {r["blind_consistency"] for r in flagged if r["category"] != "SM"} == {1.0}


def test_r_trials_come_from_one_sampled_call_per_batch(tmp_path):
    records = make_records(videos_per_subject=1)
    guesser = scripted(records, 2)
    curate(records, [guesser], ScoreCache(tmp_path / "s.jsonl"), sampling=Sampling(trials=5, temperature=0.7))
    scored = sum(r["category"] != "SM" for r in records)
    assert sum(n for n, _ in guesser.backend.calls) == scored
    assert len(guesser.backend.calls) == -(-scored // ScriptedBackend.batch_size)
    assert {trials for _, trials in guesser.backend.calls} == {5}


def test_folds_are_video_level_stratified_and_deterministic(tmp_path):
    records = make_records(videos_per_subject=4)
    cache = ScoreCache(tmp_path / "s.jsonl")
    first = curate(records, [scripted(records, 0)], cache, num_folds=4, fold_seed=42)
    again = curate(records, [scripted(records, 0)], cache, num_folds=4, fold_seed=42)
    assert first.folds == again.folds == assign_folds({r["source_id"]: r["subject"] for r in records}, 4, 42)
    # One fold per video, and each subject's four videos spread over the four folds.
    for subject in SUBJECTS:
        assert sorted(f for v, f in first.folds.items() if subject[:3].lower() in v) == [0, 1, 2, 3]


def test_fold_f_is_scored_only_by_the_guessers_that_held_it_out(tmp_path):
    records = make_records(videos_per_subject=4)
    folds = assign_folds({r["source_id"]: r["subject"] for r in records}, 4, 42)
    per_fold = [scripted(records, 0, f"fold{f}", held_out_fold=f, trained_folds=folds) for f in range(4)]
    off_the_shelf = scripted(records, 0, "base")
    curation = curate(records, [*per_fold, off_the_shelf], ScoreCache(tmp_path / "s.jsonl"), num_folds=4)
    fold_of_question = {r["question"]: folds[r["source_id"]] for r in records}
    for f, guesser in enumerate(per_fold):
        assert asked(guesser) and {fold_of_question[q] for q in asked(guesser)} == {f}
    assert len(asked(off_the_shelf)) == sum(r["category"] != "SM" for r in records)
    assert all(
        set(scores) == {f"fold{folds[qid.rsplit('-', 1)[0]]}", "base"} for qid, scores in curation.scores.items()
    )

    # Guessers whose folds.json disagree with each other would score videos one of them trained on.
    shifted = {video: (fold + 1) % 4 for video, fold in folds.items()}
    leaky = scripted(records, 0, "leaky", held_out_fold=0, trained_folds=shifted)
    with pytest.raises(FoldLeakError, match="trained on different folds"):
        curate(records, [leaky, *per_fold[1:]], ScoreCache(tmp_path / "s.jsonl"), num_folds=4)
    with pytest.raises(FoldLeakError, match="trained with 4 folds"):
        curate(records, per_fold, ScoreCache(tmp_path / "s.jsonl"), num_folds=2)
    with pytest.raises(FoldLeakError, match="may only score fold 1"):
        check_fold_rule(per_fold[1], 0, set())
    with pytest.raises(FoldLeakError, match="declares no held-out fold"):
        curate(
            records, [scripted(records, 0, "x", trained_folds=folds)], ScoreCache(tmp_path / "s.jsonl"), num_folds=4
        )
    # Validation: a guesser trained on a validation video, or on three folds only, is refused.
    with pytest.raises(FoldLeakError, match="validation video"):
        curate(records, [scripted(records, 0, "v", trained_folds=folds)], ScoreCache(tmp_path / "s.jsonl"))
    with pytest.raises(FoldLeakError, match="whole training split"):
        curate(records, [per_fold[0]], ScoreCache(tmp_path / "s.jsonl"))


def test_the_folds_are_the_ones_the_guessers_trained_with_whatever_their_seed(tmp_path):
    """`recipes/sft.py --fold k` under a recipe's own seed (7 here, not the curation's 42): curate takes the folds
    each guesser's folds.json records, so the README's command works as written; an explicit --fold-seed that
    contradicts them is refused."""
    records = make_records()
    folds = assign_folds({r["source_id"]: r["subject"] for r in records}, 4, 7)
    assert folds != assign_folds({r["source_id"]: r["subject"] for r in records}, 4, 42)
    guessers = [scripted(records, 0, f"fold{f}", held_out_fold=f, trained_folds=folds) for f in range(4)]
    curation = curate(records, guessers, ScoreCache(tmp_path / "s.jsonl"), num_folds=4)
    assert curation.folds == folds
    with pytest.raises(FoldLeakError, match="--fold-seed 42 gives other folds"):
        curate(records, guessers, ScoreCache(tmp_path / "s.jsonl"), num_folds=4, fold_seed=42)
    assert curate(records, guessers, ScoreCache(tmp_path / "s.jsonl"), num_folds=4, fold_seed=7).folds == folds


def test_a_guesser_reads_its_held_out_fold_from_the_recipe_outputs(tiny_causal_lm, tmp_path):
    import shutil

    folder = tmp_path / "guesser-fold2"
    shutil.copytree(tiny_causal_lm, folder)
    (folder / "training_complete.json").write_text(json.dumps({"fold": 2, "num_folds": 4}))
    (folder / "folds.json").write_text(json.dumps({"vid-a": 2, "vid-b": 0}))
    guesser = load_guesser(f"model={folder},type=refined")
    assert (guesser.name, guesser.kind, guesser.held_out_fold) == ("guesser-fold2", "refined", 2)
    assert guesser.trained_folds == {"vid-a": 2, "vid-b": 0}
    with pytest.raises(FoldLeakError, match="fold=1"):
        load_guesser(f"model={folder},fold=1")


def hardening_records(pool_size=10):
    return [r for r in make_records(videos_per_subject=1, pool_size=pool_size) if r["category"] != "SM"][:4]


def test_hardening_keeps_the_first_configuration_the_guesser_fails_on(tmp_path):
    records = hardening_records()
    # The guesser finds the answer whenever the distractors include "pool 0" or "pool 1" (a shortcut).
    guesser = scripted(records, lambda q, options: 5 if any(re.match(r"pool [01] ", o) for o in options) else 0)
    hardened, discarded = harden(records, guesser, ScoreCache(tmp_path / "s.jsonl"), attempts=32, seed=42)
    assert not discarded and [r["question_id"] for r in hardened] == [r["question_id"] for r in records]
    for record, kept in zip(records, hardened, strict=True):
        candidates = candidate_configurations(record, 32, 42)
        first = next(i for i, c in enumerate(candidates) if not any(re.match(r"pool [01] ", o) for o in c["options"]))
        assert kept["hardening_attempts"] == first + 1
        assert kept["options"] == candidates[first]["options"]
        assert kept["options"][kept["answer_index"]] == record["answer"]
        # Every configuration before it was tried, in order, and none after it.
        tried = [opts for question, opts in guesser.backend.seen if question == record["question"]]
        assert tried == [tuple(c["options"]) for c in candidates[: first + 1]]
    assert any(r["hardening_attempts"] > 1 for r in hardened)  # the rule was exercised, not just attempt 1


def test_hardening_discards_after_m_attempts_and_draws_are_diverse_and_seeded(tmp_path):
    records = hardening_records()
    guesser = scripted(records, 5)
    hardened, discarded = harden(records, guesser, ScoreCache(tmp_path / "s.jsonl"), attempts=8, seed=42)
    assert hardened == [] and [d["attempts"] for d in discarded] == [8] * len(records)
    for record in records:
        tried = [opts for question, opts in guesser.backend.seen if question == record["question"]]
        assert len(tried) == len({frozenset(o) for o in tried}) == 8  # eight distinct configurations
        pool = clean_pool(record["distractor_pool"], record["answer"])
        model_of = {c["text"]: c for c in pool}
        for options in tried:
            assert is_diverse([model_of[o] for o in options if o != record["answer"]], pool)
    # The draws depend on the seed and the question only.
    assert candidate_configurations(records[0], 8, 42) == candidate_configurations(records[0], 8, 42)
    assert candidate_configurations(records[0], 8, 42) != candidate_configurations(records[0], 8, 7)
    # A question without a pool has one configuration: its own.
    assert candidate_configurations(records[0] | {"distractor_pool": []}, 8, 42) == [
        records[0] | {"distractor_pool": []}
    ]


def test_an_interrupted_curation_resumes_without_rescoring(tmp_path):
    records = make_records(videos_per_subject=2)
    path = tmp_path / "scores.jsonl"
    guesser = scripted(records, 2)
    real_sample = guesser.backend.sample

    def dies_after_two_batches(*args):
        if len(guesser.backend.calls) == 2:
            raise KeyboardInterrupt
        return real_sample(*args)

    guesser.backend.sample = dies_after_two_batches
    with pytest.raises(KeyboardInterrupt):
        curate(records, [guesser], ScoreCache(path))
    with open(path, "a") as handle:
        handle.write('{"key": "cut short by the kill')  # a line half-written when the process died
    resumed = scripted(records, 2)
    result = curate(records, [resumed], ScoreCache(path))
    scored = sum(r["category"] != "SM" for r in records)
    assert sum(n for n, _ in resumed.backend.calls) == scored - 2 * ScriptedBackend.batch_size
    fresh = curate(records, [scripted(records, 2)], ScoreCache(tmp_path / "fresh.jsonl"))
    assert result.scores == fresh.scores and result.passes == fresh.passes
    # A changed setting (R, temperature or the options' order) is scored anew.
    again = scripted(records, 2)
    curate(records, [again], ScoreCache(path), sampling=Sampling(trials=3))
    assert sum(n for n, _ in again.backend.calls) == scored


def test_survival_table_counts_each_stage_against_the_input():
    records = make_records(videos_per_subject=1)
    retained = [r for r in records if r["category"] in ("SM", "AD")]
    table = survival_table({"after curation": retained, "after hardening": retained[:1]}, records)
    counts = Counter(r["category"] for r in records)
    assert table["after curation"]["SM"] == {"count": counts["SM"], "rate": 1.0}
    assert table["after curation"]["EE"]["count"] == 0
    assert table["after hardening"]["Total"] == {"count": 1, "rate": 1 / len(records)}
    assert list(table["after curation"])[:3] == ["AD", "EE", "SPI"]  # the paper's category order
