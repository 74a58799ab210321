"""The project's one OpenAI-compatible chat client (``client``), with its endpoint check (``endpoint``), the wire
format of its messages (``messages``), its on-disk cache (``cache``) and its usage ledger (``usage``)."""

from builders.llm.cache import LLMCache
from builders.llm.client import ChatRequest, LLMClient
from builders.llm.endpoint import check_endpoint
from builders.llm.messages import to_openai_messages
from builders.llm.usage import ModelUsage


# What the rest of the project imports from ``builders.llm``.
__all__ = ["ChatRequest", "LLMCache", "LLMClient", "ModelUsage", "check_endpoint", "to_openai_messages"]
