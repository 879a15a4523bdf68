"""A follower (`amago-pipe collect --follow RUN_DIR`) tells how its learner ended: finished (exit 0), killed or
failed (exit 6, one line saying which), already finished before it started (nothing to follow), or no run at all.
Real learner and follower processes, a real store, a real env (the toy env; broken on request in the learner)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

from cli_support import cli_env, toy_online_pipeline

from amago_pipe.store import TrajectoryStore
from amago_pipe.store.verify import verify_store

FLAKY_ENV = '''
"""The toy env, which raises in `step` once the file named by $BREAK_ENV_FLAG exists (set for the learner only)."""
import os
from pathlib import Path

from amago_pipe.envs.toy import ToyEnv


class FlakyEnv(ToyEnv):
    def step(self, action):
        flag = os.environ.get("BREAK_ENV_FLAG")
        if flag and Path(flag).exists():
            raise RuntimeError("the env broke on purpose")
        return super().step(action)


def make(**kwargs):
    return FlakyEnv(**kwargs)
'''
RUN = "runs/follow"
POLICY = Path(RUN) / "stages/train/policy/latest.safetensors"


def _read_lines(stream: IO[str], into: list[str]) -> None:
    into.extend(iter(stream.readline, ""))


class Cli:
    """A `python -m amago_pipe.cli` process whose stdout and stderr lines are collected as they come."""

    def __init__(self, cwd: Path, *args: str, env: dict[str, str] | None = None):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "amago_pipe.cli", *args],
            cwd=cwd,
            env={**cli_env(), "OMP_NUM_THREADS": "1", **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self.errors: list[str] = []
        self.readers = [
            threading.Thread(target=_read_lines, args=(stream, into))
            for stream, into in ((self.proc.stdout, self.lines), (self.proc.stderr, self.errors))
        ]
        for reader in self.readers:
            reader.start()

    def wait_for_line(self, start: str, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while not any(line.startswith(start) for line in self.lines):
            assert self.proc.poll() is None, f"exited {self.proc.returncode}: {self.lines} {self.errors}"
            assert time.monotonic() < deadline, f"no line starting with {start!r}: {self.lines}"
            time.sleep(0.05)

    def finish(self, timeout: float = 180) -> tuple[int, list[str], list[str]]:
        """Exit code, stdout lines and the non-empty stderr lines."""
        self.proc.wait(timeout=timeout)
        for reader in self.readers:
            reader.join()
        return (
            self.proc.returncode,
            [x.rstrip("\n") for x in self.lines],
            [x.rstrip("\n") for x in self.errors if x.strip()],
        )


def _start_learner(tmp_path: Path, epochs: int, env: dict[str, str] | None = None) -> Cli:
    (tmp_path / "p.yaml").write_text(
        toy_online_pipeline(name="follow", own=20, epochs=epochs, updates=2, env="flaky_env:make")
    )
    (tmp_path / "flaky_env.py").write_text(FLAKY_ENV)
    learner = Cli(tmp_path, "run", "p.yaml", env=env)
    deadline = time.monotonic() + 180
    while not (tmp_path / POLICY).exists():
        assert learner.proc.poll() is None and time.monotonic() < deadline, learner.finish()
        time.sleep(0.05)
    return learner


def test_a_follower_of_a_killed_learner_says_it_died_and_exits_non_zero(tmp_path: Path) -> None:
    learner = _start_learner(tmp_path, epochs=100_000)  # runs until killed
    follower = Cli(tmp_path, "collect", "--follow", RUN, "--seed", "1")
    follower.wait_for_line("policy v")  # it has collected a chunk
    os.kill(learner.proc.pid, signal.SIGKILL)  # the lock file still says running
    learner.finish()
    code, out, err = follower.finish()
    died = (
        f"error: --follow {RUN}: stage 'train' died: its learner (pid {learner.proc.pid} on {socket.gethostname()}) "
        "is gone while the lock file still says running (killed: SIGKILL, out of memory?); `amago-pipe run` resumes it"
    )
    assert code == 6 and len(err) == 1 and err[0].startswith(died + "; the follower stopped after "), err
    assert not any("finished" in line or "stopped" in line for line in out), out
    code, out, err = Cli(tmp_path, "collect", "--follow", RUN).finish()  # a follower started after the kill
    assert (code, out, err) == (6, [], [died + "; nothing to follow"])
    assert verify_store(TrajectoryStore.open(tmp_path / "store.zarr")).ok


def test_a_follower_of_a_failed_learner_says_it_failed_and_exits_non_zero(tmp_path: Path) -> None:
    flag = tmp_path / "break-now"
    learner = _start_learner(tmp_path, epochs=100_000, env={"BREAK_ENV_FLAG": str(flag)})
    follower = Cli(tmp_path, "collect", "--follow", RUN, "--seed", "1")
    follower.wait_for_line("policy v")
    flag.write_text("")  # the learner's env raises at its next step; the follower's env (no flag) goes on
    learner_code, _, learner_err = learner.finish()
    assert learner_code != 0 and "the env broke on purpose" in learner_err[-1], learner_err
    code, out, err = follower.finish()
    assert code == 6 and len(err) == 1, err
    assert err[0].startswith(f"error: --follow {RUN}: stage 'train' failed: ") and "the env broke on purpose" in err[0]
    assert "; the follower stopped after " in err[0] and not any("finished" in line for line in out), out
    code, out, err = Cli(tmp_path, "collect", "--follow", RUN).finish()
    assert code == 6 and out == [] and len(err) == 1 and err[0].endswith("; nothing to follow"), err
    assert "stage 'train' failed: " in err[0] and "the env broke on purpose" in err[0]


def test_following_a_finished_run_or_no_run_is_said_plainly(tmp_path: Path) -> None:
    learner = _start_learner(tmp_path, epochs=1)
    assert learner.finish()[0] == 0
    code, out, err = Cli(tmp_path, "collect", "--follow", RUN).finish()
    assert (code, out, err) == (0, [f"stage 'train' of {RUN} has already finished: nothing to follow"], [])
    code, out, err = Cli(tmp_path, "collect", "--follow", "runs/nowhere").finish()
    assert (code, out) == (2, []) and err == [
        "error: --follow runs/nowhere: no such run directory; give the run directory of a running `amago-pipe run` "
        "(default runs/<pipeline name>)"
    ]
    (tmp_path / "runs/empty").mkdir()
    code, out, err = Cli(tmp_path, "collect", "--follow", "runs/empty").finish()
    assert (code, out) == (2, []) and err == [
        "error: --follow runs/empty: not a run directory (no pipeline.lock.json); has `amago-pipe run` started?"
    ]
