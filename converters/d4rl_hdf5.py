"""D4RL HDF5 files → store episodes, streamed in row blocks (bounded memory), every adjustment reported.

Episodes end at a terminal, a timeout or (with next_observations) an unflagged discontinuity; the last
observation comes from next_observations when present. h5py only (never the `d4rl` package); no torch.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from amago_pipe.config.convert import D4rlSourceConfig
from amago_pipe.errors import DataError
from amago_pipe.hashing import hash_paths
from amago_pipe.spec import ArraySpec, DataSpec

from . import d4rl_layout as layout
from .base import Converter, SourceInfo, to_float32

if TYPE_CHECKING:
    from amago_pipe.store import Episode

    from .report import ConversionReport

DISCONTINUITY_ATOL = 1e-5
"""next_observations[t] and observations[t+1] closer than this (plus 1e-5 relative) count as continuous."""


@dataclass
class RowSpan:
    """Rows [start, stop) of one source episode, their arrays and why the episode ended there."""

    start: int
    stop: int
    arrays: dict[str, np.ndarray]
    end: str
    """terminal, timeout, both, discontinuity or end_of_data."""


class D4rlHdf5Converter(Converter):
    """Reads one D4RL-layout HDF5 file (observations, actions, rewards, terminals[, timeouts, next_observations])."""

    name = "d4rl"
    Config = D4rlSourceConfig
    config: D4rlSourceConfig

    def open(self) -> SourceInfo:
        cfg = self.config
        self.path = Path(cfg.path).expanduser().resolve()
        self.where = f"{self.path}"
        self.file = layout.open_h5(self.path)
        self.n, self.names = layout.check_layout(self.file, where=self.where, info_keys=cfg.info_keys)
        self.terminals = layout.read_flags(self.file, "terminals", self.n, where=self.where)
        has_timeouts = "timeouts" in self.names
        self.timeouts = (
            layout.read_flags(self.file, "timeouts", self.n, where=self.where)
            if has_timeouts
            else np.zeros(self.n, bool)
        )
        self.has_next = "next_observations" in self.names
        self.action, self.action_how = layout.infer_action_spec(self.file, self.n, where=self.where)
        obs_ds = self.file["observations"]
        if self.has_next and self.file["next_observations"].shape[1:] != obs_ds.shape[1:]:
            raise DataError(
                f"{self.where}: next_observations has per-row shape {self.file['next_observations'].shape[1:]} but "
                f"observations has {obs_ds.shape[1:]}; expected the same shape"
            )
        rewards_shape = self.file["rewards"].shape[1:]
        if rewards_shape not in ((), (1,)):
            raise DataError(f"{self.where}: rewards has per-row shape {rewards_shape}, expected one number per row")
        observations = {"observation": ArraySpec(tuple(int(s) for s in obs_ds.shape[1:]), obs_ds.dtype.name)}
        for name in self.names:
            if name.startswith("infos/"):
                ds = self.file[name]
                observations[name] = ArraySpec(tuple(int(s) for s in ds.shape[1:]), ds.dtype.name)
        options = self.options(
            info_keys=sorted(cfg.info_keys),
            repeat_last_obs=cfg.repeat_last_obs,
            split_on_discontinuity=cfg.split_on_discontinuity,
        )
        self.env_name = self.job.env_name or self.path.stem
        return SourceInfo(
            name=f"d4rl:{self.path}",
            spec=DataSpec(observations=observations, action=self.action),
            fingerprint=hash_paths(self.path.parent, [self.path], sampled=True, extra=options)[:32],
            total_timesteps=self.n,
            env_name=self.env_name,
            metadata=layout.read_metadata(self.file),
        )

    def close(self) -> None:
        if getattr(self, "file", None) is not None:
            self.file.close()
            self.file = None

    # ---- streaming -------------------------------------------------------------------------------------------
    def episodes(self, report: ConversionReport) -> Iterator[Episode]:
        self._report_layout(report)
        report.source_timesteps = self.n
        index = 0
        for span in self._spans():
            if self.selection.past_end(index):
                self._count_rest(span.start, index, report)
                return
            if index in self.selection:
                episode = self._episode(span, index, report)
                if episode is not None:
                    yield episode
            else:
                report.unselected_episodes += 1
                report.unselected_timesteps += span.stop - span.start
            index += 1
        report.source_episodes = index

    def _report_layout(self, report: ConversionReport) -> None:
        report.adjust("action_space_inferred", self.action_how, count_episode=False)
        if "timeouts" not in self.names:
            report.adjust(
                "no_timeouts",
                "the file has no `timeouts` array: episodes end only at terminals"
                + (" and at discontinuities in next_observations" if self.has_next else ""),
                count_episode=False,
            )
        both = int(np.count_nonzero(self.terminals & self.timeouts))
        if both:
            report.adjust(
                "terminal_and_timeout",
                "steps flagged both terminal and timeout: one episode boundary, both flags kept "
                "(termination wins for bootstrapping)",
                timesteps=both,
                count_episode=False,
            )

    def _count_rest(self, start: int, index: int, report: ConversionReport) -> None:
        """Rows from `start` on are past the selected episodes: account for them without reading them."""
        ends = self.terminals[start:] | self.timeouts[start:]
        rest = int(np.count_nonzero(ends)) + int(not ends[-1])
        report.unselected_timesteps += self.n - start
        report.unselected_episodes += rest
        report.source_episodes = index + rest

    def _spans(self) -> Iterator[RowSpan]:
        """Episodes as row spans, read block by block; a span crossing blocks is stitched from pieces."""
        names = {k: v for k, v in self.names.items() if k not in ("terminals", "timeouts")}
        step = layout.block_rows(self.file, names)
        pieces: list[dict[str, np.ndarray]] = []
        span_start = 0
        for b0 in range(0, self.n, step):
            b1 = min(b0 + step, self.n)
            block = {k: layout.read_rows(self.file[v], b0, b1, where=self.where) for k, v in names.items()}
            ends = self._block_ends(block, b0, b1)
            cut = b0
            for e in np.flatnonzero(ends != "") + b0:
                pieces.append({k: v[cut - b0 : e + 1 - b0] for k, v in block.items()})
                yield RowSpan(span_start, int(e) + 1, _stitch(pieces), str(ends[e - b0]))
                pieces, span_start, cut = [], int(e) + 1, int(e) + 1
            if cut < b1:
                pieces.append({k: v[cut - b0 :] for k, v in block.items()})
        if pieces:
            yield RowSpan(span_start, self.n, _stitch(pieces), "end_of_data")

    def _block_ends(self, block: dict[str, np.ndarray], b0: int, b1: int) -> np.ndarray:
        """Per row of the block: why an episode ends there ('' when it does not)."""
        term, tout = self.terminals[b0:b1], self.timeouts[b0:b1]
        ends = np.full(b1 - b0, "", dtype=object)
        ends[tout] = "timeout"
        ends[term] = "terminal"
        ends[term & tout] = "both"
        if self.has_next and self.config.split_on_discontinuity:
            following = block["observations"][1:]
            if b1 < self.n:
                extra = layout.read_rows(self.file["observations"], b1, b1 + 1, where=self.where)
                following = np.concatenate([following, extra])
            nxt = block["next_observations"][: len(following)]
            jump = ~_close(nxt, following)
            jump &= ends[: len(following)] == ""
            ends[: len(following)][jump] = "discontinuity"
        return ends

    # ---- one episode -----------------------------------------------------------------------------------------
    def _episode(self, span: RowSpan, index: int, report: ConversionReport) -> Episode | None:
        from amago_pipe.store import Episode

        a = span.arrays
        steps = span.stop - span.start
        term = self.terminals[span.start : span.stop].copy()
        trunc = self.timeouts[span.start : span.stop].copy()
        obs = {"observation": a["observations"]}
        obs.update({k: a[k] for k in a if k.startswith("infos/")})
        actions, rewards = a["actions"], a["rewards"]
        last: dict[str, np.ndarray] | None = self._last_observation(span, index, report)
        if last is None:  # the last transition's next observation is unknown: drop that transition
            if steps == 1:
                report.adjust(
                    "episode_dropped_one_step",
                    "one-step non-terminal episode without next_observations: nothing left once its last step "
                    "is dropped, so the episode is not written (its step is counted under last_step_dropped)",
                    episode=index,
                )
                return None
            steps -= 1
            trunc[steps - 1] = span.end in ("timeout", "both")
            actions, rewards, term, trunc = actions[:steps], rewards[:steps], term[:steps], trunc[:steps]
        else:
            obs = {k: np.concatenate([v, last[k]]) for k, v in obs.items()}
        self._note_end(span, index, report)
        return Episode(
            obs=obs,
            actions=self._actions(actions, index, report),
            rewards=to_float32(rewards.reshape(steps), what="rewards", report=report, index=index),
            terminated=term,
            truncated=trunc,
            env_name=self.env_name,
            source=f"d4rl:{self.path.name}",
            time_start=0,
            meta={"source_index": index, "source_rows": [span.start, span.stop]},
        )

    def _last_observation(self, span: RowSpan, index: int, report: ConversionReport) -> dict[str, np.ndarray] | None:
        """The observation after the last step (and its info rows), or None when that step must be dropped."""
        a = span.arrays
        terminal = span.end in ("terminal", "both")
        if self.has_next:
            last = {"observation": a["next_observations"][-1:]}
        elif terminal or self.config.repeat_last_obs:
            kind = "terminal" if terminal else "non_terminal"
            report.adjust(
                f"last_obs_repeated_{kind}",
                "no next_observations: the final observation repeats the previous one"
                + (" (after a terminal it is never bootstrapped from)" if terminal else " (repeat_last_obs)"),
                episode=index,
                timesteps=1,
            )
            last = {"observation": a["observations"][-1:]}
        else:
            report.adjust(
                "last_step_dropped",
                "no next_observations: the last step of each non-terminal episode was dropped (its next observation "
                "is unknown: D4RL's next row already starts the next episode); after a timeout the step before it "
                "now carries the timeout flag (set repeat_last_obs to keep the step with a repeated observation)",
                episode=index,
                dropped_timesteps=1,
            )
            return None
        for k in (k for k in a if k.startswith("infos/")):
            report.adjust(
                f"info_last_row_repeated:{k}",
                f"{k}: the file has no row for the final observation; the last row was repeated",
                episode=index,
            )
            last[k] = a[k][-1:]
        return last

    def _note_end(self, span: RowSpan, index: int, report: ConversionReport) -> None:
        if span.end == "discontinuity":
            report.adjust(
                "split_at_discontinuity",
                "next_observations[t] != observations[t+1] with no terminal/timeout flag: an unflagged episode "
                "boundary; the episode was ended there without an end flag (split_on_discontinuity)",
                episode=index,
            )
        elif span.end == "end_of_data":
            report.adjust(
                "trailing_unfinished",
                "the file ends without a terminal/timeout: the trailing steps were kept as an unfinished episode",
                episode=index,
                timesteps=span.stop - span.start,
            )

    def _actions(self, actions: np.ndarray, index: int, report: ConversionReport) -> np.ndarray:
        if self.action.kind != "continuous":
            out = actions.astype(np.int64, copy=False)
            return out.reshape(len(out)) if self.action.kind == "discrete" else out.reshape(len(out), -1)
        if actions.ndim == 1:
            report.adjust("actions_reshaped", "1-D continuous actions stored as (T, 1)", episode=index)
            actions = actions.reshape(-1, 1)
        return to_float32(actions, what="actions", report=report, index=index)


def _stitch(pieces: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    if len(pieces) == 1:
        return pieces[0]
    return {k: np.concatenate([p[k] for p in pieces]) for k in pieces[0]}


def _close(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise: every element of a[i] is close to b[i] (NaNs equal); exact matches skip the tolerance test."""
    if len(a) == 0:
        return np.zeros(0, bool)
    same: np.ndarray = np.all((a == b).reshape(len(a), -1), axis=1)
    if a.dtype.kind not in "fc" or same.all():
        return same
    rows = np.flatnonzero(~same)
    ok = np.isclose(a[rows], b[rows], rtol=1e-5, atol=DISCONTINUITY_ATOL, equal_nan=True)
    same[rows] = np.all(ok.reshape(len(rows), -1), axis=1)
    return same
