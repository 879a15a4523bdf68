"""amago_pipe.pipeline.stages."""
