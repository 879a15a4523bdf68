"""Strict construction of config dataclasses from plain YAML data, collecting every problem.

Each problem names the dotted key path, what was found and what was expected, with a "did you
mean" for misspelled keys and types. No torch, no click.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Callable
from typing import Any, Literal, Union

from amago_pipe.config.base import Component, field_docs
from amago_pipe.errors import ConfigError, did_you_mean

_MISSING = dataclasses.MISSING
_EXAMPLE = re.compile(r"e\.g\. `([^`]+)`")
_SUFFIXED = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*([kKmM])")
_SCALAR_NAMES: dict[type, str] = {
    bool: "a boolean (true/false)",
    int: "an integer",
    float: "a number",
    str: "a string",
    type(None): "null",
}


class FieldError(ValueError):
    """Raised by a config's `__post_init__` to flag one of its own fields."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


class Problems:
    """Accumulates `(path, message)` problems while a config is built."""

    def __init__(self, locate: Callable[[str], str] | None = None, *, upgrade: bool = False):
        self.items: list[tuple[str, str]] = []
        self._locate = locate or (lambda path: "")
        self.upgrade = upgrade
        """Read the old forms of data an earlier version recorded (checkpoint metadata, lock files) through the
        classes' `upgrade(data)`; off for YAML, which refuses them with the new form (`moved`)."""

    def add(self, path: str, message: str) -> None:
        self.items.append((path, message))

    def lines(self) -> list[str]:
        out = []
        for path, message in self.items:
            where = self._locate(path)
            out.append(f"{where}{path or '<root>'}: {message}")
        return out

    def raise_if_any(self) -> None:
        if self.items:
            raise ConfigError(self.lines()[0], path=self.items[0][0], problems=self.lines())


def build_strict(cls: type, data: Any, where: str = "") -> Any:
    """Build `cls` from plain data, raising one ConfigError that lists every problem."""
    problems = Problems()
    built = build(cls, data, problems, where)
    problems.raise_if_any()
    return built


def join(path: str, key: str | int) -> str:
    """The key path `path.key` (just `key` at the top)."""
    return f"{path}.{key}" if path else str(key)


def describe(value: Any) -> str:
    """How a found value is shown in a message: `'ten' (a string)`."""
    kind = {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a mapping",
        type(None): "null",
    }.get(type(value), type(value).__name__)
    shown = repr(value)
    if len(shown) > 40:
        shown = shown[:37] + "..."
    return f"{shown} ({kind})"


def expected(tp: Any) -> str:
    """Human name of a type annotation: `an integer`, `one of 'a', 'b'`."""
    origin = typing.get_origin(tp)
    if isinstance(tp, type) and tp in _SCALAR_NAMES:
        return _SCALAR_NAMES[tp]
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin in (list, tuple):
        return "a list"
    if origin is dict:
        return "a mapping"
    if origin in (Union, types.UnionType):
        return " or ".join(expected(a) for a in typing.get_args(tp))
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return "a mapping"
    return str(tp)


def build(cls: type, data: Any, problems: Problems, path: str = "") -> Any:
    """Build `cls` from `data`; on a problem, record it and return None."""
    if isinstance(cls, type) and issubclass(cls, Component):
        return _build_component(cls, data, problems, path)
    return _build_dataclass(cls, data, problems, path)


def _build_component(base: type[Component], data: Any, problems: Problems, path: str) -> Any:
    if not isinstance(data, dict):
        problems.add(path, f"expected a mapping with a 'type' key, got {describe(data)}")
        return None
    kind = base.registry.kind
    type_name = data.get("type")
    if type_name is None:
        problems.add(path, f"missing 'type' (known {kind} types: {', '.join(base.registry.names())})")
        return None
    if not isinstance(type_name, str):
        problems.add(join(path, "type"), f"expected a string, got {describe(type_name)}")
        return None
    try:
        target = resolve_component_class(base, type_name, join(path, "type"))
    except ConfigError as e:
        problems.add(join(path, "type"), str(e).split(": ", 1)[-1])
        return None
    return _build_dataclass(target, {**data, "type": type_name}, problems, path)


def resolve_component_class(base: type[Component], type_name: str, where: str) -> type:
    """The config class for `type_name`: registered, or a plugin (a config class or one with `Config`)."""
    target = base.registry.get(type_name, where=where)
    if not (isinstance(target, type) and dataclasses.is_dataclass(target)):
        target = getattr(target, "Config", target)
    if not (isinstance(target, type) and issubclass(target, base)):
        raise ConfigError(
            f"{where}: '{type_name}' is not {_article(base.registry.kind)} {base.registry.kind} config; a plugin must "
            "be a subclass of "
            f"{base.__module__}.{base.__name__} or a class whose `Config` attribute is one",
            path=where,
        )
    return target


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def _build_dataclass(cls: type, data: Any, problems: Problems, path: str) -> Any:
    if not isinstance(data, dict):
        problems.add(path, f"expected a mapping, got {describe(data)}")
        return None
    hint = _old_form(cls, data)
    if hint:
        problems.add(path, hint)
        return None
    upgrade = getattr(cls, "upgrade", None)
    if problems.upgrade and upgrade is not None:
        data = upgrade(data)
    moved = _moved(cls, data)
    if moved:  # each moved key's new form, and every other problem of the rest
        for key, message in moved.items():
            problems.add(join(path, key), message)
        _convert_fields(cls, {k: v for k, v in data.items() if k not in moved}, problems, path)
        return None
    kwargs, ok = _convert_fields(cls, data, problems, path)
    if ok:
        for key, message in _no_effect(cls, kwargs):
            problems.add(join(path, key), message)
        try:
            return cls(**kwargs)
        except FieldError:
            pass  # reported below, with the other checks of the same config
        except (ValueError, TypeError, ConfigError) as e:
            problems.add(path, str(e))
            return None
    _check_fields(cls, kwargs, problems, path)
    return None


def _convert_fields(cls: type, data: dict[str, Any], problems: Problems, path: str) -> tuple[dict[str, Any], bool]:
    """The converted values of `data`'s keys, and whether every key was known, valid and every required one given."""
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    kwargs: dict[str, Any] = {}
    before = len(problems.items)
    for key, value in data.items():
        if key not in fields:
            problems.add(
                join(path, key),
                f"unknown key '{key}' for {_config_name(cls)} (allowed: {', '.join(fields)})"
                f"{did_you_mean(key, list(fields))}",
            )
            continue
        seen = len(problems.items)
        converted = convert(hints[key], value, problems, join(path, key))
        if len(problems.items) == seen:
            kwargs[key] = converted
        else:
            _add_example(cls, key, problems, seen, join(path, key))
    for name, f in fields.items():
        if name not in data and f.default is _MISSING and f.default_factory is _MISSING:
            problems.add(join(path, name), f"missing required key '{name}' ({expected(hints[name])})")
    return kwargs, len(problems.items) == before


def _add_example(cls: type, key: str, problems: Problems, first: int, path: str) -> None:
    """Add the example of field `key`'s docstring to the shape problems (a mapping or list was expected) in it."""
    found = _EXAMPLE.search(field_docs(cls).get(key, ""))
    if not found:
        return
    for i in range(first, len(problems.items)):
        where, message = problems.items[i]
        shape = message.startswith(("expected a mapping,", "expected a list,")) and " reads like " not in message
        if shape and (where == path or where.startswith(path + ".")):
            problems.items[i] = (where, f"{message}; `{key}` reads like `{found.group(1)}`")


def _old_form(cls: type, data: dict[str, Any]) -> str | None:
    """The new form of an old YAML shape, from the config class's `old_form(data)` when it has one."""
    old_form = getattr(cls, "old_form", None)
    return old_form(data) if old_form is not None else None


def _moved(cls: type, data: dict[str, Any]) -> dict[str, str]:
    """`{key: its new form}` for keys of an older release that moved, from the class's `moved(data)` when it has one."""
    moved = getattr(cls, "moved", None)
    return dict(moved(data)) if moved is not None else {}


def _no_effect(cls: type, given: dict[str, Any]) -> list[tuple[str, str]]:
    """`(key, problem)` for the keys written that the chosen options ignore, from the class's `no_effect(given)`."""
    no_effect = getattr(cls, "no_effect", None)
    return list(no_effect(given)) if no_effect is not None else []


def _check_fields(cls: type, kwargs: dict[str, Any], problems: Problems, path: str) -> None:
    """Report every FieldError of `cls.__post_init__` on the fields that converted, not only the first.

    Runs the checks on an unconstructed instance: a field that failed (or was flagged) takes its default,
    so the checks after it still run; they stop at one that reads a required field that is missing.
    """
    post_init = getattr(cls, "__post_init__", None)
    if post_init is None:
        return
    defaults = _field_defaults(cls)
    values, flagged = {**defaults, **kwargs}, set()
    while True:
        probe: Any = object.__new__(cls)
        for name, value in values.items():
            object.__setattr__(probe, name, value)
        try:
            post_init(probe)
            return
        except FieldError as e:
            key = e.field.split(".")[0]
            if key in flagged:
                return
            flagged.add(key)
            problems.add(join(path, e.field), str(e))
            if key not in defaults:
                return
            values[key] = defaults[key]
        except Exception:  # a check that needs a field which failed to convert
            return


def _field_defaults(cls: type) -> dict[str, Any]:
    """Default values of the dataclass fields that have one (factories called)."""
    defaults: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.default is not _MISSING:
            defaults[f.name] = f.default
        elif f.default_factory is not _MISSING:
            defaults[f.name] = f.default_factory()
    return defaults


def _config_name(cls: type) -> str:
    if issubclass(cls, Component) and hasattr(cls, "registry"):
        return f"{cls.registry.kind}"
    return cls.__name__


def convert(tp: Any, value: Any, problems: Problems, path: str) -> Any:
    """Check `value` against annotation `tp`, converting lists to tuples where asked."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):
        return _convert_union(tp, value, problems, path)
    if origin is Literal:
        allowed = typing.get_args(tp)
        if value in allowed and type(value) is type(allowed[allowed.index(value)]):
            return value
        hint = did_you_mean(value, [str(a) for a in allowed]) if isinstance(value, str) else ""
        problems.add(path, f"expected {expected(tp)}, got {describe(value)}{hint}")
        return None
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return build(tp, value, problems, path)
    if origin in (list, tuple):
        return _convert_sequence(tp, value, problems, path)
    if origin is dict:
        if not isinstance(value, dict):
            problems.add(path, f"expected a mapping, got {describe(value)}")
            return None
        _key_tp, val_tp = typing.get_args(tp) or (Any, Any)
        return {k: convert(val_tp, v, problems, join(path, k)) for k, v in value.items()}
    return _convert_scalar(tp, value, problems, path)


def _convert_union(tp: Any, value: Any, problems: Problems, path: str) -> Any:
    options = typing.get_args(tp)
    if value is None and type(None) in options:
        return None
    for option in options:
        trial = Problems(upgrade=problems.upgrade)
        result = convert(option, value, trial, path)
        if not trial.items:
            return result
    non_null = [o for o in options if o is not type(None)]
    shaped = [o for o in non_null if _container_for(o, value)]
    if len(non_null) == 1 or len(shaped) == 1:  # Optional[X], or one option takes this shape: its own problem
        return convert(non_null[0] if len(non_null) == 1 else shaped[0], value, problems, path)
    problems.add(path, f"expected {expected(tp)}, got {describe(value)}")
    return None


def _container_for(tp: Any, value: Any) -> bool:
    """True when `tp` is a mapping or list type (a config, dict, list, tuple) and `value` has that shape."""
    origin = typing.get_origin(tp)
    if origin is dict or (isinstance(tp, type) and dataclasses.is_dataclass(tp)):
        return isinstance(value, dict)
    return origin in (list, tuple) and isinstance(value, list | tuple)


def _convert_sequence(tp: Any, value: Any, problems: Problems, path: str) -> Any:
    if not isinstance(value, list | tuple):
        problems.add(path, f"expected a list, got {describe(value)}")
        return None
    args = typing.get_args(tp)
    if typing.get_origin(tp) is tuple and args and args[-1] is not Ellipsis:
        if len(value) != len(args):
            problems.add(path, f"expected a list of {len(args)} items, got {len(value)}")
            return None
        return tuple(convert(a, v, problems, join(path, i)) for i, (a, v) in enumerate(zip(args, value, strict=True)))
    item_tp = args[0] if args else Any
    items = [convert(item_tp, v, problems, join(path, i)) for i, v in enumerate(value)]
    return tuple(items) if typing.get_origin(tp) is tuple else items


def _convert_scalar(tp: Any, value: Any, problems: Problems, path: str) -> Any:
    if tp is bool:
        ok = isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif tp is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if ok:
            return float(value)
    elif tp is str:
        ok = isinstance(value, str)
    elif tp is type(None):
        ok = value is None
    else:
        ok = isinstance(value, tp)
    if not ok:
        hint = ""
        if tp in (int, float) and isinstance(value, str):
            hint = " (write numbers without quotes; underscores like 10_000 are fine)"
            suffixed = _SUFFIXED.fullmatch(value.strip())
            number = float(suffixed.group(1)) * (1e3 if suffixed.group(2) in "kK" else 1e6) if suffixed else 0.5
            if number.is_integer():
                hint = f" (suffixes like k or M are not read; write {int(number):_} without quotes)"
        problems.add(path, f"expected {expected(tp)}, got {describe(value)}{hint}")
        return None
    return value
