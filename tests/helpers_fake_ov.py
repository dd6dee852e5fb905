"""A fake OpenVINO continuous-batching pipeline for the step loop of `OpenVINOBackend._run`
(tests/test_loops.py, tests/test_ov_stops.py): each request's row writes scripted token ids, step by step; the
real engine runs with the model-backed tests (tests/test_backend_ov.py)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

LOGPROB = -0.25  # the log-probability the fake engine gives every token


def ov_status(name: str) -> Any:
    """The engine's GenerationStatus called `name` (RUNNING, STOP, ...)."""
    import openvino_genai

    return getattr(openvino_genai.GenerationStatus, name)


class FakeHandle:
    """One streamed row as the engine hands it over without stop strings: `per_step` tokens of `script` a step,
    finished at the `end` token, at `limit` tokens or at the script's end; nothing can be read once it is stopped
    (as the engine's `can_read`)."""

    def __init__(self, script: list[int], limit: int, per_step: int, end: int | None) -> None:
        self.script, self.limit, self.per_step, self.end = script, limit, per_step, end
        self.written: list[int] = []
        self.unread: list[int] = []
        self.status = ov_status("RUNNING")

    def can_read(self) -> bool:
        return bool(self.unread) and self.status != ov_status("STOP")

    def read(self) -> dict[int, Any]:
        tokens, self.unread = self.unread, []
        return {0: type("Out", (), {"generated_ids": tokens, "generated_log_probs": [LOGPROB] * len(tokens)})()}

    def get_status(self) -> Any:
        return self.status

    def stop(self) -> None:
        self.status = ov_status("STOP")

    def cancel(self) -> None:
        self.status = ov_status("CANCEL")

    def advance(self) -> None:
        for _ in range(self.per_step):
            if self.status != ov_status("RUNNING"):
                return
            token = self.script[len(self.written)]
            self.written.append(token)
            self.unread.append(token)
            if token == self.end or len(self.written) in (self.limit, len(self.script)):
                self.status = ov_status("FINISHED")


class FakePipeline:
    """Requests get the `scripts` in the order they are added, each row writing `per_step` tokens a step; `end` is
    the end token's id (None: a row ends at its script's end or its max_new_tokens). It records the handles, the
    configs and the step each request came in at."""

    def __init__(self, scripts: list[list[int]], per_step: int = 1, end: int | None = None) -> None:
        self.scripts, self.per_step, self.end = scripts, per_step, end
        self.handles: list[FakeHandle] = []
        self.configs: list[Any] = []
        self.added_at: list[int] = []
        self.steps = 0

    def add_request(self, request_id: int, tensor: Any, config: Any) -> FakeHandle:
        handle = FakeHandle(self.scripts[len(self.handles)], config.max_new_tokens, self.per_step, self.end)
        self.handles.append(handle)
        self.configs.append(config)
        self.added_at.append(self.steps)
        return handle

    def has_non_finished_requests(self) -> bool:
        return any(h.status == ov_status("RUNNING") for h in self.handles)

    def step(self) -> None:
        self.steps += 1
        for handle in self.handles:
            handle.advance()


def fake_ov_backend(pipeline: FakePipeline) -> Any:
    """An OpenVINOBackend over `pipeline`, with only what its step loop reads set (no model, no tokenizer)."""
    pytest.importorskip("openvino_genai")
    from assistant.backends import ov

    backend = object.__new__(ov.OpenVINOBackend)
    backend._lock = threading.Lock()
    backend._watchdog = ov.Watchdog(60.0, "the fake engine", on_stall=print)
    backend._next_id = 0
    backend.pipeline = pipeline
    return backend
