"""Evaluate a causal LM (or a VLM used text-only) on SurgiQ with the paper's log-likelihood protocol (section 4.2).

    sureon eval surgiq --model Qwen/Qwen2.5-7B-Instruct --dataset DIR_OR_ID --config default --out runs/qwen7b
    python -m recipes.evaluation.surgiq.evaluate --model ... --dataset ... --out ...          (the same flags)

Protocol: each question is rendered with the one fixed SurgiQ prompt (:func:`builders.prompt.surgiq_prompt`), which
ends with the answer cue. One forward pass per question (batched, left padding, only the last position's logits)
gives the next-token log-probabilities; each option label is scored in its plain (``A``) and space-prefixed
(`` A``) variant and the label's score is the maximum over its variants. A variant the tokenizer splits into several
tokens is scored as its whole continuation (the sum of its tokens' log-probabilities, one more pass per such
variant), so no label has fewer variants than another; with single-token labels (Qwen's, Llama's) the pass per
question stays one. The prediction is the
argmax over the four labels (ties go to the earlier letter) and the confidence a softmax over the four label scores.
Nothing is sampled, so two runs give the same predictions.

With ``--chat-template`` the prompt is one user turn of the model's chat template, after the system prompt the
model was trained with (``recipes/sft.py`` records it with the weights; ``--system-prompt`` replaces it,
``--no-system-prompt`` drops it); the plain protocol has no system turn.

Few-shot (``--shots k``, k = 1..3): the first k questions of a fixed pool of three, chosen by a seed from their ids,
are shown as solved demonstrations; the pool is then excluded from scoring (zero-shot scores every question).

Scores are appended to ``OUT/scores_cache.jsonl`` after every batch, keyed by the model's fingerprint and the exact
prompt, so a killed run resumes where it stopped and a rerun pays nothing. Batches are formed over all questions in
a fixed order, so a resumed run is byte-identical to an uninterrupted one. Outputs (written atomically):
``predictions.jsonl`` (one line per question id), ``report.json``, ``report.md`` and ``reliability.png``.
"""

import argparse
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from builders.arguments import int_range, positive_int
from builders.errors import InputError
from builders.jsonl_log import AppendOnlyJsonl
from builders.options import LETTERS, stable_seed
from builders.outputs import atomic_file, write_atomic
from builders.prompt import surgiq_prompt
from recipes.evaluation.surgiq.calibration import DEFAULT_BINS


LABEL_VARIANTS = ("{}", " {}")
FEWSHOT_POOL_SIZE = 3
MAX_SHOTS = FEWSHOT_POOL_SIZE
NUM_OPTIONS = 4
DEFAULT_BATCH_SIZE = 8
REQUIRED_COLUMNS = ("id", "question", "options", "answer_index", "domain", "question_type")
CACHE_FILE = "scores_cache.jsonl"
SURGIQ_BUILD = "SurgiQ is read from a build of `sureon build surgiq` (configs default and shuffled)"


def label_token_ids(tokenizer, num_options: int = NUM_OPTIONS) -> dict[str, dict[str, tuple[int, ...]]]:
    """``{letter: {variant text: token ids}}``: every variant of every label, however many tokens it takes (two
    variants with the same ids are one). A tokenizer that writes a label as no token at all is refused."""
    labels: dict[str, dict[str, tuple[int, ...]]] = {}
    for letter in LETTERS[:num_options]:
        variants: dict[str, tuple[int, ...]] = {}
        for template in LABEL_VARIANTS:
            ids = tuple(tokenizer.encode(template.format(letter), add_special_tokens=False))
            if not ids:
                raise InputError(f"the tokenizer encodes option label {template.format(letter)!r} as no token")
            if ids not in variants.values():
                variants[template.format(letter)] = ids
        labels[letter] = variants
    return labels


class LabelScorer:
    """Scores a batch of tokenised prompts: the log-probability of each label variant as the prompt's continuation.

    A variant of one token is read off the prompt's next-token distribution; one of several tokens is the sum of its
    tokens' log-probabilities, from a pass over the prompt followed by the variant's leading tokens. Every label's
    variants are thus scored alike (a tokenizer with " A" as one token and " C" as two gives C its two variants too),
    and when every variant is one token the batch takes exactly one forward pass.
    """

    def __init__(self, model, tokenizer, num_options: int = NUM_OPTIONS, chat_template: bool = False):
        import inspect

        self.model = model.eval()
        self.tokenizer = tokenizer
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.labels = label_token_ids(tokenizer, num_options)
        # One pass per distinct run of leading tokens: () for every single-token variant, one per longer variant.
        self.prefixes = sorted({ids[:-1] for variants in self.labels.values() for ids in variants.values()})
        self.add_special_tokens = not chat_template  # a rendered chat template already holds its special tokens
        parameters = inspect.signature(model.forward).parameters
        # Positions that skip the left padding, as ``generate`` computes them; VLMs with M-RoPE derive their own.
        self.pass_position_ids = "position_ids" in parameters and getattr(model.config, "vision_config", None) is None
        self.keep_last_logits = "logits_to_keep" in parameters

    def encode(self, prompts: list[str]) -> list[list[int]]:
        return self.tokenizer(prompts, add_special_tokens=self.add_special_tokens)["input_ids"]

    def last_logprobs(self, batch: list[list[int]], keep: int):
        """(len(batch), keep, vocab) log-probabilities at the last ``keep`` positions of each (left-padded) row."""
        import torch

        encoded = self.tokenizer.pad({"input_ids": batch}, return_tensors="pt")  # left padding
        inputs = {key: value.to(self.model.device) for key, value in encoded.items() if key != "token_type_ids"}
        if self.pass_position_ids:
            inputs["position_ids"] = (inputs["attention_mask"].cumsum(-1) - 1).clamp(min=0)
        if self.keep_last_logits:
            inputs["logits_to_keep"] = keep
        with torch.inference_mode():
            logits = self.model(**inputs, use_cache=False).logits[:, -keep:, :].float()
        return torch.log_softmax(logits, dim=-1)

    def score_ids(self, batch: list[list[int]]) -> np.ndarray:
        """(len(batch), num_options) label scores: max over each label's variants of its continuation log-prob."""
        import torch

        passes = {
            prefix: self.last_logprobs([ids + list(prefix) for ids in batch], len(prefix) + 1)
            for prefix in self.prefixes
        }
        scores = []
        for variants in self.labels.values():
            per_variant = []
            for ids in variants.values():
                logprobs = passes[ids[:-1]]
                per_variant.append(sum(logprobs[:, position, token] for position, token in enumerate(ids)))
            scores.append(torch.stack(per_variant, dim=-1).max(dim=-1).values)
        return torch.stack(scores, dim=-1).cpu().double().numpy()


class ScoreCache(AppendOnlyJsonl):
    """Label scores as ``{key, id, scores}`` lines, keyed by model fingerprint + exact prompt."""

    def __init__(self, path: Path):
        super().__init__(path, key=lambda entry: entry["key"])

    def add(self, items: list[tuple[str, str, list[float]]]) -> None:
        super().add([{"key": key, "id": qid, "scores": scores} for key, qid, scores in items])


def fewshot_pool(records: list[dict], size: int = FEWSHOT_POOL_SIZE) -> list[dict]:
    """The fixed demonstration pool: the ``size`` questions first in an order seeded by their ids."""
    return sorted(records, key=lambda r: (stable_seed("surgiq-fewshot", r["id"]), r["id"]))[:size]


def render_prompts(
    records: list[dict], demonstrations: list[dict], processor=None, system_prompt: str | None = None
) -> list[str]:
    """The prompt of each record; with ``processor`` (``--chat-template``: a tokenizer, or a VLM's processor, whose
    chat template takes a list of content parts), wrapped as one user turn (after ``system_prompt``, if any)
    followed by the assistant's turn."""
    from recipes.training.modeling import tokenizer_of

    prompts = [surgiq_prompt(record, demonstrations) for record in records]
    if processor is None:
        return prompts
    as_parts = processor is not tokenizer_of(processor)

    def turn(role: str, text: str) -> dict:
        return {"role": role, "content": [{"type": "text", "text": text}] if as_parts else text}

    system = [turn("system", system_prompt)] if system_prompt else []
    return [
        processor.apply_chat_template([*system, turn("user", p)], tokenize=False, add_generation_prompt=True)
        for p in prompts
    ]


def cache_key(fingerprint: str, prompt: str) -> str:
    return hashlib.sha256(f"{fingerprint}\x1f{prompt}".encode()).hexdigest()


def score_prompts(
    scorer: LabelScorer,
    ids: list[str],
    prompts: list[str],
    cache: ScoreCache,
    fingerprint: str,
    batch_size: int = DEFAULT_BATCH_SIZE,
    progress: bool = False,
) -> tuple[dict[str, list[float]], int]:
    """Label scores per id, from the cache or one forward pass per question; returns ``(scores, batches run)``.

    Batches are cut over all prompts sorted by token length (longest first, then id), whatever the cache holds, so
    each question is always scored in the same batch: resumed and fresh runs agree to the last bit.
    """
    from tqdm.auto import tqdm

    keys = [cache_key(fingerprint, prompt) for prompt in prompts]
    encoded = scorer.encode(prompts)
    order = sorted(range(len(prompts)), key=lambda i: (-len(encoded[i]), ids[i]))
    batches = [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
    todo = [batch for batch in batches if any(keys[i] not in cache.entries for i in batch)]
    for batch in tqdm(todo, desc="scoring", unit="batch", disable=not progress):
        scores = scorer.score_ids([encoded[i] for i in batch])
        cache.add([(keys[i], ids[i], [float(s) for s in row]) for i, row in zip(batch, scores, strict=True)])
    return {ids[i]: cache.entries[keys[i]]["scores"] for i in range(len(ids))}, len(todo)


def predictions_from_scores(records: list[dict], scores: dict[str, list[float]]) -> list[dict]:
    """One prediction per record: argmax label, softmax confidence over the labels, correctness."""
    from scipy.special import softmax

    predictions = []
    for record in records:
        label_scores = np.asarray(scores[record["id"]], dtype=float)
        probabilities = softmax(label_scores)
        predicted = int(np.argmax(label_scores))
        letters = LETTERS[: len(label_scores)]
        predictions.append(
            {
                "id": record["id"],
                "domain": record["domain"],
                "question_type": record["question_type"],
                "source_type": record.get("source_type") or "",
                "answer": LETTERS[record["answer_index"]],
                "prediction": LETTERS[predicted],
                "correct": predicted == record["answer_index"],
                "confidence": float(probabilities[predicted]),
                "probabilities": dict(zip(letters, map(float, probabilities), strict=True)),
                "scores": dict(zip(letters, map(float, label_scores), strict=True)),
            }
        )
    return predictions


def _accuracy_by(predictions: list[dict], key: str, vocabulary: dict) -> dict[str, dict]:
    from builders.surgiq.build import in_vocabulary_order

    groups: dict[str, list[bool]] = {}
    for p in predictions:
        groups.setdefault(p[key], []).append(p["correct"])
    return {
        name: {"n": len(groups[name]), "accuracy": float(np.mean(groups[name]))}
        for name in in_vocabulary_order(groups, vocabulary)
    }


def summarize(predictions: list[dict], n_bins: int = DEFAULT_BINS) -> dict:
    """Micro accuracy overall / per domain / per question type, calibration, and the letters predicted."""
    from builders.surgiq.build import DOMAINS, QUESTION_TYPES
    from recipes.evaluation.surgiq.calibration import calibration_summary

    letters = list(predictions[0]["probabilities"])
    probabilities = [[p["probabilities"][letter] for letter in letters] for p in predictions]
    labels = [letters.index(p["answer"]) for p in predictions]
    calibration = calibration_summary(probabilities, labels, n_bins)
    count = len(predictions)
    return {
        "num_questions": count,
        "accuracy": float(np.mean([p["correct"] for p in predictions])),
        "per_domain": _accuracy_by(predictions, "domain", DOMAINS),
        "per_type": _accuracy_by(predictions, "question_type", QUESTION_TYPES),
        "calibration": {key: value for key, value in calibration.items() if key != "accuracy"},
        "predicted_letters": {x: sum(p["prediction"] == x for p in predictions) / count for x in letters},
        "answer_letters": {x: sum(p["answer"] == x for p in predictions) / count for x in letters},
    }


def model_fingerprint(name_or_path: str, model, labels: dict, chat_template: bool, revision: str | None) -> str:
    """What the scores depend on besides the prompt: checkpoint (and its files' sizes and times), dtype, labels."""
    path = Path(name_or_path)
    files = (
        sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in path.iterdir() if p.is_file())
        if path.is_dir()
        else []
    )
    identity = {
        "model": str(path.resolve()) if path.is_dir() else name_or_path,
        "revision": revision,
        "commit": getattr(model.config, "_commit_hash", None),
        "files": files,
        "dtype": str(model.dtype),
        # A one-token variant is written as its id, as before multi-token variants were scored: its scores did
        # not change, so caches written then stay valid.
        "labels": {
            letter: {text: ids[0] if len(ids) == 1 else list(ids) for text, ids in variants.items()}
            for letter, variants in labels.items()
        },
        "chat_template": chat_template,
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


@dataclass
class EvalOptions:
    model: str
    dataset: str
    out: Path
    config: str = "default"
    split: str = "test"
    shots: int = 0
    batch_size: int = DEFAULT_BATCH_SIZE
    revision: str | None = None
    dtype: str | None = None
    attn_implementation: str | None = None
    device: str | None = None
    chat_template: bool = False
    system_prompt: str | None = None
    no_system_prompt: bool = False
    limit: int | None = None
    n_bins: int = DEFAULT_BINS


@dataclass
class EvalResult:
    out: Path
    report: dict
    batches_run: int
    from_cache: int

    def summary(self) -> str:
        r = self.report
        cal = r["calibration"]
        return (
            f"SurgiQ {r['config']} {r['shots']}-shot, {r['model']}: accuracy {100 * r['accuracy']:.2f}% on "
            f"{r['num_questions']} questions; ECE {cal['ece']:.3f} ({cal['n_bins']} bins), Brier {cal['brier']:.3f}, "
            f"gap {cal['gap']:+.3f}\n{self.batches_run} batch(es) scored, {self.from_cache} question(s) from the "
            f"cache; wrote {self.out}/predictions.jsonl, report.json, report.md, reliability.png"
        )


def load_surgiq(dataset: str, config: str, split: str) -> list[dict]:
    from recipes.evaluation.inputs import load_build

    ds = load_build(dataset, config, split, expected=SURGIQ_BUILD)
    missing = [c for c in REQUIRED_COLUMNS if c not in ds.column_names]
    if missing:
        raise InputError(
            f"{dataset} ({config}/{split}) lacks column(s) {missing}: build it with `sureon build surgiq`"
        )
    return [{key: row[key] for key in (*REQUIRED_COLUMNS, "source_type") if key in row} for row in ds]


def write_outputs(out: Path, predictions: list[dict], report: dict) -> None:
    from recipes.evaluation.surgiq.calibration import plot_reliability

    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "predictions.jsonl", "".join(json.dumps(p, sort_keys=True) + "\n" for p in predictions))
    write_atomic(out / "report.json", json.dumps(report, indent=2, sort_keys=True) + "\n")
    write_atomic(out / "report.md", report_markdown(report))
    title = f"{report['model']} on SurgiQ {report['config']} ({report['shots']}-shot)"
    with atomic_file(out / "reliability.png") as partial:
        plot_reliability(report["calibration"]["bins"], partial, title)


def _pct(value: float) -> str:
    return f"{100 * value:.2f}"


def report_markdown(report: dict) -> str:
    cal = report["calibration"]
    lines = [
        f"# SurgiQ evaluation: {report['model']}",
        "",
        f"Dataset `{report['dataset']}`, config `{report['config']}`, split `{report['split']}`, "
        f"{report['shots']}-shot, {report['num_questions']} questions scored"
        + (f" (few-shot pool excluded: {', '.join(report['excluded_from_scoring'])})" if report["shots"] else "")
        + ".",
        "",
        "| metric | value |",
        "| --- | --- |",
        f"| accuracy (%) | {_pct(report['accuracy'])} |",
        f"| ECE (top-label, {cal['n_bins']} equal-width bins) | {cal['ece']:.4f} |",
        f"| Brier score (4 options) | {cal['brier']:.4f} |",
        f"| confidence - accuracy gap | {cal['gap']:+.4f} |",
        f"| mean confidence | {cal['mean_confidence']:.4f} |",
        "",
    ]
    for title, key in (("Accuracy per question type", "per_type"), ("Accuracy per domain", "per_domain")):
        lines += [f"## {title}", "", "| group | questions | accuracy (%) |", "| --- | --- | --- |"]
        lines += [f"| {name} | {g['n']} | {_pct(g['accuracy'])} |" for name, g in report[key].items()]
        lines.append("")
    letters = list(report["predicted_letters"])
    lines += [
        "## Answer letters",
        "",
        "| | " + " | ".join(letters) + " |",
        "| --- |" + " --- |" * len(letters),
        "| predicted (%) | " + " | ".join(_pct(report["predicted_letters"][x]) for x in letters) + " |",
        "| correct (%) | " + " | ".join(_pct(report["answer_letters"][x]) for x in letters) + " |",
        "",
        "![Reliability diagram](reliability.png)",
        "",
        (
            f"Labels scored: {', '.join(repr(v) for variants in report['labels'].values() for v in variants)} "
            "(max over the variants of each letter); confidence is the softmax over the four label scores."
        ),
        "",
    ]
    return "\n".join(lines)


def evaluate(opts: EvalOptions) -> EvalResult:
    """Load the model and dataset, score every question (resuming from the cache), write the outputs."""
    import torch

    from recipes.evaluation.inputs import check_model_path
    from recipes.training.modeling import load_model, load_processor, resolve_system_prompt, tokenizer_of

    if not 0 <= opts.shots <= MAX_SHOTS:
        raise InputError(f"--shots must be 0..{MAX_SHOTS}, got {opts.shots}")
    for flag, value in (("--batch-size", opts.batch_size), ("--bins", opts.n_bins)):
        if value < 1:
            raise InputError(f"{flag} {value}: give a positive number")
    check_model_path(opts.model, "--model", opts.revision)
    records = load_surgiq(opts.dataset, opts.config, opts.split)
    pool = fewshot_pool(records) if opts.shots else []
    pool_ids = {r["id"] for r in pool}
    scored = [r for r in records if r["id"] not in pool_ids][: opts.limit]
    if not scored:
        raise InputError(f"{opts.dataset} ({opts.config}/{opts.split}) has no question left to score")

    processor = load_processor(opts.model, revision=opts.revision, padding_side="left")
    tokenizer = tokenizer_of(processor)
    model = load_model(
        opts.model, revision=opts.revision, dtype=opts.dtype, attn_implementation=opts.attn_implementation
    )
    model.to(opts.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    scorer = LabelScorer(model, tokenizer, chat_template=opts.chat_template)
    fingerprint = model_fingerprint(opts.model, model, scorer.labels, opts.chat_template, opts.revision)
    system_prompt = None
    if opts.chat_template:
        system_prompt = resolve_system_prompt(
            opts.model, override=opts.system_prompt, disabled=opts.no_system_prompt, revision=opts.revision
        )
    elif opts.system_prompt:
        raise InputError("--system-prompt needs --chat-template: the plain SurgiQ prompt has no system turn")
    prompts = render_prompts(scored, pool[: opts.shots], processor if opts.chat_template else None, system_prompt)
    cache = ScoreCache(opts.out / CACHE_FILE)
    cached_before = sum(cache_key(fingerprint, p) in cache.entries for p in prompts)
    scores, batches_run = score_prompts(
        scorer, [r["id"] for r in scored], prompts, cache, fingerprint, opts.batch_size, progress=True
    )
    predictions = predictions_from_scores(scored, scores)
    report = {
        "benchmark": "surgiq",
        "model": opts.model,
        "revision": opts.revision,
        "dataset": opts.dataset,
        "config": opts.config,
        "split": opts.split,
        "shots": opts.shots,
        "fewshot_pool": [r["id"] for r in pool] if opts.shots else [],
        "demonstrations": [r["id"] for r in pool[: opts.shots]],
        "excluded_from_scoring": sorted(pool_ids),
        "chat_template": opts.chat_template,
        "system_prompt": system_prompt,
        "labels": {letter: list(variants) for letter, variants in scorer.labels.items()},
        "dtype": str(model.dtype),
        **summarize(predictions, opts.n_bins),
    }
    write_outputs(opts.out, predictions, report)
    return EvalResult(opts.out, report, batches_run, cached_before)


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--model", required=True, help="Hub id or local folder of a causal LM or a VLM (text-only)")
    parser.add_argument("--dataset", required=True, help="a folder built by `sureon build surgiq`, or its Hub id")
    parser.add_argument("--config", default="default", help="default (stored order) or shuffled")
    parser.add_argument("--split", default="test")
    parser.add_argument("--shots", type=int_range(0, MAX_SHOTS), default=0, help="few-shot demonstrations")
    parser.add_argument("--out", required=True, type=Path, help="output folder (also holds the score cache)")
    parser.add_argument("--batch-size", type=positive_int, default=DEFAULT_BATCH_SIZE)
    parser.add_argument("--revision", help="model revision (branch, tag or commit)")
    parser.add_argument("--dtype", help="auto (default), bfloat16, float16 or float32")
    parser.add_argument("--attn-implementation", help="sdpa, flash_attention_2, eager (default: best available)")
    parser.add_argument("--device", help="cuda, cuda:1, cpu (default: cuda when available)")
    parser.add_argument("--chat-template", action="store_true", help="wrap the prompt in the model's chat template")
    prompt = parser.add_mutually_exclusive_group()
    prompt.add_argument(
        "--system-prompt",
        help="with --chat-template: the system turn (default: the one the model was trained with, read from the "
        "training_complete.json stored with its weights)",
    )
    prompt.add_argument("--no-system-prompt", action="store_true", help="with --chat-template: no system turn")
    parser.add_argument("--limit", type=positive_int, help="score only the first N questions (smoke runs)")
    parser.add_argument("--bins", type=positive_int, default=DEFAULT_BINS, help="ECE / reliability-diagram bins")
    return parser


def run(args: argparse.Namespace) -> int:
    from recipes.evaluation.runner import check_counts

    check_counts(limit=args.limit)
    options = EvalOptions(
        model=args.model,
        dataset=args.dataset,
        out=args.out,
        config=args.config,
        split=args.split,
        shots=args.shots,
        batch_size=args.batch_size,
        revision=args.revision,
        dtype=args.dtype,
        attn_implementation=args.attn_implementation,
        device=args.device,
        chat_template=args.chat_template,
        system_prompt=args.system_prompt,
        no_system_prompt=args.no_system_prompt,
        limit=args.limit,
        n_bins=args.bins,
    )
    print(evaluate(options).summary())
    return 0


def make_parser() -> argparse.ArgumentParser:
    return add_arguments(argparse.ArgumentParser(description=__doc__.splitlines()[0]))


def main(argv: list[str] | None = None) -> int:
    return run(make_parser().parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
