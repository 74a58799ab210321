"""Stage 2 (the Sureon paper's B.3): retrieval-augmented, multi-model distractor generation (RADG), and the resampled
baseline.

Every correct MCQ answer of the training split is embedded (default ``BAAI/bge-m3`` through sentence-transformers;
any model path works) and indexed with its procedure, specialty, subject and question type. For each question, four
metadata-filtered pools of the same question type (same procedure, same specialty, same subject, broad) are searched
for the top 100 answers by cosine similarity to the question's own correct answer [the Sureon paper does not say what
the query text is; the answer is used so that exemplars share its style], merged in that priority order with repeats
(same normalised text) and the question's own answer dropped, keeping at most K = 100 exemplars.

Each generator model (M1-M3) writes N = 6 distractors from the question, answer, stage-1 options, transcript context
and exemplars (prompt ``prompts/distractors.md``, in the spirit of the Sureon paper's Fig. 8). The pool of up to 18
keeps each distractor's model (``distractor_pool`` column, read by the hardening stage); the final distractors are a
draw seeded by ``question_id`` under the cross-model diversity constraint (:mod:`builders.sureon.distractor_pool`).

The options are then ordered by ``option_order`` (:func:`ordered_options`): ``shuffled`` (the default) shuffles the
answer among the drawn distractors, seeded by ``question_id``; ``stage1`` keeps the answer at its stage-1 letter.

The search is exact: answers are grouped by question type, a batch of same-type queries is scored with one matrix
product and each pool takes its top-k through precomputed positions (``benchmarks/radg.py`` times it against a
brute-force scan and against one flat faiss index per pool).
"""

import hashlib
import json
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
from pydantic import BaseModel

from builders.errors import InputError
from builders.llm import ChatRequest, LLMClient
from builders.options import normalise_option, options_from_pool, stable_seed
from builders.outputs import atomic_file
from builders.pipeline.agents import STAGE1_FIELDS, read_prompt
from builders.pipeline.output import lettered, read_stage_output, write_stage_output
from builders.sureon.categories import MCQ, resolve_category
from builders.sureon.distractor_pool import POOL_TYPE, clean_pool, draw_distractors


DEFAULT_EMBEDDING_MODEL = "BAAI/bge-m3"
DEFAULT_GENERATORS = ("google/medgemma-27b-text-it", "meta-llama/Llama-3.1-70B", "Qwen/Qwen3.5-35B-A3B")
POOLS = ("procedure", "specialty", "subject", "broad")  # priority order
OPTION_ORDERS = ("shuffled", "stage1")
STAGE2_FIELDS = [
    *STAGE1_FIELDS,
    ("stage1_distractors", pa.list_(pa.string())),
    ("distractor_pool", POOL_TYPE),
]


class DistractorReply(BaseModel):
    distractors: list[str]


@dataclass
class AnswerIndex:
    """Correct answers with their metadata, searchable exactly within metadata-filtered pools.

    Answers are stored once, grouped by question type (every pool is a subset of the question's type); a batch of
    queries of one type is scored with a single matrix product over that group, and each pool takes its top-k from
    those scores through precomputed positions. Ties break by answer index, so results never depend on timing.
    """

    embeddings: np.ndarray  # (n, d) float32, L2-normalised
    meta: list[dict]  # question_id, answer, category, procedure, specialty, subject
    chunk: int = 256  # queries scored per matrix product
    blocks: dict = field(default_factory=dict, repr=False)
    positions: dict = field(default_factory=dict, repr=False)

    def __post_init__(self):
        if len(self.embeddings) != len(self.meta):
            raise InputError(f"{len(self.embeddings)} embeddings for {len(self.meta)} answers")
        members: dict[str, list[int]] = {}
        for i, item in enumerate(self.meta):
            members.setdefault(item["category"], []).append(i)
        vectors = np.asarray(self.embeddings, dtype=np.float32)
        for category, ids in members.items():
            ids = np.asarray(ids, dtype=np.int64)
            self.blocks[category] = (ids, np.ascontiguousarray(vectors[ids]))
            groups: dict[tuple, list[int]] = {}
            for position, i in enumerate(ids):
                for pool in POOLS[:3]:
                    if self.meta[i].get(pool):
                        groups.setdefault((pool, self.meta[i][pool]), []).append(position)
            self.positions[category] = {key: np.asarray(p, dtype=np.int64) for key, p in groups.items()}

    def _top(self, scores: np.ndarray, ids: np.ndarray, top_k: int) -> list[tuple[int, float]]:
        if len(scores) > top_k:
            keep = np.argpartition(-scores, top_k - 1)[:top_k]
            scores, ids = scores[keep], ids[keep]
        order = np.lexsort((ids, -scores))
        return [(int(ids[j]), float(scores[j])) for j in order]

    def search_many(self, queries: np.ndarray, items: list[dict], top_k: int = 100) -> list[dict]:
        """Per query, per pool, ``(answer index, cosine)`` best first; a pool whose field is empty is empty."""
        results: list[dict] = [{pool: [] for pool in POOLS} for _ in items]
        by_category: dict[str, list[int]] = {}
        for q, item in enumerate(items):
            by_category.setdefault(item["category"], []).append(q)
        queries = np.asarray(queries, dtype=np.float32).reshape(len(items), -1)
        for category, members in by_category.items():
            if category not in self.blocks:
                continue
            ids, block = self.blocks[category]
            positions = self.positions[category]
            for start in range(0, len(members), self.chunk):
                batch = members[start : start + self.chunk]
                scores = block @ queries[batch].T
                for column, q in enumerate(batch):
                    column_scores = scores[:, column]
                    for pool in POOLS:
                        if pool == "broad":
                            results[q][pool] = self._top(column_scores, ids, top_k)
                        elif (found := positions.get((pool, items[q].get(pool) or ""))) is not None:
                            results[q][pool] = self._top(column_scores[found], ids[found], top_k)
        return results

    def search(self, query: np.ndarray, item: dict, top_k: int = 100) -> dict[str, list[tuple[int, float]]]:
        return self.search_many(query.reshape(1, -1), [item], top_k)[0]

    def merge(self, hits: dict[str, list[tuple[int, float]]], item: dict, limit: int = 100) -> list[str]:
        """The exemplar set: pools in priority order, repeats and the item's own answer dropped, at most ``limit``."""
        seen = {normalise_option(item["answer"])}
        merged = []
        for pool in POOLS:
            for i, _ in hits[pool]:
                other = self.meta[i]
                key = normalise_option(other["answer"])
                if other["question_id"] == item["question_id"] or key in seen:
                    continue
                seen.add(key)
                merged.append(other["answer"])
                if len(merged) == limit:
                    return merged
        return merged

    def exemplars(self, query: np.ndarray, item: dict, top_k: int = 100, limit: int = 100) -> list[str]:
        return self.merge(self.search(query, item, top_k), item, limit)


def embed(model, texts: list[str], cache_dir: Path | None = None, model_name: str = "") -> np.ndarray:
    """L2-normalised float32 embeddings (so inner product is cosine), kept in ``cache_dir`` as ``.npy`` keyed by
    ``model_name`` and the texts: a rerun of stage 2 does not embed the training answers again."""
    path = None
    if cache_dir is not None:
        key = hashlib.sha256(json.dumps([model_name, texts], ensure_ascii=False).encode()).hexdigest()
        path = Path(cache_dir) / f"{key}.npy"
        if path.exists():
            return np.load(path)
    vectors = model.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
    vectors = np.asarray(vectors, dtype=np.float32)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_file(path) as partial:
            np.save(partial, vectors)
    return vectors


def load_embedder(name: str):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(name, trust_remote_code=False)


def is_mcq(record: dict) -> bool:
    known = resolve_category(record["category"])[1]
    return bool(record.get("options")) and (known is None or known.answer_format == MCQ)


def index_items(records: list[dict]) -> list[dict]:
    keys = ("question_id", "answer", "procedure", "specialty", "subject")
    return [{**{k: r.get(k) or "" for k in keys}, "category": r["category"]} for r in records if is_mcq(r)]


def option_texts(record: dict) -> list[str]:
    return [o["text"] for o in record.get("options") or []]


# The distractor message's labels: written by distractor_message, read back by parse_distractor_message.
_ANSWER_LABEL = "\nCorrect answer: "
_OPTIONS_LABEL = "\nOriginal options: "
_EXEMPLARS_LABEL = "\n\nExample correct answers of similar questions (match their style):\n"
_NO_EXEMPLARS = "- (none retrieved)"


def distractor_message(record: dict, exemplars: list[str]) -> str:
    """The user message a generator gets for one question (the system prompt is ``prompts/distractors.md``)."""
    listing = "\n".join(f"- {text}" for text in exemplars) or _NO_EXEMPLARS
    return (
        f"Procedure: {record.get('procedure') or 'unknown'}; specialty: {record.get('specialty') or 'unknown'}; "
        f"subject: {record.get('subject') or 'unknown'}; question type: {record['category']}\n\n"
        f"Transcript context:\n{record.get('transcript') or '(none)'}\n\n"
        f"Question: {record['question']}{_ANSWER_LABEL}{record['answer']}"
        f"{_OPTIONS_LABEL}{json.dumps(option_texts(record), ensure_ascii=False)}"
        f"{_EXEMPLARS_LABEL}{listing}"
    )


@dataclass(frozen=True)
class DistractorPrompt:
    """What a :func:`distractor_message` tells a generator about the answer: the text, the stage-1 options and the
    retrieved exemplars."""

    answer: str
    options: list[str]
    exemplars: list[str]


def parse_distractor_message(message: str) -> DistractorPrompt:
    """Read back a :func:`distractor_message` (for a program standing in for a generator model).

    Labels are searched from the end, so a transcript or question holding one does not fool it; an exemplar spread
    over several lines comes back whole. Raises ``ValueError`` for a message in another format."""
    head, found_exemplars, listing = message.rpartition(_EXEMPLARS_LABEL)
    head, found_options, options = head.rpartition(_OPTIONS_LABEL)
    _, found_answer, answer = head.rpartition(_ANSWER_LABEL)
    if not (found_exemplars and found_options and found_answer):
        raise ValueError("not a stage-2 distractor message: no 'Correct answer', 'Original options' or examples")
    try:
        texts = json.loads(options)
    except json.JSONDecodeError as err:
        raise ValueError(f"the original options are not a JSON list: {err}") from None
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise ValueError("the original options are not a JSON list of strings")
    exemplars: list[str] = []
    if listing != _NO_EXEMPLARS:
        for line in listing.split("\n"):
            if line.startswith("- "):
                exemplars.append(line[2:])
            elif exemplars:
                exemplars[-1] += f"\n{line}"
    return DistractorPrompt(answer, texts, exemplars)


@dataclass
class Stage2Config:
    generators: list[str] = field(default_factory=lambda: list(DEFAULT_GENERATORS))
    embedding_model: str = DEFAULT_EMBEDDING_MODEL
    per_model: int = 6  # N
    num_distractors: int = 6  # drawn from the pool (the Sureon paper reports 3 and 6)
    top_k: int = 100
    exemplars: int = 100  # K
    temperature: float = 0.1
    max_tokens: int | None = None
    option_order: str = "shuffled"  # or "stage1": see ordered_options

    def __post_init__(self):
        if self.option_order not in OPTION_ORDERS:
            raise InputError(f"option_order {self.option_order!r}: one of {', '.join(OPTION_ORDERS)}")


def stage1_answer_index(record: dict) -> int | None:
    """The answer's index among the record's stage-1 options (compared as the release reader compares texts)."""
    answer = normalise_option(record["answer"])
    return next((i for i, text in enumerate(option_texts(record)) if normalise_option(text) == answer), None)


def ordered_options(record: dict, distractors: list[str], option_order: str) -> list[str]:
    """The answer and the drawn distractors in the order they are lettered.

    ``shuffled``: shuffled together, seeded by ``question_id``. ``stage1``: the answer keeps its stage-1 letter and
    the distractors fill the other letters in the order they were drawn (pool order: the order the generators wrote
    them); an answer whose stage-1 letter lies past the new option count, or that no stage-1 option holds, goes last.
    ``stage1`` exists for ablations that compare distractor texts alone (the Sureon paper's Table 4, stage 1 against
    stage 2): a re-shuffle also removes any position bias of stage 1's answers, which would credit RADG with what the
    reordering did.
    """
    if option_order == "shuffled":
        return options_from_pool(record["answer"], distractors, record["question_id"])
    position = stage1_answer_index(record)
    texts = list(distractors)
    texts.insert(len(texts) if position is None else min(position, len(texts)), record["answer"])
    return texts


def _with_options(record: dict, pool: list[dict], drawn: list[dict], option_order: str) -> dict:
    answer = record["answer"]
    texts = ordered_options(record, [d["text"] for d in drawn], option_order)
    return {
        **record,
        "options": lettered(texts, answer),
        "stage1_distractors": [t for t in option_texts(record) if t != answer],
        "distractor_pool": pool,
    }


def run_radg(
    records: dict[str, list[dict]], client: LLMClient, config: Stage2Config, embedder, embedding_cache=None
) -> tuple[dict[str, list[dict]], list[dict]]:
    """RADG on every MCQ record; other records pass through with an empty pool."""
    items = index_items(records.get("train", []))
    if not items:
        raise InputError("no MCQ answers in the train split to retrieve exemplars from")
    vectors = embed(embedder, [i["answer"] for i in items], embedding_cache, config.embedding_model)
    index = AnswerIndex(vectors, items)
    queries = [(split, r) for split, rows in sorted(records.items()) for r in rows if is_mcq(r)]
    query_vectors = embed(embedder, [r["answer"] for _, r in queries], embedding_cache, config.embedding_model)
    system = read_prompt("distractors.md").format(num_distractors=config.per_model)
    requests = []
    hits = index.search_many(query_vectors, [r for _, r in queries], config.top_k)
    for (_, record), found in zip(queries, hits, strict=True):
        user = distractor_message(record, index.merge(found, record, config.exemplars))
        for model in config.generators:
            messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
            requests.append(
                ChatRequest(
                    messages,
                    model=model,
                    stage="stage2-radg",
                    temperature=config.temperature,
                    max_tokens=config.max_tokens,
                    schema=DistractorReply,
                )
            )
    results = iter(client.chat_many(requests))
    out: dict[str, list[dict]] = {split: [] for split in records}
    skipped = []
    for split, record in queries:
        candidates, failures = [], []
        for model in config.generators:
            result = next(results)
            if result.ok:
                candidates += [{"text": t, "model": model} for t in result.data.distractors[: config.per_model]]
            else:
                failures.append(f"{model}: {result.error}")
        pool = clean_pool(candidates, record["answer"])
        try:
            drawn = draw_distractors(pool, config.num_distractors, record["question_id"])
        except ValueError as err:
            skipped.append(
                {"question_id": record["question_id"], "stage": "radg", "reason": f"{err}", "failures": failures}
            )
            continue
        out[split].append(_with_options(record, pool, drawn, config.option_order))
    for split, rows in records.items():
        out[split] += [{**r, "stage1_distractors": [], "distractor_pool": []} for r in rows if not is_mcq(r)]
    return out, skipped


def run_resampled(
    records: dict[str, list[dict]], num_distractors: int = 6, option_order: str = "shuffled"
) -> tuple[dict[str, list[dict]], list]:
    """The Sureon paper's Table 8 "resampled" baseline: correct answers of other same-type training questions as
    distractors, drawn with a seed from ``question_id``, ordered by ``option_order`` (:func:`ordered_options`)."""
    answers: dict[str, list[str]] = {}
    for item in index_items(records.get("train", [])):
        answers.setdefault(item["category"], []).append(item["answer"])
    unique = {c: sorted({normalise_option(a): a for a in texts}.values()) for c, texts in sorted(answers.items())}
    out: dict[str, list[dict]] = {split: [] for split in records}
    skipped = []
    for split, rows in sorted(records.items()):
        for record in rows:
            if not is_mcq(record):
                out[split].append({**record, "stage1_distractors": [], "distractor_pool": []})
                continue
            own = normalise_option(record["answer"])
            others = [a for a in unique.get(record["category"], []) if normalise_option(a) != own]
            if len(others) < num_distractors:
                reason = f"{len(others)} other {record['category']} answers; {num_distractors} needed"
                skipped.append({"question_id": record["question_id"], "stage": "resampled", "reason": reason})
                continue
            rng = random.Random(stable_seed("resampled", record["question_id"]))
            drawn = [
                {"text": others[i], "model": "resampled"}
                for i in sorted(rng.sample(range(len(others)), num_distractors))
            ]
            out[split].append(_with_options(record, drawn, drawn, option_order))
    return out, skipped


def write_stage2(
    stage1: Path,
    out: Path,
    method: str,
    config: Stage2Config,
    client: LLMClient | None = None,
    embedder=None,
    overwrite: bool = False,
    embedding_cache: Path | None = None,
) -> dict:
    """Read a stage-1 folder, refine its distractors (``radg`` / ``resampled``), write D_ref; return the manifest."""
    records = read_stage_output(stage1)
    if method == "radg":
        embedder = embedder if embedder is not None else load_embedder(config.embedding_model)
        refined, skipped = run_radg(records, client, config, embedder, embedding_cache)
    elif method == "resampled":
        refined, skipped = run_resampled(records, config.num_distractors, config.option_order)
    else:
        raise InputError(f"unknown stage-2 method {method!r}: radg or resampled")
    manifest = {
        "stage": f"stage2-{method}",
        "settings": asdict(config),
        "input": {split: len(rows) for split, rows in sorted(records.items())},
        "written": {split: len(rows) for split, rows in sorted(refined.items())},
        "skipped": len(skipped),
    }
    usage = client.ledger.as_dict() if client is not None else {}
    write_stage_output(out, refined, STAGE2_FIELDS, skipped, manifest, usage, overwrite)
    return manifest
