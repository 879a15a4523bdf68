"""The flat keys `agent:` had before its typed blocks (2026-12-01) and the blocks they moved into: YAML that writes
one is refused with its new form; an older checkpoint's or policy file's metadata is translated (`upgrade_flat_agent`).

Config only: no torch, no click; imports nothing of the package.
"""

from __future__ import annotations

from typing import Any

MOVED: dict[str, tuple[str, str]] = {
    "fbc_filter": ("filter", "type"),
    "filter_beta": ("filter", "beta"),
    "filter_max_weight": ("filter", "max_weight"),
    "filter_scale_max": ("filter", "scale_max"),
    "filter_normalize": ("filter", "normalize"),
    "leak_slope": ("filter", "slope"),
    "n_step": ("targets", "n_step"),
    "nstep_correction": ("targets", "correction"),
    "num_critics_td": ("targets", "num_critics_td"),
    "td_reduce": ("targets", "reduce"),
    "critic_loss": ("critic", "loss"),
    "value_samples": ("samples", "value"),
    "target_samples": ("samples", "target"),
}
"""Old flat key of `agent:` -> (the block it moved into, its key there)."""

FILTER_FIELDS: dict[str, tuple[str, ...]] = {
    "exp": ("beta", "max_weight", "scale_max", "normalize"),
    "binary": (),
    "leaky": ("slope",),
}
"""The fields each built-in `filter:` type reads (the others had no effect under the flat keys)."""


def upgrade_flat_agent(data: dict[str, Any]) -> dict[str, Any]:
    """`agent:` data with its flat keys of before the blocks moved into their blocks (a new dict; `data` itself when it has none).

    A block already written keeps its keys (they win over a flat key); a filter key the chosen filter type does not
    read is dropped (it had no effect). Old checkpoints' and policy files' `agent` metadata goes through this.
    """
    if not any(key in MOVED for key in data):
        return data
    out = {key: value for key, value in data.items() if key not in MOVED}
    for key, value in data.items():
        if key in MOVED:
            block, name = MOVED[key]
            current = out.get(block)
            current = dict(current) if isinstance(current, dict) else {}
            out[block] = {**current, name: current.get(name, value)}
    if isinstance(out.get("filter"), dict):
        out["filter"] = _filter_block(out["filter"])
    return out


def _filter_block(block: dict[str, Any]) -> dict[str, Any]:
    """The filter block with a `type` (from the keys written when none: `exp` unless only `slope` is) and only the
    keys that type reads; a plugin type keeps every key."""
    kind = block.get("type")
    if kind is None:
        kind = "leaky" if "slope" in block and not set(block) & set(FILTER_FIELDS["exp"]) else "exp"
    reads = FILTER_FIELDS.get(kind)
    if reads is None:
        return block
    return {"type": kind, **{key: value for key, value in block.items() if key in reads}}


def moved_keys(given: dict[str, Any]) -> dict[str, str]:
    """`{old key: problem}` for the flat keys in `given` (YAML `agent:` data), each naming the block to write."""
    new = upgrade_flat_agent(given)
    out = {}
    for key in given:
        if key not in MOVED:
            continue
        block, name = MOVED[key]
        written = new[block]
        dropped = "" if name in written else f" ({key} has no effect with filter type {written['type']})"
        out[key] = f"moved: write agent.{block}: {flow(written)}{dropped} (CHANGELOG.md, upgrade notes)"
    return out


def flow(value: Any) -> str:
    """`value` as YAML flow text: `{type: exp, beta: 2}`, `null`, `true`."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key}: {flow(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(flow(item) for item in value) + "]"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
