"""The shared OpenAI-compatible client against a local chat-completions server: retries, cap, JSON, cache, resume."""

import base64
import io
import json
import logging
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import REPO
from fake_chat_server import FakeChatServer, Reply, last_user_text
from PIL import Image
from pydantic import BaseModel

from builders.llm.cache import LLMCache, cache_key
from builders.llm.client import ChatRequest, LLMClient
from builders.llm.endpoint import LLMError, check_endpoint
from builders.llm.messages import to_openai_messages


KEY = "sk-test-SECRET-0123456789"


class Verdict(BaseModel):
    verdict: str
    reason: str


def user(text):
    return [{"role": "user", "content": [{"type": "text", "text": text}]}]


def client_for(server, tmp_path, **kwargs):
    kwargs.setdefault("backoff", 0.0)
    return LLMClient("fake-model", base_url=server.url, api_key=KEY, cache=tmp_path / "llm.sqlite", **kwargs)


def test_retries_on_429_and_5xx_then_succeeds(tmp_path):
    statuses = {0: 429, 1: 500, 2: 503}

    def script(body, index):
        if index in statuses:
            return Reply(status=statuses[index], raw='{"error": "busy"}', headers={"Retry-After": "0"})
        return Reply(content="B")

    with FakeChatServer(script) as server:
        client = client_for(server, tmp_path)
        result = client.chat(user("Which option?"), stage="eval")
    assert result.ok and result.text == "B" and not result.cached
    assert len(server.requests) == 4
    usage = client.ledger.as_dict()["eval"]
    assert (usage["retries"], usage["calls"], usage["failed"]) == (3, 1, 0)


def test_gives_up_after_max_retries_and_counts_the_failure(tmp_path):
    with FakeChatServer(lambda body, index: Reply(status=500, raw="oops")) as server:
        client = client_for(server, tmp_path, max_retries=2)
        result = client.chat(user("q"), stage="s")
    assert not result.ok and "gave up after 3 attempts" in result.error and "HTTP 500" in result.error
    assert len(server.requests) == 3
    assert client.ledger.as_dict()["s"]["failed"] == 1
    assert len(LLMCache(tmp_path / "llm.sqlite")) == 0  # failures are never cached


def test_timeouts_are_retried(tmp_path):
    with FakeChatServer(lambda body, index: Reply(content="late" if index else "never", delay=5 * (index == 0))) as s:
        client = client_for(s, tmp_path, timeout=0.5)
        result = client.chat(user("q"))
    assert result.text == "late" and client.ledger.as_dict()["default"]["retries"] == 1


def test_invalid_json_is_asked_again_then_counted_as_failed(tmp_path):
    replies = {"good": ["not json", '{"verdict": "correct"}', '```json\n{"verdict": "correct", "reason": "ok"}\n```']}

    def script(body, index):
        text = last_user_text(body)
        if text == "good":
            return Reply(content=replies["good"][sum(last_user_text(b) == "good" for b in server.requests) - 1])
        return Reply(content="{broken")

    with FakeChatServer(script) as server:
        client = client_for(server, tmp_path)
        good, bad = client.chat_many(
            [ChatRequest(user("good"), schema=Verdict, stage="judge"), ChatRequest(user("bad"), schema=Verdict)]
        )
    assert good.ok and good.data == Verdict(verdict="correct", reason="ok")
    assert not bad.ok and "invalid JSON for Verdict" in bad.error
    assert server.requests[0]["response_format"]["json_schema"]["schema"] == Verdict.model_json_schema()
    ledger = client.ledger.as_dict()
    assert ledger["judge"]["invalid_json"] == 2 and ledger["judge"]["failed"] == 0
    assert ledger["default"]["invalid_json"] == 3 and ledger["default"]["failed"] == 1
    assert len(LLMCache(tmp_path / "llm.sqlite")) == 1  # only the valid reply


def test_concurrency_cap_is_never_exceeded(tmp_path):
    with FakeChatServer(lambda body, index: Reply(content=last_user_text(body).upper(), delay=0.05)) as server:
        client = client_for(server, tmp_path, max_concurrency=4)
        results = client.chat_many([ChatRequest(user(f"q{i}")) for i in range(24)])
    assert [r.text for r in results] == [f"Q{i}" for i in range(24)]  # results keep the request order
    assert server.max_in_flight == 4


def test_cache_answers_a_rerun_without_any_call_and_never_holds_the_key(tmp_path):
    requests = [ChatRequest(user(f"q{i}"), max_tokens=8) for i in range(5)]
    with FakeChatServer(lambda body, index: Reply(content=f"a{index}")) as server:
        first = client_for(server, tmp_path).chat_many(requests)
        again = LLMClient(
            "fake-model", base_url=server.url, api_key="another-key", cache=tmp_path / "llm.sqlite"
        ).chat_many(requests)
        changed = client_for(server, tmp_path).chat(user("q0"), max_tokens=9)  # other params: another entry
    assert len(server.requests) == 6 and changed.text == "a5"
    assert [r.text for r in again] == [r.text for r in first] and all(r.cached for r in again)
    for path in tmp_path.glob("llm.sqlite*"):
        assert KEY.encode() not in path.read_bytes()
    assert server.headers[0]["Authorization"] == f"Bearer {KEY}"
    assert KEY not in repr(client_for(server, tmp_path))


def test_fatal_status_stops_and_the_key_is_scrubbed_from_the_message(tmp_path, caplog):
    with FakeChatServer(lambda body, index: Reply(status=401, raw=f'{{"error": "bad key {KEY}"}}')) as server:
        client = client_for(server, tmp_path)
        with caplog.at_level(logging.DEBUG), pytest.raises(LLMError, match="check the API key") as err:
            client.chat(user("q"))
    assert KEY not in str(err.value) and "***" in str(err.value)
    assert KEY not in caplog.text
    assert len(server.requests) == 1


def closed_port_url() -> str:
    """A base URL at a local port nobody listens on (bound, then closed): connecting to it is refused."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}/v1"


def test_a_refused_connection_fails_at_once_naming_the_url(tmp_path):
    """Nothing listens at the URL: retrying (6 times, backoff up to a minute) would only hide it."""
    url = closed_port_url()
    client = LLMClient("m", base_url=url, api_key=KEY, cache=tmp_path / "llm.sqlite", backoff=1.0)
    started = time.monotonic()
    with pytest.raises(LLMError, match=r"cannot connect to .* \(Connection refused\): is the server running") as err:
        client.chat_many([ChatRequest(user(f"q{i}")) for i in range(5)])
    assert time.monotonic() - started < 5
    assert url in str(err.value) and "--base-url" in str(err.value) and KEY not in str(err.value)
    assert client.ledger.as_dict().get("default", {}).get("retries", 0) == 0
    assert len(LLMCache(tmp_path / "llm.sqlite")) == 0


def test_a_server_that_answered_is_retried_when_a_connection_is_refused(tmp_path):
    """Once the server has answered, a refused connection is a restart: it is retried, and the cache holds all."""
    import httpx

    class RestartingServer(httpx.AsyncBaseTransport):
        calls = 0

        async def handle_async_request(self, request):
            self.calls += 1
            if self.calls == 2:
                raise httpx.ConnectError("Connection refused", request=request)
            body = json.loads(request.content)
            return httpx.Response(200, json=fake_completion(last_user_text(body).upper(), body["model"]))

    transport = RestartingServer()
    client = LLMClient("m", base_url="http://fake/v1", cache=tmp_path / "llm.sqlite", backoff=0.0, transport=transport)
    assert client.chat(user("a")).text == "A"
    assert client.chat(user("b")).text == "B"
    assert client.ledger.as_dict()["default"]["retries"] == 1 and len(LLMCache(tmp_path / "llm.sqlite")) == 2


def test_routes_send_each_model_to_its_own_server_and_the_cache_ignores_the_url(tmp_path):
    """A routed model's requests go to its own server only, the others to the base URL; a server that moves to
    another port is asked nothing: its cached replies stay valid."""

    def echo(body, index):
        return Reply(content=f"{body['model']}: {last_user_text(body)}")

    requests = [ChatRequest(user(f"q{i}"), model=model) for i in range(3) for model in ("routed", "plain")]
    with FakeChatServer(echo) as base, FakeChatServer(echo) as own, FakeChatServer(echo) as moved:
        client = client_for(base, tmp_path, routes={"routed": own.url + "/"})
        results = client.chat_many(requests)
        again = client_for(base, tmp_path, routes={"routed": moved.url}).chat_many(requests)
    assert [r.text for r in results] == [f"{r.model}: q{i // 2}" for i, r in enumerate(requests)]
    assert {b["model"] for b in own.requests} == {"routed"} and len(own.requests) == 3
    assert {b["model"] for b in base.requests} == {"plain"} and len(base.requests) == 3
    assert moved.requests == [] and all(r.cached for r in again)


def test_a_dead_route_fails_at_once_naming_its_url_though_the_base_url_answered(tmp_path):
    """ "Never answered yet" is per URL: the base URL answering makes a refused route no restart to retry."""
    dead = closed_port_url()
    with FakeChatServer() as base:
        client = client_for(base, tmp_path, routes={"routed": dead}, backoff=1.0)
        assert client.chat(user("q"), model="plain").text == "OK"
        started = time.monotonic()
        with pytest.raises(LLMError, match=r"cannot connect to .* \(Connection refused\)") as err:
            client.chat(user("q"), model="routed")
    assert time.monotonic() - started < 5
    assert dead in str(err.value) and base.url not in str(err.value) and "model 'routed'" in str(err.value)
    assert "OPENAI_BASE_URL" not in str(err.value)  # a route has no fallback to name
    assert client.ledger.as_dict().get("default", {}).get("retries", 0) == 0


def test_a_fatal_status_names_the_url_the_request_went_to(tmp_path):
    with FakeChatServer() as base, FakeChatServer(lambda body, index: Reply(status=404, raw="no model")) as own:
        client = client_for(base, tmp_path, routes={"routed": own.url})
        with pytest.raises(LLMError, match="HTTP 404") as err:
            client.chat(user("q"), model="routed")
    assert f"{own.url}/chat/completions" in str(err.value) and base.url not in str(err.value)


def fake_completion(content: str, model: str) -> dict:
    from fake_chat_server import completion

    return completion(content, {"prompt_tokens": 1, "completion_tokens": 1}, model)


def test_check_endpoint_tells_a_server_from_nothing_before_any_request():
    with FakeChatServer() as server:  # answers GET /models with 501: a server is there
        assert check_endpoint(server.url + "/") == server.url
        assert server.requests == []
    with pytest.raises(LLMError, match=r"cannot connect to .*Connection refused.*\(--judge-base-url, or OPENAI"):
        check_endpoint(closed_port_url(), option="--judge-base-url")
    with pytest.raises(LLMError, match="--base-url localhost:8000/v1: not an http:// or https:// URL"):
        check_endpoint("localhost:8000/v1")


def test_base_url_and_key_from_the_environment(tmp_path, monkeypatch):
    with FakeChatServer() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        assert LLMClient("m").chat(user("q")).text == "OK"
    assert server.headers[0]["Authorization"] == f"Bearer {KEY}"


def test_tokens_and_cost_per_stage(tmp_path):
    usage = {"prompt_tokens": 1000, "completion_tokens": 200}
    with FakeChatServer(lambda body, index: Reply(usage=usage)) as server:
        client = client_for(server, tmp_path, prices={"fake-model": {"input": 2.0, "output": 10.0}})
        client.chat_many([ChatRequest(user(f"q{i}"), stage="distractors") for i in range(3)])
        client.chat_many([ChatRequest(user("q0"), stage="distractors"), ChatRequest(user("z"), stage="judge")])
    ledger = client.ledger.as_dict()
    assert ledger["distractors"]["prompt_tokens"] == 3000 and ledger["distractors"]["completion_tokens"] == 600
    assert ledger["distractors"]["cost_usd"] == pytest.approx(3 * (1000 * 2 + 200 * 10) / 1e6)
    assert (ledger["distractors"]["calls"], ledger["distractors"]["cached"]) == (3, 1)
    assert ledger["judge"]["calls"] == 1
    assert "distractors: 3 calls (1 cached" in client.ledger.summary()


def test_images_travel_as_base64_data_urls():
    frame = Image.new("RGB", (20, 10), (200, 30, 30))
    buffer = io.BytesIO()
    frame.save(buffer, format="PNG")
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Frame at 00:00:01.00:"},
                {"type": "image", "image": frame},
                {"type": "image", "image": {"bytes": buffer.getvalue(), "path": None}},
                {"type": "text", "text": "Question?"},
            ],
        }
    ]
    parts = to_openai_messages(messages)[0]["content"]
    assert [p["type"] for p in parts] == ["text", "image_url", "image_url", "text"]
    jpeg_url, png_url = parts[1]["image_url"]["url"], parts[2]["image_url"]["url"]
    assert jpeg_url.startswith("data:image/jpeg;base64,") and png_url.startswith("data:image/png;base64,")
    decoded = Image.open(io.BytesIO(base64.b64decode(png_url.split(",", 1)[1])))
    assert decoded.size == (20, 10) and decoded.getpixel((0, 0)) == (200, 30, 30)
    with pytest.raises(ValueError, match="frames_as='images'"):
        to_openai_messages([{"role": "user", "content": [{"type": "video", "video": [frame]}]}])


def test_cache_key_depends_on_model_messages_and_params_only():
    base = cache_key("m", user("q"), {"temperature": 0.0})
    assert base == cache_key("m", user("q"), {"temperature": 0.0})
    assert len({base, cache_key("m2", user("q"), {"temperature": 0.0}), cache_key("m", user("q2"), {})}) == 3


RESUME_SCRIPT = """
import json, sys
from builders.llm.client import ChatRequest, LLMClient
url, cache, key = sys.argv[1:4]
client = LLMClient("fake-model", base_url=url, cache=cache, api_key=key, max_concurrency=4, backoff=0)
messages = [[{"role": "user", "content": f"q{i}"}] for i in range(20)]
results = client.chat_many([ChatRequest(m) for m in messages])
print(json.dumps([r.text for r in results]))
"""


def test_a_killed_run_resumes_from_the_cache_without_repeating_calls(tmp_path):
    cache = tmp_path / "llm.sqlite"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    hang = {"on": True}

    def script(body, index):
        answer = last_user_text(body).replace("q", "a")
        return Reply(content=answer, delay=60 if hang["on"] and index >= 10 else 0)

    with FakeChatServer(script) as server:
        # each run sends its own key (the cache ignores keys): a killed run's requests still queued at the server when
        # it died are recorded after the kill and must not count as the resumed run's
        process = subprocess.Popen(
            [sys.executable, "-c", RESUME_SCRIPT, server.url, str(cache), "killed-run"],
            env=env,
            stdout=subprocess.PIPE,
        )
        deadline = time.monotonic() + 60
        while (not cache.exists() or len(LLMCache(cache)) < 10) and time.monotonic() < deadline:
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)
        process.wait()
        assert len(LLMCache(cache)) == 10
        first_round = [last_user_text(b) for b in server.requests[:10]]
        hang["on"] = False
        server.release.set()
        result = subprocess.run(
            [sys.executable, "-c", RESUME_SCRIPT, server.url, str(cache), "resumed-run"],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [f"a{i}" for i in range(20)]
    resumed = [
        last_user_text(body)
        for body, headers in zip(server.requests, server.headers, strict=True)
        if {k.lower(): v for k, v in headers.items()}.get("authorization") == "Bearer resumed-run"
    ]
    assert len(resumed) == 10 and not set(resumed) & set(first_round)  # every finished call came from the cache


def test_reasoning_fields_are_kept_apart_cached_and_counted_per_model(tmp_path):
    """vLLM's reasoning parsers send ``reasoning_content`` (newer releases ``reasoning``); neither is the answer."""

    def script(body, index):
        field = "reasoning_content" if "first" in last_user_text(body) else "reasoning"
        message = {"role": "assistant", "content": "B", field: f"thought via {field}"}
        usage = {"prompt_tokens": 7, "completion_tokens": 5, "completion_tokens_details": {"reasoning_tokens": 4}}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        return Reply(raw=json.dumps({"choices": [choice], "usage": usage}))

    with FakeChatServer(script) as server:
        client = client_for(server, tmp_path)
        first, second = client.chat_many([ChatRequest(user("first")), ChatRequest(user("second"))])
        again = client_for(server, tmp_path).chat(user("first"))
        dropped = client.chat(user("third"), params={"temperature": None, "reasoning_effort": "high"})
    assert (first.text, first.reasoning) == ("B", "thought via reasoning_content")
    assert (second.text, second.reasoning) == ("B", "thought via reasoning")
    assert again.cached and again.reasoning == "thought via reasoning_content"  # from the SQLite cache
    assert "temperature" not in server.requests[-1] and server.requests[-1]["reasoning_effort"] == "high"
    assert dropped.ok and len(server.requests) == 3
    assert client.ledger.as_dict()["default"]["reasoning_tokens"] == 12
    assert client.ledger.by_model()["fake-model"] == {
        "replies": 3,
        "cached": 0,
        "prompt_tokens": 21,
        "completion_tokens": 15,
        "reasoning_tokens": 12,
    }


def test_a_cache_written_before_reasoning_was_kept_still_opens(tmp_path):
    import sqlite3

    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.execute(
        "CREATE TABLE replies (key TEXT PRIMARY KEY, model TEXT, stage TEXT, text TEXT, usage TEXT,"
        " finish_reason TEXT, created REAL)"
    )
    db.execute("INSERT INTO replies VALUES ('k', 'm', 's', 'old reply', '{}', 'stop', 0)")
    db.commit()
    db.close()
    cache = LLMCache(path)
    assert cache.get("k") == {"text": "old reply", "usage": {}, "finish_reason": "stop", "reasoning": None}
    cache.put("k2", "m", "s", "new", {}, "stop", "why")
    assert cache.get("k2")["reasoning"] == "why" and len(cache) == 2
