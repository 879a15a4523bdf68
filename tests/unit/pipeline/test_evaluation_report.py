"""The evaluate stage's summary.md: a per-task table, with each task's return per attempt for k-shot task sets."""

from __future__ import annotations

from amago_pipe.envs.stats import EpisodeStats, summarize
from amago_pipe.pipeline.evaluation_report import task_table


def _episode(task: str, attempts: list[float]) -> EpisodeStats:
    info = {f"amago_pipe/attempt_{i + 1}_return": r for i, r in enumerate(attempts)}
    return EpisodeStats(task, 0, sum(attempts), 10, True, False, info=info)


def test_each_task_has_its_own_returns_per_attempt() -> None:
    stats = [_episode("coinrun", [1.0, 3.0]), _episode("coinrun", [0.0, 5.0]), _episode("maze", [2.0, 2.0])]
    lines = task_table(summarize(stats, held_out=frozenset({"maze"})), [])
    assert "return per attempt (1 / 2 / ...)" in lines[3]
    assert "| coinrun | training | 2 | 4.5 | 4 | - | 0.5 / 4 |" in lines
    assert "| maze | held-out | 1 | 4 | 4 | - | 2 / 2 |" in lines
    assert all(line.count("|") == lines[3].count("|") for line in lines[3:] if line.startswith("|"))


def test_tasks_without_attempts_keep_the_plain_table() -> None:
    stats = [EpisodeStats("a", 0, 1.0, 5, True, False), EpisodeStats("b", 1, 2.0, 5, True, False)]
    lines = task_table(summarize(stats), [])
    assert lines[3] == "| task | split | episodes | mean return | bottom-quintile return | success |"
