"""`python -m assistant` is the same as the `assist` command."""

from assistant.ui.cli import main

main()
