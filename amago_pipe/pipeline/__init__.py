"""amago_pipe.pipeline."""
