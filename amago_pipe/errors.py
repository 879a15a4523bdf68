"""The amago-pipe error family and the exit code of each kind.

Leaf module: imports nothing from the package. The CLI maps these to exit codes in one place.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import io
import re
from pathlib import Path
from typing import Any


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


class OutOfSpaceError(AmagoPipeError):
    """A write failed for lack of space (disk full, quota, file-size limit); what it wrote was removed."""

    exit_code = 3


OUT_OF_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
"""errno values meaning "no room to write": device full, quota exceeded, file-size limit (RLIMIT_FSIZE)."""
OUT_OF_SPACE_HINT = "free some disk space (or raise the quota / file-size limit) and run again"
_OS_ERROR = re.compile(r"os error (\d+)")


def out_of_space(e: BaseException | None) -> BaseException | None:
    """The error in `e`'s chain (`e` itself or a cause) that says a write ran out of space, or None.

    Recognises OSError's errno and the `(os error N)` text of I/O errors raised by Rust extensions (safetensors).
    """
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno in OUT_OF_SPACE:
            return e
        code = _OS_ERROR.search(str(e))
        if code and int(code.group(1)) in OUT_OF_SPACE:
            return e
        e = e.__cause__ or e.__context__
    return None


def out_of_space_error(path: str | Path | None, cause: BaseException, *, kept: str = "") -> OutOfSpaceError:
    """The one-line OutOfSpaceError for a write to `path` that failed with `cause` (`kept`: what is still intact)."""
    found = out_of_space(cause) or cause
    number = found.errno if isinstance(found, OSError) else None
    if number is None and (code := _OS_ERROR.search(str(found))):
        number = int(code.group(1))
    reason = {errno.EFBIG: "file size limit reached", errno.EDQUOT: "disk quota exceeded"}.get(
        number or 0, "no space left on device"
    )
    where = f"{path}: " if path else ""
    return OutOfSpaceError(
        f"{where}out of space while writing ({reason}){f'; {kept}' if kept else ''}; {OUT_OF_SPACE_HINT}"
    )


class MissingDependencyError(AmagoPipeError):
    """An optional package is needed for what was asked; the message gives the install hint."""

    exit_code = 4


def import_optional(module: str, *, needs: str, package: str, install: str, quiet: bool = False) -> Any:
    """`importlib.import_module(module)`, or MissingDependencyError "`needs` the optional package '`package`', which
    cannot be imported (why); install it with: `install`" (`needs` names the key and who needs it, e.g. "env:
    Crafter needs"). `quiet` drops what the import prints to stderr (old gym's deprecation banner)."""
    try:
        with contextlib.redirect_stderr(io.StringIO()) if quiet else contextlib.nullcontext():
            return importlib.import_module(module)
    except ImportError as e:
        raise MissingDependencyError(
            f"{needs} the optional package '{package}', which cannot be imported ({e}); install it with: {install}"
        ) from e


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
