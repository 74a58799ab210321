"""Blind guessers and how they are scored: the part of stage-3 curation (:mod:`recipes.curation.curate`) and of
the audit (:mod:`recipes.curation.audit`) that asks models for answers. Apart from the curation's decisions because
the audit scores any MCQ dataset the same way, with no folds and no hardening.

- A **guesser** is any model behind :mod:`recipes.evaluation.inference` (transformers, vLLM, or an OpenAI-compatible
  endpoint) queried with exactly the project's blind prompt (``format_messages(record, blind=True)``: question and
  options, no frames), with the system prompt the guesser was trained with, if any. Its answers are read by
  :func:`recipes.model_io.answers.parse_answer`, as in evaluation.
- **Consistency** S(g, x) is the fraction of R sampled answers (temperature T > 0, one batched generation per batch of
  questions) that recover the answer. Sequence summaries (SM) have no options: they are not scored.

Every scoring pass is cached in an append-only JSONL, keyed by (guesser, question, options in order, R, T, seed) and
stamped with a fingerprint of the prompt and the guesser's settings: an interrupted run resumes where it stopped.
"""

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from builders.arguments import float_range, key_values
from builders.errors import InputError
from builders.jsonl_log import AppendOnlyJsonl
from builders.options import stable_seed
from builders.prompt import answer_target, format_messages


DEFAULT_TRIALS = 5
DEFAULT_TEMPERATURE = 1.0
DEFAULT_TAU = 3 / 5
PASSTHROUGH_CATEGORIES = ("SM",)
TAU = float_range(0.0, 1.0, low_open=True)  # --tau: a consistency, removed at S >= tau (tau 0 would remove all)


class FoldLeakError(InputError):
    """A guesser would score questions from videos it was trained on."""


def is_scored(record: dict) -> bool:
    """Blind curation applies to questions with options or an event order; SM (and other open answers) pass."""
    if record.get("category") in PASSTHROUGH_CATEGORIES:
        return False
    return bool(record.get("options")) or bool(record.get("answer_order"))


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
    (:func:`recipes.model_io.model_folder.check_model_path`), an endpoint that answers, its system prompt file."""
    from builders.llm import check_endpoint
    from recipes.evaluation.inference import BACKENDS
    from recipes.model_io.model_folder import check_model_path

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


def guesser_name(fields: dict[str, str]) -> str:
    """The name a guesser is reported and cached under: ``name=``, else its model folder's name (or Hub id)."""
    return fields.get("name") or Path(fields["model"]).name or fields["model"]


def check_guesser_names(specs: list[tuple[str, str]]) -> None:
    """Refuse two guessers of one name among ``specs`` (``(option, spec)`` pairs of guessers reported side by side:
    their scores and summaries are keyed by name, so one would silently replace the other), before any model loads."""
    seen: dict[str, str] = {}
    for option, spec in specs:
        name = guesser_name(parse_guesser_spec(spec))
        if name in seen:
            raise InputError(
                f"{option} {spec}: a second guesser named {name!r} (the first: {seen[name]}); each is reported under "
                "its name, so one would replace the other: give each its own name=NAME"
            )
        seen[name] = f"{option} {spec}"


def read_guesser_folds(model: str) -> tuple[int | None, dict[str, int] | None]:
    """The held-out fold and fold assignment the guesser recipe wrote next to the weights (when it did)."""
    from recipes.model_io.run_record import read_run_record

    folder = Path(model)
    held_out, folds = None, None
    if folder.is_dir():
        held_out = (read_run_record(model) or {}).get("fold")
    if (folder / "folds.json").is_file():
        folds = {str(k): int(v) for k, v in json.loads((folder / "folds.json").read_text()).items()}
    return held_out, folds


def load_guesser(spec: str, *, cache_dir: Path | None = None, max_new_tokens: int = 32) -> Guesser:
    """A :class:`Guesser` from a spec string. Keys: model, backend (transformers|vllm|openai), name, type, fold,
    base_url, api_key_env, batch_size, dtype, device, max_new_tokens, system_prompt_file (a file holding the system
    prompt; an empty file: none). Without ``system_prompt_file`` a guesser trained by ``recipes/sft.py`` gets the
    system prompt it was trained with (recorded in its ``training_complete.json``), any other none."""
    from recipes.evaluation.inference import make_backend
    from recipes.model_io.modeling import resolve_system_prompt

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
        name=guesser_name(fields),
        backend=make_backend(backend_name, model, **options),
        kind=fields.get("type", "fine-tuned" if folds or held_out is not None else "off-the-shelf"),
        held_out_fold=held_out,
        trained_folds=folds,
        system_prompt=system_prompt,
    )


class ScoreCache(AppendOnlyJsonl):
    """Scoring passes keyed by their ``key`` (guesser, item, option order, R, temperature, seed, fingerprint)."""

    def __init__(self, path: str | Path, label: str = "score cache"):
        super().__init__(path, key=lambda entry: entry["key"], kind="blind-scores", label=label)


def cache_label(given: Path | None) -> str:
    """How messages name the score cache of ``sureon curate`` / ``audit``: ``--cache`` where the user gave it."""
    return "--cache" if given is not None else "score cache"


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


DEFAULT_SAMPLING = Sampling()


def score_key(guesser: Guesser, record: dict, messages: list[dict], sampling: Sampling) -> str:
    from recipes.evaluation.inference.generation import prompt_fingerprint

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
    cached). The sampling RNG is seeded per batch (from the random seed and the batch's question ids): two identical
    runs give identical answers, while a resumed run samples its not-yet-cached questions in new batches."""
    from recipes.model_io.answers import parse_answer

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


def blind_accuracy(guesser: Guesser, records: list[dict], cache: ScoreCache, sampling: Sampling) -> float | None:
    """Mean consistency of ``guesser`` (its expected blind accuracy at the sampling temperature)."""
    scored = [r for r in records if is_scored(r)]
    if not scored:
        return None
    scores = score_records(guesser, scored, sampling, cache, stage="accuracy")
    return sum(scores[r["question_id"]]["consistency"] for r in scored) / len(scored)
