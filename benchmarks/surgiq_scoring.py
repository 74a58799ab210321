"""Benchmark SurgiQ's scorer and near-duplicate search, each against a baseline measured in the same run.

1. Scoring: the full scorer (``recipes.evaluation.surgiq.evaluate.score_prompts``: tokenisation, left-padded batches,
   one forward per question keeping only the last position's logits, label log-probabilities, the on-disk cache)
   against a raw forward pass of the same batches (pre-tokenised, full logits), as time per question and their
   ratio. The model is the tiny causal LM (built on the spot) or ``--model PATH``; questions are synthetic, with
   SurgiQ's length distribution (59.8 +- 26.6 words).
2. Near-duplicates: ``builders.surgiq.near_duplicates`` (inverted n-gram index) on ``--surgiq`` x ``--external``
   synthetic questions (default the paper's 13,055 x 206,683), against an all-pairs comparison of precomputed n-gram
   sets, timed on a sub-sample and extrapolated to the full pair count. Planted duplicates must all be found.

    python benchmarks/surgiq_scoring.py [--questions 256] [--batch-size 8] [--surgiq 13055] [--external 206683]
"""

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.timing import best_of, parse_with_quick  # noqa: E402
from builders.surgiq.near_duplicates import NgramIndex, ngrams  # noqa: E402
from recipes.evaluation.surgiq.evaluate import LabelScorer, ScoreCache, render_prompts, score_prompts  # noqa: E402
from sample_data.make_surgiq_sample import surgiq_rows  # noqa: E402


STEMS = ("All of the following are true EXCEPT:", "A 45-year-old man presents with", "Which of the following is")


def synthetic_texts(rng: np.random.Generator, vocabulary: list[str], n: int, mean: float, std: float, low: int = 8):
    """``n`` texts of normally distributed word counts; word frequencies ~ 1 / (rank + 2.7), as in English text."""
    counts = np.clip(rng.normal(mean, std, size=n), low, 200).astype(int)
    weights = 1 / (np.arange(len(vocabulary)) + 2.7)
    words = np.asarray(vocabulary, dtype=object)[
        rng.choice(len(vocabulary), size=counts.sum(), p=weights / weights.sum())
    ]
    ends = np.cumsum(counts)
    return [" ".join(words[end - count : end]) for end, count in zip(ends.tolist(), counts.tolist(), strict=True)]


def synthetic_questions(n: int, seed: int, vocabulary: list[str]) -> list[str]:
    """Questions of SurgiQ's length (59.8 +- 26.6 words); a third open with one of a few shared exam stems."""
    rng = np.random.default_rng(seed)
    stems = rng.integers(0, len(STEMS) * 3, size=n).tolist()
    texts = synthetic_texts(rng, vocabulary, n, 59.8, 26.6)
    return [(f"{STEMS[s]} " if s < len(STEMS) else "") + text for s, text in zip(stems, texts, strict=True)]


def sample_words() -> list[str]:
    """The sample SurgiQ questions' words: real English, so a real tokenizer cuts them as it would SurgiQ."""
    return sorted({w for row in surgiq_rows() for w in row["question"].lower().split()})


def vocabulary_of(size: int, seed: int = 0) -> list[str]:
    """The sample's words, then made-up words up to ``size`` (a large vocabulary for the near-duplicate search)."""
    words = sample_words()
    rng = random.Random(seed)
    made = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 10))) for _ in range(size)]
    return words + made[: size - len(words)]


def bench_scoring(args) -> None:
    import torch

    from recipes.model_io.modeling import load_model, load_processor, tokenizer_of
    from recipes.training.tiny_models import build_tiny_causal_lm

    workdir = Path(tempfile.mkdtemp(prefix="surgiq-bench-"))
    model_path = args.model or str(build_tiny_causal_lm(workdir / "tiny-lm"))
    model = load_model(model_path)
    model.to("cuda" if torch.cuda.is_available() else "cpu")
    tokenizer = tokenizer_of(load_processor(model_path, padding_side="left"))
    rng = np.random.default_rng(1)
    vocabulary = sample_words()
    questions = synthetic_texts(rng, vocabulary, args.questions, 59.8, 26.6)
    options = synthetic_texts(rng, vocabulary, 4 * args.questions, 7, 3, low=1)
    records = [
        {"id": f"q{i:05d}", "question": q, "options": options[4 * i : 4 * i + 4], "answer_index": 0}
        for i, q in enumerate(questions)
    ]
    prompts = render_prompts(records, [])
    ids = [r["id"] for r in records]
    scorer = LabelScorer(model, tokenizer)
    lengths = [len(ids) for ids in scorer.encode(prompts)]
    order = sorted(range(len(prompts)), key=lambda i: (-lengths[i], ids[i]))
    batches = [
        tokenizer([prompts[i] for i in order[s : s + args.batch_size]], return_tensors="pt", padding=True).to(
            model.device
        )
        for s in range(0, len(order), args.batch_size)
    ]

    def raw_forward():
        with torch.inference_mode():
            for batch in batches:
                model(**batch).logits.float().sum().item()

    runs = iter(range(10**6))

    def scorer_run():
        cache = ScoreCache(workdir / f"cache-{next(runs)}.jsonl")  # a fresh cache: every question is scored
        score_prompts(scorer, ids, prompts, cache, "bench", args.batch_size)

    raw_forward(), scorer_run()  # warm-up
    raw = best_of(args.repeats, raw_forward)
    scored = best_of(args.repeats, scorer_run)
    print(f"\n== Scoring: {args.questions} questions, batch {args.batch_size}, {model_path} on {model.device}")
    print(f"  mean prompt length {statistics.fmean(lengths):.0f} tokens")
    print(f"  raw forward of the same batches: {1000 * raw / args.questions:8.3f} ms / question")
    print(f"  scorer (score_prompts):          {1000 * scored / args.questions:8.3f} ms / question")
    print(f"  scorer / raw forward:            {scored / raw:8.2f}x")


def bench_near_duplicates(args) -> None:
    vocabulary = vocabulary_of(20000)
    surgiq = synthetic_questions(args.surgiq, 2, vocabulary)
    external = synthetic_questions(args.external, 3, vocabulary)
    rng = random.Random(4)
    planted = rng.sample(range(args.surgiq), 25)
    for slot, q in zip(rng.sample(range(args.external), len(planted)), planted, strict=True):
        external[slot] = surgiq[q].upper()  # planted duplicates (normalisation must undo the case)
    ids = [f"sq{i}" for i in range(args.surgiq)]

    start = time.perf_counter()
    index = NgramIndex(ids, surgiq)
    built = time.perf_counter() - start
    found = index.search(external)
    total = time.perf_counter() - start
    recall = len({q for _, q, *_ in found} & set(planted)) / len(planted)

    sample_q, sample_e = min(args.surgiq, 200), min(args.external, 2000)
    start = time.perf_counter()
    a_sets = [ngrams(t) for t in surgiq[:sample_q]]
    b_sets = [ngrams(t) for t in external[:sample_e]]
    prepared = time.perf_counter() - start
    start = time.perf_counter()
    flagged = 0
    for a in a_sets:
        for b in b_sets:
            flagged += bool(a and b) and len(a & b) >= 0.5 * min(len(a), len(b))
    pairs_time = time.perf_counter() - start
    per_pair = pairs_time / (sample_q * sample_e)
    extrapolated = per_pair * args.surgiq * args.external + prepared / (sample_q + sample_e) * (
        args.surgiq + args.external
    )
    print(f"\n== Near-duplicates: {args.surgiq} SurgiQ x {args.external} external questions (5-grams, overlap >= 0.5)")
    print(f"  inverted index: build {built:.1f} s, search {total - built:.1f} s, total {total:.1f} s")
    print(f"  flagged pairs {len(found)}; planted duplicates found {100 * recall:.0f}%")
    print(f"  all pairs (sets, {sample_q} x {sample_e} sample): {1e6 * per_pair:.2f} us / pair")
    print(f"  all pairs extrapolated to the full size: {extrapolated / 3600:.1f} h")
    print(f"  all pairs / inverted index: {extrapolated / total:,.0f}x")


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a local causal LM (default: the tiny one, built on the spot)")
    parser.add_argument("--questions", type=int, default=256, help="questions to score")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--surgiq", type=int, default=13055, help="SurgiQ-side questions for the near-duplicate search"
    )
    parser.add_argument("--external", type=int, default=206683, help="external questions for the search")
    parser.add_argument("--skip", choices=["scoring", "near-duplicates"], help="run only the other benchmark")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parse_with_quick(
        make_parser(), argv, {"questions": 4, "batch_size": 2, "repeats": 1, "surgiq": 100, "external": 1000}
    )
    if args.skip != "scoring":
        bench_scoring(args)
    if args.skip != "near-duplicates":
        bench_near_duplicates(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
