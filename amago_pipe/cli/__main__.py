"""`python -m amago_pipe.cli` is the same as the `amago-pipe` command."""

from amago_pipe.cli import main

main(prog_name="amago-pipe")
