"""How long work reports how far it has got: one callback type for every layer.

`progress(stage, done, total)`: `stage` names the step ("retrieve", "generate", "embed", ...), `done` of `total`
units are finished. A callback that raises (e.g. :class:`~assistant.errors.Cancelled`) stops the work there, which
is how interactive callers cancel it.
"""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[str, int, int], None]


def silent(stage: str, done: int, total: int) -> None:
    """A progress callback that reports nothing."""
    return None
