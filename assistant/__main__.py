"""`python -m assistant` is the same as the `assist` command."""

from .cli import main

main()
