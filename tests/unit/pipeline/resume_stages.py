"""A resumable test stage whose `step_seconds` may change without invalidating its partial output."""

from __future__ import annotations

from pipeline_stages import ResumableEmit


class PacedEmit(ResumableEmit):
    """ResumableEmit that resumes (rather than restarts) when only its pace changed."""

    resume_safe = ("step_seconds",)

    def resume_point(self) -> str:
        progress = self.ctx.out_dir / "progress.txt"
        return f"step {progress.read_text()}" if progress.exists() else ""
