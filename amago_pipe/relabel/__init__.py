"""amago_pipe.relabel."""
