"""Training batches: store windows (numpy) -> padded torch tensors, with rl2 = [prev reward, prev action].

Actions are mapped to policy space (integer ids for discrete kinds, [-1, 1] for bounded continuous dims),
the convention the environment wrapper uses. Imports torch, numpy and the store's WindowBatch; no nets,
agents or envs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from amago_pipe.actions import ActionCodec
from amago_pipe.errors import DataError
from amago_pipe.spec import DataSpec

if TYPE_CHECKING:  # annotation only: acting with a policy (amago_pipe.Policy) needs no store
    from amago_pipe.store.info import WindowBatch


@dataclass
class Batch:
    """B windows of L steps as torch tensors; everything past `mask` is padding (zeros)."""

    obs: dict[str, torch.Tensor]
    """(B, L+1, ...) by observation key, stored dtype (uint8 images stay uint8)."""
    rl2: torch.Tensor
    """(B, L+1, 1+A) float32: [previous reward, previous action features]; zeros at an episode start."""
    time: torch.Tensor
    """(B, L+1) int64 absolute time index of each observation."""
    actions: torch.Tensor
    """(B, L) int64 ids (discrete), (B, L, A) float32 in [-1, 1] (continuous) or (B, L, A) int64 (multi*)."""
    rewards: torch.Tensor
    """(B, L) float32."""
    terminated: torch.Tensor
    """(B, L) bool: a terminal state follows this step (no bootstrapping)."""
    truncated: torch.Tensor
    """(B, L) bool: the episode was cut after this step (bootstrapping continues)."""
    mask: torch.Tensor
    """(B, L) bool: valid steps."""
    task: torch.Tensor | None = None
    """(B,) int64 id of each window's task (its episode's env name in the agent's `task_names`), when the agent
    keeps statistics per task (`popart_per_task`)."""

    @property
    def batch_size(self) -> int:
        return int(self.mask.shape[0])

    @property
    def seq_len(self) -> int:
        return int(self.mask.shape[1])

    @property
    def obs_mask(self) -> torch.Tensor:
        """(B, L+1) bool: valid observations."""
        first = torch.ones_like(self.mask[:, :1])
        return torch.cat([first, self.mask], dim=1)

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Batch:
        """The same batch on `device`."""
        moved: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, dict):
                moved[f.name] = {k: v.to(device, non_blocking=non_blocking) for k, v in value.items()}
            elif value is None:
                moved[f.name] = None
            else:
                moved[f.name] = value.to(device, non_blocking=non_blocking)
        return Batch(**moved)

    def pin_memory(self) -> Batch:
        """Page-locked copies (faster host-to-GPU transfers)."""
        pinned: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, dict):
                pinned[f.name] = {k: v.pin_memory() for k, v in value.items()}
            else:
                pinned[f.name] = None if value is None else value.pin_memory()
        return Batch(**pinned)


def window_to_batch(
    window: WindowBatch,
    spec: DataSpec,
    codec: ActionCodec | None = None,
    task_ids: Mapping[str, int] | None = None,
) -> Batch:
    """Build a torch Batch (CPU) from a store WindowBatch: policy-space actions and rl2 sequences; with `task_ids`
    (env name -> id) the windows' task ids from their `env_names` too."""
    codec = codec or ActionCodec(spec.action)
    mask = np.asarray(window.mask, dtype=bool)  # (B, L)
    bsz, length = mask.shape
    rl2 = np.zeros((bsz, length + 1, spec.rl2_dim), dtype=np.float32)  # (B, L+1, 1+A)
    first = np.asarray(window.time[:, 0]) > 0  # (B,) windows that start after their episode's first step
    rl2[:, 0, 0] = np.where(first, window.prev_rewards, 0.0)
    rl2[:, 0, 1:] = codec.rl2_features(window.prev_actions) * first[:, None]
    step_mask = mask[..., None].astype(np.float32)  # (B, L, 1)
    rl2[:, 1:, 0] = np.where(mask, window.rewards, 0.0)
    rl2[:, 1:, 1:] = codec.rl2_features(window.actions) * step_mask
    actions = codec.to_unit(window.actions)
    if actions.dtype != np.int64:
        actions = actions * step_mask.reshape(bsz, length, *([1] * (actions.ndim - 2)))
    return Batch(
        obs={k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in window.obs.items()},
        rl2=torch.from_numpy(rl2),
        time=torch.from_numpy(np.asarray(window.time, dtype=np.int64)),
        actions=torch.from_numpy(np.ascontiguousarray(actions)),
        rewards=torch.from_numpy(np.where(mask, window.rewards, 0.0).astype(np.float32)),
        terminated=torch.from_numpy(np.asarray(window.terminated, dtype=bool) & mask),
        truncated=torch.from_numpy(np.asarray(window.truncated, dtype=bool) & mask),
        mask=torch.from_numpy(mask),
        task=None if task_ids is None else torch.from_numpy(_task_ids(window.env_names, task_ids)),
    )


def _task_ids(names: tuple[str, ...], task_ids: Mapping[str, int]) -> np.ndarray:
    """(B,) int64 ids of the windows' env names; DataError naming a task the agent keeps no statistics of."""
    try:
        return np.asarray([task_ids[n] for n in names], dtype=np.int64)
    except KeyError as e:
        raise DataError(
            f"agent.popart_per_task: the data holds task '{e.args[0]}', which the agent keeps no value statistics of "
            f"(its tasks: {', '.join(task_ids)}, fixed when the run started); train a fresh run (--force) on data "
            "with that task, or keep that task out of the sampled partitions"
        ) from None
