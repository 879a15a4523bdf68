"""amago_pipe.data."""
