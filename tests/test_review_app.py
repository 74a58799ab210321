"""The review app's handlers, on the demo build, without a server (skipped without the ``review`` extra)."""

import pytest

from builders.pipeline.review.app import ALL, Filters, ReviewUI, build_blocks, markdown_text, new_session
from builders.pipeline.review.samples import load_samples
from builders.pipeline.review.store import Assignment, ReviewStore
from builders.sureon.frames import index_videos


gr = pytest.importorskip("gradio")

PASSWORD = "correct horse battery"
HOSTILE = "<img src=x onerror=alert(1)> & done"


@pytest.fixture
def ui(sureon_build, sample_videos, tmp_path):
    samples = load_samples(sureon_build.out)
    store = ReviewStore(tmp_path / "review.sqlite")
    for name in ("alice", "bob"):
        store.add_user(name, PASSWORD)
    store.add_assignments([Assignment(s, "alice", "single") for s in samples])
    store.add_assignments([Assignment(s, "bob", "dual") for s in list(samples)[:2]])
    return ReviewUI(store, samples, index_videos(sample_videos))


def login(ui, name, password, client="127.0.0.1"):
    """(session token or None, message), as the server's login route gets them (without its slow-down sleep)."""
    attempt = ui.begin_login(name, client)
    if not attempt.allowed:
        return None, ui.refusal(attempt)
    return ui.finish_login(name, password, client, attempt)


def logged_in(ui, name="alice"):
    token, message = login(ui, name, PASSWORD)
    assert ui.session_user(token) == name, message
    return ui.resume(new_session(), ui.session_user(token))


def test_blocks_build_and_the_load_handler_takes_the_reviewer_from_the_request(ui):
    blocks = build_blocks(ui)
    assert isinstance(blocks, gr.Blocks)
    handlers = {fn.fn.__name__: fn.fn for fn in blocks.fns.values()}
    as_alice = gr.Request(username="alice")
    state, message, clip, question, *_ = handlers["on_load"](new_session(), as_alice)
    assert state["user"] == "alice" and state["current"] in ui.samples and "<video" in clip
    assert ui.samples[state["current"]]["question_id"] in question and message == "Logged in as alice."
    bobs, *_ = handlers["on_load"](state, gr.Request(username="bob"))  # a state never changes hands
    assert bobs["user"] == "bob" and bobs["skipped"] == []
    ended, message, *_ = handlers["on_load"](state, gr.Request(username=None))
    assert ended["user"] is None and "session has ended" in message


def test_login_refuses_wrong_credentials_and_nothing_is_written_anonymously(ui):
    for name, password in (("alice", "nope nope nope"), ("mallory", PASSWORD), ("", "")):
        token, message = login(ui, name, password)
        assert token is None and "wrong password" in message
        anonymous = ui.resume(new_session(), ui.session_user(token)) | {"current": next(iter(ui.samples))}
        _, message, recorded = ui.decide(anonymous, "approve", [], "", Filters())
        assert not recorded and "Log in" in message
    assert ui.store.log() == [] and ui.panels(new_session()) == ("", "", "")


def test_markdown_text_shows_markdown_and_html_as_typed():
    markdown_it = pytest.importorskip("markdown_it")
    hostile = "[a](http://x.example) ![i](http://x.example/i.png) *em* _u_ `c` # h <b>b</b> & $x$ http://x.example"
    rendered = markdown_it.MarkdownIt("commonmark").render(markdown_text(hostile))
    assert "<a" not in rendered and "<img" not in rendered and "<em>" not in rendered and "<code>" not in rendered
    assert "<b>" not in rendered and "&lt;b&gt;" in rendered and "<h1>" not in rendered


def test_decide_records_refuses_a_rejection_without_a_note_and_moves_on(ui):
    session = logged_in(ui)
    first = session["current"]
    session, message, recorded = ui.decide(session, "reject", ["inaccurate"], "  ", Filters())
    assert not recorded and "note" in message and session["current"] == first and ui.store.log() == []
    session, message, recorded = ui.decide(session, "reject", ["inaccurate"], HOSTILE, Filters())
    assert recorded and session["current"] != first
    second = session["current"]
    session, _, recorded = ui.decide(session, "approve", [], "", Filters())
    assert recorded
    assert [(d.sample_id, d.decision, d.note) for d in ui.store.log()] == [
        (first, "reject", HOSTILE),
        (second, "approve", ""),
    ]
    rows = ui.my_decisions(session)
    assert [row[:3] for row in rows] == [
        [second, ui.samples[second]["category"], "approve"],
        [first, ui.samples[first]["category"], "reject"],
    ]
    assert rows[1][4] == HOSTILE  # the table component shows it as text
    assert first not in ui.queue(session, Filters()) and first in ui.queue(session, Filters(include_decided=True))


def test_a_reviewer_sees_only_their_own_decisions_and_not_the_other_dual_reviewer(ui):
    alice = logged_in(ui)
    shared = alice["current"]
    ui.decide(alice, "reject", ["other"], "alice's private reason", Filters())
    bob = logged_in(ui, "bob")
    assert bob["current"] == shared  # blind: the same sample, nothing of alice's decision on screen
    assert ui.my_decisions(bob) == []
    assert "alice" not in "".join(ui.panels(bob)) and "private reason" not in "".join(ui.panels(bob))
    assert set(ui.queue(bob, Filters())) == {a.sample_id for a in ui.store.assignments("bob")}


def test_skip_sends_the_sample_to_the_end_and_filters_narrow_the_queue(ui):
    session = logged_in(ui)
    queue = ui.queue(session, Filters())
    session, _ = ui.skip(session, Filters())
    assert session["current"] == queue[1] and ui.queue(session, Filters())[-1] == queue[0]
    assert ui.store.log() == []
    choices = ui.filter_choices(session)
    assert choices["category"][0] == ALL and set(choices["category"][1:]) == {
        r["category"] for r in ui.samples.values()
    }
    only_f = Filters(qa_type="F")
    assert ui.queue(session, only_f) == [s for s in queue if ui.samples[s]["category"] == "F"]
    session = ui.advance(session, only_f)
    _, question, _ = ui.panels(session)
    assert "check the step right after the clip's end" in question
    assert ui.queue(session, Filters(specialty="No such specialty")) == []


def test_panels_show_clip_window_full_video_green_answer_and_escape_dataset_text(ui):
    session = logged_in(ui)
    record = ui.samples[session["current"]]
    clip, question, context = ui.panels(session)
    assert f"#t={record['start']:.3f},{record['end']:.3f}" in clip
    assert f"#t={record['start']:.3f}'" in context  # the full video, from the clip's start
    assert f"/videos/{record['source_id']}#t=" in clip and str(ui.videos[record["source_id"]]) not in clip
    if record["answer_format"] == "mcq":
        correct = record["options"][record["answer_index"]]
        assert "16a34a" in question.split(correct)[0].rsplit("<li", 1)[1]
    assert record["procedure"] in context and record["specialty"] in context
    ui.samples[session["current"]] = record | {"question": HOSTILE, "transcript": HOSTILE}
    _, question, context = ui.panels(session)
    assert "<img" not in question and "<img" not in context and "&lt;img src=x" in question
    markdown = (
        "line one\n\n[link](http://x.example) ![i](http://x.example/i.png) *em*"  # panels are Markdown components
    )
    ui.samples[session["current"]] = record | {"question": markdown, "transcript": markdown, "options": [markdown] * 4}
    markdown_it = pytest.importorskip("markdown_it")
    for panel in ui.panels(session):
        rendered = markdown_it.MarkdownIt("commonmark").render(panel)
        assert "<a" not in rendered and "<img" not in rendered and "<em>" not in rendered and "\n" not in panel
    assert "[link](http://x.example)" in markdown_it.MarkdownIt("commonmark").render(ui.panels(session)[1])


class Clock:
    def __init__(self):
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def throttled(ui):
    clock = Clock()
    return ReviewUI(ui.store, ui.samples, ui.videos, clock=clock), clock


def test_failed_logins_lock_the_pair_for_a_growing_delay_and_only_slow_the_account(throttled, caplog):
    ui, clock = throttled
    caplog.set_level("INFO", logger="builders.pipeline.review.app")
    for attempt in range(4):
        assert login(ui, "alice", f"guess number {attempt}", "10.0.0.1") == (None, "Unknown user or wrong password.")
    token, message = login(ui, "alice", "guess number 4", "10.0.0.1")
    assert token is None and "try again in 30 s" in message
    token, message = login(ui, "alice", PASSWORD, "10.0.0.1")  # the right password from that address: refused
    assert token is None and "Too many failed logins from your address: try again in 30 s" in message
    attempt = ui.begin_login("alice", "10.0.1.1")  # from another address: allowed, after a slow-down
    assert attempt.allowed and attempt.wait_s == 1.0
    token, message = ui.finish_login("alice", PASSWORD, "10.0.1.1", attempt)
    assert ui.session_user(token) == "alice" and message == "Logged in as alice."
    assert ui.begin_login("alice", "10.0.1.1").wait_s == 0  # the login cleared the account's count ...
    clock.now += 29
    assert login(ui, "alice", PASSWORD, "10.0.0.1")[0] is None  # ... not the attacker's pair
    clock.now += 2
    token, message = login(ui, "alice", "guess number 5", "10.0.0.1")  # the lock ran out; the next failure doubles it
    assert token is None and "try again in 60 s" in message
    clock.now += 61
    assert login(ui, "alice", "guess number 6", "10.0.0.1")[1].endswith("try again in 120 s.")

    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "failed login for 'alice' from 10.0.0.1" in logged and "locked for 30 s" in logged
    assert "login refused for 'alice' from 10.0.0.1" in logged and "slowed down by 1.0 s" in logged
    assert "guess number" not in logged and PASSWORD not in logged


def test_a_guessing_client_is_slowed_across_accounts_and_it_survives_a_restart(throttled):
    ui, clock = throttled
    for name in ("root", "admin", "alice", "mallory", "carol"):
        assert login(ui, name, "hunter2 hunter2", "192.0.2.9")[0] is None
    attempt = ui.begin_login("bob", "192.0.2.9")
    assert attempt.allowed and attempt.wait_s == 1.0  # slowed, not locked: a colleague behind the same NAT
    assert ui.session_user(ui.finish_login("bob", PASSWORD, "192.0.2.9", attempt)[0]) == "bob"
    assert ui.begin_login("bob", "192.0.2.10").wait_s == 0
    restarted = ReviewUI(ReviewStore(ui.store.path), ui.samples, ui.videos, clock=clock)
    assert restarted.begin_login("dave", "192.0.2.9").wait_s == 1.0  # the five failures are kept in the database
    clock.now += 3601  # an hour without failures forgets the client
    assert restarted.begin_login("erin", "192.0.2.9").wait_s == 0
