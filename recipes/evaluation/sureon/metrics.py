"""Sureon benchmark metrics from prediction records (the Sureon paper, Section 4, Table 3 and Appendix D.1).

- μ: pooled accuracy over the accuracy-scored items (``scored_by == "accuracy"``: the eight multiple-choice
  categories and temporal ordering; 299 items on the real benchmark). Sequence summaries are judged by an LLM and
  reported apart, from the judge's verdicts.
- Per category, and the perception (AD, EE, EA, PAD, IAI) and reasoning (LAR, SPI, F, TO) aggregates.
- MG = S_visual - S_blind, per category and overall, on the same items in both modes.
- Analytic random baselines: 1/num_options per multiple-choice item, 1/k! per ordering item of k events (k = its
  ``num_options`` when given, else 3 as in the Sureon paper: 1/6), averaged over the items of each subset.
- Each accuracy with its 95% percentile-bootstrap interval (10,000 resamples over items) and Wilson interval.

Categories outside the ten (kept under their own slug by the builder) get a column of their own and count in μ when
accuracy-scored, but in neither the perception nor the reasoning aggregate.

Prediction records are the runner's ``predictions.jsonl`` lines::

    {"question_id": str, "model": str, "mode": "visual"|"blind", "category": "AD"|..., "answer_format":
     "mcq"|"ordering"|"open", "num_options": int|null, "raw_output": str, "parsed": str|null, "answer": str,
     "correct": bool|null, "scored_by": "accuracy"|"judge"}
"""

import json
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from builders.errors import InputError
from builders.sureon.categories import BY_CODE, CATEGORIES, MCQ, OPEN, ORDERING, resolve_category
from recipes.evaluation.stats import N_RESAMPLES, Estimate, estimate


MODES = ("visual", "blind")
OVERALL, PERCEPTION, REASONING = "overall", "perception", "reasoning"
GROUPS = (PERCEPTION, REASONING)
DEFAULT_ORDERING_EVENTS = 3  # the Sureon paper's TO questions order three events (random baseline 1/3! = 1/6)
_FIELDS = ("question_id", "model", "mode", "category", "answer_format", "num_options", "correct", "scored_by")


class PredictionError(InputError):
    """A prediction record that cannot be used; the message names the file and line."""


@dataclass(frozen=True)
class Prediction:
    question_id: str
    model: str
    mode: str
    category: str
    answer_format: str
    num_options: int | None
    parsed: bool
    correct: bool | None
    scored_by: str

    @property
    def group(self) -> str | None:
        known = BY_CODE.get(self.category)
        return known.group if known else None


def parse_prediction(row: dict, where: str) -> Prediction:
    """Validate one record; ``where`` ("file:line") starts every error message."""
    if not isinstance(row, dict):
        raise PredictionError(f"{where}: a prediction must be a JSON object, got {type(row).__name__}")
    missing = [name for name in _FIELDS if name not in row]
    if missing:
        raise PredictionError(f"{where}: missing field(s) {', '.join(missing)} (write them with sureon eval sureon)")
    mode, scored_by, answer_format = row["mode"], row["scored_by"], row["answer_format"]
    if mode not in MODES:
        raise PredictionError(f"{where}: mode {mode!r} is neither 'visual' nor 'blind'")
    if answer_format not in (MCQ, ORDERING, OPEN):
        raise PredictionError(f"{where}: answer_format {answer_format!r} is not one of mcq, ordering, open")
    if scored_by == "accuracy":
        if answer_format == OPEN:
            raise PredictionError(
                f"{where}: an open-ended answer cannot be scored by accuracy (use scored_by 'judge')"
            )
        if not isinstance(row["correct"], bool):
            raise PredictionError(f"{where}: accuracy-scored record needs correct true/false, got {row['correct']!r}")
    elif scored_by == "judge":
        if row["correct"] is not None and not isinstance(row["correct"], bool):
            raise PredictionError(f"{where}: judged record needs correct true/false/null, got {row['correct']!r}")
    else:
        raise PredictionError(f"{where}: scored_by {scored_by!r} is neither 'accuracy' nor 'judge'")
    num_options = row["num_options"]
    if num_options is not None and (isinstance(num_options, bool) or not isinstance(num_options, int)):
        raise PredictionError(f"{where}: num_options must be an integer or null, got {num_options!r}")
    if answer_format == MCQ and (num_options is None or num_options < 2):
        raise PredictionError(f"{where}: a multiple-choice record needs num_options >= 2, got {num_options!r}")
    if answer_format == ORDERING and num_options is not None and num_options < 2:
        raise PredictionError(
            f"{where}: an ordering record's num_options counts its events (>= 2), got {num_options!r}"
        )
    code, _ = resolve_category(str(row["category"]))
    return Prediction(
        question_id=str(row["question_id"]),
        model=str(row["model"]),
        mode=mode,
        category=code,
        answer_format=answer_format,
        num_options=num_options,
        parsed="parsed" not in row or row["parsed"] is not None,  # absent: unknown, not counted as unparseable
        correct=row["correct"],
        scored_by=scored_by,
    )


def read_jsonl(path: str | Path) -> Iterable[tuple[str, dict]]:
    """``("file:line", object)`` for every non-blank line; a malformed line (not JSON, not a JSON object, not UTF-8)
    is an error naming the file and the line. A run folder or a bare word (a name typed without ``NAME=``) is named
    as such."""
    path = Path(path)
    if path.is_dir():
        inside = " (it holds predictions.jsonl: give that file)" if (path / "predictions.jsonl").is_file() else ""
        raise PredictionError(f"{path} is a folder, not a prediction file{inside}")
    if not path.is_file():
        hint = "; to name a run, write NAME=PATH" if not path.suffix and len(path.parts) == 1 else ""
        raise PredictionError(f"{path}: no such prediction file{hint}")
    number = 0
    try:
        with path.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as err:
                    raise PredictionError(
                        f"{path}:{number}: not valid JSON ({err.msg}); one JSON object per line"
                    ) from None
                if not isinstance(row, dict):
                    raise PredictionError(f"{path}:{number}: a JSON {type(row).__name__}, not an object; one per line")
                yield f"{path}:{number}", row
    except UnicodeDecodeError:
        raise PredictionError(f"{path}:{number + 1}: not UTF-8 text: is it a JSONL prediction file?") from None


def prediction_rows(path: str | Path, model: str | None = None) -> Iterable[tuple[str, dict]]:
    """``("where", record)`` of a ``predictions.jsonl``, or of a VLMEvalKit prediction table (``.xlsx`` / ``.tsv``)
    of a dataset ``sureon export vlmevalkit`` wrote, scored into the same records (``model``: its name, else the one
    VLMEvalKit gave the file)."""
    from recipes.evaluation.prediction_tables import is_prediction_table, records_of

    return records_of(path, model, "sureon") if is_prediction_table(path) else read_jsonl(path)


def read_predictions(path: str | Path, model: str | None = None) -> dict[str, list[Prediction]]:
    """Records of one file (``predictions.jsonl`` or a VLMEvalKit table) grouped by model; ``model`` renames them all
    (the file must then hold one model)."""
    by_model: dict[str, list[Prediction]] = defaultdict(list)
    seen: dict[tuple[str, str, str], str] = {}
    for where, row in prediction_rows(path, model):
        prediction = parse_prediction(row, where)
        key = (prediction.model, prediction.question_id, prediction.mode)
        if key in seen:
            raise PredictionError(
                f"{where}: {prediction.model} answered {prediction.question_id} in {prediction.mode} mode twice "
                f"(first at {seen[key]}); keep one answer per question and mode"
            )
        seen[key] = where
        by_model[prediction.model].append(prediction)
    if not by_model:
        raise InputError(f"{path}: no predictions in the file")
    if model is None:
        return dict(by_model)
    if len(by_model) > 1:
        raise InputError(f"{path} holds several models ({', '.join(sorted(by_model))}); name=PATH needs one")
    return {model: [_renamed(p, model) for p in next(iter(by_model.values()))]}


def _renamed(prediction: Prediction, model: str) -> Prediction:
    fields = {name: getattr(prediction, name) for name in Prediction.__dataclass_fields__}
    return Prediction(**(fields | {"model": model}))


def subset_order(categories: Iterable[str]) -> list[str]:
    """Category columns in the paper's order, then any category outside the ten, alphabetically."""
    present = set(categories)
    known = [c.code for c in CATEGORIES if c.code in present]
    return known + sorted(present - set(known))


def _subsets_of(prediction: Prediction) -> list[str]:
    return [OVERALL, prediction.category] + ([prediction.group] if prediction.group else [])


@dataclass
class ModeResult:
    """One model in one mode: estimates per subset (accuracy-scored), per-item outcomes, judged categories."""

    estimates: dict[str, Estimate]
    outcomes: dict[str, bool]
    judged: dict[str, Estimate]
    unjudged: dict[str, int]
    unparsed: int
    records: int


@dataclass
class ModelResult:
    name: str
    modes: dict[str, ModeResult]
    gain: dict[str, float] = field(default_factory=dict)


def score_mode(predictions: list[Prediction], n_resamples: int = N_RESAMPLES) -> ModeResult:
    """Estimates for one model in one mode; bootstrap seeds come from the subset and its item ids."""
    scored: dict[str, dict[str, bool]] = defaultdict(dict)
    judged: dict[str, dict[str, bool]] = defaultdict(dict)
    unjudged: dict[str, int] = defaultdict(int)
    for p in predictions:
        if p.scored_by == "accuracy":
            for subset in _subsets_of(p):
                scored[subset][p.question_id] = p.correct
        elif p.correct is None:
            unjudged[p.category] += 1
        else:
            judged[p.category][p.question_id] = p.correct

    def estimate_of(subset: str, outcomes: dict[str, bool]) -> Estimate:
        ids = sorted(outcomes)
        return estimate([outcomes[i] for i in ids], "sureon", subset, *ids, n_resamples=n_resamples)

    return ModeResult(
        estimates={subset: estimate_of(subset, outcomes) for subset, outcomes in scored.items()},
        outcomes=dict(scored.get(OVERALL, {})),
        judged={category: estimate_of(category, outcomes) for category, outcomes in judged.items()},
        unjudged=dict(unjudged),
        unparsed=sum(not p.parsed for p in predictions),
        records=len(predictions),
    )


def multimodal_gain(visual: ModeResult, blind: ModeResult, model: str) -> dict[str, float]:
    """MG = S_v - S_wv in points, per subset; the two passes must cover the same accuracy-scored items."""
    only_visual = visual.outcomes.keys() - blind.outcomes.keys()
    only_blind = blind.outcomes.keys() - visual.outcomes.keys()
    if only_visual or only_blind:
        example = min(only_visual or only_blind)
        raise InputError(
            f"{model}: the visual and blind passes cover different items ({len(only_visual)} only visual, "
            f"{len(only_blind)} only blind, e.g. {example}); run both modes on the same benchmark"
        )
    gain = {
        subset: visual.estimates[subset].accuracy - blind.estimates[subset].accuracy for subset in visual.estimates
    }
    for category in visual.judged.keys() & blind.judged.keys():
        gain[category] = visual.judged[category].accuracy - blind.judged[category].accuracy
    return gain


def score_model(name: str, predictions: list[Prediction], n_resamples: int = N_RESAMPLES) -> ModelResult:
    by_mode: dict[str, list[Prediction]] = defaultdict(list)
    for p in predictions:
        by_mode[p.mode].append(p)
    modes = {mode: score_mode(by_mode[mode], n_resamples) for mode in MODES if by_mode[mode]}
    result = ModelResult(name, modes)
    if len(modes) == 2:
        result.gain = multimodal_gain(modes["visual"], modes["blind"], name)
    return result


def _chance(prediction: Prediction) -> float:
    if prediction.answer_format == ORDERING:
        return 1.0 / math.factorial(prediction.num_options or DEFAULT_ORDERING_EVENTS)
    return 1.0 / prediction.num_options


def item_table(predictions: Iterable[Prediction]) -> dict[str, Prediction]:
    """One record per question id across all models and modes; files that disagree on an item are an error."""
    items: dict[str, Prediction] = {}
    for p in predictions:
        first = items.setdefault(p.question_id, p)
        mine = (p.category, p.answer_format, p.num_options, p.scored_by)
        theirs = (first.category, first.answer_format, first.num_options, first.scored_by)
        if mine != theirs:
            raise InputError(
                f"question {p.question_id} is {theirs} for {first.model} ({first.mode}) but {mine} for {p.model} "
                f"({p.mode}) (category, format, options, scoring): were they evaluated on the same benchmark build?"
            )
    return items


def random_baseline(items: dict[str, Prediction]) -> dict[str, float]:
    """Expected accuracy (percent) of uniform guessing, per subset of accuracy-scored items."""
    chances: dict[str, list[float]] = defaultdict(list)
    for p in items.values():
        if p.scored_by == "accuracy":
            for subset in _subsets_of(p):
                chances[subset].append(_chance(p))
    return {subset: 100.0 * sum(values) / len(values) for subset, values in chances.items()}
