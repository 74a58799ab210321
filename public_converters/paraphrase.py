"""LLM paraphrase augmentation (the Sureon paper's C.4): the third version of every templated QA, optional.

Calls go through the project's one chat client (``builders/llm/``): any OpenAI-compatible endpoint (what vLLM
serves), a concurrency cap, retries, and an on-disk cache keyed by (model, messages, params), so a rerun pays nothing
twice. The Sureon paper's settings are the defaults: Qwen3.5-9B with T=0.7, top-p 0.8, top-k 20, at most 256 new tokens
for the image branch; Qwen3-VL-8B-Instruct (text only) with T=0.7, top-p 0.9 for the clip branch. Each request carries
a seed derived from the QA id, so a server that honours it gives the same paraphrase on a rebuild.

A paraphrase is kept only if it preserves every vocabulary term of the original (and their order in the answer),
every number, and the visual-grounding cue ("image"/"frame" or "clip"/"video"); for grounded (JSON) answers only the
question is paraphrased and the answer is copied verbatim. Rejections and failures are counted by reason; a failed
call is not cached, so a rerun tries it again.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from builders.llm import ChatRequest, LLMClient
from builders.options import stable_seed


PROMPTS = Path(__file__).parent / "prompts"
GROUNDING_CUES = {
    "image": ("image", "frame", "picture", "photo", "view"),
    "clip": ("clip", "video", "segment", "footage", "sequence"),
}
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


class Paraphrase(BaseModel):
    question: str
    answer: str | None = None


@dataclass(frozen=True)
class ParaphraseSettings:
    model: str
    temperature: float = 0.7
    top_p: float = 0.8
    top_k: int | None = 20
    max_tokens: int = 256


DEFAULT_SETTINGS = {
    "image": ParaphraseSettings("Qwen/Qwen3.5-9B", 0.7, 0.8, 20),
    "clip": ParaphraseSettings("Qwen/Qwen3-VL-8B-Instruct", 0.7, 0.9, None),
}


def _positions(text: str, terms: list[str]) -> list[tuple[int, str]]:
    """Where each vocabulary term occurs (whole words, case-insensitive), longest terms first so that a term inside a
    longer one ("grasper" in "prograsp forceps" is not an issue; "hook" in "electrocautery hook" is) counts once."""
    found, taken = [], []
    lowered = text.lower()
    for term in sorted(terms, key=len, reverse=True):
        for match in re.finditer(rf"(?<![a-z0-9]){re.escape(term.lower())}(?![a-z0-9])", lowered):
            span = range(match.start(), match.end())
            if not any(match.start() in t or match.end() - 1 in t for t in taken):
                taken.append(span)
                found.append((match.start(), term))
    return sorted(found)


def rejection(original: str, rephrased: str, terms: list[str], check_order: bool) -> str | None:
    """Why ``rephrased`` is not a faithful rephrasing of ``original`` (None if it is)."""
    if not rephrased or not rephrased.strip():
        return "empty"
    before, after = _positions(original, terms), _positions(rephrased, terms)
    lost = Counter(t for _, t in before) - Counter(t for _, t in after)
    if lost:
        return f"lost term {min(lost)!r}"
    if check_order:
        order = [t for _, t in after if t in {u for _, u in before}]
        if list(dict.fromkeys(order)) != list(dict.fromkeys(t for _, t in before)):
            return "changed term order"
    if Counter(_NUMBER.findall(original)) - Counter(_NUMBER.findall(rephrased)):
        return "changed a number"
    return None


def check(record: dict, reply: Paraphrase, terms: list[str]) -> tuple[str | None, str, str]:
    """(rejection reason or None, question, answer) for one reply to one templated record."""
    branch = record["branch"]
    question = reply.question.strip()
    if not any(cue in question.lower() for cue in GROUNDING_CUES[branch]) and not record["grounded"]:
        return "lost the grounding cue", question, ""
    reason = rejection(record["question"], question, terms, check_order=True)
    if reason:
        return f"question: {reason}", question, ""
    if record["grounded"]:
        return None, question, record["answer"]
    answer = (reply.answer or "").strip()
    reason = rejection(record["answer"], answer, terms, check_order=True)
    return (f"answer: {reason}" if reason else None), question, answer


def request_for(record: dict, settings: ParaphraseSettings) -> ChatRequest:
    payload = {"question": record["question"]}
    if not record["grounded"]:
        payload["answer"] = record["answer"]
    system = (PROMPTS / f"paraphrase_{record['branch']}.md").read_text()
    params = {"top_p": settings.top_p, "seed": stable_seed("paraphrase", record["qa_id"]) % (2**31)}
    if settings.top_k is not None:
        params["top_k"] = settings.top_k
    return ChatRequest(
        messages=[{"role": "system", "content": system}, {"role": "user", "content": json.dumps(payload)}],
        model=settings.model,
        stage=f"paraphrase-{record['branch']}",
        temperature=settings.temperature,
        max_tokens=settings.max_tokens,
        schema=Paraphrase,
        params=params,
    )


def paraphrase(
    records: list[dict], client: LLMClient, terms: dict[str, list[str]], settings: dict[str, ParaphraseSettings]
) -> tuple[list[dict], Counter]:
    """Paraphrase versions of the ``version == "template"`` records; ``terms`` is the vocabulary per source.

    Returns the accepted records and the counts: requested = accepted + rejected (by reason) + failed."""
    originals = [r for r in records if r["version"] == "template"]
    results = client.chat_many([request_for(r, settings[r["branch"]]) for r in originals])
    accepted, stats = [], Counter(requested=len(originals))
    for record, result in zip(originals, results, strict=True):
        if not result.ok or result.data is None:
            stats["failed"] += 1
            continue
        reason, question, answer = check(record, result.data, terms[record["source"]])
        if reason:
            stats["rejected"] += 1
            stats["rejected: " + re.sub(r" '.*'$", "", reason)] += 1
            continue
        stats["accepted"] += 1
        accepted.append(
            {
                **record,
                "qa_id": f"{record['qa_id'][:-2]}-p",
                "version": "paraphrase",
                "question": question,
                "answer": answer,
            }
        )
    return accepted, stats
