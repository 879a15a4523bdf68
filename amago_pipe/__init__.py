"""amago-pipe: sequence-based reinforcement learning as validated, resumable YAML pipelines.

Importing the package is cheap: it imports no torch; subpackages load on demand.
"""

from amago_pipe._version import __version__

__all__ = ["__version__"]


def __getattr__(name: str) -> object:
    """`amago_pipe.Policy` (an exported policy), imported on first use."""
    if name == "Policy":
        from amago_pipe.export.policy import Policy

        return Policy
    raise AttributeError(f"module 'amago_pipe' has no attribute '{name}'")
