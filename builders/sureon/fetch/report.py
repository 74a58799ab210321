"""What a fetch run tells its user: how many sources have a file, which have none and why, what to do about each
kind, and the exit status.

Exit status: 0 when every source has a good file; 1 when some have none (the summary says which, why, and what to
do); 2 when none has (one line naming the cause and the fix). Apart from the fetcher because its wording is for the
user (the next steps follow the kinds of :mod:`builders.sureon.fetch.error_classes`), and it reads only the
availability entries, however they were made.
"""

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from builders.sureon.availability import GOOD
from builders.sureon.fetch.needs import SPLIT_KEYS


# what to do about a deferred source, by the kind of error that deferred it
NEXT_STEP = {
    "rate-limited": "YouTube rate-limited this session: rerun the same command in an hour (verified files are kept), "
    "with --sleep-interval 10 to space the downloads out, or pass --on-rate-limit wait to pause instead of stopping",
    "bot-check": "YouTube asks for a bot check: pass --cookies FILE or --cookies-from-browser NAME (a signed-in "
    "browser's cookies), then rerun",
    "later": "not yet available (an upcoming premiere or live event): rerun once it has aired",
    "transient": "network or server errors on every attempt: check the connection (and --url-template), then rerun",
}
UNAVAILABLE_STEP = "build with --on-missing-video skip to leave their questions out (each one's reason is listed)"
SIGN_IN_STEP = "pass --cookies FILE or --cookies-from-browser NAME (a signed-in account's), then rerun"
SIGN_IN_REASONS = ("age-restricted", "sign-in required")  # PERMANENT_ERRORS that cookies fix


@dataclass
class FetchReport:
    sources: dict[str, dict]
    downloaded_bytes: int
    seconds: float
    availability: Path
    paused_s: float = 0.0

    def ready(self) -> list[str]:
        return [s for s, e in self.sources.items() if e["status"] in GOOD]

    def headline(self) -> str:
        """One line: how many sources have a file, are deferred (missing for now) or unavailable (removed, ...)."""
        statuses = Counter(entry["status"] for entry in self.sources.values())
        parts = [
            f"{len(self.ready())} fetched ({statuses['downloaded']} downloaded, {statuses['supplied']} supplied)",
            *(
                f"{statuses[status]} {label}"
                for status, label in (
                    ("deferred", "deferred (missing for now, not removed)"),
                    ("unavailable", "unavailable (removed, private, blocked, ...)"),
                    ("invalid", "invalid (failed the integrity check)"),
                    ("not_fetchable", "not fetchable (supply them)"),
                )
                if statuses[status]
            ),
        ]
        return f"{len(self.sources)} source video(s): " + ", ".join(parts)

    def next_steps(self) -> list[str]:
        missing = Counter(
            e.get("cause", "transient") if e["status"] == "deferred" else e["status"] for e in self.missing().values()
        )
        steps = [f"{missing[kind]} deferred: {step}" for kind, step in NEXT_STEP.items() if missing[kind]]
        sign_in = sum(
            1
            for e in self.missing().values()
            if e["status"] == "unavailable" and e["reason"].startswith(SIGN_IN_REASONS)
        )
        if sign_in:
            steps.append(f"{sign_in} need sign-in (age-restricted or sign-in only): {SIGN_IN_STEP}")
        if missing["unavailable"] + missing["invalid"] > sign_in:
            steps.append(
                f"{missing['unavailable'] + missing['invalid'] - sign_in} unavailable or invalid: {UNAVAILABLE_STEP}"
            )
        if missing["not_fetchable"]:
            steps.append(
                f"{missing['not_fetchable']} not fetchable: put <source_id>.<ext> in {self.availability.parent} "
                "yourself"
            )
        return steps

    def missing(self) -> dict[str, dict]:
        return {s: e for s, e in self.sources.items() if e["status"] not in GOOD}

    def summary(self) -> str:
        lines = [
            self.headline(),
            f"downloaded {self.downloaded_bytes / 1e6:.1f} MB in {self.seconds:.1f} s"
            + (f" (paused {self.paused_s / 60:.0f} min for YouTube's rate limit)" if self.paused_s else "")
            + f"; see {self.availability}",
        ]
        missing = self.missing()
        if missing:
            lines.append(f"{'source_id':<34} {'status':<14} {'test':>5} {'train':>6} {'val':>5}  reason")
            for source, entry in missing.items():
                q = entry["questions"]
                lines.append(
                    f"{source:<34} {entry['status']:<14} {q['test']:>5} {q['train']:>6} {q['validation']:>5}  "
                    f"{entry['reason']}"
                )
            lost = {k: sum(e["questions"][k] for e in missing.values()) for k in SPLIT_KEYS}
            lines.append(
                f"questions without a video: {lost['test']} benchmark, {lost['train']} train, "
                f"{lost['validation']} validation"
            )
            lines += self.next_steps()
        return "\n".join(lines)

    def exit_status(self) -> int:
        """0: every source has a file; 1: some have none; 2: none has (:meth:`nothing_fetched` says why)."""
        if self.sources and not self.ready():
            return 2
        return 1 if self.missing() else 0

    def nothing_fetched(self) -> str:
        """The one line of an exit status 2: no source has a file, why, and what to do."""
        return (
            f"none of the {len(self.sources)} source video(s) was fetched into {self.availability.parent}; "
            + "; ".join(self.next_steps())
        )
