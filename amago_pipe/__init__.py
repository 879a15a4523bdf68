"""amago-pipe: sequence-based reinforcement learning as validated, resumable YAML pipelines.

Importing the package is cheap: it imports no torch; subpackages load on demand.
"""

__version__ = "0.2.0"
