"""YouTube's refusals as yt-dlp reports them, for the ``sureon videos fetch`` tests (no network).

yt-dlp's YouTube extractor turns YouTube's playability reason into its error message where it finds no formats
(``yt_dlp/extractor/youtube/_video.py``, ``_real_extract``, the ``if not formats:`` branch): a subreason is appended
("reason. subreason"), or raises a ``GeoRestrictedError`` when it starts "The uploader has not made this video
available in your country"; a reason saying "sign in" loses YouTube's "This helps protect our community. Learn more"
and gets yt-dlp's cookies hint; a captcha screen adds "YouTube is requiring a captcha challenge before playback";
"This content isn't available, try again later" gets the rate-limit explanation; the error is "expected" (no bug
report). :func:`youtube_error` does the same, with yt-dlp's own sentences read from the installed ``_video.py``
(:func:`ytdlp_text` fails if yt-dlp changes their wording) and its cookies hint from ``YoutubeIE``.
:class:`FakeYouTube` makes yt-dlp's generic extractor raise that error for chosen ids, so that it goes through
yt-dlp's own reporting (``ERROR: [youtube] <id>: ...``) and the fetcher sees what it would see from YouTube.

``REASONS`` are YouTube's own texts (the server's, not in yt-dlp): those that yt-dlp's test expectations quote
(``'skip':`` in ``_video.py``) are copied from there; the others as yt-dlp's issue tracker quotes them.
"""

import ast
import functools
import re
import threading
import time
from pathlib import Path

import yt_dlp.extractor.youtube._video as youtube_video
from yt_dlp.extractor.generic import GenericIE
from yt_dlp.extractor.youtube import YoutubeIE
from yt_dlp.utils import ExtractorError, GeoRestrictedError


@functools.cache
def _video_py_strings() -> tuple[str, ...]:
    """Every string literal (and literal part of an f-string) of the installed ``_video.py``."""
    tree = ast.parse(Path(youtube_video.__file__).read_text())
    return tuple(
        node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)
    )


def ytdlp_text(fragment: str) -> str:
    """The one string literal of yt-dlp's ``_video.py`` that contains ``fragment``."""
    found = sorted({text for text in _video_py_strings() if fragment in text})
    assert len(found) == 1, f"yt-dlp's _video.py has {len(found)} literal(s) with {fragment!r}: {found}"
    return found[0]


def remove_end(text: str, end: str) -> str:
    return text[: -len(end)] if end and text.endswith(end) else text


# (reason, subreason) as YouTube sends them
REASONS = {
    "rate-limited": ("Video unavailable", "This content isn't available, try again later."),
    "bot-check": ("Sign in to confirm you’re not a bot", "This helps protect our community. Learn more"),
    "captcha": ("Video unavailable", None),  # with a playerCaptchaViewModel on the error screen
    "private": ("Private video", "Sign in if you've been granted access to this video"),
    "removed-by-uploader": ("Video unavailable", "This video has been removed by the uploader"),
    "removed-for-policy": (ytdlp_text("has been removed for violating YouTube's policy"), None),
    "does-not-exist": (ytdlp_text("This video does not exist."), None),
    "not-available": (ytdlp_text("This video is not available."), None),
    "unavailable": ("Video unavailable", None),
    "copyright": ("Video unavailable", "This video is no longer available due to a copyright claim by Example Media"),
    "terminated": (
        "Video unavailable",
        "This video is no longer available because the YouTube account associated with this video has been terminated"
        + ".",
    ),
    "age-restricted": ("Sign in to confirm your age", "This video may be inappropriate for some users."),
    "members-only": (
        "Join this channel to get access to members-only content like this video, and other exclusive perks.",
        None,
    ),
    "region-blocked": (
        "Video unavailable",
        ytdlp_text("The uploader has not made this video available in your country"),
    ),
    "premiere": ("Premieres in 10 hours", None),
    "live-event": ("This live event will begin in 3 hours.", None),
}
IP_BLOCKED = ytdlp_text("Your IP is likely being blocked")  # raised as is by _video.py, no YouTube reason


def youtube_message(kind: str, authenticated: bool = False) -> str:
    """What ``_video.py`` raises for the reason ``REASONS[kind]`` (the geo case: see :func:`youtube_error`)."""
    reason, subreason = REASONS[kind]
    if subreason and subreason != reason:
        reason += f". {subreason}"
    if "sign in" in reason.lower():
        reason = remove_end(reason, ytdlp_text("This helps protect our community"))
        reason = f"{remove_end(reason.strip(), '.')}. {YoutubeIE()._youtube_login_hint}"
    elif kind == "captcha":
        reason += ytdlp_text("captcha challenge before playback")
    elif ytdlp_text("try again later") in reason:
        who = ytdlp_text("Your account") if authenticated else ytdlp_text("The current session")
        reason = f"{remove_end(reason.strip(), '.')}. {who}{ytdlp_text('has been rate-limited by YouTube')}"
    return reason


def youtube_error(kind: str, video_id: str, authenticated: bool = False) -> ExtractorError:
    if kind == "ip-blocked":
        return ExtractorError(IP_BLOCKED, expected=True, video_id=video_id, ie="youtube")
    if kind == "region-blocked":
        return GeoRestrictedError(REASONS[kind][1], countries=["DE", "FR"])
    return ExtractorError(youtube_message(kind, authenticated), expected=True, video_id=video_id, ie="youtube")


class FakeYouTube:
    """yt-dlp refuses chosen ids as YouTube would; the others go on to the generic extractor (a local host).

    ``says[id]``: the ``REASONS`` key (or ``ip-blocked``) every extraction of ``id`` gets.
    ``rate_limit(after, lasts, clock)``: from the extraction after the first ``after`` ones on, the session is
    rate-limited for ``lasts`` seconds of ``clock`` (forever when None). ``extractions``: ``(id, clock time,
    refusal or None)`` of each extraction asked.
    """

    def __init__(self, monkeypatch):
        self.says: dict[str, str] = {}
        self.authenticated = False  # "Your account" rather than "The current session" is rate-limited
        self.limit_after: int | None = None
        self.limit_lasts: float | None = None
        self.limited_since: float | None = None
        self.clock = time.monotonic
        self.extractions: list[tuple[str, float, str | None]] = []
        self.lock = threading.Lock()
        original = GenericIE._real_extract
        fake = self

        def _real_extract(ie, url):
            video_id = re.search(r"/([^/?]+?)(?:\.mp4)?(?:\?|$)", url)[1]
            kind = fake.refusal(video_id)
            if kind is not None:
                raise youtube_error(kind, video_id, fake.authenticated)
            return original(ie, url)

        monkeypatch.setattr(GenericIE, "_real_extract", _real_extract)

    def rate_limit(self, after: int = 0, lasts: float | None = None, clock=time.monotonic) -> None:
        self.limit_after, self.limit_lasts, self.clock = after, lasts, clock

    def refusal(self, video_id: str) -> str | None:
        with self.lock:
            now = self.clock()
            kind = self.says.get(video_id)
            if self.limit_after is not None and len(self.extractions) >= self.limit_after:
                if self.limited_since is None:
                    self.limited_since = now
                if self.limit_lasts is None or now < self.limited_since + self.limit_lasts:
                    kind = "rate-limited"
            self.extractions.append((video_id, now, kind))
            return kind

    def asked(self, video_id: str) -> list[str | None]:
        return [kind for source, _, kind in self.extractions if source == video_id]
