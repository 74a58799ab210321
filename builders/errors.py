"""The project's error types: a mistake the user can fix, told apart from a bug in the project.

``sureon``'s one top-level handler (:mod:`sureon.errors`) prints a :class:`UserError` as one line, ``error: ...``, and
exits 2; every other exception is a bug and keeps its traceback. So a message raised as a ``UserError`` is written for
the user: it names the file, row or option at fault and says what to do about it.
"""


class UserError(Exception):
    """Something the user can fix: an input, an option, a path, a service the command needs."""


class InputError(UserError, ValueError):
    """A bad input file, row or option value (a ``ValueError``, so callers that catch those keep working)."""
