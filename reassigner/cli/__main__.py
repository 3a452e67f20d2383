"""`python -m reassigner.cli ...`: the same entry point as the installed `reassigner` command."""

from reassigner.cli.main import main

main()
