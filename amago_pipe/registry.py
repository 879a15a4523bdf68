"""One generic, lazy registry for every pluggable component (stages, encoders, converters, ...).

Entries are `"module:attr"` strings imported on first use, so listing or validating never imports
torch. A `type:` value with a colon (`my_pkg.mod:MyClass`) is a plugin loaded by import path.
Leaf module: imports only `errors`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any, Generic, TypeVar

from amago_pipe.errors import ConfigError, did_you_mean

T = TypeVar("T")


def import_path(path: str, *, what: str = "object", where: str | None = None) -> Any:
    """Import `"pkg.module:attr"` (attr may be dotted), raising ConfigError on failure."""
    prefix = f"{where}: " if where else ""
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(f"{prefix}'{path}' is not an import path; expected 'package.module:Name'", path=where)
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as e:
        raise ConfigError(f"{prefix}cannot import module '{module_name}' for {what} '{path}' ({e})", path=where) from e
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as e:
            raise ConfigError(
                f"{prefix}module '{module_name}' has no attribute '{attr}' (for {what} '{path}')",
                path=where,
            ) from e
    return obj


class Registry(Generic[T]):
    """Maps short names to lazily imported objects of one kind (e.g. `traj_encoder`)."""

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, str | T] = {}
        self._entry_points_loaded = False

    def register(self, name: str, target: str | T | None = None) -> Callable[[T], T] | None:
        """Register `target` (an object or a lazy `"module:attr"`); without it, act as a decorator."""
        if target is not None:
            self._entries[name] = target
            return None

        def decorator(obj: T) -> T:
            self._entries[name] = obj
            return obj

        return decorator

    def names(self) -> list[str]:
        """Every registered short name, sorted (plugins from entry points included)."""
        self._load_entry_points()
        return sorted(self._entries)

    def __contains__(self, name: str) -> bool:
        self._load_entry_points()
        return name in self._entries

    def get(self, name: str, *, where: str | None = None) -> T:
        """Resolve a short name or a `module:attr` plugin path; ConfigError names the field."""
        if ":" in name:
            obj: T = import_path(name, what=self.kind, where=where)
            return obj
        self._load_entry_points()
        if name not in self._entries:
            prefix = f"{where}: " if where else ""
            known = ", ".join(sorted(self._entries)) or "none registered"
            raise ConfigError(
                f"{prefix}unknown {self.kind} '{name}' (known: {known}){did_you_mean(name, list(self._entries))}",
                path=where,
            )
        entry = self._entries[name]
        if isinstance(entry, str):
            entry = import_path(entry, what=self.kind, where=where)
            self._entries[name] = entry
        return entry

    def _load_entry_points(self) -> None:
        """Add plugins published under the entry-point group `amago_pipe.<kind>`."""
        if self._entry_points_loaded:
            return
        self._entry_points_loaded = True
        for ep in entry_points(group=f"amago_pipe.{self.kind}"):
            self._entries.setdefault(ep.name, ep.value)
