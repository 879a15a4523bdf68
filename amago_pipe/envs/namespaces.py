"""The gymnasium id namespaces amago-pipe registers on first use: `<namespace>/<Env>` ids, each namespace with a
`register()` function (no arguments, idempotent; MissingDependencyError naming the `pip install` when its package
is absent). A plugin adds its own with `ENV_NAMESPACES.register("mine", "my_pkg.envs:register")` or the
`amago_pipe.env_namespace` entry-point group, like every other registry. Imports nothing heavy.
"""

from __future__ import annotations

from collections.abc import Callable

from amago_pipe.registry import Registry

BUILTIN_NAMESPACE = "amago_pipe"
"""Ids `amago_pipe/...` are the built-in envs of `amago_pipe.envs.builtin`."""

ENV_NAMESPACES: Registry[Callable[[], None]] = Registry("env_namespace")
"""Namespace -> its `register()`: the built-in envs, POPGym, gymnax and ale-py's `ALE`."""
for _name, _target in {
    BUILTIN_NAMESPACE: "amago_pipe.envs.builtin:register_builtin_envs",
    "popgym": "amago_pipe.envs.popgym:register_popgym_envs",
    "gymnax": "amago_pipe.envs.gymnax:register_gymnax_envs",
    "ALE": "amago_pipe.envs.transforms_atari:register_ale_envs",
}.items():
    ENV_NAMESPACES.register(_name, _target)


def register_namespace(env_id: str) -> None:
    """Register the envs of `env_id`'s namespace when it is one of ENV_NAMESPACES (ids of others are left to
    gymnasium)."""
    namespace = env_id.split("/", 1)[0] if "/" in env_id else ""
    if namespace in ENV_NAMESPACES:
        ENV_NAMESPACES.get(namespace, where="env.id")()
