"""Typed configuration: `Component` (chosen by a flat `type:` key) and field docstrings.

Frozen, keyword-only dataclasses are the source of truth for every config; this module holds the
shared pieces. No torch, no click.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import itertools
import textwrap
from functools import cache
from typing import Any, ClassVar

from amago_pipe.registry import Registry, import_path

config = dataclasses.dataclass(frozen=True, kw_only=True)
"""Decorator for config classes: `@config class X: ...` is a frozen, keyword-only dataclass."""


@config
class Component:
    """A config chosen by `type:` from a registry; subclasses set `registry` on their family base.

    `type` holds the registered name (or the `module:Class` plugin path) the user wrote.
    """

    registry: ClassVar[Registry[Any]]
    impl: ClassVar[str] = ""
    """`module:Class` of the implementation, imported only when the component is built."""

    type: str = ""
    """Registered name or `package.module:Class` of a plugin."""

    def implementation(self) -> Any:
        """Import and return the implementation class named by `impl`."""
        if self.impl:
            return import_path(self.impl, what=self.registry.kind)
        if ":" in self.type:  # plugin given as its implementation class, whose `Config` is this config
            return import_path(self.type, what=self.registry.kind)
        raise TypeError(f"{type(self).__name__} names no implementation (set `impl`)")

    def to_dict(self) -> dict[str, Any]:
        """This config as plain JSON-able data."""
        data: dict[str, Any] = to_dict(self)
        return data


def to_dict(obj: Any) -> Any:
    """Plain JSON-able data for a config (dataclasses → dicts, tuples → lists)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): to_dict(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_dict(v) for v in obj]
    return obj


@cache
def field_docs(cls: type) -> dict[str, str]:
    """Field docstrings (the string literal under each annotated field), inherited ones included."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass is object or not dataclasses.is_dataclass(klass):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for node, nxt in itertools.pairwise(body):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant)
                and isinstance(nxt.value.value, str)
            ):
                docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


def class_doc(cls: type) -> str:
    """First paragraph of a class docstring, on one line."""
    doc = inspect.getdoc(cls) or ""
    return " ".join(doc.split("\n\n")[0].split())
