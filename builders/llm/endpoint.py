"""Where the chat client talks to, and whether anything answers there, before a command loads anything.

Apart from the client because the commands (``sureon eval``, ``curate``, ``audit``, ``pipeline stage2``) check the
endpoint before they build one: a refused connection, an unknown host or a URL that is not http(s) is one line in
milliseconds, not a minute of retries after the dataset has loaded. The client reports the same unreachable
endpoint with the same words.
"""

import os

import httpx

from builders.errors import UserError


DEFAULT_BASE_URL = "https://api.openai.com/v1"


class LLMError(UserError, RuntimeError):
    """A configuration error (bad key, model or URL, nothing listening at the URL) that retrying cannot fix."""


def resolve_base_url(base_url: str | None = None) -> str:
    """The endpoint a client talks to: ``base_url``, else ``OPENAI_BASE_URL``, else OpenAI's."""
    return (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")


def _where_set(option: str, environment: str | None) -> str:
    """Where the URL came from, for a message: the option, and the environment variable it falls back to."""
    return f"{option}, or {environment}" if environment else option


def unreachable_message(
    base_url: str, err: Exception, option: str = "--base-url", environment: str | None = "OPENAI_BASE_URL"
) -> str:
    """One line for an endpoint nothing answers at: the URL, why (the operating system's word for it, e.g.
    "Connection refused", where the error chain holds one), and what to check: ``option`` (and ``environment``,
    the variable it falls back to; None for a URL that has no fallback, such as a generator's own)."""
    reason, cause, seen = str(err).strip() or type(err).__name__, err, set()
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, OSError) and cause.strerror:
            reason = os.strerror(cause.errno) if isinstance(cause.errno, int) and cause.errno > 0 else cause.strerror
            break
        cause = cause.__cause__ or cause.__context__
    return (
        f"cannot connect to {base_url} ({reason}): is the server running there, and is the URL right "
        f"({_where_set(option, environment)})?"
    )


def check_endpoint(
    base_url: str | None = None,
    *,
    option: str = "--base-url",
    environment: str | None = "OPENAI_BASE_URL",
    timeout: float = 10.0,
) -> str:
    """Fail at once, naming the URL, when nothing answers at an OpenAI-compatible endpoint; returns the URL.

    Called by the commands before they load a dataset or start a batch: a refused connection, an unknown host or a
    URL that is not http(s) is one line in milliseconds, not a minute of retries. Any HTTP answer to ``GET
    {base_url}/models`` (a 401 or 404 too) means a server is there; a slow answer does too (the requests themselves
    then report). No key is sent. ``option`` and ``environment`` name where the URL came from, as for
    :func:`unreachable_message`."""
    url = resolve_base_url(base_url)
    try:
        with httpx.Client(timeout=httpx.Timeout(timeout)) as http:
            http.get(f"{url}/models")
    except httpx.ConnectTimeout:
        raise LLMError(
            f"no answer from {url} within {timeout:.0f} s: is the server running there, and is the URL right "
            f"({_where_set(option, environment)})?"
        ) from None
    except httpx.ConnectError as err:
        raise LLMError(unreachable_message(url, err, option, environment)) from None
    except (httpx.UnsupportedProtocol, httpx.InvalidURL) as err:
        raise LLMError(f"{option} {url}: not an http:// or https:// URL ({err})") from None
    except httpx.HTTPError:
        pass  # connected: a read timeout or a protocol quirk is for the requests themselves to report
    return url
