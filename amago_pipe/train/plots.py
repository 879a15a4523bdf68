"""Learning-curve and return plots (PNG, matplotlib's Agg backend) from metrics rows and episode returns.

Imports matplotlib lazily; no torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

CURVES: dict[str, tuple[str, ...]] = {
    "losses": ("train/critic_loss", "train/actor_loss", "train/loss"),
    "values": ("train/q_mean", "train/td_target_mean", "train/advantage_mean"),
    "policy": ("train/bc_filter_rate", "train/entropy", "train/logp_data"),
    "throughput": ("train/updates_per_s",),
    "validation": ("val/return_mean", "val/return_bottom_quintile"),
}
"""Plot file name -> metric keys drawn in it (keys that were never logged are left out)."""


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _save(plt: Any, fig: Any, path: Path, title: str) -> Path:
    """Title, tight layout, write `path` (creating its folder) and free the figure."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def plot_learning_curves(rows: list[dict[str, Any]], out_dir: Path, *, x: str = "step") -> list[Path]:
    """One PNG per group in CURVES with at least one logged key; returns the written paths."""
    out_dir = Path(out_dir)
    written: list[Path] = []
    plt = None
    for name, keys in CURVES.items():
        series = {k: [(r[x], r[k]) for r in rows if r.get(k) is not None and x in r] for k in keys}
        series = {k: v for k, v in series.items() if v}
        if not series:
            continue
        plt = plt or _pyplot()
        out_dir.mkdir(parents=True, exist_ok=True)
        fig, axes = plt.subplots(len(series), 1, figsize=(7, 2.4 * len(series)), squeeze=False)
        for ax, (key, points) in zip(axes[:, 0], series.items()):
            xs, ys = zip(*points)
            ax.plot(xs, ys, marker="o" if len(xs) < 30 else None, linewidth=1.2)
            ax.set_ylabel(key.split("/", 1)[-1], fontsize=8)
            ax.grid(alpha=0.3)
        axes[-1, 0].set_xlabel(x)
        fig.suptitle(name)
        fig.tight_layout()
        path = out_dir / f"{name}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)
    return written


def plot_returns(
    returns_by_env: Mapping[str, Sequence[float]], path: Path, *, title: str = "evaluation returns"
) -> Path:
    """Histogram of episode returns per env name, plus the returns in episode order."""
    plt = _pyplot()
    fig, (ax_hist, ax_seq) = plt.subplots(1, 2, figsize=(10, 3.2))
    for name, returns in returns_by_env.items():
        ax_hist.hist(list(returns), bins=min(20, max(5, len(returns) // 2)), alpha=0.6, label=name)
        ax_seq.plot(list(returns), marker=".", linewidth=0.8, label=name)
    ax_hist.set_xlabel("return")
    ax_hist.set_ylabel("episodes")
    ax_seq.set_xlabel("episode")
    ax_seq.set_ylabel("return")
    for ax in (ax_hist, ax_seq):
        ax.grid(alpha=0.3)
    if len(returns_by_env) > 1:
        ax_seq.legend(fontsize=7)
    return _save(plt, fig, path, title)


def plot_attempts(attempt_returns: Sequence[Sequence[float]], path: Path, *, title: str = "return per attempt") -> Path:
    """Meta-RL: mean (and spread) of the return of attempt 1..k over episodes; rising means in-context learning."""
    import numpy as np

    plt = _pyplot()
    k = np.arange(1, len(attempt_returns) + 1)
    means = np.asarray([np.mean(r) for r in attempt_returns])
    stds = np.asarray([np.std(r) for r in attempt_returns])
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.plot(k, means, marker="o")
    ax.fill_between(k, means - stds, means + stds, alpha=0.2)
    ax.set_xlabel("attempt within the episode")
    ax.set_ylabel("return")
    ax.set_xticks(k)
    ax.grid(alpha=0.3)
    return _save(plt, fig, path, title)
