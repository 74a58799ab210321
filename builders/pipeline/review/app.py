"""The reviewers' web app (seed Figs. 12-13), built with Gradio (the ``review`` extra; imported only when served).

    sureon review serve --dataset DIR --db review.sqlite [--videos DIR] [--host 127.0.0.1 --port 7860]

Main screen: the clip (the source video played from ``start`` to ``end`` with an HTML media fragment, so nothing is
re-encoded), its timestamps, the question, every option with the correct one in green, approve / reject / flag,
reason tags and a note (required to reject). Below, the context view: the full video from the clip's start, the
aligned transcript segment and the metadata; forecasting questions say to check the step right after the clip.
Filters by specialty, procedure and QA type, and skip. Videos are read from ``--videos`` (``<source_id>.<ext>``,
as the Sureon builder names them) and never downloaded.

:class:`ReviewUI` holds every handler as plain Python on a per-browser ``session`` dict kept server-side (a
``gr.State``), so the UI logic is tested without a server; :func:`build_blocks` only wires it to components. Every
dataset text and note is HTML-escaped before display.

Logins are throttled per account name and per client address (:class:`~builders.pipeline.review.store.LoginPolicy`:
five failures lock for 30 s, each further one doubles that, up to 15 min); every failure and refusal is logged with
the name and the client, never the password. The client is the address of the TCP peer: behind a reverse proxy
every reviewer shares the proxy's address, so the per-client limit then counts them together (the per-account one
is unaffected).
"""

import html
import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path

from builders.options import LETTERS
from builders.pipeline.review.store import DECISIONS, REASON_TAGS, LoginPolicy, ReviewStore
from builders.sureon.categories import BY_CODE


ALL = "All"
FILE_ROUTE = "/gradio_api/file="
TABLE_HEADERS = ["question_id", "category", "decision", "tags", "note", "recorded (UTC)"]
WRONG_LOGIN = "Unknown user or wrong password."
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


def timestamp(seconds: float) -> str:
    centis = round(seconds * 100)
    return f"{centis // 360000}:{centis % 360000 // 6000:02d}:{centis % 6000 // 100:02d}.{centis % 100:02d}"


def video_tag(path: Path | None, start: float, end: float | None, label: str) -> str:
    if path is None:
        return f"<p class='missing-video'>{html.escape(label)}: video not found in --videos</p>"
    fragment = f"#t={start:.3f}" + (f",{end:.3f}" if end is not None else "")
    src = html.escape(f"{FILE_ROUTE}{path.resolve()}{fragment}", quote=True)
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


def context_html(record: dict, video: Path | None) -> str:
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


def new_session() -> dict:
    return {"user": None, "current": None, "skipped": []}


class ReviewUI:
    """All handlers of the app as plain functions of (session, inputs); see the module docstring."""

    def __init__(
        self,
        store: ReviewStore,
        samples: dict[str, dict],
        videos: dict[str, Path] | None = None,
        login_policy: LoginPolicy | None = None,
        clock=time.time,
    ):
        self.store = store
        self.samples = samples
        self.videos = videos or {}
        self.login_policy = login_policy or LoginPolicy()
        self.clock = clock
        unknown = sorted({a.sample_id for a in store.assignments()} - set(samples))
        if unknown:
            raise ValueError(f"{len(unknown)} assigned sample(s) are not in the dataset, e.g. {unknown[:3]}")

    def login(self, session: dict, username: str, password: str, client: str | None = None) -> tuple[dict, str]:
        """Log in, unless the account name or the client is locked by earlier failures (see the module docstring)."""
        username = username.strip()
        account = f"account:{username[:128]}"
        keys = [account, f"client:{client}"] if client else [account]
        now = self.clock()
        wait = self.store.login_locked_until(keys, now, self.login_policy) - now
        if wait > 0:
            logger.warning("login refused for %r from %s: locked for another %.0f s", username[:128], client, wait)
            return new_session(), f"Too many failed logins: try again in {math.ceil(wait)} s."
        if not self.store.authenticate(username, password):
            counts = self.store.login_failed(keys, now, self.login_policy)
            lock = self.login_policy.lock_seconds(max(counts.values()))
            logger.warning(
                "failed login for %r from %s (%s)%s",
                username[:128],
                client,
                ", ".join(f"{key}: {count} failure(s)" for key, count in counts.items()),
                f"; locked for {lock:.0f} s" if lock else "",
            )
            return new_session(), WRONG_LOGIN + (
                f" Too many failed logins: try again in {math.ceil(lock)} s." if lock else ""
            )
        self.store.login_succeeded(account)
        logger.info("login of %r from %s", username, client)
        session = new_session() | {"user": username}
        return self.advance(session, Filters()), f"Logged in as {html.escape(session['user'])}."

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
            return session, f"Not recorded: {html.escape(str(err))}.", False
        done = session["current"]
        session = session | {"skipped": [s for s in session["skipped"] if s != done]}
        return self.advance(session, filters), f"Recorded: {decision} on {html.escape(done)}.", True

    def panels(self, session: dict) -> tuple[str, str, str]:
        """(clip, question, context) HTML of the current sample."""
        if not session["user"]:
            return "", "", ""
        if not session["current"]:
            return "", "<p>No sample left for these filters. Thank you!</p>", ""
        record = self.samples[session["current"]]
        video = self.videos.get(record["source_id"])
        clip = (
            video_tag(video, record["start"], record["end"], "clip")
            + f"<p>Clip {timestamp(record['start'])} → {timestamp(record['end'])} "
            + f"of {html.escape(record['source_id'])}</p>"
        )
        return clip, question_html(record), context_html(record, video)

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
    """The Gradio Blocks of the app, wired to ``ui``'s handlers."""
    import gradio as gr

    with gr.Blocks(title="Sureon expert review") as blocks:
        session = gr.State(new_session())
        gr.Markdown("# Sureon expert review")
        status = gr.Markdown()
        with gr.Column(visible=True) as login_box:
            username = gr.Textbox(label="Username")
            password = gr.Textbox(label="Password", type="password")
            login_button = gr.Button("Log in", variant="primary")
        with gr.Column(visible=False) as review_box:
            with gr.Row():
                specialty = gr.Dropdown([ALL], value=ALL, label="Specialty")
                procedure = gr.Dropdown([ALL], value=ALL, label="Procedure")
                qa_type = gr.Dropdown([ALL], value=ALL, label="QA type")
                include_decided = gr.Checkbox(label="Also show samples I decided (to change a decision)")
            with gr.Row():
                clip = gr.HTML()
                question = gr.HTML()
            tags = gr.CheckboxGroup([(label, slug) for slug, label in REASON_TAGS.items()], label="Reasons")
            note = gr.Textbox(label="Note (required to reject, encouraged to flag)", lines=3)
            with gr.Row():
                buttons = {
                    d: gr.Button(d.capitalize(), variant="primary" if d == "approve" else "secondary")
                    for d in DECISIONS
                }
                skip_button = gr.Button("Skip")
            gr.Markdown("## Context")
            context = gr.HTML()
            gr.Markdown("## My decisions")
            table = gr.Dataframe(headers=TABLE_HEADERS, datatype="str", interactive=False)

        filter_inputs = [specialty, procedure, qa_type, include_decided]
        view = [session, status, clip, question, context, table, note, tags]

        def render(state, message):
            return (state, message, *ui.panels(state), ui.my_decisions(state), "", [])

        def on_login(state, user, secret, request: gr.Request):
            client = getattr(getattr(request, "client", None), "host", None) if request else None
            state, message = ui.login(state, user, secret, client)
            choices = (
                ui.filter_choices(state)
                if state["user"]
                else {"specialty": [ALL], "procedure": [ALL], "category": [ALL]}
            )
            logged_in = state["user"] is not None
            return (
                *render(state, message),
                gr.Column(visible=not logged_in),
                gr.Column(visible=logged_in),
                "",
                *(gr.Dropdown(choices=choices[f], value=ALL) for f in ("specialty", "procedure", "category")),
            )

        login_outputs = [*view, login_box, review_box, password, specialty, procedure, qa_type]
        login_button.click(on_login, [session, username, password], login_outputs, api_name="login")
        password.submit(on_login, [session, username, password], login_outputs)

        def on_filter(state, *values):
            return render(ui.advance(state, Filters(*values)) if state["user"] else state, "")

        for component in filter_inputs:
            component.change(on_filter, [session, *filter_inputs], view)

        def on_skip(state, *values):
            return render(*ui.skip(state, Filters(*values)))

        skip_button.click(on_skip, [session, *filter_inputs], view, api_name="skip")

        for decision, button in buttons.items():

            def on_decide(state, chosen_tags, text, *values, decision=decision):
                state, message, recorded = ui.decide(state, decision, chosen_tags or [], text, Filters(*values))
                if not recorded:  # keep what the reviewer typed
                    return (state, message, *ui.panels(state), ui.my_decisions(state), text, chosen_tags)
                return render(state, message)

            button.click(on_decide, [session, tags, note, *filter_inputs], view, api_name=decision)
    return blocks


def launch_app(ui: ReviewUI, host: str, port: int, videos_dir: Path | None = None, block: bool = True):
    """Serve ``ui``; only ``videos_dir`` is readable through the file route. ``block=False`` returns the Blocks
    (close it with ``.close()``)."""
    blocks = build_blocks(ui)
    blocks.queue(default_concurrency_limit=8).launch(
        server_name=host,
        server_port=port,
        allowed_paths=[str(Path(videos_dir).resolve())] if videos_dir else None,
        prevent_thread_lock=not block,
        quiet=not block,
    )
    return blocks


def serve(
    dataset: Path,
    db: Path,
    videos: Path | None = None,
    config: str | None = None,
    host: str = "127.0.0.1",
    port: int = 7860,
) -> None:
    from builders.pipeline.review.samples import DEFAULT_CONFIG, load_samples
    from builders.sureon.frames import index_videos

    samples = load_samples(dataset, config or DEFAULT_CONFIG)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    launch_app(ReviewUI(ReviewStore(db), samples, index_videos(videos) if videos else {}), host, port, videos)
