"""Training data: store windows -> padded torch `Batch`es (batch.py) and the background `BatchLoader` (loader.py).

Nothing is imported here, so `import amago_pipe.data` stays cheap.
"""
