"""A model that loads on first use: the one shape of the pipeline's encoder and of agree's test writer.

What it stands for is known before it loads (an encoder's name, a backend's model), so a caller that only needs that
costs no memory; the first use loads it, one thread loading while the others wait.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

Loaded = TypeVar("Loaded")


class Lazy(Generic[Loaded]):
    """Loads with `load` on the first :meth:`get` (or the first attribute this class does not have)."""

    def __init__(self, load: Callable[[], Loaded]) -> None:
        self._load = load
        self._loaded: Loaded | None = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._loaded is not None

    def get(self) -> Loaded:
        """The object, loaded on the first call."""
        with self._lock:
            if self._loaded is None:
                self._loaded = self._load()
            return self._loaded

    def __getattr__(self, attribute: str) -> Any:  # anything else the loaded object has
        if attribute.startswith("_"):
            raise AttributeError(attribute)
        return getattr(self.get(), attribute)
