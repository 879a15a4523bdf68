"""The amago-pipe error family and the exit code of each kind.

Leaf module: imports nothing from the package. The CLI maps these to exit codes in one place.
"""

from __future__ import annotations


class AmagoPipeError(Exception):
    """Base of every error a user can cause; printed as one message, no traceback."""

    exit_code = 1


class ConfigError(AmagoPipeError):
    """A pipeline file or override is invalid.

    `problems` holds one line per problem (every problem in the file, not only the first);
    `path` is the dotted key path of the first problem, when there is one.
    """

    exit_code = 2

    def __init__(self, message: str, *, path: str | None = None, problems: list[str] | None = None):
        self.path = path
        self.problems = problems or [message]
        super().__init__(message if problems is None else "\n".join(problems))


class DataError(AmagoPipeError):
    """Data do not match what was expected (a dataset, an episode, a spec)."""

    exit_code = 3


class StoreFormatError(AmagoPipeError):
    """A trajectory store is missing, damaged, or of an unsupported format version."""

    exit_code = 3


class MissingDependencyError(AmagoPipeError):
    """An optional package is needed for what was asked; the message gives the install hint."""

    exit_code = 4


class LockError(AmagoPipeError):
    """A run directory is locked by another (or a dead) run."""

    exit_code = 5


class StageFailed(AmagoPipeError):
    """A pipeline stage raised; the lock file records it as failed."""

    exit_code = 6


class Interrupted(AmagoPipeError):
    """The run was stopped by a signal; `exit_code` is 128 + the signal number."""

    def __init__(self, message: str, *, signum: int = 2):
        super().__init__(message)
        self.exit_code = 128 + signum


def did_you_mean(word: str, options: list[str] | tuple[str, ...] | set[str]) -> str:
    """`"; did you mean 'x'?"` for the closest option, or an empty string."""
    import difflib

    close = difflib.get_close_matches(str(word), sorted(options), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""
