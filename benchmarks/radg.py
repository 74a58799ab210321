"""Benchmark RADG retrieval (builders/pipeline/radg.py): four metadata-filtered pools x top-100 per question.

Over ``--answers`` synthetic answer embeddings (default 176K, the Sureon paper's training split; ``--dim`` 1024 as
BAAI/bge-m3) with skewed procedure / specialty / subject / question-type metadata, this times for ``--queries``
questions

- the baseline: a brute-force numpy scan (one matrix-vector product over every answer, then per pool a mask and an
  ``argpartition`` for the top 100, sorted),
- one flat faiss index per (question type, pool value) group, searched per question (when faiss-cpu is installed),
- :meth:`AnswerIndex.search` one question at a time, and :meth:`AnswerIndex.search_many` over all questions at once
  (what stage 2 runs: one matrix product per question type and chunk, amortised per question),

checks that all return the same top-100 per pool, and prints the per-question time of each as a ratio against the
brute-force scan.

    python benchmarks/radg.py [--answers 176000] [--dim 1024] [--queries 200] [--top-k 100]
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np


REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.timing import parse_with_quick  # noqa: E402
from builders.pipeline.radg import POOLS, AnswerIndex  # noqa: E402


def synthetic_answers(count: int, dim: int, seed: int = 0) -> tuple[np.ndarray, list[dict]]:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((count, dim), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)

    def skewed(values: int) -> np.ndarray:
        weights = 1.0 / np.arange(1, values + 1)
        return rng.choice(values, size=count, p=weights / weights.sum())

    procedure, specialty, subject, category = skewed(300), skewed(8), skewed(60), skewed(8)
    meta = [
        {
            "question_id": f"q{i}",
            "answer": f"answer {i}",
            "category": f"cat{category[i]}",
            "procedure": f"proc{procedure[i]}",
            "specialty": f"spec{specialty[i]}",
            "subject": f"subj{subject[i]}",
        }
        for i in range(count)
    ]
    return vectors, meta


class BruteForce:
    """The baseline: score every answer, then filter per pool (metadata as integer codes, compared vectorised)."""

    def __init__(self, vectors: np.ndarray, meta: list[dict]):
        self.vectors = vectors
        self.codes, self.columns = {}, {}
        for name in ("category", *POOLS[:3]):
            values, codes = np.unique([m[name] for m in meta], return_inverse=True)
            self.codes[name] = {value: code for code, value in enumerate(values.tolist())}
            self.columns[name] = codes

    def search(self, query: np.ndarray, item: dict, top_k: int) -> dict[str, list[int]]:
        scores = self.vectors @ query
        same_type = self.columns["category"] == self.codes["category"][item["category"]]
        hits = {}
        for pool in POOLS:
            if pool == "broad":
                mask = same_type
            else:
                mask = same_type & (self.columns[pool] == self.codes[pool][item[pool]])
            ids = np.flatnonzero(mask)
            if len(ids) > top_k:
                ids = ids[np.argpartition(-scores[ids], top_k - 1)[:top_k]]
            hits[pool] = ids[np.argsort(-scores[ids], kind="stable")].tolist()
        return hits


class FaissPerPool:
    """One exact flat inner-product faiss index per (question type, pool, value): each pool scans only its group."""

    def __init__(self, vectors: np.ndarray, meta: list[dict]):
        import faiss

        members: dict[tuple, list[int]] = {}
        for i, item in enumerate(meta):
            for pool in POOLS:
                members.setdefault((item["category"], pool, "" if pool == "broad" else item[pool]), []).append(i)
        self.groups = {}
        for key, ids in members.items():
            index = faiss.IndexFlatIP(vectors.shape[1])
            index.add(vectors[ids])
            self.groups[key] = (index, np.asarray(ids))

    def search(self, query: np.ndarray, item: dict, top_k: int) -> dict[str, list[int]]:
        hits = {}
        for pool in POOLS:
            index, ids = self.groups[(item["category"], pool, "" if pool == "broad" else item[pool])]
            _, found = index.search(query.reshape(1, -1), min(top_k, len(ids)))
            hits[pool] = ids[found[0]].tolist()
        return hits


def per_question(search, queries, items, top_k) -> tuple[float, list]:
    results = []
    start = time.perf_counter()
    for query, item in zip(queries, items, strict=True):
        results.append(search(query, item, top_k))
    return (time.perf_counter() - start) / len(items), results


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--answers", type=int, default=176_000)
    parser.add_argument("--dim", type=int, default=1024)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--top-k", type=int, default=100)
    return parser


def main(argv=None) -> None:
    args = parse_with_quick(make_parser(), argv, {"answers": 3000, "dim": 32, "queries": 10, "top_k": 10})
    vectors, meta = synthetic_answers(args.answers, args.dim)
    rng = np.random.default_rng(1)
    picks = rng.choice(args.answers, size=args.queries, replace=False)
    queries = [vectors[i] + 0.1 * rng.standard_normal(args.dim, dtype=np.float32) for i in picks]
    queries = [q / np.linalg.norm(q) for q in queries]
    items = [meta[i] for i in picks]

    start = time.perf_counter()
    index = AnswerIndex(vectors, meta)
    build = time.perf_counter() - start
    brute = BruteForce(vectors, meta)

    base_time, expected = per_question(brute.search, queries, items, args.top_k)
    timings = {}
    try:
        per_pool = FaissPerPool(vectors, meta)
    except ImportError:
        print("faiss-cpu is not installed: the per-pool faiss comparison is left out")
    else:
        timings["faiss, one flat index per pool"], found = per_question(per_pool.search, queries, items, args.top_k)
        check(expected, found, "faiss")
    timings["AnswerIndex.search (one question)"], found = per_question(index.search, queries, items, args.top_k)
    check(expected, [{p: [i for i, _ in hits] for p, hits in r.items()} for r in found], "search")
    start = time.perf_counter()
    found = index.search_many(np.stack(queries), items, args.top_k)
    timings["AnswerIndex.search_many (batched)"] = (time.perf_counter() - start) / len(items)
    check(expected, [{p: [i for i, _ in hits] for p, hits in r.items()} for r in found], "search_many")

    print(f"{args.answers} answers x {args.dim} dims, {args.queries} questions, 4 pools x top-{args.top_k}")
    print(f"AnswerIndex build: {build:.2f} s")
    print(f"{'brute-force numpy scan':<36} {1000 * base_time:8.2f} ms / question  (1.00x)")
    for name, seconds in timings.items():
        print(f"{name:<36} {1000 * seconds:8.2f} ms / question  ({base_time / seconds:.2f}x faster)")


def check(expected: list[dict], found: list[dict], name: str) -> None:
    for want, got in zip(expected, found, strict=True):
        for pool in POOLS:
            if set(want[pool]) != set(got[pool]):
                raise SystemExit(f"{name} and the brute-force scan disagree on the {pool} pool")


if __name__ == "__main__":
    main()
