"""Near-duplicate analysis of SurgiQ against external question banks (the SurgiQ paper's D.2).

    sureon near-duplicates surgiq --source surgiq.jsonl --against medqa.jsonl medmcqa.csv ... --out DIR

Each question stem is normalised (Unicode NFKC, case-folded, punctuation dropped: only letter and digit runs kept)
and cut into word 5-grams (a stem shorter than five words is one n-gram). A SurgiQ question and an external question
overlap by ``shared / min(|A|, |B|)``, the share of the shorter one's n-grams found in the other (the overlap
coefficient; the Jaccard index is reported beside it). Pairs at or above ``--threshold`` are flagged.

Search is an inverted index, never all pairs: SurgiQ's n-grams are the index's vocabulary (an external n-gram absent
from it cannot be shared, so it only counts in that question's size), questions are sparse rows, and one sparse
product per chunk of external questions counts the n-grams every candidate pair shares. N-grams found in more than
``--max-df`` SurgiQ questions (template stems such as "all of the following are true except") do not nominate
candidates, which keeps the product sparse; they still count in the overlap of every nominated pair. So a pair is
missed only when all it shares are such template n-grams, i.e. template-level overlap (``--max-df 0`` nominates on
every n-gram: exhaustive, slower).

Outputs (for review; nothing is removed here): ``flagged_pairs.csv`` (every flagged pair with both texts, most
overlapping first), ``dedupe_ids.txt`` (the flagged SurgiQ ids, one per line with its best match as a comment: edit
it after review, then build with ``sureon build surgiq --exclude-ids dedupe_ids.txt``) and ``summary.json``.
External files are JSON, JSONL, CSV or parquet (MedQA-, MedMCQA-, PubMedQA-style); the stem is read from the first
column found among :data:`QUESTION_COLUMNS` (or ``--external-question-column``) and the id from :data:`ID_COLUMNS`,
else ``file line N``.
"""

import csv
import json
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import sparse

from builders.errors import InputError
from builders.surgiq.reader import SurgiqError, read_source


NGRAM = 5
DEFAULT_THRESHOLD = 0.5
DEFAULT_MAX_DF = 50
CHUNK = 20_000
QUESTION_COLUMNS = ("question", "Question", "QUESTION", "question_text", "stem", "query")
ID_COLUMNS = ("id", "qid", "question_id", "_id", "ID")
_WORD = re.compile(r"[^\W_]+")


def normalise(text: str) -> list[str]:
    return _WORD.findall(unicodedata.normalize("NFKC", str(text)).casefold())


def ngrams(text: str, n: int = NGRAM) -> set[str]:
    tokens = normalise(text)
    if len(tokens) < n:
        return {" ".join(tokens)} if tokens else set()
    return {" ".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


@dataclass
class Match:
    surgiq_id: str
    external_file: str
    external_id: str
    shared: int
    surgiq_ngrams: int
    external_ngrams: int

    @property
    def overlap(self) -> float:
        return self.shared / min(self.surgiq_ngrams, self.external_ngrams)

    @property
    def jaccard(self) -> float:
        return self.shared / (self.surgiq_ngrams + self.external_ngrams - self.shared)


class NgramIndex:
    """Inverted n-gram index of the SurgiQ questions (sparse question x n-gram incidence, split by frequency)."""

    def __init__(self, ids: list[str], texts: list[str], n: int = NGRAM, max_df: int = DEFAULT_MAX_DF):
        self.ids, self.n = list(ids), n
        self.vocabulary: dict[str, int] = {}
        rows = [[self.vocabulary.setdefault(g, len(self.vocabulary)) for g in ngrams(t, n)] for t in texts]
        self.sizes = np.array([len(r) for r in rows], dtype=np.int64)
        matrix = self._incidence(rows, len(self.vocabulary))
        df = np.asarray(matrix.sum(axis=0)).ravel()
        self.rare = df <= max_df if max_df > 0 else np.ones(len(df), dtype=bool)
        self.rare_t = matrix[:, self.rare].T.tocsr()  # n-gram -> questions: the posting lists
        self.common = matrix[:, ~self.rare].tocsr()

    @staticmethod
    def _incidence(rows: list[list[int]], width: int) -> sparse.csr_matrix:
        indptr = np.cumsum([0, *map(len, rows)])
        indices = np.fromiter((c for r in rows for c in r), dtype=np.int64, count=int(indptr[-1]))
        data = np.ones(len(indices), dtype=np.int32)
        return sparse.csr_matrix((data, indices, indptr), shape=(len(rows), width))

    def search(self, texts: list[str], threshold: float = DEFAULT_THRESHOLD) -> list[tuple[int, int, int, int, int]]:
        """``(external index, surgiq index, shared, surgiq size, external size)`` of the pairs at or above
        ``threshold``."""
        found = []
        for start in range(0, len(texts), CHUNK):
            chunk = [ngrams(t, self.n) for t in texts[start : start + CHUNK]]
            sizes = np.array([len(g) for g in chunk], dtype=np.int64)
            rows = [[self.vocabulary[g] for g in grams if g in self.vocabulary] for grams in chunk]
            external = self._incidence(rows, len(self.vocabulary))
            candidates = (external[:, self.rare] @ self.rare_t).tocoo()
            ext, sq = candidates.row, candidates.col
            common = np.asarray(external[:, ~self.rare][ext].multiply(self.common[sq]).sum(axis=1)).ravel()
            shared = candidates.data + common
            smaller = np.minimum(sizes[ext], self.sizes[sq])
            keep = (smaller > 0) & (shared >= threshold * smaller)
            found += [
                (start + int(e), int(q), int(s), int(self.sizes[q]), int(sizes[e]))
                for e, q, s in zip(ext[keep], sq[keep], shared[keep], strict=True)
            ]
        return found


def _pick_column(columns: list[str], wanted: tuple[str, ...], override: str | None, path: Path, what: str):
    if override:
        if override not in columns:
            raise SurgiqError(f"{path}: no {what} column {override!r}; columns found: {columns}")
        return override
    return next((c for c in wanted if c in columns), None)


def read_external(path: Path, question_column: str | None = None) -> tuple[list[str], list[str]]:
    """``(ids, question stems)`` of one external question file."""
    source = read_source(path)
    column = _pick_column(source.columns, QUESTION_COLUMNS, question_column, path, "question")
    if column is None:
        raise SurgiqError(
            f"{path}: no question column among {QUESTION_COLUMNS}; columns found: {source.columns}. "
            "Name it with --external-question-column."
        )
    id_column = _pick_column(source.columns, ID_COLUMNS, None, path, "id")
    ids, texts = [], []
    for where, row in source.rows:
        ids.append(str(row[id_column]) if id_column and row.get(id_column) is not None else where)
        texts.append(str(row.get(column) or ""))
    return ids, texts


@dataclass
class NearDuplicateReport:
    out: Path
    surgiq_questions: int
    external_questions: dict[str, int]
    matches: list[Match]

    @property
    def flagged_ids(self) -> list[str]:
        return sorted({m.surgiq_id for m in self.matches})

    def summary(self) -> str:
        total = sum(self.external_questions.values())
        share = 100 * len(self.flagged_ids) / self.surgiq_questions if self.surgiq_questions else 0.0
        return (
            f"{self.surgiq_questions} SurgiQ questions against {total} external questions "
            f"({len(self.external_questions)} file(s)): {len(self.matches)} flagged pair(s), "
            f"{len(self.flagged_ids)} SurgiQ question(s) ({share:.2f}%).\n"
            f"Review {self.out / 'flagged_pairs.csv'}, edit {self.out / 'dedupe_ids.txt'}, then build with "
            f"--exclude-ids {self.out / 'dedupe_ids.txt'}"
        )


def find_near_duplicates(
    surgiq: Iterable[dict],
    external_files: list[Path],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    n: int = NGRAM,
    max_df: int = DEFAULT_MAX_DF,
    question_column: str | None = None,
) -> tuple[list[Match], dict[str, int], dict[tuple[str, str], str]]:
    """Flagged pairs (most overlapping first), question counts per external file, and the external texts matched."""
    if not 0 < threshold <= 1:
        raise InputError(f"--threshold must be in (0, 1], got {threshold}")
    records = list(surgiq)
    index = NgramIndex([r["id"] for r in records], [r["question"] for r in records], n, max_df)
    matches, counts, texts = [], {}, {}
    for path in external_files:
        ids, stems = read_external(Path(path), question_column)
        counts[str(path)] = len(ids)
        for e, q, shared, q_size, e_size in index.search(stems, threshold):
            matches.append(Match(index.ids[q], str(path), ids[e], shared, q_size, e_size))
            texts[(str(path), ids[e])] = stems[e]
    matches.sort(key=lambda m: (-m.overlap, m.surgiq_id, m.external_file, m.external_id))
    return matches, counts, texts


def write_near_duplicates(
    out: Path, records: list[dict], matches: list[Match], counts: dict[str, int], texts: dict, settings: dict
) -> NearDuplicateReport:
    out.mkdir(parents=True, exist_ok=True)
    questions = {r["id"]: r["question"] for r in records}
    with (out / "flagged_pairs.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(
            [
                "surgiq_id",
                "external_file",
                "external_id",
                "overlap",
                "jaccard",
                "shared_ngrams",
                "surgiq_ngrams",
                "external_ngrams",
                "surgiq_question",
                "external_question",
            ]
        )
        for m in matches:
            writer.writerow(
                [
                    m.surgiq_id,
                    m.external_file,
                    m.external_id,
                    f"{m.overlap:.4f}",
                    f"{m.jaccard:.4f}",
                    m.shared,
                    m.surgiq_ngrams,
                    m.external_ngrams,
                    questions[m.surgiq_id],
                    texts[(m.external_file, m.external_id)],
                ]
            )
    best: dict[str, Match] = {}
    for m in matches:
        best.setdefault(m.surgiq_id, m)  # matches are sorted: the first is the most overlapping
    lines = [
        f"# SurgiQ ids flagged as near-duplicates (overlap >= {settings['threshold']}); delete the lines to keep",
        *(
            f"{qid}  # overlap {m.overlap:.2f} with {m.external_id} ({Path(m.external_file).name})"
            for qid, m in sorted(best.items())
        ),
    ]
    (out / "dedupe_ids.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = NearDuplicateReport(out, len(records), counts, matches)
    summary = {
        "settings": settings,
        "surgiq_questions": len(records),
        "external_questions": counts,
        "flagged_pairs": len(matches),
        "flagged_surgiq_ids": len(report.flagged_ids),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return report
