"""`assist serve`: llama.cpp's OpenAI-compatible server on 127.0.0.1 for a registered local GGUF model.

llama-cpp-python is an optional extra (`pip install -e '.[serve]'`): it has no wheel on PyPI and builds
llama.cpp from source (0.3.36: nearly an hour on 2 busy cores here, once; pip then caches the wheel).
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from assistant.backends.models import Progress, gguf_path, resolve
from assistant.errors import AssistError, UsageError, install_extra

INSTALL_HINT = (
    f"llama-cpp-python is not installed; install it with `{install_extra('serve')}` in assist's checkout "
    "(it builds llama.cpp from source, once: up to an hour on 2 cores)"
)


def llama_cpp_available() -> bool:
    return importlib.util.find_spec("llama_cpp") is not None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LlamaServer:
    """A running `python -m llama_cpp.server` child process; use as a context manager or call `stop()`."""

    def __init__(
        self,
        model: str | None = None,
        *,
        port: int = 0,
        threads: int | None = None,
        context: int = 4096,
        log_file: Path | None = None,
        progress: Progress | None = None,
    ) -> None:
        if not llama_cpp_available():
            raise UsageError(INSTALL_HINT)
        self.spec = resolve(model, "generator")
        self.port = port or free_port()
        self.context = context
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        gguf = gguf_path(self.spec, progress)
        command = [
            sys.executable,
            "-P",  # the folder it starts in (a repo) is not put first on sys.path
            "-m",
            "llama_cpp.server",
            "--model",
            str(gguf),
            "--model_alias",
            self.spec.name,  # clients name the model as assist does
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_threads",
            str(threads or os.cpu_count() or 1),
            "--n_ctx",
            str(context),
        ]
        self.log_file = log_file
        self._log = open(log_file, "ab") if log_file else subprocess.DEVNULL  # noqa: SIM115 (closed in stop)
        # Its own process group: Ctrl-C in the terminal reaches assist, which then stops the server in order.
        self.process = subprocess.Popen(
            command, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )

    def wait_ready(self, timeout_s: float = 120.0) -> None:
        """Block until the server lists its model. A server that exits or stalls is an error, and on any
        failure (Ctrl-C included) the server is stopped: nothing is left running."""
        try:
            self._wait(timeout_s)
        except BaseException:
            self.stop()
            raise

    def _wait(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                where = f"; see {self.log_file}" if self.log_file else ""
                raise AssistError(f"llama.cpp's server exited with code {self.process.returncode}{where}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as response:
                    if json.load(response).get("data"):
                        return
            except (urllib.error.URLError, OSError, ValueError):
                pass
            time.sleep(0.3)
        raise AssistError(f"llama.cpp's server did not start within {timeout_s:.0f} s")

    def stop(self, grace_s: float = 10.0) -> int | None:
        """Interrupt the server, then terminate, then kill; returns its exit code."""
        if self.process.poll() is None:
            for sig, wait in ((signal.SIGINT, grace_s), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
                try:
                    os.killpg(self.process.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.process.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        if self._log is not subprocess.DEVNULL:
            self._log.close()
        return self.process.returncode

    def __enter__(self) -> LlamaServer:
        self.wait_ready()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
