"""The generation pipeline: one :class:`Pipeline` that every door (CLI, TUI, docstrings, training, eval) uses."""

from __future__ import annotations

from assistant.pipeline.options import GenerationOptions
from assistant.pipeline.pipeline import Answer, Pipeline, Request

__all__ = ["Answer", "GenerationOptions", "Pipeline", "Request"]
