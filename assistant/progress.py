"""How long work reports how far it has got: one callback type for every layer.

`progress(stage, done, total)`: `stage` names the step ("retrieve", "generate", "embed", ...), `done` of `total`
units are finished. A callback that raises (e.g. :class:`~assistant.errors.Cancelled`) stops the work there, which
is how interactive callers cancel it.
"""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[str, int, int], None]

# How each stage reads to people (the CLI's progress bars, the TUI's status bar).
STAGE_LABELS = {
    "assemble": "Assembling model parts",
    "convert": "Converting the model (once)",
    "parse": "Parsing files",
    "encode": "Embedding",
    "encode selfracg": "Encoding the pool with the SelfRACG branch (once)",
    "retrieve": "Retrieving demonstrations",
    "generate": "Generating candidates",
    "rank": "Ranking candidates",
    "rank tests": "Writing tests to rank by (agree)",
    "find tests": "Finding the repo's tests that check the stub",
    "repo tests": "Running the repo's tests",
    "label": "Labeling pairs with the LLM",
    "train": "Training",
}


def silent(stage: str, done: int, total: int) -> None:
    """A progress callback that reports nothing."""
    return None
