"""The project's one OpenAI-compatible chat client: construction stages, the paraphraser, the judge, hosted models.

What vLLM, OpenAI and most inference servers speak (``POST {base_url}/chat/completions``), with what a paid or slow
batch needs:

- **Concurrency cap**: at most ``max_concurrency`` requests in flight (the Sureon paper used 128 for 35B models, 64
  above).
- **Retries** with exponential backoff (and jitter, and the server's ``Retry-After`` when it sends one) on 429, 5xx,
  timeouts and dropped connections. 401 / 403 / 404 stop the run at once: the key, model or URL is wrong. So does a
  refused connection (or an unknown host) before the server ever answered: nothing listens at the URL, and retrying
  for a minute would only hide it; once the server has answered, a refused connection (a restart) is retried.
  :func:`check_endpoint` finds it before a command loads anything: ``sureon eval``, ``curate`` and ``audit`` call it
  first.
- **Structured output**: a request with a pydantic ``schema`` is sent with ``response_format`` (JSON schema) and its
  reply validated; an invalid reply is asked again, then counted as failed (never cached, so a rerun tries again).
- **Accounting** per stage: calls, cache hits, retries, invalid replies, failures, tokens (reasoning tokens where the
  server reports them), and cost when ``prices`` are given (USD per million input / output tokens, per model); and
  per model, the tokens of every reply returned, cache hits included (what the answers cost when first asked).
- **Request fields**: a request's ``params`` are merged into the body last (``reasoning_effort``, ``seed``, ...); a
  ``None`` value drops a field the client would send (``temperature`` for models that refuse it).
- **Reasoning**: a reply's ``reasoning_content`` / ``reasoning`` field (vLLM's reasoning parsers, OpenRouter, ...) is
  kept apart from the text in ``ChatResult.reasoning`` and cached with it; it is never taken as the answer.
- **On-disk cache** keyed by (model, messages, params) in SQLite, committed after every call: a killed run resumes
  without paying for a finished call twice. The API key is never part of the key, never logged nor printed.

Base URL and key come from the arguments or ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``. Images in the project's message
format (PIL images, encoded bytes, ``{"bytes", "path"}`` dicts or paths) are sent as base64 data URLs in OpenAI's
``image_url`` content parts; a ``video`` part is refused (format those prompts with ``frames_as="images"``).
"""

import asyncio
import base64
import hashlib
import io
import json
import logging
import os
import random
import re
import sqlite3
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel, ValidationError

from builders.errors import InputError, UserError


logger = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529})
FATAL_STATUS = frozenset({401, 403, 404})
_FENCE = re.compile(r"^\s*```(?:json)?\s*\n?(.*?)\n?```\s*$", re.DOTALL)


class LLMError(UserError, RuntimeError):
    """A configuration error (bad key, model or URL, nothing listening at the URL) that retrying cannot fix."""


def resolve_base_url(base_url: str | None = None) -> str:
    """The endpoint a client talks to: ``base_url``, else ``OPENAI_BASE_URL``, else OpenAI's."""
    return (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")


def unreachable_message(base_url: str, err: Exception, option: str = "--base-url") -> str:
    """One line for an endpoint nothing answers at: the URL, why (the operating system's word for it, e.g.
    "Connection refused", where the error chain holds one), and what to check."""
    reason, cause, seen = str(err).strip() or type(err).__name__, err, set()
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, OSError) and cause.strerror:
            reason = os.strerror(cause.errno) if isinstance(cause.errno, int) and cause.errno > 0 else cause.strerror
            break
        cause = cause.__cause__ or cause.__context__
    return (
        f"cannot connect to {base_url} ({reason}): is the server running there, and is the URL right "
        f"({option}, or OPENAI_BASE_URL)?"
    )


def check_endpoint(base_url: str | None = None, *, option: str = "--base-url", timeout: float = 10.0) -> str:
    """Fail at once, naming the URL, when nothing answers at an OpenAI-compatible endpoint; returns the URL.

    Called by the commands before they load a dataset or start a batch: a refused connection, an unknown host or a
    URL that is not http(s) is one line in milliseconds, not a minute of retries. Any HTTP answer to ``GET
    {base_url}/models`` (a 401 or 404 too) means a server is there; a slow answer does too (the requests themselves
    then report). No key is sent."""
    url = resolve_base_url(base_url)
    try:
        with httpx.Client(timeout=httpx.Timeout(timeout)) as http:
            http.get(f"{url}/models")
    except httpx.ConnectTimeout:
        raise LLMError(
            f"no answer from {url} within {timeout:.0f} s: is the server running there, and is the URL right "
            f"({option}, or OPENAI_BASE_URL)?"
        ) from None
    except httpx.ConnectError as err:
        raise LLMError(unreachable_message(url, err, option)) from None
    except (httpx.UnsupportedProtocol, httpx.InvalidURL) as err:
        raise LLMError(f"{option} {url}: not an http:// or https:// URL ({err})") from None
    except httpx.HTTPError:
        pass  # connected: a read timeout or a protocol quirk is for the requests themselves to report
    return url


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


@dataclass
class StageUsage:
    calls: int = 0
    cached: int = 0
    retries: int = 0
    invalid_json: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float | None = None


@dataclass
class ModelUsage:
    """Every reply one model gave a run, fresh or from the cache, and the tokens the server reported for it."""

    replies: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0

    def add(self, usage: dict, cached: bool = False) -> None:
        self.replies += 1
        self.cached += cached
        self.prompt_tokens += int(usage.get("prompt_tokens") or 0)
        self.completion_tokens += int(usage.get("completion_tokens") or 0)
        self.reasoning_tokens += reasoning_tokens(usage)


def reasoning_tokens(usage: dict) -> int:
    """The reasoning tokens of a reply's usage, where the server reports them (OpenAI's ``completion_tokens_details``;
    they are part of ``completion_tokens``); 0 otherwise."""
    details = usage.get("completion_tokens_details") or {}
    return int(details.get("reasoning_tokens") or 0) if isinstance(details, dict) else 0


class UsageLedger:
    """Per-stage counts and tokens (cost only where a price is known for the model), and per-model replies."""

    def __init__(self, prices: dict[str, dict[str, float]] | None = None):
        self.prices = prices or {}
        self.stages: dict[str, StageUsage] = defaultdict(StageUsage)
        self.models: dict[str, ModelUsage] = defaultdict(ModelUsage)

    def by_model(self) -> dict[str, dict]:
        return {model: asdict(usage) for model, usage in sorted(self.models.items())}

    def add_tokens(self, stage: str, model: str, usage: dict) -> None:
        entry = self.stages[stage]
        prompt, completion = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
        entry.prompt_tokens += prompt
        entry.completion_tokens += completion
        entry.reasoning_tokens += reasoning_tokens(usage)
        price = self.prices.get(model)
        if price is not None:
            cost = (prompt * price.get("input", 0.0) + completion * price.get("output", 0.0)) / 1e6
            entry.cost_usd = (entry.cost_usd or 0.0) + cost

    def as_dict(self) -> dict[str, dict]:
        return {stage: asdict(usage) for stage, usage in sorted(self.stages.items())}

    def summary(self) -> str:
        lines = []
        for stage, u in sorted(self.stages.items()):
            cost = f", ${u.cost_usd:.4f}" if u.cost_usd is not None else ""
            lines.append(
                f"{stage}: {u.calls} calls ({u.cached} cached, {u.retries} retries, {u.invalid_json} invalid JSON, "
                f"{u.failed} failed), {u.prompt_tokens} prompt + {u.completion_tokens} completion tokens{cost}"
            )
        return "\n".join(lines)


class LLMCache:
    """Replies keyed by request hash, in SQLite (WAL): each call is committed as it finishes, so a kill loses nothing
    finished and two processes may share one file."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, model TEXT, stage TEXT, text TEXT,"
            " usage TEXT, finish_reason TEXT, created REAL, reasoning TEXT)"
        )
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(replies)")}
        if "reasoning" not in columns:  # a cache written before replies kept their reasoning
            self._db.execute("ALTER TABLE replies ADD COLUMN reasoning TEXT")

    def get(self, key: str) -> dict | None:
        row = self._db.execute(
            "SELECT text, usage, finish_reason, reasoning FROM replies WHERE key = ?", (key,)
        ).fetchone()
        if row is None:
            return None
        return {"text": row[0], "usage": json.loads(row[1]), "finish_reason": row[2], "reasoning": row[3]}

    def put(
        self,
        key: str,
        model: str,
        stage: str,
        text: str,
        usage: dict,
        finish_reason: str | None,
        reasoning: str | None = None,
    ) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO replies (key, model, stage, text, usage, finish_reason, created, reasoning)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (key, model, stage, text, json.dumps(usage), finish_reason, time.time(), reasoning),
        )

    def __len__(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM replies").fetchone()[0]

    def close(self) -> None:
        self._db.close()


# ---------------------------------------------------------------------------------------------------------- messages


def _image_bytes(value) -> bytes:
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    if isinstance(value, dict):  # datasets' Image(decode=False) form
        if value.get("bytes"):
            return value["bytes"]
        return Path(value["path"]).read_bytes()
    if isinstance(value, str | Path):
        return Path(value).read_bytes()
    if hasattr(value, "save"):  # PIL
        buffer = io.BytesIO()
        value.convert("RGB").save(buffer, format="JPEG", quality=95)
        return buffer.getvalue()
    raise TypeError(f"cannot send an image of type {type(value).__name__}")


def _mime(data: bytes) -> str:
    if data[:3] == b"\xff\xd8\xff":
        return "image/jpeg"
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "image/png"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    raise InputError("image bytes are neither JPEG, PNG, WebP nor GIF")


def image_data_url(value) -> str:
    """A base64 data URL for an image given as PIL image, encoded bytes, datasets dict or file path."""
    if isinstance(value, str) and value.startswith(("data:", "http://", "https://")):
        return value
    data = _image_bytes(value)
    return f"data:{_mime(data)};base64,{base64.b64encode(data).decode('ascii')}"


def to_openai_messages(messages: list[dict]) -> list[dict]:
    """The project's chat messages (``builders.prompt.format_messages``) in OpenAI's content-part format."""
    converted = []
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            converted.append({"role": message["role"], "content": content})
            continue
        parts = []
        for part in content:
            kind = part.get("type")
            if kind == "text":
                parts.append({"type": "text", "text": part["text"]})
            elif kind == "image":
                parts.append({"type": "image_url", "image_url": {"url": image_data_url(part["image"])}})
            elif kind == "image_url":
                parts.append(part)
            elif kind == "video":
                raise InputError("OpenAI-compatible endpoints take frames as images: format with frames_as='images'")
            else:
                raise InputError(f"unknown content part type {kind!r}")
        converted.append({"role": message["role"], "content": parts})
    return converted


def response_format(schema: type[BaseModel]) -> dict:
    """OpenAI's JSON-schema response format; ``strict`` only where OpenAI accepts it (no extra keys, all required)."""
    strict = schema.model_config.get("extra") == "forbid" and all(
        f.is_required() for f in schema.model_fields.values()
    )
    return {
        "type": "json_schema",
        "json_schema": {"name": schema.__name__, "schema": schema.model_json_schema(), "strict": strict},
    }


def parse_json_reply(text: str, schema: type[BaseModel]) -> BaseModel:
    """Validate a reply against ``schema``; tolerate a Markdown code fence around the JSON."""
    fenced = _FENCE.match(text or "")
    return schema.model_validate_json(fenced.group(1) if fenced else (text or ""))


def cache_key(model: str, messages: list[dict], params: dict) -> str:
    """sha256 of the canonical JSON of (model, messages, params): the same request always maps to the same reply."""
    payload = json.dumps(
        {"model": model, "messages": messages, "params": params}, sort_keys=True, ensure_ascii=False, default=str
    )
    return hashlib.sha256(payload.encode()).hexdigest()


# ------------------------------------------------------------------------------------------------------------ client


class LLMClient:
    """Async chat client with a concurrency cap, retries, JSON validation, accounting and an on-disk cache.

    ``chat_many(requests)`` runs a batch from synchronous code; ``achat_many`` inside an event loop.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
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
        self._answered = False  # whether the server ever answered: before it has, a refused connection is fatal

    def __repr__(self) -> str:
        return f"LLMClient(model={self.model!r}, base_url={self.base_url!r}, max_concurrency={self.max_concurrency})"

    def _scrub(self, text: str) -> str:
        return text.replace(self._api_key, "***") if self._api_key else text

    def _http(self) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        return httpx.AsyncClient(
            base_url=self.base_url,
            headers=headers,
            timeout=self.timeout,
            transport=self.transport,
            limits=httpx.Limits(max_connections=self.max_concurrency, max_keepalive_connections=self.max_concurrency),
        )

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
        last_error = "no attempt made"
        for attempt in range(self.max_retries + 1):
            retry_after = None
            try:
                async with semaphore:
                    response = await http.post("/chat/completions", json=body)
            except httpx.TimeoutException as err:
                last_error = f"timeout ({type(err).__name__})"
            except httpx.ConnectError as err:
                if not self._answered:  # nothing listens there (or no such host): retrying cannot help
                    raise LLMError(self._scrub(unreachable_message(self.base_url, err))) from None
                last_error = f"connection error ({type(err).__name__}: {err})"
            except httpx.TransportError as err:
                last_error = f"connection error ({type(err).__name__}: {err})"
            else:
                self._answered = True
                status = response.status_code
                if status == 200:
                    try:
                        return response.json()
                    except json.JSONDecodeError:
                        last_error = "the server's response body is not JSON"
                elif status in FATAL_STATUS:
                    raise LLMError(
                        self._scrub(
                            f"HTTP {status} from {self.base_url}/chat/completions for model {body['model']!r}: "
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
