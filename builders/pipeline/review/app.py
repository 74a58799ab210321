"""The reviewers' web app (the Sureon paper, Figs. 12-13), built with Gradio (the ``review`` extra; imported only when
served).

    sureon review serve --dataset DIR --db review.sqlite [--videos DIR] [--host 127.0.0.1 --port 7860]

Main screen: the clip (the source video played from ``start`` to ``end`` with an HTML media fragment, so nothing is
re-encoded), its timestamps, the question, every option with the correct one in green, approve / reject / flag,
reason tags and a note (required to reject). Below, the context view: the full video from the clip's start, the
aligned transcript segment and the metadata; forecasting questions say to check the step right after the clip.
Filters by specialty, procedure and QA type, and skip. Videos are read from ``--videos`` (``<source_id>.<ext>``,
as the Sureon builder names them) and never downloaded.

:class:`ReviewUI` holds every handler as plain Python on a per-browser ``session`` dict kept server-side (a
``gr.State``), so the UI logic is tested without a server; :func:`build_blocks` only wires it to components, and
:mod:`builders.pipeline.review.server` serves them behind its own login. Who is logged in never comes from that
dict: every event carries the reviewer of its server-issued session (a cookie the server checks on every request),
and a ``gr.State`` that belongs to someone else is thrown away (:meth:`ReviewUI.resume`). Every dataset text and
note is HTML-escaped before display, and escaped for Markdown too where it reaches the Markdown status line.

Logins are throttled (:class:`~builders.pipeline.review.accounts.LoginPolicy`): five failures of one account from one
client address lock that pair for 30 s, each further one doubling it up to 15 min; the account as a whole and the
client address as a whole are only slowed down (a delay of 1 s, doubling up to 8 s, before each further password
check), so nobody can lock a reviewer out by guessing at their name, from anywhere. Every failure and refusal is
logged with the name (escaped: a typed newline cannot forge a log line) and the client, never the password. The
client is the TCP peer, or what a ``--trusted-proxy`` says it forwarded for (see
:mod:`~builders.pipeline.review.gate`).
"""

import html
import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from builders.errors import InputError
from builders.options import LETTERS
from builders.pipeline.review.accounts import LoginAttempt, LoginPolicy, SessionPolicy
from builders.pipeline.review.store import DECISIONS, LONE_SURROGATE, MAX_NOTE_CHARS, REASON_TAGS, ReviewStore
from builders.sureon.categories import BY_CODE


ALL = "All"
VIDEO_ROUTE = "/videos/"  # served by the server module: a logged-in reviewer's own samples' videos only
# CommonMark's backslash-escapable ASCII punctuation that html.escape leaves alone, plus ':' (autolinks) and '$'
# (Gradio's LaTeX delimiters); html.escape takes & < > " '.
MARKDOWN_PUNCTUATION = frozenset("\\`*_{}[]()#+-.!|~:$=^")
TABLE_HEADERS = ["question_id", "category", "decision", "tags", "note", "recorded (UTC)"]
WRONG_LOGIN = "Unknown user or wrong password."
# The "Log out" control: a plain form posting /logout (never a link: a GET changes nothing, or an <img> elsewhere on
# the site could log a reviewer out), so it needs no script (Gradio runs a button's `js` with `new Function`, which
# the CSP forbids). Gradio's Markdown keeps a form and its button through its sanitizer.
LOGOUT_FORM = (
    "<form method='post' action='/logout' style='margin:0;text-align:right'>"
    "<button type='submit' style='padding:.45rem 1rem;border:1px solid #d1d5db;border-radius:.5rem;"
    "background:#f3f4f6;color:#1f2937;font:inherit;cursor:pointer'>Log out</button></form>"
)
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Filters:
    specialty: str = ALL
    procedure: str = ALL
    qa_type: str = ALL
    include_decided: bool = False

    def keep(self, record: dict) -> bool:
        return all(
            wanted in (ALL, None, "", record[field])
            for wanted, field in (
                (self.specialty, "specialty"),
                (self.procedure, "procedure"),
                (self.qa_type, "category"),
            )
        )


def markdown_text(text: str) -> str:
    """``text`` as literal characters in Markdown: HTML-escaped, and every Markdown punctuation backslash-escaped (so
    ``[x](http://...)`` or ``![x](...)`` in a dataset id shows as typed instead of becoming a link or an image)."""
    return "".join("\\" + char if char in MARKDOWN_PUNCTUATION else html.escape(char) for char in text)


def html_block(markup: str) -> str:
    """``markup`` as one raw-HTML block of Markdown: wrapped in a ``<div>`` and on one line (newlines as ``&#10;``,
    which a ``<pre>`` still shows), so a Markdown renderer passes it through whole and never reads the escaped
    dataset text inside as Markdown. The panels are Markdown components because Gradio 6's HTML component compiles
    its template with ``new Function``, which the app's CSP (no ``'unsafe-eval'``) forbids."""
    return "<div>" + markup.replace("\r", "").replace("\n", "&#10;") + "</div>"


def timestamp(seconds: float) -> str:
    centis = round(seconds * 100)
    return f"{centis // 360000}:{centis % 360000 // 6000:02d}:{centis % 6000 // 100:02d}.{centis % 100:02d}"


def video_tag(source_id: str | None, start: float, end: float | None, label: str) -> str:
    """A player of the source video ``source_id`` (None: not in --videos) from ``start`` to ``end``."""
    if source_id is None:
        return f"<p class='missing-video'>{html.escape(label)}: video not found in --videos</p>"
    fragment = f"#t={start:.3f}" + (f",{end:.3f}" if end is not None else "")
    src = html.escape(f"{VIDEO_ROUTE}{quote(source_id, safe='')}{fragment}", quote=True)
    style = "width:100%;max-height:60vh"
    return f"<video controls preload='metadata' style='{style}' src='{src}' aria-label='{html.escape(label)}'></video>"


def options_html(record: dict) -> str:
    """Every option, the correct one in green; ordering and open answers show the reference answer in green."""
    correct = record["answer_index"] if record["answer_format"] == "mcq" else -1
    items = []
    for index, option in enumerate(record["options"]):
        style = " style='background:#d1fadf;border-left:4px solid #16a34a'" if index == correct else ""
        mark = " ✓ correct" if index == correct else ""
        items.append(f"<li{style}><b>{LETTERS[index]}.</b> {html.escape(option)}{mark}</li>")
    out = f"<ol class='options' style='list-style:none;padding-left:0'>{''.join(items)}</ol>" if items else ""
    if correct < 0:
        out += (
            "<p style='background:#d1fadf;border-left:4px solid #16a34a'><b>Reference answer:</b> "
            f"{html.escape(record['answer'])}</p>"
        )
    return out


def question_html(record: dict) -> str:
    category = BY_CODE.get(record["category"])
    name = category.name if category else record["category"]
    head = (
        f"<p><b>{html.escape(record['question_id'])}</b> · {html.escape(name)} · clip "
        f"{timestamp(record['start'])} → {timestamp(record['end'])}</p>"
    )
    instruction = ""
    if record["category"] == "F":
        instruction = (
            "<p class='forecast'><b>Forecasting:</b> check the step right after the clip's end "
            f"({timestamp(record['end'])}) in the full video below.</p>"
        )
    return head + f"<h3>{html.escape(record['question'])}</h3>" + instruction + options_html(record)


def context_html(record: dict, video: str | None) -> str:
    metadata = {
        "title": record.get("title") or record["source_id"],
        "specialty": record["specialty"],
        "procedure": record["procedure"],
        "QA type": record["category"],
        "source video": record["source_id"],
    }
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>" for k, v in metadata.items())
    return (
        f"<h4>Full video from {timestamp(record['start'])}</h4>"
        + video_tag(video, record["start"], None, "full video")
        + f"<h4>Transcript</h4><pre style='white-space:pre-wrap'>{html.escape(record['transcript'] or '')}</pre>"
        + f"<h4>Metadata</h4><table>{rows}</table>"
    )


def new_session(user: str | None = None) -> dict:
    return {"user": user, "current": None, "skipped": []}


class ReviewUI:
    """All handlers of the app as plain functions of (session, inputs); see the module docstring."""

    def __init__(
        self,
        store: ReviewStore,
        samples: dict[str, dict],
        videos: dict[str, Path] | None = None,
        login_policy: LoginPolicy | None = None,
        session_policy: SessionPolicy | None = None,
        clock=time.time,
    ):
        self.store = store
        self.samples = samples
        released = {record["source_id"] for record in samples.values()}
        self.videos = {source: path for source, path in (videos or {}).items() if source in released}
        self.login_policy = login_policy or LoginPolicy()
        self.session_policy = session_policy or SessionPolicy()
        self.clock = clock
        unknown = sorted({a.sample_id for a in store.assignments()} - set(samples))
        if unknown:
            raise InputError(f"{len(unknown)} assigned sample(s) are not in the dataset, e.g. {unknown[:3]}")

    # logging in and out (the server module calls these; see the module docstring) --------------------------------

    def begin_login(self, username: str, client: str) -> LoginAttempt:
        """May this attempt check a password, and after what slow-down? Counted before the check (atomically)."""
        account = username.strip()[:128]
        attempt = self.store.begin_login(account, client, self.clock(), self.login_policy)
        if not attempt.allowed:
            logger.warning("login refused for %r from %s: locked for another %.0f s", account, client, attempt.wait_s)
        elif attempt.wait_s:
            logger.warning("login for %r from %s slowed down by %.1f s", account, client, attempt.wait_s)
        return attempt

    def refusal(self, attempt: LoginAttempt) -> str:
        return f"Too many failed logins from your address: try again in {math.ceil(attempt.wait_s)} s."

    def finish_login(
        self, username: str, password: str, client: str, attempt: LoginAttempt, replaces: str | None = None
    ) -> tuple[str | None, str]:
        """Check the password of an allowed attempt: ``(session token, message)``, the token None on failure.
        ``replaces`` is the session cookie the browser sent, ended here (a session is never carried across a login)."""
        username = username.strip()
        account = username[:128]
        if not self.store.authenticate(username, password):
            counts = attempt.failures | self.store.login_failed(account, client, self.clock())
            lock = self.login_policy.lock_seconds(counts["pair"])
            logger.warning(
                "failed login for %r from %s (%s)%s",
                account,
                client,
                ", ".join(f"{count} failure(s) of the {kind}" for kind, count in counts.items()),
                f"; locked for {lock:.0f} s" if lock else "",
            )
            return None, WRONG_LOGIN + (
                f" Too many failed logins from your address: try again in {math.ceil(lock)} s." if lock else ""
            )
        token = self.store.login_succeeded(account, client, username, self.clock(), self.session_policy, replaces)
        logger.info("login of %r from %s", username, client)
        return token, f"Logged in as {username}."

    def session_user(self, token: str | None) -> str | None:
        """The reviewer of a session cookie, or None (unknown, expired, logged out, password reset, removed)."""
        return self.store.session_user(token, self.clock(), self.session_policy)

    def logout(self, token: str | None, client: str) -> None:
        user = self.session_user(token)
        if token:
            self.store.end_session(token)
        if user:
            logger.info("logout of %r from %s", user, client)

    def resume(self, session: dict, user: str | None) -> dict:
        """``session`` if it is ``user``'s, else a fresh one for ``user`` (a browser state never changes hands)."""
        if user is None:
            return new_session()
        if session.get("user") != user:
            return self.advance(new_session(user), Filters())
        return session

    def video_of(self, user: str | None, source_id: str) -> Path | None:
        """The video file of ``source_id`` if it is one of ``user``'s assigned samples' videos, else None."""
        if user is None or source_id not in self.videos:
            return None
        assigned = (self.samples[a.sample_id]["source_id"] for a in self.store.assignments(user))
        return self.videos[source_id] if source_id in set(assigned) else None

    def filter_choices(self, session: dict) -> dict[str, list[str]]:
        records = [self.samples[a.sample_id] for a in self.store.assignments(session["user"])]
        return {field: [ALL, *sorted({r[field] for r in records})] for field in ("specialty", "procedure", "category")}

    def queue(self, session: dict, filters: Filters) -> list[str]:
        """The reviewer's assigned samples passing ``filters``: undecided first, then (optionally) decided ones."""
        decided = {sample for _, sample in self.store.latest(session["user"])}
        assigned = [a.sample_id for a in self.store.assignments(session["user"])]
        matching = [s for s in assigned if filters.keep(self.samples[s])]
        todo = [s for s in matching if s not in decided]
        todo = [s for s in todo if s not in session["skipped"]] + [s for s in todo if s in session["skipped"]]
        return todo + ([s for s in matching if s in decided] if filters.include_decided else [])

    def advance(self, session: dict, filters: Filters) -> dict:
        pending = self.queue(session, filters)
        return session | {"current": pending[0] if pending else None}

    def skip(self, session: dict, filters: Filters) -> tuple[dict, str]:
        if not session["user"] or not session["current"]:
            return session, "Nothing to skip."
        skipped = [s for s in session["skipped"] if s != session["current"]] + [session["current"]]
        return self.advance(session | {"skipped": skipped}, filters), "Skipped; it comes back at the end."

    def decide(
        self, session: dict, decision: str, tags: list[str], note: str, filters: Filters
    ) -> tuple[dict, str, bool]:
        """Record the logged-in reviewer's decision on the current sample: (session, message, recorded)."""
        if not session["user"]:
            return session, "Log in first: decisions are recorded per reviewer.", False
        if not session["current"]:
            return session, "No sample selected.", False
        try:
            self.store.record(session["user"], session["current"], decision, tags, note or "")
        except (ValueError, PermissionError) as err:
            return session, f"Not recorded: {markdown_text(str(err))}.", False
        done = session["current"]
        session = session | {"skipped": [s for s in session["skipped"] if s != done]}
        return self.advance(session, filters), f"Recorded: {decision} on {markdown_text(done)}.", True

    def panels(self, session: dict) -> tuple[str, str, str]:
        """(clip, question, context) HTML of the current sample."""
        if not session["user"]:
            return "", "", ""
        if not session["current"]:
            return "", html_block("<p>No sample left for these filters. Thank you!</p>"), ""
        record = self.samples[session["current"]]
        video = record["source_id"] if record["source_id"] in self.videos else None
        clip = (
            video_tag(video, record["start"], record["end"], "clip")
            + f"<p>Clip {timestamp(record['start'])} → {timestamp(record['end'])} "
            + f"of {html.escape(record['source_id'])}</p>"
        )
        return tuple(html_block(panel) for panel in (clip, question_html(record), context_html(record, video)))

    def my_decisions(self, session: dict) -> list[list[str]]:
        """The reviewer's own decisions in force (never anyone else's), newest first; shown as plain text."""
        if not session["user"]:
            return []
        latest = sorted(self.store.latest(session["user"]).values(), key=lambda d: d.id, reverse=True)
        return [
            [d.sample_id, self.samples[d.sample_id]["category"], d.decision, ", ".join(d.tags), d.note, d.created_at]
            for d in latest
        ]


def build_blocks(ui: ReviewUI):
    """The Gradio Blocks of the app, wired to ``ui``'s handlers. Each event's reviewer is ``request.username``, which
    the server sets from the session cookie it checked (never from anything the browser says about itself)."""
    import gradio as gr

    with gr.Blocks(title="Sureon expert review", analytics_enabled=False) as blocks:
        session = gr.State(new_session())
        with gr.Row():
            gr.Markdown("# Sureon expert review")
            # a form posting /logout: the server ends the session, clears the cookie and shows the login page again
            gr.Markdown(html_block(LOGOUT_FORM), latex_delimiters=[])
        status = gr.Markdown(latex_delimiters=[])
        with gr.Row():
            specialty = gr.Dropdown([ALL], value=ALL, label="Specialty")
            procedure = gr.Dropdown([ALL], value=ALL, label="Procedure")
            qa_type = gr.Dropdown([ALL], value=ALL, label="QA type")
            include_decided = gr.Checkbox(label="Also show samples I decided (to change a decision)")
        with gr.Row():
            clip = gr.Markdown(latex_delimiters=[])
            question = gr.Markdown(latex_delimiters=[])
        tags = gr.CheckboxGroup([(label, slug) for slug, label in REASON_TAGS.items()], label="Reasons")
        note = gr.Textbox(label="Note (required to reject, encouraged to flag)", lines=3, max_length=MAX_NOTE_CHARS)
        with gr.Row():
            buttons = {
                d: gr.Button(d.capitalize(), variant="primary" if d == "approve" else "secondary") for d in DECISIONS
            }
            skip_button = gr.Button("Skip")
        gr.Markdown("## Context")
        context = gr.Markdown(latex_delimiters=[])
        gr.Markdown("## My decisions")
        table = gr.Dataframe(headers=TABLE_HEADERS, datatype="str", interactive=False)

        filter_inputs = [specialty, procedure, qa_type, include_decided]
        view = [session, status, clip, question, context, table, note, tags]

        def reviewer(state: dict, request: gr.Request) -> dict:
            return ui.resume(state, getattr(request, "username", None) if request else None)

        def render(state, message):
            return (state, message, *ui.panels(state), ui.my_decisions(state), "", [])

        def on_load(state, request: gr.Request):
            state = reviewer(state, request)
            if not state["user"]:
                return (*render(state, "Your session has ended: reload the page to log in."), *([gr.Dropdown()] * 3))
            choices = ui.filter_choices(state)
            return (
                *render(state, f"Logged in as {markdown_text(state['user'])}."),
                *(gr.Dropdown(choices=choices[f], value=ALL) for f in ("specialty", "procedure", "category")),
            )

        blocks.load(on_load, [session], [*view, specialty, procedure, qa_type])

        # Gradio passes gr.Request only to a positional parameter, hence the spelled-out filter values.
        def on_filter(state, specialty_, procedure_, qa_type_, decided, request: gr.Request):
            state, filters = reviewer(state, request), Filters(specialty_, procedure_, qa_type_, decided)
            return render(ui.advance(state, filters) if state["user"] else state, "")

        for component in filter_inputs:
            component.change(on_filter, [session, *filter_inputs], view)

        def on_skip(state, specialty_, procedure_, qa_type_, decided, request: gr.Request):
            return render(*ui.skip(reviewer(state, request), Filters(specialty_, procedure_, qa_type_, decided)))

        skip_button.click(on_skip, [session, *filter_inputs], view, api_name="skip")

        for decision, button in buttons.items():

            def on_decide(
                state,
                chosen_tags,
                text,
                specialty_,
                procedure_,
                qa_type_,
                decided,
                request: gr.Request,
                decision=decision,
            ):
                state, filters = reviewer(state, request), Filters(specialty_, procedure_, qa_type_, decided)
                state, message, recorded = ui.decide(state, decision, chosen_tags or [], text, filters)
                if not recorded:  # keep what the reviewer typed (a lone surrogate would break the response)
                    kept = LONE_SURROGATE.sub("\ufffd", text or "")
                    return (state, message, *ui.panels(state), ui.my_decisions(state), kept, chosen_tags)
                return render(state, message)

            button.click(on_decide, [session, tags, note, *filter_inputs], view, api_name=decision)
    return blocks
