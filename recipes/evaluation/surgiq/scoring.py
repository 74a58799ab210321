"""SurgiQ's log-likelihood protocol (the SurgiQ paper's section 4.2): prompts, label scores, predictions.

Each question is rendered with the one fixed SurgiQ prompt (:func:`builders.prompt.surgiq_prompt`), which ends with the
answer cue. One forward pass per question (batched, left padding, only the last position's logits) gives the
next-token log-probabilities; each option label is scored in its plain (``A``) and space-prefixed (`` A``) variant
and the label's score is the maximum over its variants. A variant the tokenizer splits into several tokens is scored
as its whole continuation (the sum of its tokens' log-probabilities, one more pass per such variant), so no label has
fewer variants than another; with single-token labels (Qwen's, Llama's) the pass per question stays one. The
prediction is the argmax over the four labels (ties go to the earlier letter) and the confidence a softmax over the
four label scores. Nothing is sampled, so two runs give the same predictions.

Few-shot: the first k questions of a fixed pool of three, chosen by a seed from their ids, are shown as solved
demonstrations. Label scores are cached per model fingerprint and exact prompt, in batches cut over all questions in a
fixed order, so a resumed run is byte-identical to an uninterrupted one, and a run sharded over ranks (each rank its
own batches of that one plan) to a one-process run.

Apart from the command (:mod:`recipes.evaluation.surgiq.evaluate`) because the lm-eval export
(:mod:`recipes.export.lm_eval`) scores with the same labels, pool and predictions, and the scoring benchmark
(``benchmarks/surgiq_scoring.py``) times this alone.
"""

import hashlib
import json
from pathlib import Path

import numpy as np

from builders.errors import InputError
from builders.jsonl_log import AppendOnlyJsonl
from builders.options import LETTERS, stable_seed
from builders.prompt import surgiq_prompt
from recipes.evaluation.ranks import ALONE, Ranks


LABEL_VARIANTS = ("{}", " {}")
FEWSHOT_POOL_SIZE = 3
MAX_SHOTS = FEWSHOT_POOL_SIZE
NUM_OPTIONS = 4
DEFAULT_BATCH_SIZE = 8


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
        super().__init__(path, key=lambda entry: entry["key"], kind="surgiq-label-scores")

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
    from recipes.model_io.modeling import tokenizer_of

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
    ranks: Ranks = ALONE,
) -> tuple[dict[str, list[float]], int]:
    """Label scores per id of this rank's batches (every id, alone), from the cache or one forward pass per
    question; returns ``(scores, batches run)``.

    Batches are cut over all prompts sorted by token length (longest first, then id), whatever the cache holds, so
    each question is always scored in the same batch: resumed and fresh runs agree to the last bit, and so do runs on
    any number of ranks (rank r scores batches r, r + W, r + 2W, ... of the one plan).
    """
    from tqdm.auto import tqdm

    keys = [cache_key(fingerprint, prompt) for prompt in prompts]
    encoded = scorer.encode(prompts)
    order = sorted(range(len(prompts)), key=lambda i: (-len(encoded[i]), ids[i]))
    batches = [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
    owned = [batches[number] for number in ranks.share(len(batches))]
    todo = [batch for batch in owned if any(keys[i] not in cache.entries for i in batch)]
    for batch in tqdm(todo, desc="scoring", unit="batch", disable=not progress):
        scores = scorer.score_ids([encoded[i] for i in batch])
        cache.add([(keys[i], ids[i], [float(s) for s in row]) for i, row in zip(batch, scores, strict=True)])
    return {ids[i]: cache.entries[keys[i]]["scores"] for i in sorted(i for batch in owned for i in batch)}, len(todo)


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
