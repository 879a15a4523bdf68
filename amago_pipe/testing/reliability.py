"""Driving `amago-pipe` processes under random signals and auditing what they leave: the reliability battery's kit.

`CliProcess` starts a real CLI process (logs to files) and kills it at a chosen moment; `audit_episodes` counts
every episode of a partition by content against the expected ones; `leftovers` lists `.tmp-*` files and
unsealed segments; `verify_cli` runs `amago-pipe store verify`; `Battery` ties them into rounds and `Row` is
one line of the result table. The scenarios' rounds are in `reliability_scenarios`. Used by
`benchmarks/bench_reliability.py`. numpy + the store; no torch, no click.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from amago_pipe.store import Episode, TrajectoryStore
from amago_pipe.store.format import segment_pid
from amago_pipe.store.leftovers import unsealed_segments

PID_MODULO = 10_000_000
"""Segment ids carry the writer's pid modulo this (see `amago_pipe.store.format.new_segment_id`)."""
PARTITION = "protected"
"""The partition every scenario writes."""


def cli_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for CLI processes: wandb off, wide console, plus `extra`."""
    env = {**os.environ, "WANDB_MODE": "disabled", "COLUMNS": "200", **(extra or {})}
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


class CliProcess:
    """One `python -m amago_pipe.cli ARGS` process; stdout and stderr go to `<log_dir>/<label>.log`."""

    def __init__(self, args: list[str], *, cwd: Path, env: dict[str, str], log_dir: Path, label: str):
        self.args, self.label = args, label
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log = log_dir / f"{label}.log"
        self.started = time.monotonic()
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "amago_pipe.cli", *args], cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT
            )
        self.signal: int | None = None
        """The signal this process was killed with (None when it was not, or had exited before)."""
        self.ended: float | None = None
        self.moment: int | None = None
        """Index of this process's signal in `Row.moments`."""

    @property
    def pid(self) -> int:
        return self.proc.pid

    def kill_at(self, delay: float, sig: int) -> bool:
        """Send `sig` `delay` seconds after the start unless the process has exited; True when it was running."""
        remaining = self.started + delay - time.monotonic()
        if remaining > 0:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=remaining)
        if self.poll() is not None:
            return False
        os.kill(self.proc.pid, sig)
        self.signal = sig
        self.wait()  # reaped at once: a zombie would look alive to the store's dead-writer check
        return True

    def poll(self) -> int | None:
        rc = self.proc.poll()
        if rc is not None and self.ended is None:
            self.ended = time.monotonic()
        return rc

    def wait(self, timeout: float = 600.0) -> int:
        self.proc.wait(timeout=timeout)
        return self.poll()  # type: ignore[return-value]

    @property
    def seconds(self) -> float:
        """How long the process ran (so far, while it runs)."""
        return (self.ended or time.monotonic()) - self.started

    def failure(self) -> str | None:
        """None when the process exited 0 or died of the signal sent to it; else its last log line."""
        rc = self.proc.returncode
        if rc == 0 or (self.signal is not None and rc in (-self.signal, 128 + self.signal)):
            return None
        lines = [line for line in self.log.read_text(errors="replace").splitlines() if line.strip()]
        return f"{self.label}: exit {rc}: {lines[-1] if lines else '(no output)'}"


def run_all(procs: Iterable[CliProcess], timeout: float = 600.0) -> list[str]:
    """Wait for every process (noting when each exits); returns the failures (see `CliProcess.failure`)."""
    procs = list(procs)
    deadline = time.monotonic() + timeout
    while any(p.poll() is None for p in procs):
        if time.monotonic() > deadline:
            raise TimeoutError(f"still running after {timeout:.0f}s: {[p.label for p in procs if p.poll() is None]}")
        time.sleep(0.02)
    return [problem for p in procs if (problem := p.failure())]


def random_signal(rng: np.random.Generator, sigterm_share: float) -> int:
    """SIGTERM with probability `sigterm_share`, else SIGKILL."""
    return int(signal.SIGTERM if rng.random() < sigterm_share else signal.SIGKILL)


# ---------------------------------------------------------------- auditing a store


def episode_key(ep: Episode) -> str:
    """Content hash of an episode: rewards (as float32), every observation array and the end flags."""
    h = hashlib.sha1(np.ascontiguousarray(ep.rewards, dtype=np.float32).tobytes())
    for key in sorted(ep.obs):
        arr = np.ascontiguousarray(ep.obs[key])
        h.update(f"{key}:{arr.dtype.str}:{arr.shape}".encode())
        h.update(arr.tobytes())
    h.update(np.asarray(ep.terminated, bool).tobytes() + np.asarray(ep.truncated, bool).tobytes())
    return h.hexdigest()


@dataclass
class Audit:
    """Episodes of a partition compared with the expected ones (by content)."""

    expected: int = 0
    found: int = 0
    lost: int = 0
    """Expected episodes not found."""
    duplicates: int = 0
    """Extra copies of an episode found more than once (or more often than expected)."""
    unexpected: int = 0
    """Episodes found that match no expected one (torn or foreign data)."""

    def add(self, other: Audit) -> None:
        for name in ("expected", "found", "lost", "duplicates", "unexpected"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


def audit_episodes(store_url: str | Path, partition: str, expected: Counter[str] | None) -> Audit:
    """Count every episode of `partition` by content. `expected` maps keys to how often each must appear;
    None: every episode must be distinct (no ground truth, e.g. collected episodes)."""
    store = TrajectoryStore.open(store_url)
    found: Counter[str] = Counter()
    if partition in store.partitions():
        found.update(episode_key(ep) for ep in store.iter_episodes(partition))
    audit = Audit(found=sum(found.values()))
    if expected is None:
        audit.expected = audit.found
        audit.duplicates = sum(n - 1 for n in found.values())
        return audit
    audit.expected = sum(expected.values())
    audit.lost = sum(max(0, n - found[k]) for k, n in expected.items())
    audit.duplicates = sum(max(0, n - expected[k]) for k, n in found.items() if k in expected)
    audit.unexpected = sum(n for k, n in found.items() if k not in expected)
    return audit


def episodes_by_writer(store_url: str | Path, partition: str, attr: str) -> tuple[Counter[str], Counter[int]]:
    """Sealed episodes per value of segment attribute `attr`, and per writer pid (modulo `PID_MODULO`)."""
    store = TrajectoryStore.open(store_url)
    by_attr: Counter[str] = Counter()
    by_pid: Counter[int] = Counter()
    if partition in store.partitions():
        for seg in store.segments(partition):
            by_attr[str(seg.attrs.get(attr))] += seg.episodes
            by_pid[segment_pid(seg.id) or -1] += seg.episodes
    return by_attr, by_pid


@dataclass(frozen=True)
class Leftover:
    """A `.tmp-*` file or folder, or an unsealed segment (with its writer's pid modulo `PID_MODULO`)."""

    path: str
    pid: int | None = None


def leftovers(root: Path, store_urls: Iterable[str | Path] = ()) -> list[Leftover]:
    """`.tmp-*` files or folders below `root`, and unsealed segments of the given stores."""
    found = [Leftover(str(p.relative_to(root))) for p in root.rglob(".tmp-*")]
    for url in store_urls:
        if not TrajectoryStore.exists(url):
            continue
        store = TrajectoryStore.open(url)
        for partition in store.partitions():
            found += [
                Leftover(f"{url}: unsealed {partition}/{sid}", segment_pid(sid))
                for sid in unsealed_segments(store.files, partition)
            ]
    return sorted(found, key=lambda x: x.path)


def verify_cli(store_url: str | Path, *, cwd: Path, env: dict[str, str]) -> tuple[bool, str]:
    """Run `amago-pipe store verify --json`: (exit 0 and no damaged segment, a one-line summary). Unsealed
    leftovers are `leftovers`' business."""
    proc = subprocess.run(
        [sys.executable, "-m", "amago_pipe.cli", "store", "verify", "--json", str(store_url)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        return False, f"verify {store_url}: exit {proc.returncode}: {proc.stderr.strip()[-300:]}"
    findings = [f"{f['status']} {f['partition']}/{f['segment']}: {f['detail']}" for f in report["findings"]]
    ok = proc.returncode == 0 and report["ok"]
    return ok, f"verify {store_url}: exit {proc.returncode}, ok={report['ok']}" + "".join(f"; {f}" for f in findings)


@dataclass
class Timer:
    """Running mean of how long an uninterrupted process of one kind takes (the window for random kills)."""

    seconds: list[float] = field(default_factory=list)

    def add(self, seconds: float) -> None:
        self.seconds.append(seconds)

    @property
    def estimate(self) -> float:
        return float(np.mean(self.seconds[-8:])) if self.seconds else 2.0


@dataclass
class Row:
    """One scenario's line of the result table, plus what went wrong."""

    scenario: str
    writers: str
    """How many processes wrote into one store at once."""
    kills: Counter[str] = field(default_factory=Counter)
    verified: int = 0
    verifications: int = 0
    audit: Audit | None = None
    weights: str = "—"
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)
    moments: list[str] = field(default_factory=list)
    """When each signal landed, e.g. `KILL@1.3s/2.0s` (after the start / the expected run time)."""

    HEADER = (
        "| scenario | kills | concurrent writers | stores verified | episodes expected / found | episodes lost "
        "| duplicates | resumed weights identical | wall time |\n|---|---|---|---|---:|---:|---:|---|---:|"
    )

    def worst(self, audit: Audit) -> None:
        """Keep the latest expected/found and the worst lost/duplicates/unexpected seen after any round."""
        prev = self.audit or Audit()
        audit.lost, audit.duplicates = max(audit.lost, prev.lost), max(audit.duplicates, prev.duplicates)
        audit.unexpected = max(audit.unexpected, prev.unexpected)
        self.audit = audit

    def markdown(self) -> str:
        kills = f"{sum(self.kills.values())} ({self.kills['SIGKILL']} KILL, {self.kills['SIGTERM']} TERM)"
        a = self.audit
        episodes, lost, dups = (f"{a.expected} / {a.found}", str(a.lost), str(a.duplicates)) if a else ("—",) * 3
        if a and a.unexpected:
            dups += f" (+{a.unexpected} unknown)"
        cells = [self.scenario, kills, self.writers, f"{self.verified}/{self.verifications}", episodes, lost, dups]
        return "| " + " | ".join([*cells, self.weights, f"{self.seconds:.0f}s"]) + " |"


class Battery:
    """State shared by the scenarios of one run: work directory, random draws, process environment."""

    def __init__(self, workdir: Path, seed: int, sigterm_share: float):
        self.dir, self.rng, self.sigterm_share = workdir, np.random.default_rng(seed), sigterm_share
        self.env = cli_env({"MINARI_DATASETS_PATH": str(workdir / "minari")})

    def spawn(self, row: Row, label: str, *args: str) -> CliProcess:
        return CliProcess(list(args), cwd=self.dir, env=self.env, log_dir=self.dir / "logs" / row.scenario, label=label)

    def kill_some(self, row: Row, procs: list[CliProcess], window: float, most: int) -> list[CliProcess]:
        """Signal one (a third of the time two) of `procs`, at moments uniform in [0, window] after their start;
        returns those still running when signalled."""
        count = min(most, 2 if self.rng.random() < 1 / 3 else 1, len(procs))
        victims = [procs[int(i)] for i in self.rng.choice(len(procs), size=count, replace=False)]
        hit = []
        for delay, victim in sorted(((float(self.rng.uniform(0, window)), v) for v in victims), key=lambda x: x[0]):
            sig = random_signal(self.rng, self.sigterm_share)
            if victim.kill_at(delay, sig):
                row.kills[signal.Signals(sig).name] += 1
                row.moments.append(f"{signal.Signals(sig).name[3:]}@{delay:.1f}s/{window:.1f}s")
                victim.moment = len(row.moments) - 1
                hit.append(victim)
        return hit

    def mark_mid_write(self, row: Row, hit: list[CliProcess], store: Path) -> None:
        """Mark the signals that caught their process with an unsealed segment open (i.e. while writing)."""
        open_by = {x.pid for x in leftovers(self.dir, [store]) if x.pid is not None}
        for p in hit:
            if p.pid % PID_MODULO in open_by and p.moment is not None:
                row.moments[p.moment] += " mid-write"

    def check_store(self, row: Row, store: Path, root: Path, pending: Iterable[CliProcess] = ()) -> None:
        """After a round: verify the store and look for leftovers below `root`.

        Unsealed segments of the `pending` processes (signalled this round, no write since) and `.tmp-*` files
        are allowed until the next check with nothing pending, which must come after a write."""
        ok, summary = verify_cli(store, cwd=self.dir, env=self.env)
        row.verifications += 1
        row.verified += ok
        if not ok:
            row.problems.append(summary)
        waiting = {p.pid % PID_MODULO for p in pending}
        strict = not waiting
        debris = [x.path for x in leftovers(root, [store]) if strict or (x.pid is not None and x.pid not in waiting)]
        if debris:
            row.problems.append(f"left behind after a later write: {', '.join(debris[:5])}")
