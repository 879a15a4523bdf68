"""Hindsight relabeling: Episode -> relabeled copies under goals the episode achieved (numpy only).

`build_relabeler(config, spec)` makes a `Relabeler` from a `RelabelConfig`; `relabel_stream` relabels a stream of
episodes (the `relabel` stage), `relabel_windows` sampled windows (a train stage's `relabel:` section).
"""

from amago_pipe.relabel.goals import GoalLayout
from amago_pipe.relabel.rewards import CheckedReward
from amago_pipe.relabel.run import RelabelReport, build_relabeler, goal_pool, relabel_stream
from amago_pipe.relabel.strategies import Relabeler, Settings
from amago_pipe.relabel.windows import relabel_windows, window_relabeler

__all__ = [
    "CheckedReward",
    "GoalLayout",
    "RelabelReport",
    "Relabeler",
    "Settings",
    "build_relabeler",
    "goal_pool",
    "relabel_stream",
    "relabel_windows",
    "window_relabeler",
]
