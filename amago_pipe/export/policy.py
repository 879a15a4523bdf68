"""`Policy`: act with an exported policy from raw gymnasium observations, its memory kept for you.

    policy = Policy.load("artifact/")           # checks the manifest and every file's checksum
    policy.reset(n_envs=8)
    actions = policy.act(obs)                   # first step of each episode
    actions = policy.act(obs, reward=rewards)   # later steps: the rewards the previous actions earned
    policy.reset_envs(terminated | truncated)   # episodes that ended start over with fresh memory

Env wrappers the policy was trained behind (frame skip, resize, grayscale, frame stacks, ...) are recorded: build
the env with them through `policy.make_env("ALE/Pong-v5")` or `policy.wrap_env(env)` (these two need gymnasium).

Needs torch and the network code only: no store, YAML, training code or gymnasium. Rewards are told through
`act(..., reward=...)`: the policy keeps the previous action, reward and time index of every env itself. Text
observations (a MiniGrid mission) may be given as the env's strings: they become word ids with the vocabulary
stored in the export (`policy.text_tallies` counts unknown words and cut texts).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from amago_pipe.actions import ActionCodec
from amago_pipe.agents.agent import Agent
from amago_pipe.agents.loading import agent_from_weights
from amago_pipe.agents.policy import AgentPolicy
from amago_pipe.errors import DataError
from amago_pipe.export.artifact import WEIGHTS, read_manifest
from amago_pipe.spec import DataSpec, flatten_obs
from amago_pipe.tokens import TextTally


class Policy:
    """A trained, exported policy acting in N parallel envs (batched observations in, env-space actions out)."""

    def __init__(self, agent: Agent, manifest: dict[str, Any], *, device: str | torch.device = "cpu"):
        self.agent, self.manifest = agent, manifest
        self.spec: DataSpec = agent.spec
        self.device = torch.device(device)
        self.codec = ActionCodec(self.spec.action)
        self._policy = AgentPolicy(agent, greedy=True, device=self.device)
        self.n_envs = 0
        self._time = np.zeros(0, np.int64)
        self._prev_action = np.zeros(0)
        self.text_tallies = {
            k: TextTally(a.text, k, where="policy") for k, a in self.spec.observations.items() if a.text is not None
        }
        """Per text key: the texts read, unknown words and texts cut to the stored `max_tokens`."""

    @classmethod
    def load(cls, path: str | Path, *, device: str | torch.device = "cpu") -> Policy:
        """Load an export directory (manifest, checksums and format checked); `device`: `cpu`, `cuda`, ..."""
        folder = Path(path)
        manifest = read_manifest(folder)
        agent = agent_from_weights(folder / WEIGHTS, manifest["policy"], device=device)
        return cls(agent, manifest, device=device)

    @property
    def wrappers(self) -> list[dict[str, Any]]:
        """The env `wrappers:` the policy's observations came through, as config records (`[]`: none)."""
        return list(self.spec.transforms or [])

    def make_env(self, env_id: str, **kwargs: Any) -> Any:
        """`gymnasium.make(env_id, **kwargs)` inside the policy's wrappers (what `act` expects to be given)."""
        from amago_pipe.config.transforms import wrappers_from_records
        from amago_pipe.envs.factory import EnvFactory

        wrappers = tuple(wrappers_from_records(self.wrappers, where="policy.wrappers"))
        return EnvFactory(id=env_id, kwargs=kwargs, wrappers=wrappers, where="policy")()

    def wrap_env(self, env: Any) -> Any:
        """An env already made, inside the policy's wrappers (an ALE env must be made with `frameskip=1` and the
        recorded sticky-action probability when the wrappers hold `atari`: `make_env` does that)."""
        from amago_pipe.config.transforms import wrappers_from_records
        from amago_pipe.envs.transforms import apply_wrappers

        wrappers = tuple(wrappers_from_records(self.wrappers, where="policy.wrappers"))
        return apply_wrappers(env, wrappers, where="policy.wrappers")

    @property
    def max_seq_len(self) -> int:
        return int(self.manifest["policy"]["max_seq_len"])

    def reset(self, n_envs: int = 1) -> None:
        """Fresh memory for `n_envs` environments (their next `act` is the first step of an episode)."""
        self.n_envs = n_envs
        self._policy.reset(n_envs)
        self._time = np.zeros(n_envs, np.int64)
        self._prev_action = np.zeros((n_envs, *self.spec.action.shape), self.codec.spec.dtype)

    def reset_envs(self, mask: Any) -> None:
        """Start new episodes (fresh memory, time 0) in the envs where `mask (N,)` is true."""
        done = np.asarray(mask, bool).reshape(-1)
        if done.shape != (self.n_envs,):
            raise ValueError(f"reset_envs: mask has {done.size} entries for {self.n_envs} envs (call reset(n) first)")
        self._policy.reset_envs(done)
        self._time[done] = 0

    def act(self, observations: Any, *, reward: Any = None, sample: bool = False) -> np.ndarray:
        """Env-space actions for one step of every env.

        `observations`: the env's observations, batched (N, ...) (a dict for Dict spaces); a single unbatched
        observation works when n_envs is 1 and returns one action. `reward`: the rewards (N,) the previous
        actions earned; needed by every env that is not at the first step of an episode. `sample`: draw from
        the policy instead of its most likely action.
        """
        obs, single = self._flat(observations)
        n = next(iter(obs.values())).shape[0]
        if n != self.n_envs:
            self.reset(n)
        started = self._time > 0
        rewards = np.zeros(n, np.float32)
        if started.any():
            if reward is None:
                raise ValueError(
                    "act: pass reward= (the rewards the previous actions earned) after the first step of an episode, "
                    "or call reset_envs(mask) where episodes ended"
                )
            rewards = np.broadcast_to(np.asarray(reward, np.float32).reshape(-1), (n,)).copy()
        rl2 = np.concatenate([rewards[:, None], self.codec.rl2_features(self._prev_action)], axis=1)
        rl2 = (rl2 * started[:, None]).astype(np.float32)
        self._policy.greedy = not sample
        actions = self.codec.to_env(self._policy.act(obs, rl2, self._time.copy()))
        self._prev_action = actions
        self._time += 1
        return actions[0] if single else actions

    def _flat(self, observations: Any) -> tuple[dict[str, np.ndarray], bool]:
        """Flattened observation arrays (N, ...) by key, and whether the input was one unbatched observation."""
        flat = flatten_obs(observations)
        expected = self.spec.observations
        if set(flat) != set(expected):
            raise DataError(
                f"act: observation keys {sorted(flat)} do not match the policy's {sorted(expected)} "
                "(pass what the env returns, a dict for Dict spaces)"
            )
        flat.update({k: self._token_ids(k, flat[k]) for k in self.text_tallies})
        single = all(np.ndim(v) == len(expected[k].shape) for k, v in flat.items())
        arrays = {k: np.asarray(v)[None] if single else np.asarray(v) for k, v in flat.items()}
        for k, v in arrays.items():
            if v.shape[1:] != expected[k].shape:
                raise DataError(
                    f"act: observation '{k}' has shape {v.shape}, expected (N, {', '.join(map(str, expected[k].shape))})"
                )
        return arrays, single

    def _token_ids(self, key: str, value: np.ndarray) -> np.ndarray:
        """A text key's word ids: strings (one, or N) through the stored vocabulary; ids pass as they are."""
        if value.dtype.kind in "USO":
            tally = self.text_tallies[key]
            return tally.encode(value.item()) if value.ndim == 0 else tally.encode_many(value)
        return value
