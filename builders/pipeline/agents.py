"""Stage 1 (the Sureon paper's B.2): ten generator-validator agent pairs turn transcripts into grounded QA samples
(D_SGM).

Per transcript and category, the generator is called ``R`` times (T = 0.1; the calls differ by their ``seed``
parameter, so each is cached on its own) and the paired validator (T = 0.0) receives the union of the candidates and
returns a decision with a reason for each (category rules + hallucination, visual grounding, temporal window,
semantic deduplication). Before the validator, each candidate is checked mechanically (window inside the video and
over transcript lines, MCQ with three distinct distractors, temporal ordering with three lettered events and a
permutation answer); a candidate failing a check, rejected by the validator or left without a decision is written
to ``skipped.jsonl`` with the reason. Kept samples carry the transcript context, the evidence and the validator's
reason. Prompts live in ``builders/pipeline/prompts/`` (``generator.md``, ``validator.md`` and one file per
category with the Sureon paper's Table 7 rules).
"""

import hashlib
import json
from dataclasses import asdict, dataclass, field
from importlib.resources import files
from pathlib import Path

import pyarrow as pa
from pydantic import BaseModel, Field

from builders.errors import InputError
from builders.llm import ChatRequest, LLMClient
from builders.options import OptionError, lettered_events, options_from_pool, parse_order
from builders.pipeline.output import lettered, write_stage_output
from builders.pipeline.transcripts import Transcript, format_lines
from builders.sureon.categories import BY_CODE, CATEGORIES, MCQ, ORDERING, Category
from builders.sureon.distractor_pool import clean_pool


STAGE1_DISTRACTORS = 3  # 4 options, as on the release's train / validation splits
REASONING_CATEGORIES = ("F", "TO")  # the release fills ``reasoning`` for these only
STAGE1_FIELDS = [("title", pa.string()), ("evidence", pa.string()), ("validator_reason", pa.string())]


class Sample(BaseModel):
    question: str
    answer: str
    distractors: list[str] = Field(default_factory=list)
    start: float
    end: float
    evidence: str = ""
    reasoning: str = ""


class GeneratorReply(BaseModel):
    samples: list[Sample]


class Decision(BaseModel):
    index: int
    keep: bool
    reason: str
    duplicate_of: int | None = None


class ValidatorReply(BaseModel):
    decisions: list[Decision]


@dataclass
class Stage1Config:
    model: str
    generator_calls: int = 3
    generator_temperature: float = 0.1
    validator_temperature: float = 0.0
    categories: list[str] = field(default_factory=lambda: [c.code for c in CATEGORIES])
    max_tokens: int | None = None


def read_prompt(name: str) -> str:
    return files("builders.pipeline").joinpath("prompts", name).read_text(encoding="utf-8")


def category_rules(category: Category) -> tuple[str, str]:
    """(generator rules, validator rules) from the category's prompt file (``# Generator`` / ``# Validator``)."""
    text = read_prompt(f"{category.slug}.md")
    head, _, validator = text.partition("# Validator")
    generator = head.partition("# Generator")[2]
    if not generator.strip() or not validator.strip():
        raise InputError(f"prompts/{category.slug}.md needs a '# Generator' and a '# Validator' section")
    return generator.strip(), validator.strip()


def system_prompts(category: Category) -> tuple[str, str]:
    generator_rules, validator_rules = category_rules(category)
    note = "Leave distractors empty." if category.answer_format != MCQ else "Give exactly 3 distractors."
    fields = {"name": category.name, "code": category.code, "answer_format": category.answer_format}
    return (
        read_prompt("generator.md").format(**fields, rules=generator_rules, format_note=note),
        read_prompt("validator.md").format(**fields, rules=validator_rules),
    )


def transcript_message(transcript: Transcript) -> str:
    meta = (
        f"Video {transcript.source_id}: {transcript.title or 'untitled'}\n"
        f"Specialty: {transcript.specialty or 'unknown'}; subject: {transcript.subject or 'unknown'}; "
        f"procedure: {transcript.procedure or 'unknown'}\n"
    )
    return f"{meta}\nTranscript (seconds as h:mm:ss):\n{format_lines(transcript.lines)}"


def check_sample(sample: Sample, category: Category, transcript: Transcript) -> str | None:
    """Why a candidate cannot become a release record, or None."""
    if not sample.question.strip() or not sample.answer.strip():
        return "empty question or answer"
    if not 0 <= sample.start < sample.end or sample.start > transcript.duration:
        return f"window [{sample.start}, {sample.end}] is empty or outside the video (0-{transcript.duration}s)"
    if not transcript.window(sample.start, sample.end):
        return f"window [{sample.start}, {sample.end}] covers no transcript line"
    if category.answer_format == MCQ:
        kept = clean_pool([{"text": d} for d in sample.distractors], sample.answer)
        if len(kept) < STAGE1_DISTRACTORS:
            return f"{len(kept)} usable distractors (distinct, not the answer); {STAGE1_DISTRACTORS} needed"
    elif category.answer_format == ORDERING:
        events = lettered_events(sample.question)
        if len(events) != 3:
            return f"temporal ordering needs three inline events 'A: ... B: ... C: ...', found {len(events)}"
        try:
            parse_order(sample.answer, 3)
        except OptionError as err:
            return str(err)
    return None


def dashed(seconds: float) -> str:
    hundredths = round(seconds * 100)
    whole, frac = divmod(hundredths, 100)
    return f"{whole // 3600:02d}-{whole % 3600 // 60:02d}-{whole % 60:02d}.{frac:02d}"


def make_record(sample: Sample, category: Category, transcript: Transcript, reason: str) -> dict:
    """A release record; ``question_id`` is a digest of the sample's content, so reruns give the same ids."""
    sample = sample.model_copy(update={"question": sample.question.strip(), "answer": sample.answer.strip()})
    content = json.dumps([transcript.source_id, category.code, sample.start, sample.end, sample.question])
    question_id = f"{transcript.source_id}_{category.slug}_{hashlib.sha256(content.encode()).hexdigest()[:12]}"
    options: list[dict] = []
    if category.answer_format == MCQ:
        pool = clean_pool([{"text": d} for d in sample.distractors], sample.answer)[:STAGE1_DISTRACTORS]
        options = lettered(options_from_pool(sample.answer, [d["text"] for d in pool], question_id), sample.answer)
    answer = ",".join(parse_order(sample.answer, 3)) if category.answer_format == ORDERING else sample.answer
    return {
        "question_id": question_id,
        "clip_id": f"{transcript.source_id}_{category.slug}_{dashed(sample.start)}_{dashed(sample.end)}",
        "source_id": transcript.source_id,
        "start": float(sample.start),
        "end": float(sample.end),
        "category": category.slug,
        "question": sample.question,
        "answer": answer,
        "options": options,
        "specialty": transcript.specialty,
        "subject": transcript.subject,
        "procedure": transcript.procedure,
        "transcript": format_lines(transcript.window(sample.start, sample.end)),
        "reasoning": sample.reasoning.strip() if category.code in REASONING_CATEGORIES else "",
        "passes_blind_curation": None,
        "title": transcript.title,
        "evidence": sample.evidence,
        "validator_reason": reason,
    }


def _candidates_message(transcript: Transcript, candidates: list[Sample]) -> str:
    listing = "\n".join(f"[{i}] {json.dumps(c.model_dump(), ensure_ascii=False)}" for i, c in enumerate(candidates))
    return f"{transcript_message(transcript)}\n\nCandidates:\n{listing}"


def generator_requests(transcripts: list[Transcript], config: Stage1Config) -> list[tuple[int, str, ChatRequest]]:
    requests = []
    for index, transcript in enumerate(transcripts):
        user = transcript_message(transcript)
        for code in config.categories:
            system = system_prompts(BY_CODE[code])[0]
            for call in range(config.generator_calls):
                messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
                request = ChatRequest(
                    messages,
                    model=config.model,
                    stage="stage1-generator",
                    temperature=config.generator_temperature,
                    max_tokens=config.max_tokens,
                    schema=GeneratorReply,
                    params={"seed": call},
                )
                requests.append((index, code, request))
    return requests


def run_stage1(
    transcripts: list[Transcript], split: dict[str, str], client: LLMClient, config: Stage1Config
) -> tuple[dict[str, list[dict]], list[dict]]:
    """``(records per split, skipped entries)`` for ``transcripts``; ``split`` maps each source id to its split."""
    unknown = [c for c in config.categories if c not in BY_CODE]
    if unknown:
        raise InputError(f"unknown categories {unknown}; choose among {list(BY_CODE)}")
    unassigned = sorted(t.source_id for t in transcripts if split.get(t.source_id) not in ("train", "validation"))
    if unassigned:
        raise InputError(f"{len(unassigned)} video(s) have no train / validation split: {unassigned[:5]}")
    skipped = [
        {"source_id": t.source_id, "stage": "input", "reason": "the transcript has no lines"}
        for t in transcripts
        if not t.lines
    ]
    transcripts = [t for t in transcripts if t.lines]
    candidates: dict[tuple[int, str], list[Sample]] = {}
    planned = generator_requests(transcripts, config)
    for (index, code, _), result in zip(planned, client.chat_many([r for _, _, r in planned]), strict=True):
        where = {"source_id": transcripts[index].source_id, "category": code}
        bucket = candidates.setdefault((index, code), [])
        if not result.ok:
            skipped.append({**where, "stage": "generator", "reason": f"call failed: {result.error}"})
            continue
        for sample in result.data.samples:
            problem = check_sample(sample, BY_CODE[code], transcripts[index])
            if problem:
                skipped.append({**where, "stage": "check", "reason": problem, "sample": sample.model_dump()})
            else:
                bucket.append(sample)

    keys = [key for key, found in candidates.items() if found]
    requests = []
    for index, code in keys:
        system = system_prompts(BY_CODE[code])[1]
        user = _candidates_message(transcripts[index], candidates[(index, code)])
        requests.append(
            ChatRequest(
                [{"role": "system", "content": system}, {"role": "user", "content": user}],
                model=config.model,
                stage="stage1-validator",
                temperature=config.validator_temperature,
                max_tokens=config.max_tokens,
                schema=ValidatorReply,
            )
        )
    records: dict[str, list[dict]] = {}
    seen: set[str] = set()
    for (index, code), result in zip(keys, client.chat_many(requests), strict=True):
        transcript, category = transcripts[index], BY_CODE[code]
        where = {"source_id": transcript.source_id, "category": code}
        decisions = {d.index: d for d in result.data.decisions} if result.ok else {}
        for position, sample in enumerate(candidates[(index, code)]):
            entry = {**where, "stage": "validator", "sample": sample.model_dump()}
            decision = decisions.get(position)
            if decision is None:
                reason = f"validator call failed: {result.error}" if not result.ok else "validator gave no decision"
                skipped.append({**entry, "reason": reason})
            elif not decision.keep:
                duplicate = (
                    f" (duplicate of candidate {decision.duplicate_of})" if decision.duplicate_of is not None else ""
                )
                skipped.append({**entry, "reason": f"rejected: {decision.reason}{duplicate}"})
            else:
                record = make_record(sample, category, transcript, decision.reason)
                if record["question_id"] in seen:
                    skipped.append({**entry, "reason": f"exact duplicate of {record['question_id']}"})
                    continue
                seen.add(record["question_id"])
                records.setdefault(split[transcript.source_id], []).append(record)
    return records, skipped


def write_stage1(
    out: Path,
    transcripts: list[Transcript],
    split: dict[str, str],
    client: LLMClient,
    config: Stage1Config,
    overwrite: bool = False,
) -> dict:
    """Run stage 1 and write D_SGM as a release folder; return the manifest."""
    records, skipped = run_stage1(transcripts, split, client, config)
    written = {name: len(rows) for name, rows in sorted(records.items())}
    candidates = sum(written.values()) + sum(1 for s in skipped if "sample" in s)
    manifest = {
        "stage": "stage1",
        "settings": asdict(config),
        "videos": {name: sum(split[t.source_id] == name for t in transcripts) for name in ("train", "validation")},
        "candidates": candidates,
        "written": written,
        "skipped": len(skipped),
    }
    write_stage_output(out, records, STAGE1_FIELDS, skipped, manifest, client.ledger.as_dict(), overwrite)
    return manifest
