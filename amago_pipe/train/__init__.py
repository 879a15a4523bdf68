"""The learner (learner.py) on accelerate, its checkpoints, metrics, plots, validation and policy loading.

Nothing is imported here, so `import amago_pipe.train` stays cheap.
"""
