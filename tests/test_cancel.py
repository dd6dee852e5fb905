"""Ctrl-C in the CLI (issue 69, item 5): `assist generate` waiting on a slow model server ends within a second of
SIGINT, with a non-zero status and nothing of its process group left running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from .openai_server import Script, openai_server


def sigint_latency(cwd: Path, url: str, script: Script) -> tuple[float, int, bool]:
    """Start `assist generate` against `url`, press Ctrl-C (SIGINT to its process group, as a terminal does) once
    the server holds its request; (seconds to exit, exit status, whether any process of the group outlived it)."""
    command = [sys.executable, "-m", "assistant", "generate", "return a number", "-k", "0", "-n", "1"]
    command += ["--ranker", "first", "--base-url", url]
    env = {**os.environ, "ASSIST_OPENAI_API": "completions"}
    process = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 60
        while not script.requests and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.02)
        assert script.requests, process.communicate(timeout=5)
        pressed = time.monotonic()
        os.killpg(process.pid, signal.SIGINT)
        status = process.wait(timeout=10)
        seconds = time.monotonic() - pressed
        time.sleep(0.1)
        try:
            os.killpg(process.pid, 0)  # any process of the group still there?
            left = True
        except ProcessLookupError:
            left = False
        return seconds, status, left
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.communicate(timeout=10)


def test_ctrl_c_ends_generate_within_a_second_with_nothing_left(tmp_path: Path) -> None:
    with openai_server(Script(delay_s=30.0)) as (url, script):
        seconds, status, left = sigint_latency(tmp_path, url, script)
    assert seconds < 1.0
    assert status != 0
    assert not left
