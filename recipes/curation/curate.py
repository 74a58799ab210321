"""Stage 3 of the construction (the Sureon paper's 3.1 and B.4): blind-test curation and distractor hardening.

- A **guesser** is any model behind :mod:`recipes.evaluation.inference` (transformers, vLLM, or an OpenAI-compatible
  endpoint) queried with exactly the project's blind prompt (``format_messages(record, blind=True)``: question and
  options, no frames), with the system prompt the guesser was trained with, if any. Its answers are read by
  :func:`recipes.evaluation.answers.parse_answer`, as in evaluation.
- **Consistency** S(g, x) is the fraction of R sampled answers (temperature T > 0, one batched generation per batch of
  questions) that recover the answer. A question is removed when any guesser reaches S >= tau (default 3/5).
  Sequence summaries (SM) have no options: they pass through, flagged as passing.
- **Training split**: video-level folds stratified by subject (:func:`builders.sureon.folds.assign_folds`, the function
  the guesser recipe ``recipes/sft.py --fold k`` trains with); fold f is scored only by guessers that held fold f out,
  plus off-the-shelf guessers. The folds are the ones the guessers trained with (each writes its ``folds.json`` next
  to its weights, whatever seed its recipe used; they must agree with each other, :func:`curation_folds`); scoring a
  video a guesser trained on raises :class:`FoldLeakError`.
- **Validation split**: scored by guessers trained on the whole training split (a guesser whose ``folds.json`` names
  a validation video is refused).
- **Hardening** (Algorithm 1, B.4.3): for each retained question, up to M = 32 configurations are drawn from its
  ``distractor_pool`` under the cross-model diversity constraint (random seed 42, as the Sureon paper's B.4.3 draws
  them); the first on which the hardening guesser's S < tau is kept (``hardening_attempts`` records its rank), else the
  question is discarded. A question without a pool has one configuration, its own.

Every scoring pass is cached in an append-only JSONL, keyed by (guesser, question, options in order, R, T, seed) and
stamped with a fingerprint of the prompt and the guesser's settings: an interrupted run resumes where it stopped.
"""

import hashlib
import json
import logging
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from builders.arguments import float_range, int_range, key_values, positive_float, positive_int, seed
from builders.errors import InputError
from builders.jsonl_log import AppendOnlyJsonl
from builders.options import seeded_shuffle, stable_seed
from builders.prompt import answer_target, format_messages
from builders.sureon.distractor_pool import clean_pool, draw_configurations
from builders.sureon.folds import assign_folds


logger = logging.getLogger(__name__)

DEFAULT_TRIALS = 5
DEFAULT_TEMPERATURE = 1.0
DEFAULT_TAU = 3 / 5
HARDENING_ATTEMPTS = 32
HARDENING_SEED = 42
PASSTHROUGH_CATEGORIES = ("SM",)
TAU = float_range(0.0, 1.0, low_open=True)  # --tau: a consistency, removed at S >= tau (tau 0 would remove all)
SUREON_BUILD = "curation reads a Sureon build (`sureon build sureon`: train_all or validation)"


class FoldLeakError(InputError):
    """A guesser would score questions from videos it was trained on."""


def is_scored(record: dict) -> bool:
    """Blind curation applies to questions with options or an event order; SM (and other open answers) pass."""
    if record.get("category") in PASSTHROUGH_CATEGORIES:
        return False
    return bool(record.get("options")) or bool(record.get("answer_order"))


# ---------------------------------------------------------------------------------------------------------- guessers


@dataclass
class Guesser:
    """A blind guesser: a backend with ``settings()``, ``batch_size`` and ``sample(...)`` (see
    recipes.evaluation.inference).

    ``held_out_fold``: the training fold it never saw (``--fold k`` of the guesser recipe); ``None`` for an
    off-the-shelf model or one trained on the whole training split. ``trained_folds``: its ``folds.json``.
    ``system_prompt``: the system message of its blind prompts (by default the one it was trained with).
    """

    name: str
    backend: object
    kind: str = "off-the-shelf"
    held_out_fold: int | None = None
    trained_folds: dict[str, int] | None = None
    system_prompt: str | None = None

    @property
    def fingerprint(self) -> str:
        return json.dumps({"name": self.name, "settings": self.backend.settings()}, sort_keys=True, default=str)

    def blind_prompt(self, record: dict) -> list[dict]:
        return format_messages(record, blind=True, system_prompt=self.system_prompt)


GUESSER_KEYS = (
    "model",
    "backend",
    "name",
    "type",
    "fold",
    "base_url",
    "api_key_env",
    "batch_size",
    "dtype",
    "device",
    "max_new_tokens",
    "system_prompt_file",
)
GUESSER_COUNTS = {"fold": 0, "batch_size": 1, "max_new_tokens": 1}  # integer keys and their least value


def parse_guesser_spec(spec: str) -> dict[str, str]:
    """``"model=PATH,backend=transformers,fold=0,type=refined"`` -> a dict (a bare ``PATH`` means ``model=PATH``).
    An unknown key (a typo would otherwise be ignored) or a count that is not one is refused, naming the spec."""
    if "=" not in spec:
        return {"model": spec}
    fields = key_values(spec.split(","), "--guesser", "model=PATH,name=NAME", allow_empty=True)
    if "model" not in fields or not fields["model"]:
        raise InputError(f"guesser spec {spec!r} has no model=...")
    unknown = [key for key in fields if key not in GUESSER_KEYS]
    if unknown:
        raise InputError(f"guesser spec {spec!r}: unknown key {unknown[0]!r} (keys: {', '.join(GUESSER_KEYS)})")
    for key, least in GUESSER_COUNTS.items():
        if key in fields and not (fields[key].isdigit() and int(fields[key]) >= least):
            raise InputError(f"guesser spec {spec!r}: {key}={fields[key]} is not an integer of at least {least}")
    return fields


def check_guesser_spec(spec: str, option: str = "--guesser") -> dict[str, str]:
    """A guesser spec checked before any data or model loads: its keys, its backend, a local model that is there
    (:func:`recipes.evaluation.inputs.check_model_path`), an endpoint that answers, its system prompt file."""
    from builders.llm import check_endpoint
    from recipes.evaluation.inference import BACKENDS
    from recipes.evaluation.inputs import check_model_path

    fields = parse_guesser_spec(spec)
    backend = fields.get("backend", "transformers")
    if backend not in BACKENDS:
        raise InputError(f"{option} {spec}: backend={backend} is not one of {', '.join(BACKENDS)}")
    if backend == "openai":
        check_endpoint(fields.get("base_url"), option=f"base_url= of {option}")
    else:
        check_model_path(fields["model"], f"{option} model=")
    prompt_file = fields.get("system_prompt_file")
    if prompt_file is not None and not Path(prompt_file).expanduser().is_file():
        raise InputError(f"{option} {spec}: system_prompt_file {prompt_file}: no such file")
    return fields


def read_guesser_folds(model: str) -> tuple[int | None, dict[str, int] | None]:
    """The held-out fold and fold assignment the guesser recipe wrote next to the weights (when it did)."""
    from recipes.training.modeling import training_record

    folder = Path(model)
    held_out, folds = None, None
    if folder.is_dir():
        held_out = (training_record(model) or {}).get("fold")
    if (folder / "folds.json").is_file():
        folds = {str(k): int(v) for k, v in json.loads((folder / "folds.json").read_text()).items()}
    return held_out, folds


def load_guesser(spec: str, *, cache_dir: Path | None = None, max_new_tokens: int = 32) -> Guesser:
    """A :class:`Guesser` from a spec string. Keys: model, backend (transformers|vllm|openai), name, type, fold,
    base_url, api_key_env, batch_size, dtype, device, max_new_tokens, system_prompt_file (a file holding the system
    prompt; an empty file: none). Without ``system_prompt_file`` a guesser trained by ``recipes/sft.py`` gets the
    system prompt it was trained with (recorded in its ``training_complete.json``), any other none."""
    from recipes.evaluation.inference import make_backend
    from recipes.training.modeling import resolve_system_prompt

    fields = parse_guesser_spec(spec)
    model, backend_name = fields["model"], fields.get("backend", "transformers")
    options: dict = {"max_new_tokens": int(fields.get("max_new_tokens", max_new_tokens))}
    if backend_name == "openai":
        options |= {"base_url": fields.get("base_url"), "api_key": os.environ.get(fields.get("api_key_env", ""))}
        if cache_dir is not None:
            options["cache"] = cache_dir / "llm_cache.sqlite"
    else:
        options |= {k: fields[k] for k in ("dtype",) if k in fields}
        if "batch_size" in fields:
            options["batch_size"] = int(fields["batch_size"])
        if backend_name == "transformers" and "device" in fields:
            options["device"] = fields["device"]
    held_out, folds = read_guesser_folds(model)
    if "fold" in fields:
        declared = int(fields["fold"])
        if held_out is not None and held_out != declared:
            raise FoldLeakError(
                f"guesser {model}: spec says fold={declared} but it was trained holding out {held_out}"
            )
        held_out = declared
    if "system_prompt_file" in fields:
        prompt = Path(fields["system_prompt_file"]).expanduser().read_text(encoding="utf-8")
        system_prompt = resolve_system_prompt(None, override=prompt)
    else:
        system_prompt = resolve_system_prompt(None if backend_name == "openai" else model)
    return Guesser(
        name=fields.get("name") or Path(model).name or model,
        backend=make_backend(backend_name, model, **options),
        kind=fields.get("type", "fine-tuned" if folds or held_out is not None else "off-the-shelf"),
        held_out_fold=held_out,
        trained_folds=folds,
        system_prompt=system_prompt,
    )


# ------------------------------------------------------------------------------------------------------------ scores


class ScoreCache(AppendOnlyJsonl):
    """Scoring passes keyed by their ``key`` (guesser, item, option order, R, temperature, seed, fingerprint)."""

    def __init__(self, path: str | Path):
        super().__init__(path, key=lambda entry: entry["key"])


@dataclass(frozen=True)
class Sampling:
    trials: int = DEFAULT_TRIALS
    temperature: float = DEFAULT_TEMPERATURE
    seed: int = 0

    def __post_init__(self):
        """R answers need R >= 1 (``range(0, n, 0)`` would fail deep inside a backend) and sampling a temperature
        above 0."""
        if self.trials < 1:
            raise InputError(f"--trials {self.trials}: give at least 1 (R answers per question)")
        if not self.temperature > 0:
            raise InputError(f"--temperature {self.temperature}: sampling needs a temperature above 0")


def score_key(guesser: Guesser, record: dict, messages: list[dict], sampling: Sampling) -> str:
    from recipes.evaluation.inference import prompt_fingerprint

    settings = {"guesser": guesser.fingerprint, "trials": sampling.trials, "temperature": sampling.temperature}
    identity = [
        guesser.name,
        record["question_id"],
        list(record.get("options") or record.get("answer_order") or []),
        sampling.trials,
        sampling.temperature,
        sampling.seed,
        prompt_fingerprint(messages, settings | {"seed": sampling.seed}),
    ]
    return hashlib.sha256(json.dumps(identity, ensure_ascii=False).encode()).hexdigest()


def score_records(
    guesser: Guesser, records: list[dict], sampling: Sampling, cache: ScoreCache, *, stage: str = "curation"
) -> dict[str, dict]:
    """``{question_id: entry}`` with ``consistency`` = hits / trials; cached entries reused, the rest generated
    ``batch_size`` questions at a time, R answers each from one ``sample`` call, each batch cached when done.
    A question the endpoint failed to answer R times is scored on the answers it got and marked ``failed`` (and not
    cached). The sampling RNG is seeded per batch (from the seed and the batch's question ids): two identical runs
    give identical answers, while a resumed run samples its not-yet-cached questions in new batches."""
    from recipes.evaluation.answers import parse_answer

    scores: dict[str, dict] = {}
    pending = []
    for record in records:
        messages = guesser.blind_prompt(record)
        key = score_key(guesser, record, messages, sampling)
        if key in cache.entries:
            scores[record["question_id"]] = cache.entries[key]
        else:
            pending.append((record, messages, key))
    for start in range(0, len(pending), guesser.backend.batch_size):
        batch = pending[start : start + guesser.backend.batch_size]
        seed = stable_seed(
            "blind", str(sampling.seed), guesser.name, *(record["question_id"] for record, _, _ in batch)
        )
        answers = guesser.backend.sample([m for _, m, _ in batch], sampling.trials, sampling.temperature, seed)
        done = []
        for (record, _, key), outputs in zip(batch, answers, strict=True):
            target = answer_target(record)
            answered = [o for o in outputs if o is not None]
            hits = sum(bool(parse_answer(record, o, target).correct) for o in answered)
            entry = {
                "key": key,
                "stage": stage,
                "guesser": guesser.name,
                "question_id": record["question_id"],
                "options": list(record.get("options") or []),
                "trials": sampling.trials,
                "temperature": sampling.temperature,
                "outputs": outputs,
                "hits": hits,
                "consistency": hits / sampling.trials,
                "failed": len(answered) < sampling.trials,
            }
            scores[record["question_id"]] = entry
            if not entry["failed"]:
                done.append(entry)
        cache.add(done)
    return scores


# ---------------------------------------------------------------------------------------------------------- curation


@dataclass
class Curation:
    """Per-question decisions: ``scores[question_id][guesser] = S``; ``passes[question_id]``; ``fold`` when used."""

    scores: dict[str, dict[str, float]] = field(default_factory=dict)
    passes: dict[str, bool] = field(default_factory=dict)
    folds: dict[str, int] | None = None


def check_fold_rule(guesser: Guesser, fold: int, source_ids: set[str]) -> None:
    """Refuse to score fold ``fold`` with a guesser that trained on it (or on any of its videos)."""
    if guesser.held_out_fold is None:
        if guesser.trained_folds:
            raise FoldLeakError(
                f"guesser {guesser.name} was trained on folds (it has a folds.json) but declares no held-out fold: "
                "pass fold=K in its spec"
            )
        return
    if guesser.held_out_fold != fold:
        raise FoldLeakError(
            f"guesser {guesser.name} trained on fold {fold}; it may only score fold {guesser.held_out_fold}"
        )
    if guesser.trained_folds is not None:
        leaked = sorted(s for s in source_ids if s in guesser.trained_folds and guesser.trained_folds[s] != fold)
        if leaked:
            raise FoldLeakError(
                f"guesser {guesser.name} trained on {len(leaked)} video(s) of fold {fold} "
                f"(e.g. {', '.join(leaked[:3])}): its folds.json disagrees with the curation's folds; "
                "the guessers were trained on another split or with other folds"
            )


def check_validation_rule(guesser: Guesser, source_ids: set[str]) -> None:
    if guesser.held_out_fold is not None:
        raise FoldLeakError(
            f"guesser {guesser.name} was trained holding out fold {guesser.held_out_fold}: validation is scored by "
            "guessers trained on the whole training split"
        )
    leaked = sorted(source_ids & set(guesser.trained_folds or {}))
    if leaked:
        raise FoldLeakError(f"guesser {guesser.name} trained on validation video(s) {', '.join(leaked[:3])}")


def video_subjects(records: list[dict]) -> dict[str, str]:
    missing = [r["question_id"] for r in records if not r.get("source_id")]
    if missing:
        raise InputError(f"{len(missing)} question(s) lack source_id (e.g. {missing[0]}): folds are video-level")
    return {r["source_id"]: r.get("subject") or "unknown" for r in records}


def curation_folds(
    records: list[dict], guessers: list[Guesser], num_folds: int, fold_seed: int | None = None
) -> dict[str, int]:
    """The training split's folds: the assignment the fold guessers were trained with (each ``folds.json`` records
    it, whatever seed their recipe used), which must be one assignment for all of them; without such guessers,
    :func:`assign_folds` with ``fold_seed`` (default 42). A ``fold_seed`` given explicitly must agree with the
    guessers' folds, since it then says what the user believes they were trained with."""
    recorded = [g for g in guessers if g.trained_folds]
    if not recorded:
        return assign_folds(video_subjects(records), num_folds=num_folds, seed=42 if fold_seed is None else fold_seed)
    reference = recorded[0]
    for other in recorded[1:]:
        shared = reference.trained_folds.keys() & other.trained_folds.keys()
        differ = sorted(v for v in shared if reference.trained_folds[v] != other.trained_folds[v])
        if differ or reference.trained_folds.keys() != other.trained_folds.keys():
            example = differ[0] if differ else min(reference.trained_folds.keys() ^ other.trained_folds.keys())
            raise FoldLeakError(
                f"guessers {reference.name} and {other.name} were trained on different folds (e.g. video {example}): "
                "train every fold guesser with the same --num_folds, seed and training split"
            )
    folds = dict(reference.trained_folds)
    count = len(set(folds.values()))
    if count != num_folds:
        raise FoldLeakError(
            f"the guessers were trained with {count} folds (their folds.json), not --num-folds {num_folds}"
        )
    missing = sorted({r["source_id"] for r in records if r.get("source_id")} - folds.keys())
    if missing:
        raise FoldLeakError(
            f"{len(missing)} video(s) of the split are in no guesser's folds.json (e.g. {missing[0]}): the guessers "
            "were trained on another training split"
        )
    if fold_seed is not None:
        expected = assign_folds(video_subjects(records), num_folds=num_folds, seed=fold_seed)
        if any(expected[v] != folds[v] for v in expected):
            raise FoldLeakError(
                f"--fold-seed {fold_seed} gives other folds than the guessers were trained with (their folds.json); "
                "leave --fold-seed out to use the guessers' own folds"
            )
    return folds


def decide(curation: Curation, records: list[dict], scores_by_guesser: dict[str, dict], tau: float) -> None:
    for record in records:
        qid = record["question_id"]
        scores = {name: scores[qid]["consistency"] for name, scores in scores_by_guesser.items() if qid in scores}
        curation.scores[qid] = curation.scores.get(qid, {}) | scores
        curation.passes[qid] = all(s < tau for s in curation.scores[qid].values())


def curate(
    records: list[dict],
    guessers: list[Guesser],
    cache: ScoreCache,
    *,
    sampling: Sampling = Sampling(),
    tau: float = DEFAULT_TAU,
    num_folds: int | None = None,
    fold_seed: int | None = None,
) -> Curation:
    """Score every eligible question and decide. ``num_folds`` set: training-split curation by cross-validation;
    ``None``: every guesser scores every question (validation), after checking none trained on these videos."""
    if not guessers:
        raise InputError("blind curation needs at least one guesser")
    scored = [r for r in records if is_scored(r)]
    curation = Curation(passes={r["question_id"]: True for r in records if not is_scored(r)})
    if num_folds is None:
        source_ids = {r.get("source_id") for r in scored} - {None}
        for guesser in guessers:
            check_validation_rule(guesser, source_ids)
        decide(curation, scored, {g.name: score_records(g, scored, sampling, cache) for g in guessers}, tau)
        return curation
    curation.folds = curation_folds(records, guessers, num_folds, fold_seed)
    for fold in range(num_folds):
        in_fold = [r for r in scored if curation.folds[r["source_id"]] == fold]
        eligible = [g for g in guessers if g.held_out_fold in (None, fold)]
        if not any(g.held_out_fold == fold for g in eligible):
            logger.warning("fold %d: no guesser held it out; only off-the-shelf guessers score it", fold)
        if not eligible:
            raise InputError(f"fold {fold}: no guesser may score it (none held it out, none is off-the-shelf)")
        source_ids = {r["source_id"] for r in in_fold}
        for guesser in eligible:
            check_fold_rule(guesser, fold, source_ids)
        decide(curation, in_fold, {g.name: score_records(g, in_fold, sampling, cache) for g in eligible}, tau)
    return curation


def apply_curation(records: list[dict], curation: Curation) -> list[dict]:
    """The records with ``passes_blind_curation`` set and ``blind_consistency`` (the highest S, None if unscored)."""
    flagged = []
    for record in records:
        scores = curation.scores.get(record["question_id"]) or {}
        flagged.append(
            record
            | {
                "passes_blind_curation": curation.passes[record["question_id"]],
                "blind_consistency": max(scores.values()) if scores else None,
            }
        )
    return flagged


# --------------------------------------------------------------------------------------------------------- hardening


def configuration_record(record: dict, distractors: list[str], seed: int, attempt: int) -> dict:
    """``record`` with options = answer + ``distractors`` in a seeded order (the answer text is unchanged)."""
    options = seeded_shuffle(
        [record["answer"], *distractors], "hardening", str(seed), record["question_id"], str(attempt)
    )
    return record | {"options": options, "answer_index": options.index(record["answer"])}


def candidate_configurations(record: dict, attempts: int, seed: int) -> list[dict]:
    """Up to ``attempts`` diverse configurations from the record's pool; without a pool, the record itself."""
    pool = clean_pool(record.get("distractor_pool") or [], record["answer"]) if record.get("options") else []
    size = len(record.get("options") or []) - 1
    if size < 1 or len(pool) < size:
        return [record]
    draws = draw_configurations(pool, size, attempts, "hardening", str(seed), record["question_id"])
    return [configuration_record(record, [c["text"] for c in draw], seed, i) for i, draw in enumerate(draws)]


def harden(
    records: list[dict],
    guesser: Guesser,
    cache: ScoreCache,
    *,
    sampling: Sampling = Sampling(),
    tau: float = DEFAULT_TAU,
    attempts: int = HARDENING_ATTEMPTS,
    seed: int = HARDENING_SEED,
) -> tuple[list[dict], list[dict]]:
    """Algorithm 1 over the retained ``records``: returns (hardened records, discarded records with the attempts
    made). Attempt k of every unresolved question is scored in one pass, so batches stay full. Questions blind
    curation does not score (SM) pass through unchanged, with ``hardening_attempts`` 0."""
    candidates = {r["question_id"]: candidate_configurations(r, attempts, seed) for r in records if is_scored(r)}
    kept: dict[str, dict] = {r["question_id"]: r | {"hardening_attempts": 0} for r in records if not is_scored(r)}
    for attempt in range(max((len(c) for c in candidates.values()), default=0)):
        trying = [c[attempt] for qid, c in candidates.items() if qid not in kept and attempt < len(c)]
        scores = score_records(guesser, trying, sampling, cache, stage="hardening")
        for record in trying:
            if scores[record["question_id"]]["consistency"] < tau:
                kept[record["question_id"]] = record | {"hardening_attempts": attempt + 1}
    hardened = [kept[r["question_id"]] for r in records if r["question_id"] in kept]
    discarded = [
        {"question_id": r["question_id"], "category": r.get("category"), "attempts": len(candidates[r["question_id"]])}
        for r in records
        if r["question_id"] not in kept
    ]
    return hardened, discarded


def blind_accuracy(guesser: Guesser, records: list[dict], cache: ScoreCache, sampling: Sampling) -> float | None:
    """Mean consistency of ``guesser`` (its expected blind accuracy at the sampling temperature)."""
    scored = [r for r in records if is_scored(r)]
    if not scored:
        return None
    scores = score_records(guesser, scored, sampling, cache, stage="accuracy")
    return sum(scores[r["question_id"]]["consistency"] for r in scored) / len(scored)


# ----------------------------------------------------------------------------------------------------------- reports


def survival_table(stages: dict[str, list[dict]], reference: list[dict]) -> dict[str, dict[str, dict]]:
    """Counts per category after each stage with the rate against ``reference`` (the Sureon paper's Table 11)."""
    from builders.sureon.categories import BY_CODE

    totals = Counter(r.get("category") or "unknown" for r in reference)
    order = [c for c in BY_CODE if c in totals] + sorted(set(totals) - set(BY_CODE))
    table = {}
    for stage, records in stages.items():
        counts = Counter(r.get("category") or "unknown" for r in records)
        rows = {c: {"count": counts[c], "rate": counts[c] / totals[c]} for c in order}
        rows["Total"] = {"count": len(records), "rate": len(records) / len(reference) if reference else 0.0}
        table[stage] = rows
    return table


def fold_tables(records: list[dict], folds: dict[str, int]) -> dict:
    """Videos and questions per fold (Table 9) and questions per category and fold (Table 10)."""
    from builders.sureon.folds import fold_table

    per_category = fold_table(records, folds)
    videos = Counter(folds[s] for s in {r["source_id"] for r in records})
    return {
        str(fold): {"videos": videos[fold], "questions": sum(counts.values()), "categories": dict(counts)}
        for fold, counts in per_category.items()
    }


def report_markdown(report: dict) -> str:
    lines = [f"# Blind-test curation: {report['dataset']}", ""]
    settings = report["settings"]
    guessers = ", ".join(f"{g['name']} ({g['kind']}, held-out fold {g['held_out_fold']})" for g in report["guessers"])
    lines.append(
        f"R = {settings['trials']} trials at T = {settings['temperature']}, tau = {settings['tau']:.3f}; "
        f"guessers: {guessers}."
    )
    if report.get("folds"):
        lines += [
            "",
            "## Folds (Tables 9-10)",
            "",
            "| fold | videos | questions | categories |",
            "| --- | --- | --- | --- |",
        ]
        for fold, row in report["folds"].items():
            categories = ", ".join(f"{c} {n}" for c, n in sorted(row["categories"].items()))
            lines.append(f"| {fold} | {row['videos']} | {row['questions']} | {categories} |")
    stages = list(report["survival"])
    lines += ["", "## Survival per category (Table 11)", ""]
    lines.append("| category | " + " | ".join(f"{s} (n) | {s} (%)" for s in stages) + " |")
    lines.append("| --- |" + " --- | --- |" * len(stages))
    for category in report["survival"][stages[0]]:
        cells = [
            f"{report['survival'][s][category]['count']} | {100 * report['survival'][s][category]['rate']:.1f}"
            for s in stages
        ]
        lines.append(f"| {category} | " + " | ".join(cells) + " |")
    if report.get("blind_accuracy"):
        lines += ["", "## Blind accuracy before / after hardening", "", "| guesser | before (%) | after (%) |"]
        lines.append("| --- | --- | --- |")
        for name, row in report["blind_accuracy"].items():
            cells = ["-" if row[k] is None else f"{100 * row[k]:.1f}" for k in ("before", "after")]
            lines.append(f"| {name} | {cells[0]} | {cells[1]} |")
    if report.get("hardening"):
        h = report["hardening"]
        lines += [
            "",
            f"Hardening: {h['kept']} kept, {h['discarded']} discarded after at most {h['attempts']} attempts;",
        ]
        lines.append(f"attempts of the kept: {json.dumps(h['attempt_histogram'])}.")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------------------------- run


def load_records(dataset: str, config: str | None, split: str) -> tuple[list[dict], object]:
    """The split's rows without frames (guessers are blind: a build's frames, embedded or stored as files, are never
    read), and its features."""
    from recipes.evaluation.inputs import load_build

    ds = load_build(dataset, config, split, expected=SUREON_BUILD)
    ds = ds.remove_columns([c for c in ("frames", "frame_timestamps") if c in ds.column_names])
    missing = [c for c in ("question_id", "question", "answer", "category") if c not in ds.column_names]
    if missing:
        raise InputError(
            f"{dataset} ({config}/{split}) lacks column(s) {missing}: build it with `sureon build sureon`"
        )
    return ds.to_list(), ds.features


def write_records(records: list[dict], features, folder: Path, split: str, extra: dict):
    """One config of the output through the project's writer; returns its ``dataset_info``."""
    from datasets import Features

    from builders.hub import write_split

    features = Features(dict(features) | extra)
    return write_split(records, features, folder, split).info(features)


def write_card(staging: Path, split: str, infos: dict, report_markdown_text: str) -> None:
    """A README whose YAML header declares the configs (so ``load_dataset(OUT, config)`` works) and their
    ``dataset_info``, followed by the curation report."""
    from datasets.info import DatasetInfosDict
    from huggingface_hub import DatasetCard, DatasetCardData

    from builders.hub import configs_metadata

    card_data = DatasetCardData(configs=configs_metadata({name: [split] for name in infos}, default=next(iter(infos))))
    DatasetInfosDict(infos).to_dataset_card_data(card_data)
    card = DatasetCard(f"---\n{card_data.to_yaml()}\n---\n\n{report_markdown_text}")
    (staging / "README.md").write_text(str(card))


def run(args) -> int:
    from datasets import Value

    from builders.outputs import staged_output

    for spec in args.guesser:
        check_guesser_spec(spec)
    for spec in [args.harden_guesser] if args.harden_guesser else []:
        check_guesser_spec(spec, "--harden-guesser")
    for spec in args.held_out_guesser or []:
        check_guesser_spec(spec, "--held-out-guesser")
    records, features = load_records(args.dataset, args.config, args.split)
    cache = ScoreCache(args.cache or Path(f"{args.out}.cache") / "scores.jsonl")
    sampling = Sampling(args.trials, args.temperature, args.seed)

    def load(spec: str) -> Guesser:
        return load_guesser(spec, cache_dir=cache.path.parent, max_new_tokens=args.max_new_tokens)

    guessers = [load(spec) for spec in args.guesser]
    curation = curate(
        records, guessers, cache, sampling=sampling, tau=args.tau, num_folds=args.num_folds, fold_seed=args.fold_seed
    )
    flagged = apply_curation(records, curation)
    retained = [r for r in flagged if r["passes_blind_curation"]]
    config = args.config or "default"
    report: dict = {
        "dataset": f"{args.dataset} ({config}/{args.split})",
        "settings": {"trials": args.trials, "temperature": args.temperature, "tau": args.tau, "seed": args.seed}
        | {"num_folds": args.num_folds, "fold_seed": args.fold_seed},
        "guessers": [
            {"name": g.name, "kind": g.kind, "held_out_fold": g.held_out_fold, "system_prompt": g.system_prompt}
            for g in guessers
        ],
        "counts": {"input": len(records), "retained": len(retained), "removed": len(records) - len(retained)},
    }
    if curation.folds is not None:
        report["folds"] = fold_tables(records, curation.folds)
    stages = {"after curation": retained}
    hardened, discarded = None, []
    if args.harden_guesser:
        hardener = load(args.harden_guesser)
        check_validation_rule(hardener, {r.get("source_id") for r in retained} - {None})
        hardened, discarded = harden(
            retained,
            hardener,
            cache,
            sampling=sampling,
            tau=args.tau,
            attempts=args.attempts,
            seed=args.hardening_seed,
        )
        stages["after hardening"] = hardened
        attempts = Counter(r["hardening_attempts"] for r in hardened)
        report["hardening"] = {"kept": len(hardened), "discarded": len(discarded), "attempts": args.attempts}
        report["hardening"]["attempt_histogram"] = {str(k): attempts[k] for k in sorted(attempts)}
        report["blind_accuracy"] = {
            g.name: {
                "before": blind_accuracy(g, retained, cache, sampling),
                "after": blind_accuracy(g, hardened, cache, sampling),
            }
            for g in [hardener, *map(load, args.held_out_guesser or [])]
        }
    report["survival"] = survival_table(stages, records)
    with staged_output(args.out, args.overwrite) as staging:
        extra = {"blind_consistency": Value("float64")}
        infos = {config: write_records(flagged, features, staging / config, args.split, extra)}
        if hardened is not None:
            extra["hardening_attempts"] = Value("int32")
            infos[f"{config}_hardened"] = write_records(
                hardened, features, staging / f"{config}_hardened", args.split, extra
            )
            (staging / "hardening_discarded.jsonl").write_text("".join(json.dumps(d) + "\n" for d in discarded))
        write_card(staging, args.split, infos, report_markdown(report))
        decisions = [
            {
                "question_id": qid,
                "fold": (curation.folds or {}).get(r.get("source_id")),
                "passes": curation.passes[qid],
            }
            | {"scores": curation.scores.get(qid, {})}
            for r in records
            for qid in [r["question_id"]]
        ]
        (staging / "decisions.jsonl").write_text("".join(json.dumps(d) + "\n" for d in decisions))
        (staging / "curation_report.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
        (staging / "curation_report.md").write_text(report_markdown(report))
    print(report_markdown(report))
    return 0


def add_arguments(parser) -> None:
    parser.add_argument("--dataset", required=True, help="a folder built by `sureon build sureon`, or its Hub id")
    parser.add_argument("--config", default="train_all", help="train_all (folds) or validation")
    parser.add_argument("--split", default="train")
    parser.add_argument(
        "--guesser",
        action="append",
        required=True,
        metavar="SPEC",
        help="model=PATH_OR_ID[,backend=transformers|vllm|openai][,fold=K][,type=...][,name=...]"
        "[,system_prompt_file=PATH]; repeatable",
    )
    parser.add_argument(
        "--num-folds", type=int_range(2), help="cross-validated training curation (4 in the Sureon paper)"
    )
    parser.add_argument(
        "--fold-seed",
        type=seed,
        help="folds for guessers without a folds.json (default 42); by default the fold guessers' own folds.json "
        "(what their --fold runs trained with, whatever their seed) decides",
    )
    parser.add_argument("--trials", type=positive_int, default=DEFAULT_TRIALS, help="R answers per question")
    parser.add_argument("--temperature", type=positive_float, default=DEFAULT_TEMPERATURE, help="sampling")
    parser.add_argument(
        "--tau", type=TAU, default=DEFAULT_TAU, help="removed when any guesser's S >= tau (0 < tau <= 1)"
    )
    parser.add_argument("--seed", type=seed, default=0, help="sampling seed")
    parser.add_argument("--max-new-tokens", type=positive_int, default=32)
    parser.add_argument("--harden-guesser", metavar="SPEC", help="run Algorithm 1 with this guesser (validation)")
    parser.add_argument("--held-out-guesser", action="append", metavar="SPEC", help="also report its blind accuracy")
    parser.add_argument("--attempts", type=positive_int, default=HARDENING_ATTEMPTS, help="M configurations at most")
    parser.add_argument("--hardening-seed", type=int, default=HARDENING_SEED)
    parser.add_argument("--cache", type=Path, help="score cache (default: OUT.cache/scores.jsonl)")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--overwrite", action="store_true")
