"""The stand-in generators: a deterministic program in the place of stage 2's generator LLMs (M1-M3), served as
OpenAI-compatible chat-completions endpoints on the loopback interface.

It stands in for the language model only. ``sureon reproduce`` runs stage 2 for real against it (``sureon pipeline
stage2 --generators m1=URL ...``): the retrieval of exemplars, the prompt, the client with its cache and retries, the
structured reply's parsing and validation, the pool's cleaning and the draw all run as they do against vLLM. What the
program replaces is the writing: given the message :func:`builders.pipeline.radg.distractor_message` wrote, it does
what a capable model following the RADG prompt (``builders/pipeline/prompts/distractors.md``: "match the length,
vocabulary, phrasing and specificity of the example correct answers") does, by rule (:func:`write_distractors`).

:func:`serve_generators` serves one endpoint per name, each on a free port of 127.0.0.1 in a thread of this process,
as the Sureon paper serves each generator as its own vLLM server. The three stand-ins are the same program under
three names: they agree on every distractor, so the pool after ``clean_pool`` holds one model's distractors (the
others repeat them) and the miniature shows RADG's exemplar alignment, not the mixing of several models' styles.
"""

import json
import random
import re
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self

from builders.options import normalise_option, stable_seed
from builders.pipeline.radg import parse_distractor_message


# The count line of the RADG system prompt (prompts/distractors.md: "Write exactly {num_distractors} distractors").
COUNT_LINE = re.compile(r"Write exactly (\d+) distractors")


def _words(text: str) -> int:
    return len(text.split())


def _extends(text: str, start: str) -> bool:
    """Whether ``text`` starts with ``start`` as whole words (both normalised): "Hook electrode, as shown" extends
    "Hook electrode", "Clip applier" does not extend "Clip a"."""
    text, start = normalise_option(text), normalise_option(start)
    return text.startswith(start) and (len(text) == len(start) or not text[len(start)].isalnum())


def _elaborations(longer: list[str], shorter: list[str]) -> list[str]:
    """The clause each ``longer`` text adds after punctuation to a ``shorter`` one it extends ("Stapler, as clearly
    shown ..." over "Stapler": ", as clearly shown ..."), in order, without repeats: the specificity a model copies
    from an example. A word run on ("Hook electrode" over "Hook") is part of a name, not an elaboration."""
    found = [text[len(base) :] for text in longer for base in shorter if text.startswith(base)]
    return list(dict.fromkeys(tail for tail in found if tail and not (tail[0].isalnum() or tail[0].isspace())))


def write_distractors(user_message: str, count: int) -> list[str]:
    """At most ``count`` distractors for a stage-2 distractor message, restyled like the exemplars.

    The prompt asks for distractors like the example correct answers. Each original (stage-1) distractor, in order,
    is written like one exemplar drawn at random, as a model sampling at a low temperature follows one example or
    another: the text closest to it in word count among the original, the exemplars that extend the original, and
    the original with an exemplar's elaboration (the clause a longer exemplar adds after punctuation to a shorter
    text it extends, ", as clearly shown in the magnified view of the operative field"); ties: the original, then
    list order (with no exemplar retrieved, the original as it is). So a pool carries its exemplars'
    mix of lengths at places that vary from question to question: a long answer, which retrieves mostly long answers,
    gets mostly long distractors, a short one about as many as the long answers among its exemplars, and the pattern
    of long and short options does not name the answer (following the k-th exemplar in retrieval order instead made
    one pattern per answer, a shortcut of the stand-in's own that blind curation then found on most rows). The draw
    is seeded by the whole message (``stable_seed``), so a repeated request gets the same reply. When fewer than
    ``count`` come out, exemplars closest in word count to the answer fill in (ties: list order). No text that is
    the answer, extends it or is extended by it (a paraphrase or a subset of the answer), nor one that extends or is
    extended by a distractor already written, is ever written.
    """
    prompt = parse_distractor_message(user_message)
    answer, target = prompt.answer, _words(prompt.answer)
    rng = random.Random(stable_seed("standin-generator", user_message))
    elaborations = _elaborations(prompt.exemplars, [answer, *prompt.options, *prompt.exemplars])
    chosen: list[str] = []

    def acceptable(text: str) -> bool:
        return not any(_extends(text, other) or _extends(other, text) for other in [answer, *chosen])

    for original in prompt.options:
        if not acceptable(original):  # the answer, a subset of it, or a repeat: no form of it is a distractor
            continue
        length = _words(rng.choice(prompt.exemplars or [original]))
        forms = [original, *(e for e in prompt.exemplars if _extends(e, original))]
        forms += [original + elaboration for elaboration in elaborations]
        candidates = [text for text in dict.fromkeys(forms) if acceptable(text)]
        if candidates:
            chosen.append(min(candidates, key=lambda text: abs(_words(text) - length)))
    by_closeness = sorted(prompt.exemplars, key=lambda text: abs(_words(text) - target))  # stable: list order on ties
    for exemplar in by_closeness:
        if len(chosen) >= count:
            break
        if acceptable(exemplar):
            chosen.append(exemplar)
    return chosen[:count]


def _text(content) -> str:
    """A message's text: a string, or OpenAI content parts."""
    if isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content or [] if isinstance(part, dict))


def reply_to(body: dict) -> tuple[int, dict]:
    """The HTTP status and JSON body answering one chat-completions request body."""
    try:
        messages = body["messages"]
        system = next(_text(m["content"]) for m in messages if m["role"] == "system")
        user = [_text(m["content"]) for m in messages if m["role"] == "user"][-1]
    except (KeyError, IndexError, TypeError, StopIteration):
        return 400, {"error": {"message": "expected a system and a user message (the RADG prompt)"}}
    count = COUNT_LINE.search(system)
    if count is None:
        return 400, {"error": {"message": "the system message says no 'Write exactly N distractors'"}}
    try:
        distractors = write_distractors(user, int(count.group(1)))
    except ValueError as err:
        return 400, {"error": {"message": f"the user message is no stage-2 distractor message: {err}"}}
    content = json.dumps({"distractors": distractors}, ensure_ascii=False)
    usage = {
        "prompt_tokens": sum(_words(_text(m.get("content"))) for m in messages),
        "completion_tokens": _words(content),
    }
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    return 200, {
        "id": "chatcmpl-standin",
        "object": "chat.completion",
        "model": body.get("model", ""),
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": usage,
    }


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # the client opens up to --max-concurrency connections at once


class StandinServer:
    """One stand-in generator served under ``name`` at ``url`` (``http://127.0.0.1:PORT/v1``) while entered.

    ``POST /v1/chat/completions`` answers a request for ``name`` (another model is a 404, as vLLM answers), ``GET
    /v1/models`` lists ``name`` (what :func:`builders.llm.endpoint.check_endpoint` asks)."""

    def __init__(self, name: str, port: int = 0):
        self.name = name
        self._server = _Server(("127.0.0.1", port), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, name=f"standin-{name}", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def _handler(self):
        name = self.name

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: the client reuses its connections

            def log_message(self, *args):
                pass

            def _send(self, status: int, payload: dict) -> None:
                data = json.dumps(payload, ensure_ascii=False).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path.rstrip("/") == "/v1/models":
                    self._send(
                        200, {"object": "list", "data": [{"id": name, "object": "model", "owned_by": "sureon"}]}
                    )
                else:
                    self._send(404, {"error": {"message": f"no such path {self.path}"}})

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, {"error": {"message": f"no such path {self.path}"}})
                    return
                try:
                    body = json.loads(raw)
                except json.JSONDecodeError as err:
                    self._send(400, {"error": {"message": f"the request body is not JSON: {err}"}})
                    return
                if not isinstance(body, dict) or body.get("model") != name:
                    model = body.get("model") if isinstance(body, dict) else None
                    self._send(404, {"error": {"message": f"The model `{model}` does not exist; this serves {name}"}})
                    return
                self._send(*reply_to(body))

        return Handler


@contextmanager
def serve_generators(names: list[str]) -> Iterator[dict[str, str]]:
    """Serve one stand-in generator per name, each on its own free loopback port; yields ``{name: base_url}`` (for
    ``--generators NAME=URL``) and stops them all on exit."""
    if len(set(names)) != len(names):
        raise ValueError(f"each stand-in generator needs its own name, got {names}")
    with ExitStack() as stack:
        yield {name: stack.enter_context(StandinServer(name)).url for name in names}
