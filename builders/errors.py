"""What a user can fix, told apart from a bug, and the one handler that prints it: a mistake is one line.

:class:`UserError` (and :class:`InputError`, a bad input file, row or option) carries a message written for the user:
it names the file, row or option at fault and says what to do. :func:`user_message` turns those, and the usual
mistakes met on the way (a missing path, a local path read as a Hub id, the Hub offline, a refused endpoint, a corrupt
built file, a file that is not YAML or not a database, a full or read-only disk), into one line and an exit status;
anything else is a bug and keeps its traceback. :func:`report_mistakes` runs a command so, for ``sureon`` and the
launch scripts (``recipes/sft.py``, ``recipes/grpo.py``) alike; ``sureon --debug`` or ``SUREON_DEBUG=1`` shows the
traceback of a mistake too. Exit status: 2 for a mistake (argparse's own for a bad option), 130 after Ctrl-C, 143
after SIGTERM.

Third-party exceptions are recognised by their class names, so that nothing heavy (``datasets``, ``huggingface_hub``)
is imported to tell them apart.
"""

import errno
import os
import signal
import sys
from collections.abc import Callable


class UserError(Exception):
    """Something the user can fix: an input, an option, a path, a service the command needs."""


class InputError(UserError, ValueError):
    """A bad input file, row or option value (a ``ValueError``, so callers that catch those keep working)."""


USER_ERROR = 2
INTERRUPTED = 130
TERMINATED = 143


class Terminated(BaseException):
    """SIGTERM, raised where the process is, so that staging folders and open files are cleaned up on the way out
    (a ``BaseException``, like ``KeyboardInterrupt``: no ``except Exception`` swallows it)."""


def exit_on_sigterm() -> None:
    """Turn SIGTERM (``kill``, a scheduler's time limit, ``docker stop``) into :class:`Terminated`."""

    def terminate(signum, frame):
        raise Terminated()

    signal.signal(signal.SIGTERM, terminate)


def _class_names(err: BaseException) -> set[str]:
    return {f"{cls.__module__}.{cls.__qualname__}" for cls in type(err).__mro__} | {
        cls.__qualname__ for cls in type(err).__mro__
    }


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def _causes(err: BaseException):
    """``err`` and what it was raised from (``raise ... from``), never what it was raised while handling: a bug in an
    ``except FileNotFoundError`` block stays a bug."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        yield err
        err = err.__cause__


_HUB_HINTS = {
    "OfflineModeIsEnabled": "the Hub cannot be reached: HF_HUB_OFFLINE is set (unset it, or give a local folder)",
    "LocalEntryNotFoundError": "not found locally and the Hub cannot be reached: check the path or Hub id, "
    "or go online once to download it",
    "RepositoryNotFoundError": "no such repository on the Hub (or it is private: log in with `hf auth login`); "
    "a local folder must exist",
    "GatedRepoError": "the repository is gated: accept its terms on the Hub and log in with `hf auth login`",
    "RevisionNotFoundError": "no such revision on the Hub",
    "EntryNotFoundError": "no such file in the Hub repository",
    "HFValidationError": "neither an existing local folder nor a valid Hub id (ORG/NAME): check the path",
}


def user_message(err: BaseException) -> tuple[str, int] | None:
    """``(one-line message, exit status)`` for a user's mistake; ``None`` for a bug (its traceback is shown)."""
    if isinstance(err, KeyboardInterrupt):
        return "interrupted (Ctrl-C); nothing half-written was left in place", INTERRUPTED
    if isinstance(err, Terminated):
        return "terminated (SIGTERM); nothing half-written was left in place", TERMINATED
    if isinstance(err, UserError):
        return str(err), USER_ERROR
    for cause in _causes(err):
        names = _class_names(cause)
        for name, hint in _HUB_HINTS.items():
            if name in names:
                return f"{hint} ({_first_line(cause)})", USER_ERROR
        if "DatasetNotFoundError" in names or "DataFilesNotFoundError" in names:
            return f"{_first_line(cause)}: a local dataset folder must exist (build it first)", USER_ERROR
        if "DatasetGenerationError" in names or "ArrowInvalid" in names or "ArrowTypeError" in names:
            detail = _first_line(cause.__cause__ or cause)
            return (
                f"a built file cannot be read ({detail}): it is truncated or not this dataset's format; rebuild it",
                USER_ERROR,
            )
        if "YAMLError" in names:
            return f"not valid YAML: {' '.join(str(cause).split())}", USER_ERROR
        if "sqlite3.DatabaseError" in names and "sqlite3.OperationalError" not in names:
            return f"{_first_line(cause)}: is the --db file a review database made by `sureon review`?", USER_ERROR
        if isinstance(cause, UnicodeDecodeError):
            return f"a text input is not UTF-8 ({_first_line(cause)}): save it as UTF-8", USER_ERROR
        if isinstance(cause, ConnectionError) and "on the Hub" in str(cause):  # datasets: Couldn't reach X on the Hub
            return f"{_first_line(cause)}: a local dataset folder must exist, else check the Hub id", USER_ERROR
        if isinstance(cause, ConnectionError) or "ConnectError" in names or "ConnectionError" in names:
            return f"cannot connect ({_first_line(cause)}): check the address and that the server runs", USER_ERROR
        if isinstance(cause, OSError) and (
            cause.errno in (errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.EEXIST, errno.EACCES, errno.EPERM)
            or cause.errno in (errno.EROFS, errno.ENOSPC, errno.EDQUOT)
            or isinstance(cause, FileNotFoundError | FileExistsError)
        ):
            hints = {errno.ENOSPC: ": the disk is full", errno.EDQUOT: ": the disk quota is used up"}
            hint = hints.get(cause.errno, "")
            return f"{_first_line(cause)}{hint}", USER_ERROR
    return None


def report_mistakes(command: Callable[[], object], debug: bool = False) -> int:
    """Run ``command`` with SIGTERM turned into an exception (staging folders are cleaned up on the way out) and
    return its exit status (what it returns if an ``int``, else 0); a mistake is printed as one line, ``error: ...``,
    and gives its exit status; a bug, or anything with ``debug`` or ``SUREON_DEBUG=1``, keeps its traceback."""
    exit_on_sigterm()
    try:
        status = command()
        return status if isinstance(status, int) and not isinstance(status, bool) else 0
    except BaseException as err:
        if isinstance(err, SystemExit):
            raise
        known = user_message(err)
        if known is None or debug or os.environ.get("SUREON_DEBUG", "") not in ("", "0"):
            raise
        message, status = known
        print(f"error: {message}", file=sys.stderr)
        return status
