"""Generation backends behind one interface, and a generation cache so a killed evaluation resumes.

Every backend takes the chat messages of :func:`builders.prompt.format_messages` (visual, or the same call with
``blind=True``) and returns one text per conversation, greedy and deterministic: ``transformers``
(:mod:`~recipes.evaluation.inference.transformers_backend`: local batched ``generate``), ``vllm`` and ``openai``
(:mod:`~recipes.evaluation.inference.openai_chat`: vLLM's offline ``LLM.generate`` on the project's rendering and any
OpenAI-compatible endpoint). Each has ``settings()`` (what its outputs depend on), ``frames_as`` (how a clip reaches
the model: ``video``, one video with its timestamps as training encodes it, or ``images``), ``batch_size`` and
``generate(conversations)``; :func:`~recipes.evaluation.inference.generation.generate_cached` runs any of them
through the generation cache.

Blind-test curation (:mod:`recipes.curation.guessers`) also needs R answers per question at a non-zero temperature:
``backend.sample(conversations, num_samples, temperature, seed)`` returns ``num_samples`` texts per conversation from
one batched generation (transformers: ``num_return_sequences`` under a seeded RNG; vLLM: ``SamplingParams(n=...,
seed=...)``; OpenAI: ``num_samples`` concurrent requests with distinct ``seed`` values ``seed + r``, each cached by
the client, since many compatible servers ignore ``n``). Greedy ``generate`` is unchanged.
"""

from builders.errors import InputError
from recipes.evaluation.inference.generation import (
    GenerationCache,
    GenerationItem,
    GenerationStats,
    chunks,
    generate_cached,
    usage_totals,
)
from recipes.evaluation.inference.openai_chat import MAX_TOKENS_FIELDS, OpenAIBackend, VLLMBackend
from recipes.evaluation.inference.transformers_backend import TransformersBackend


# What the rest of the project imports from ``recipes.evaluation.inference``: the backends and how to make one, and
# the cached generation the evaluation commands run them through.
__all__ = [
    "BACKENDS",
    "MAX_TOKENS_FIELDS",
    "GenerationCache",
    "GenerationItem",
    "GenerationStats",
    "OpenAIBackend",
    "TransformersBackend",
    "VLLMBackend",
    "chunks",
    "generate_cached",
    "make_backend",
    "usage_totals",
]

BACKENDS = ("transformers", "vllm", "openai")


def make_backend(name: str, model: str, **options):
    """The backend ``name`` for ``model``; ``options`` are that backend's keyword arguments."""
    classes = {"transformers": TransformersBackend, "vllm": VLLMBackend, "openai": OpenAIBackend}
    if name not in classes:
        raise InputError(f"unknown backend {name!r}: choose one of {', '.join(BACKENDS)}")
    return classes[name](model, **options)
