"""amago_pipe.testing."""
