"""The registries of every pluggable component, keyed by the name users write in `type:`.

Entries are lazy `module:attr` paths to torch-free config classes; each config class names its
implementation in `impl`. Plugins use `type: package.module:Class` or the entry-point group
`amago_pipe.<kind>`.
"""

from __future__ import annotations

from typing import Any

from amago_pipe.registry import Registry

STAGES: Registry[Any] = Registry("stage")
"""Pipeline stage types: convert, collect, relabel, train, evaluate, export."""

_BUILTIN: dict[Registry[Any], dict[str, str]] = {
    STAGES: {},
}

for _registry, _entries in _BUILTIN.items():
    for _name, _target in _entries.items():
        _registry.register(_name, _target)
