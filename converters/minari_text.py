"""Minari observations narrowed to `obs_keys` and their strings read as word ids (`text:`), for `minari_source`.

A Minari dataset stores a `Text` observation as one string per step; with `text:` each becomes `max_tokens` int32
word ids of the configured vocabulary (as the env-side `amago_pipe.envs.text` does), unknown words and cut texts
counted in the conversion report. numpy + gymnasium spaces only; no torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from amago_pipe.config.convert import MinariSourceConfig
from amago_pipe.errors import DataError, did_you_mean
from amago_pipe.spec import DEFAULT_OBS_KEY, KEY_SEP, text_keys
from amago_pipe.tokens import TOKEN_DTYPE, TextSpec

if TYPE_CHECKING:
    from .report import ConversionReport


def kept_space(space: Any, cfg: MinariSourceConfig, where: str) -> Any:
    """The observation space with only the `obs_keys` of its Dict (all of it without them)."""
    from gymnasium import spaces

    if not cfg.obs_keys:
        return space
    have = list(space.spaces) if isinstance(space, spaces.Dict) else []
    missing = [k for k in cfg.obs_keys if k not in have]
    if missing:
        found = f"its keys are {have}" if have else f"its observation space is {type(space).__name__}, not a Dict"
        raise DataError(
            f"obs_keys: {missing} not in the observations of {where} ({found}){did_you_mean(missing[0], have)}"
        )
    return spaces.Dict({k: space.spaces[k] for k in cfg.obs_keys})


def kept_obs(obs: Any, cfg: MinariSourceConfig) -> Any:
    """An episode's observations (nested dict) narrowed to `obs_keys`."""
    return {k: obs[k] for k in cfg.obs_keys} if cfg.obs_keys else obs


def text_specs(space: Any, cfg: MinariSourceConfig, where: str) -> dict[str, TextSpec]:
    """The TextSpec of each text key read as word ids (none without `text:`); DataError for a named key that is
    not a text observation, or `text:` on a dataset without one."""
    if cfg.text is None:
        return {}
    found = text_keys(space)
    keys = found if cfg.text.keys is None else list(cfg.text.keys)
    missing = [k for k in keys if k not in found]
    if not found or missing:
        raise DataError(
            f"text: {where} has no text observation {missing if missing else ''} (its text keys: {found or 'none'}); "
            "name them in `text.keys`, or drop `text:`"
        )
    spec = cfg.text.text_spec()
    return {k: spec for k in keys}


def token_space(space: Any, specs: dict[str, TextSpec], prefix: str = "") -> Any:
    """`space` with each text leaf in `specs` replaced by a Box of its word ids (for the DataSpec's `spaces`)."""
    from gymnasium import spaces

    if isinstance(space, spaces.Dict):
        return spaces.Dict({k: token_space(s, specs, f"{prefix}{k}{KEY_SEP}") for k, s in space.spaces.items()})
    if isinstance(space, spaces.Tuple):
        return spaces.Tuple([token_space(s, specs, f"{prefix}{i}{KEY_SEP}") for i, s in enumerate(space.spaces)])
    key = prefix[: -len(KEY_SEP)] if prefix else DEFAULT_OBS_KEY
    if key not in specs:
        return space
    spec = specs[key]
    return spaces.Box(0, spec.vocab_size - 1, (spec.max_tokens,), np.dtype(TOKEN_DTYPE))  # type: ignore[arg-type]


def tokenize(obs: dict[str, Any], specs: dict[str, TextSpec], report: ConversionReport, index: int) -> dict[str, Any]:
    """Flat observations with each text key's `(T+1,)` strings as `(T+1, max_tokens)` word ids; steps with unknown
    words and with cut texts are recorded in the report (per key)."""
    out = dict(obs)
    for key, spec in specs.items():
        rows = [spec.encode(t) for t in np.asarray(obs[key], dtype=object).reshape(-1)]
        out[key] = np.stack([r.ids for r in rows]) if rows else np.zeros((0, spec.max_tokens), TOKEN_DTYPE)
        unknown = sorted({w for r in rows for w in r.unknown})
        if unknown:
            report.adjust(
                f"text_unknown:{key}",
                f"observations['{key}']: words outside the vocabulary read as the unknown id 1 (e.g. {unknown[:5]}); "
                "add them to `text.vocabulary`",
                episode=index,
                timesteps=sum(1 for r in rows if r.unknown),
            )
        cut = sum(1 for r in rows if r.length > spec.max_tokens)
        if cut:
            longest = max(r.length for r in rows)
            report.adjust(
                f"text_truncated:{key}",
                f"observations['{key}']: texts of up to {longest} words cut to max_tokens {spec.max_tokens}",
                episode=index,
                timesteps=cut,
            )
    return out
