"""What a yt-dlp error says of a video, or of the session: the four kinds the fetcher acts on, read from yt-dlp's
own wording, and the redaction that makes a message safe to print.

- *transient* errors (network, HTTP 5xx, 429) are retried with exponential backoff;
- *permanent* ones (removed, private, copyright, terminated account, age gate, members-only, region-blocked,
  HTTP 404 / 410) are recorded ``unavailable`` with their reason and not retried;
- a video *not yet* available (an upcoming premiere or live event) is recorded ``deferred``;
- a *session* block (YouTube rate-limited the session, or asks for a bot check or captcha) says nothing about the
  video: it is ``deferred`` too, and :mod:`builders.sureon.fetch.rate_limit` decides what the other downloads do.

Apart from the fetcher because these tables follow yt-dlp's and YouTube's wording, which changes on its own schedule
(``tests/fake_youtube.py`` reads yt-dlp's sentences from the installed yt-dlp to notice).
"""

import re
from dataclasses import dataclass


# (pattern in yt-dlp's error message, reason). yt-dlp's YouTube extractor builds its messages from YouTube's
# playability reason (yt_dlp/extractor/youtube/_video.py, where it raises "no formats"): it appends "The current
# session (or: Your account) has been rate-limited by YouTube for up to an hour" to "This content isn't available,
# try again later", "YouTube is requiring a captcha challenge before playback" to a captcha screen, and its cookies
# hint to any reason saying "sign in". A session error says nothing about the video (the rate-limit message starts
# with "Video unavailable"): matched before everything else.
SESSION_ERRORS = (
    (
        r"rate-limited by youtube|isn['’]t available, try again later",
        "rate-limited",
        "YouTube rate-limited this session (for up to an hour)",
    ),
    (
        r"not a bot|captcha|ip is likely being blocked",
        "bot-check",
        "bot check: YouTube asks this session to prove it is not a bot",
    ),
)
PERMANENT_ERRORS = (
    (r"confirm your age|age[- ]restricted|inappropriate for some users", "age-restricted: sign-in (cookies) needed"),
    (r"private video|video is private", "private video"),
    (r"members[- ]only|join this channel", "members-only video"),
    (
        r"not (?:made this video )?available in your country|geo[- ]?restrict|blocked it in your country",
        "region-blocked",
    ),
    (r"copyright", "removed (copyright claim)"),
    (r"account associated with this video has been terminated", "removed (account terminated)"),
    (
        r"video has been removed|video unavailable|no longer available|does not exist|"
        + r"(?:video|recording) is not available|drm protected",
        "removed or unavailable",
    ),
    (
        r"sign in|login required|log in|registered users|login details",
        "sign-in required: pass --cookies FILE or --cookies-from-browser NAME",
    ),
    (r"http error 404|404: not found", "not found (HTTP 404)"),
    (r"http error 410", "gone (HTTP 410)"),
    (r"requested format is not available", "no video format within --max-height"),
    (r"unsupported url", "unsupported URL (check --url-template)"),
)
LATER_ERRORS = (
    (r"live event will begin|premieres in|premiere will begin", "not yet available (upcoming premiere or live event)"),
)
TRANSIENT_ERRORS = (
    (r"http error 429|too many requests", "throttled (HTTP 429)"),
    (r"http error 5\d\d", "server error (HTTP 5xx)"),
    (r"http error 403", "forbidden (HTTP 403)"),
    (r"timed? ?out", "timed out"),
    (r"incomplete|connection|reset by peer|temporar|unreachable|refused", "network error"),
)
_SECRET = re.compile(r"(?i)((?:token|key|sig|signature|auth|cookie|session)[^=&\s]*=)[^&\s]+")


@dataclass(frozen=True)
class ErrorClass:
    """``kind``: ``rate-limited`` or ``bot-check`` (the session, not the video), ``permanent``, ``later`` (this video,
    not yet) or ``transient`` (retried in this run)."""

    kind: str
    reason: str

    @property
    def session(self) -> bool:
        return self.kind in ("rate-limited", "bot-check")


def classify_error(message: str) -> ErrorClass:
    """What a yt-dlp error message says of the video, or of the session; an unknown one is transient."""
    text = message.lower()
    for pattern, kind, reason in SESSION_ERRORS:
        if re.search(pattern, text):
            return ErrorClass(kind, reason)
    for kind, table in (("permanent", PERMANENT_ERRORS), ("later", LATER_ERRORS), ("transient", TRANSIENT_ERRORS)):
        for pattern, reason in table:
            if re.search(pattern, text):
                return ErrorClass(kind, reason)
    return ErrorClass("transient", "download error")


def redact(text: str, url: str, source_id: str) -> str:
    """A message safe to print, on one line: the URL becomes the source id, query secrets are masked."""
    return " ".join(_SECRET.sub(r"\1***", text.replace(url, f"<url of {source_id}>")).split())
