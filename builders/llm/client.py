"""The project's one OpenAI-compatible chat client: construction stages, the paraphraser, the judge, hosted models.

What vLLM, OpenAI and most inference servers speak (``POST {base_url}/chat/completions``), with what a paid or slow
batch needs:

- **Concurrency cap**: at most ``max_concurrency`` requests in flight (the Sureon paper used 128 for 35B models, 64
  above).
- **Retries** with exponential backoff (and jitter, and the server's ``Retry-After`` when it sends one) on 429, 5xx,
  timeouts and dropped connections. 401 / 403 / 404 stop the run at once: the key, model or URL is wrong. So does a
  refused connection (or an unknown host) before the server at that URL ever answered: nothing listens there, and
  retrying for a minute would only hide it; once it has answered, a refused connection (a restart) is retried.
  :func:`builders.llm.endpoint.check_endpoint` finds it before a command loads anything: ``sureon eval``, ``curate``,
  ``audit`` and ``pipeline stage2`` call it first.
- **Structured output**: a request with a pydantic ``schema`` is sent with ``response_format`` (JSON schema) and its
  reply validated; an invalid reply is asked again, then counted as failed (never cached, so a rerun tries again).
- **Accounting** per stage (:mod:`builders.llm.usage`): calls, cache hits, retries, invalid replies, failures, tokens
  (reasoning tokens where the server reports them), and cost when ``prices`` are given (USD per million input /
  output tokens, per model); and per model, the tokens of every reply returned, cache hits included (what the answers
  cost when first asked).
- **Request fields**: a request's ``params`` are merged into the body last (``reasoning_effort``, ``seed``, ...); a
  ``None`` value drops a field the client would send (``temperature`` for models that refuse it).
- **Reasoning**: a reply's ``reasoning_content`` / ``reasoning`` field (vLLM's reasoning parsers, OpenRouter, ...) is
  kept apart from the text in ``ChatResult.reasoning`` and cached with it; it is never taken as the answer.
- **On-disk cache** (:mod:`builders.llm.cache`) keyed by (model, messages, params), committed after every call. The
  API key is never part of the key, never logged nor printed.

Base URL and key come from the arguments or ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``. ``routes`` sends a model's
requests to a URL of its own (the Sureon paper serves each stage-2 generator as its own vLLM server): a request for a
routed model goes to ``{route}/chat/completions``, every other to ``{base_url}/chat/completions``, and an error names
the URL used. A route is not part of a cache key: a cached reply stays valid when a server moves to another port.
Messages are sent in OpenAI's content-part format (:mod:`builders.llm.messages`: images as base64 data URLs, videos
refused).
"""

import asyncio
import json
import logging
import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel, ValidationError

from builders.errors import InputError
from builders.llm.cache import LLMCache, cache_key
from builders.llm.endpoint import LLMError, resolve_base_url, unreachable_message
from builders.llm.messages import parse_json_reply, response_format, to_openai_messages
from builders.llm.usage import UsageLedger


logger = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529})
FATAL_STATUS = frozenset({401, 403, 404})


@dataclass
class ChatRequest:
    """One chat completion. ``params`` holds any other field the server takes (``seed``, ``reasoning_effort``...),
    merged into the body last; a ``None`` value removes that field from the body."""

    messages: list[dict]
    model: str | None = None
    stage: str = "default"
    temperature: float = 0.0
    max_tokens: int | None = None
    schema: type[BaseModel] | None = None
    params: dict = field(default_factory=dict)


@dataclass
class ChatResult:
    text: str | None
    data: BaseModel | None = None
    usage: dict = field(default_factory=dict)
    cached: bool = False
    error: str | None = None
    finish_reason: str | None = None
    reasoning: str | None = None  # the reply's separate reasoning field, never the answer

    @property
    def ok(self) -> bool:
        return self.error is None


class LLMClient:
    """Async chat client with a concurrency cap, retries, JSON validation, accounting and an on-disk cache.

    ``chat_many(requests)`` runs a batch from synchronous code; ``achat_many`` inside an event loop.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        routes: dict[str, str] | None = None,
        api_key: str | None = None,
        cache: str | Path | LLMCache | None = None,
        max_concurrency: int = 16,
        max_retries: int = 6,
        json_attempts: int = 3,
        timeout: float = 300.0,
        backoff: float = 1.0,
        max_backoff: float = 60.0,
        prices: dict[str, dict[str, float]] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        progress: bool = False,
    ):
        if max_concurrency < 1:
            raise InputError("max_concurrency must be at least 1")
        self.model = model
        self.base_url = resolve_base_url(base_url)
        self.routes = {name: url.rstrip("/") for name, url in (routes or {}).items()}  # model -> its own base URL
        self._api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.cache = cache if isinstance(cache, LLMCache) or cache is None else LLMCache(cache)
        self.max_concurrency = max_concurrency
        self.max_retries = max_retries
        self.json_attempts = max(1, json_attempts)
        self.timeout = timeout
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.ledger = UsageLedger(prices)
        self.transport = transport
        self.progress = progress
        self._answered: set[str] = set()  # URLs that ever answered: before one has, a refused connection is fatal

    def __repr__(self) -> str:
        routes = f", routes={self.routes!r}" if self.routes else ""
        return (
            f"LLMClient(model={self.model!r}, base_url={self.base_url!r}{routes}, "
            f"max_concurrency={self.max_concurrency})"
        )

    def _scrub(self, text: str) -> str:
        return text.replace(self._api_key, "***") if self._api_key else text

    def _http(self) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        return httpx.AsyncClient(
            headers=headers,
            timeout=self.timeout,
            transport=self.transport,
            limits=httpx.Limits(max_connections=self.max_concurrency, max_keepalive_connections=self.max_concurrency),
        )

    def url_for(self, model: str) -> str:
        """The base URL a request for ``model`` goes to: its route, else ``base_url``."""
        return self.routes.get(model, self.base_url)

    def payload(self, request: ChatRequest) -> dict:
        """The JSON body sent for ``request`` (and, minus nothing secret, what the cache key is made of)."""
        model = request.model or self.model
        if not model:
            raise InputError("no model given: pass model= to the client or the request")
        body: dict[str, Any] = {"model": model, "messages": to_openai_messages(request.messages)}
        body["temperature"] = request.temperature
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        if request.schema is not None:
            body["response_format"] = response_format(request.schema)
        for name, value in request.params.items():
            if value is None:
                body.pop(name, None)
            else:
                body[name] = value
        return body

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.max_backoff)
        return min(self.backoff * 2**attempt, self.max_backoff) * random.uniform(0.5, 1.0)

    async def _post(self, http: httpx.AsyncClient, semaphore: asyncio.Semaphore, body: dict, stage: str) -> dict:
        """POST with retries; return the response JSON or raise ``_CallFailed`` (or ``LLMError`` when fatal)."""
        model = body["model"]
        url = self.url_for(model)
        last_error = "no attempt made"
        for attempt in range(self.max_retries + 1):
            retry_after = None
            try:
                async with semaphore:
                    response = await http.post(f"{url}/chat/completions", json=body)
            except httpx.TimeoutException as err:
                last_error = f"timeout ({type(err).__name__})"
            except httpx.ConnectError as err:
                if url not in self._answered:  # nothing listens there (or no such host): retrying cannot help
                    if model in self.routes:
                        message = unreachable_message(url, err, f"the route of model {model!r}", environment=None)
                    else:
                        message = unreachable_message(url, err)
                    raise LLMError(self._scrub(message)) from None
                last_error = f"connection error ({type(err).__name__}: {err})"
            except httpx.TransportError as err:
                last_error = f"connection error ({type(err).__name__}: {err})"
            else:
                self._answered.add(url)
                status = response.status_code
                if status == 200:
                    try:
                        return response.json()
                    except json.JSONDecodeError:
                        last_error = "the server's response body is not JSON"
                elif status in FATAL_STATUS:
                    raise LLMError(
                        self._scrub(
                            f"HTTP {status} from {url}/chat/completions for model {model!r}: "
                            f"{response.text[:300]} (check the API key, the model name and the base URL)"
                        )
                    )
                elif status in RETRY_STATUS or status >= 500:
                    last_error = f"HTTP {status}: {response.text[:200]}"
                    retry_after = _retry_after(response)
                else:
                    raise _CallFailed(self._scrub(f"HTTP {status}: {response.text[:300]}"))
            if attempt < self.max_retries:
                self.ledger.stages[stage].retries += 1
                await asyncio.sleep(self._delay(attempt, retry_after))
        raise _CallFailed(self._scrub(f"gave up after {self.max_retries + 1} attempts: {last_error}"))

    async def _one(self, http, semaphore, request: ChatRequest) -> ChatResult:
        body = self.payload(request)
        stage, model = request.stage, body["model"]
        key = cache_key(model, body["messages"], {k: v for k, v in body.items() if k not in ("model", "messages")})
        hit = self.cache.get(key) if self.cache is not None else None
        if hit is not None:
            self.ledger.stages[stage].cached += 1
            self.ledger.models[model].add(hit["usage"], cached=True)
            data = parse_json_reply(hit["text"], request.schema) if request.schema is not None else None
            return ChatResult(
                hit["text"],
                data,
                hit["usage"],
                cached=True,
                finish_reason=hit["finish_reason"],
                reasoning=hit["reasoning"],
            )
        error = None
        for _ in range(self.json_attempts if request.schema is not None else 1):
            try:
                reply = await self._post(http, semaphore, body, stage)
            except _CallFailed as err:
                error = str(err)
                break
            self.ledger.stages[stage].calls += 1
            usage = reply.get("usage") or {}
            self.ledger.add_tokens(stage, model, usage)
            try:
                choice = reply["choices"][0]
                text = choice["message"].get("content") or ""
                reasoning = choice["message"].get("reasoning_content") or choice["message"].get("reasoning")
            except (KeyError, IndexError, TypeError, AttributeError):
                error = f"malformed chat completion: {json.dumps(reply)[:200]}"
                continue
            data = None
            if request.schema is not None:
                try:
                    data = parse_json_reply(text, request.schema)
                except ValidationError as err:
                    self.ledger.stages[stage].invalid_json += 1
                    error = f"invalid JSON for {request.schema.__name__}: {err.errors()[0]['msg']}: {text[:200]!r}"
                    continue
            reasoning = reasoning if isinstance(reasoning, str) and reasoning else None
            if self.cache is not None:
                self.cache.put(key, model, stage, text, usage, choice.get("finish_reason"), reasoning)
            self.ledger.models[model].add(usage)
            return ChatResult(text, data, usage, finish_reason=choice.get("finish_reason"), reasoning=reasoning)
        self.ledger.stages[stage].failed += 1
        logger.warning("%s call failed: %s", stage, error)
        return ChatResult(None, error=error)

    async def achat_many(self, requests: list[ChatRequest]) -> list[ChatResult]:
        """Run ``requests`` concurrently (at most ``max_concurrency`` in flight); results in request order."""
        from tqdm.auto import tqdm

        semaphore = asyncio.Semaphore(self.max_concurrency)
        bar = tqdm(total=len(requests), desc="LLM calls", disable=not self.progress)

        async def run(http, request):
            result = await self._one(http, semaphore, request)
            bar.update()
            return result

        try:
            async with self._http() as http:
                return await asyncio.gather(*(run(http, r) for r in requests))
        finally:
            bar.close()

    def chat_many(self, requests: list[ChatRequest]) -> list[ChatResult]:
        return asyncio.run(self.achat_many(requests))

    def chat(self, messages: list[dict], **kwargs) -> ChatResult:
        return self.chat_many([ChatRequest(messages, **kwargs)])[0]


class _CallFailed(Exception):
    """A call that exhausted its retries or got a non-retryable error: counted as failed, the batch goes on."""


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None
