"""The warm model server: finding it (stale, another model, files that are not the user's alone), its Unix socket
answering assist's own calls exactly, and, with the real engine, the same candidates as in-process."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from assistant.backends import Completion, SamplingParams, TokenLogprobs, Usage, row_stream, streaming, warm
from assistant.backends.local_server import LocalServer
from assistant.backends.prompts import Prompt
from assistant.errors import ModelError, UsageError

MODEL = "qwen2.5-coder-0.5b"


@pytest.fixture
def run_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private runtime folder with a short path (a socket's path may take 107 bytes): the warm servers' folder is
    its `assist/`."""
    runtime = Path(tempfile.mkdtemp(prefix="aw-", dir="/tmp"))  # mode 0700
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    yield warm.run_dir()
    shutil.rmtree(runtime, ignore_errors=True)


def _state(folder: Path, model: str = MODEL, pid: int | None = None, **fields: object) -> warm.ServerState:
    state = warm.ServerState(
        model=model,
        engine="openvino",
        decoding="plain",
        context=8192,
        pid=os.getpid() if pid is None else pid,
        socket=str(folder / f"{model}.sock"),
        started=time.time(),
        idle_timeout_s=900,
        status="ready",
    )
    return replace(state, **fields)  # type: ignore[arg-type]


def _listening_socket(path: Path) -> socket.socket:
    old = os.umask(0o177)
    try:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(path))
    finally:
        os.umask(old)
    return listener


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_the_folder_is_the_users_runtime_one_made_private(run_dir: Path) -> None:
    assert run_dir.name == "assist" and run_dir.parent == Path(os.environ["XDG_RUNTIME_DIR"])
    assert run_dir.stat().st_mode & 0o777 == 0o700


def test_a_folder_others_may_open_is_refused(run_dir: Path) -> None:
    run_dir.chmod(0o755)
    with pytest.raises(warm.Refused, match="not a folder only you can open"):
        warm.run_dir()


def test_a_ready_server_of_the_same_settings_is_found(run_dir: Path) -> None:
    socket_path, state_path = warm.slot(MODEL)
    with _listening_socket(socket_path):
        warm.write_state(state_path, _state(run_dir))
        assert state_path.stat().st_mode & 0o777 == 0o600
        found = warm.find_server(MODEL, "openvino", "plain", 8192, "int8")
        assert found is not None and found.pid == os.getpid()
        # another model, decoding or context is not what the in-process engine would give: not used, left alone
        assert warm.find_server(MODEL, "openvino", "prompt-lookup", 8192, "int8") is None
        assert warm.find_server(MODEL, "openvino", "plain", 4096, "int8") is None
        assert warm.find_server("qwen2.5-coder-1.5b", "openvino", "plain", 8192, "int8") is None
        assert state_path.exists()
        # still loading: not used yet
        warm.write_state(state_path, _state(run_dir, status="loading"))
        assert warm.find_server(MODEL, "openvino", "plain", 8192, "int8") is None


def test_a_server_of_other_weights_is_not_used_and_an_older_state_file_reads_as_int8(run_dir: Path) -> None:
    socket_path, state_path = warm.slot(MODEL)
    with _listening_socket(socket_path):
        warm.write_state(state_path, _state(run_dir, weights="int4"))
        assert warm.find_server(MODEL, "openvino", "plain", 8192, "int4") is not None
        assert warm.find_server(MODEL, "openvino", "plain", 8192, "int8") is None
        # a state file written before the setting existed has no weights: its server ran int8
        older = {key: value for key, value in json.loads(state_path.read_text()).items() if key != "weights"}
        state_path.write_text(json.dumps(older))
        found = warm.find_server(MODEL, "openvino", "plain", 8192, "int8")
        assert found is not None and found.weights == "int8"
        assert warm.find_server(MODEL, "openvino", "plain", 8192, "int4") is None


def test_a_stale_state_is_removed_with_its_socket(run_dir: Path) -> None:
    socket_path, state_path = warm.slot(MODEL)
    _listening_socket(socket_path).close()  # the file stays, as after a crash
    warm.write_state(state_path, _state(run_dir, pid=_dead_pid()))
    assert warm.find_server(MODEL, "openvino", "plain", 8192, "int8") is None
    assert not state_path.exists() and not socket_path.exists()


def test_a_state_file_others_may_write_is_refused_and_kept(run_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    socket_path, state_path = warm.slot(MODEL)
    with _listening_socket(socket_path):
        warm.write_state(state_path, _state(run_dir))
        state_path.chmod(0o620)
        assert warm.find_server(MODEL, "openvino", "plain", 8192, "int8") is None
        assert "writable by group or others" in caplog.text
        assert state_path.exists()


def test_a_socket_others_may_write_is_refused(run_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    socket_path, state_path = warm.slot(MODEL)
    with _listening_socket(socket_path):
        socket_path.chmod(0o666)
        warm.write_state(state_path, _state(run_dir))
        assert warm.find_server(MODEL, "openvino", "plain", 8192, "int8") is None
        assert "writable by group or others" in caplog.text


@pytest.mark.parametrize("pid", [0, -1, 1, True, "12"])
def test_a_state_whose_pid_names_no_single_server_is_refused(run_dir: Path, pid: object) -> None:
    """0 and -1 name groups of processes: `--stop` would signal them all."""
    _, state_path = warm.slot(MODEL)
    warm.write_state(state_path, _state(run_dir, pid=pid))
    with pytest.raises(warm.Refused, match="is not a warm server's state"):
        warm.live_state(state_path)
    assert not warm.pid_alive(pid)  # type: ignore[arg-type]


def test_a_state_file_that_is_a_link_is_refused(run_dir: Path, tmp_path: Path) -> None:
    _, state_path = warm.slot(MODEL)
    elsewhere = tmp_path / "elsewhere.json"
    warm.write_state(elsewhere, _state(run_dir))
    state_path.symlink_to(elsewhere)
    with pytest.raises(warm.Refused, match="is not a file"):
        warm.live_state(state_path)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_files_of_another_user_are_refused(run_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    socket_path, state_path = warm.slot(MODEL)
    with _listening_socket(socket_path):
        warm.write_state(state_path, _state(run_dir))
        os.chown(state_path, 65534, 65534)
        assert warm.find_server(MODEL, "openvino", "plain", 8192, "int8") is None
        assert "belongs to another user" in caplog.text
        os.chown(state_path, 0, 0)
        os.chown(socket_path, 65534, 65534)
        assert warm.find_server(MODEL, "openvino", "plain", 8192, "int8") is None


def test_a_state_naming_a_socket_elsewhere_is_refused(run_dir: Path, tmp_path: Path) -> None:
    socket_path, state_path = warm.slot(MODEL)
    with _listening_socket(socket_path):
        warm.write_state(state_path, _state(run_dir, socket=str(tmp_path / "other.sock")))
        assert warm.find_server(MODEL, "openvino", "plain", 8192, "int8") is None


def test_a_server_that_cannot_start_is_given_up_at_once(run_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A server that fails (here: speculative decoding, which the 0.5B has no draft model for) ends at once; the
    command hears it end, and loads its own model instead of waiting for the 300 s a loading server is given."""
    _, state_path = warm.slot(MODEL)
    started = time.monotonic()
    try:
        wanted = {"model": MODEL, "decoding": "speculative", "context": 8192, "weights": "int8"}
        assert warm.start_server(wanted, None) is None
    finally:
        if (state := warm.live_state(state_path)) is not None:  # never leave a server behind
            warm.stop_server(state, state_path)
    assert time.monotonic() - started < 60
    assert "it did not start" in caplog.text
    assert not state_path.exists()
    assert "warm server: speculative decoding needs a draft model" in state_path.with_suffix(".log").read_text()
    assert state_path.with_suffix(".log").stat().st_mode & 0o777 == 0o600


def test_a_socket_path_too_long_for_af_unix_means_loading_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = tmp_path / ("r" * 120)
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    assert warm.warm_backend(MODEL, {}, "start") is None  # nothing started: it could not listen there
    assert not list((runtime / "assist").iterdir())


def test_off_never_looks_and_an_unknown_mode_is_one_line(run_dir: Path) -> None:
    assert warm.warm_backend(MODEL, {}, "off") is None
    with pytest.raises(UsageError, match=r"unknown local\.warm 'always'; choose auto, off, start"):
        warm.warm_backend(MODEL, {}, "always")


def test_a_repo_config_cannot_decide_about_the_warm_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from assistant.config import load_settings

    (tmp_path / ".git").mkdir()
    (tmp_path / ".assist.toml").write_text('[local]\nwarm = "start"\n')
    with pytest.raises(UsageError, match="a repo's settings cannot decide that"):
        load_settings(start=tmp_path)
    monkeypatch.setenv("ASSIST_LOCAL_WARM", "off")
    (tmp_path / ".assist.toml").unlink()
    assert load_settings(start=tmp_path)["local.warm"] == "off"


class _ScriptedEngine:
    """Stands in for the engine alone (the socket and its protocol are what is tested): answers `sample_batch` with
    fixed candidates carrying every field, reporting 50 steps of 20 ms, and `logprob` with fixed values."""

    name, model, context = "local-ov", MODEL, 8192

    def __init__(self) -> None:
        self.usage = Usage()
        self.seen: list[tuple] = []
        self.stopped = threading.Event()

    def tokenizer(self, text: str, add_special_tokens: bool = False) -> dict:
        return {"input_ids": text.split()}

    def echo(self, prompt: str) -> list:
        return []

    def sample_texts(self, *args: object, **kwargs: object) -> list:
        return []

    def sample_batch(self, prompts, params, step=None, seeds=None):
        self.seen.append((tuple(prompts), params, seeds))
        if prompts[0].answer_prefix == "refuse":
            raise UsageError("the prompt takes 9000 tokens and 256 more are asked for")
        stream = row_stream(prompts[0].answer_prefix, prompts[0].stop)  # a listener: what the client streams
        try:
            for done in range(50):
                if step is not None:
                    step(done, 50)
                if stream is not None and done % 5 == 0:
                    stream.text("x = 1\n```"[: done // 5])
                time.sleep(0.02)
        except BaseException:
            self.stopped.set()
            raise
        self.usage.add(10, 7, 1.0)
        rows = [
            Completion("x = 1\n", 7, "stop", (-0.1, -0.25)),
            Completion("while True:", 256, "length", (-1e-9,), cut_reason="looping"),
            Completion("", 0, "stop", ()),
        ]
        return [rows[: params.n] for _ in prompts]

    def logprob(self, pairs):
        return [TokenLogprobs(["a", "b"], [-0.5, -1.5]) for _ in pairs]


@pytest.fixture
def scripted(run_dir: Path):
    engine = _ScriptedEngine()
    socket_path, _ = warm.slot(MODEL)
    with LocalServer(engine, unix_path=socket_path) as server:
        yield engine, server, str(socket_path)


def test_the_socket_is_the_users_alone_and_answers_the_models(scripted) -> None:
    _, _server, socket_path = scripted
    assert Path(socket_path).stat().st_mode & 0o777 == 0o600
    listing = warm.ask(socket_path, "/v1/models", None)
    assert listing["data"][0]["id"] == MODEL and listing["assist"]["busy"] == 0


def test_candidates_cross_the_socket_unchanged(scripted) -> None:
    engine, _, socket_path = scripted
    prompt = Prompt(messages=({"role": "user", "content": "add"},), answer_prefix="```python\n", stop=("```",))
    params = SamplingParams(n=3, temperature=0.8, top_p=0.95, max_new_tokens=256, seed=7)
    payload = {"prompts": [warm.prompt_to_json(prompt)], "params": {**params.__dict__}, "seeds": [11], "stream": True}
    steps: list[tuple[int, int]] = []
    streamed: list[tuple[int, str]] = []
    result = warm.ask(
        socket_path, "/v1/assist/sample", payload, lambda d, t: steps.append((d, t)), lambda *a: streamed.append(a)
    )
    got = [warm.completion_from_json(c) for c in result["completions"][0]]
    assert got == engine.sample_batch([prompt], params)[0]  # every field: tokens, logprobs, cut_reason
    assert engine.seen[0] == ((prompt,), params, [11])  # the engine got the very prompt, parameters and seeds
    assert steps[0] == (0, 50) and (49, 50) in steps
    assert result["usage"] == {"requests": 1, "prompt_tokens": 10, "completion_tokens": 7, "seconds": 1.0}
    # the first row as the engine wrote it, answer prefix first, cut at the stop string
    assert streamed[0] == (0, "```python\n") and streamed[1] == (0, "```python\nx")
    assert streamed[-1] == (0, "```python\nx = 1\n") and len(streamed) == 10


def test_the_engines_errors_keep_their_kind_and_words(scripted) -> None:
    _, _, socket_path = scripted
    refused = Prompt(messages=({"role": "user", "content": "x"},), answer_prefix="refuse")
    payload = {"prompts": [warm.prompt_to_json(refused)], "params": {"n": 1}, "seeds": None}
    with pytest.raises(UsageError, match=r"^the prompt takes 9000 tokens and 256 more are asked for$"):
        warm.ask(socket_path, "/v1/assist/sample", payload)
    with pytest.raises(ModelError, match="refused the request"):
        warm.ask(socket_path, "/v1/assist/sample", {"prompts": [{"messages": "no"}], "params": {}})


def test_a_client_that_cancels_stops_the_servers_work_at_once(scripted) -> None:
    engine, _server, socket_path = scripted
    prompt = Prompt(messages=({"role": "user", "content": "add"},))
    payload = {"prompts": [warm.prompt_to_json(prompt)], "params": {"n": 1}, "seeds": None}

    def cancel(done: int, total: int) -> None:
        if done >= 5:
            raise KeyboardInterrupt

    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        warm.ask(socket_path, "/v1/assist/sample", payload, cancel)
    assert engine.stopped.wait(2)  # the engine heard its client leave within a step or two
    assert time.monotonic() - started < 1.0
    assert engine.usage.requests == 0


def test_a_server_that_dies_mid_answer_is_one_line(run_dir: Path) -> None:
    """Progress lines and then the end of the connection (the server's process ended): an error, not a result."""
    socket_path, _ = warm.slot(MODEL)
    listener = _listening_socket(socket_path)
    listener.listen(1)

    def die_after_a_step() -> None:
        conn, _ = listener.accept()
        conn.recv(65536)
        conn.sendall(b'HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{"step": [1, 50]}\n')
        conn.close()

    threading.Thread(target=die_after_a_step, daemon=True).start()
    with pytest.raises(ModelError, match="stopped before it answered"):
        warm.ask(str(socket_path), "/v1/assist/sample", {"prompts": []}, lambda done, total: None)
    listener.close()


def test_scores_cross_the_socket(scripted) -> None:
    _, _, socket_path = scripted
    prompt = Prompt(messages=({"role": "user", "content": "add"},))
    result = warm.ask(socket_path, "/v1/assist/score", {"pairs": [[warm.prompt_to_json(prompt), "ab"]]})
    assert result["scores"] == [[["a", "b"], [-0.5, -1.5]]]


def test_the_server_stops_after_its_idle_timeout(run_dir: Path) -> None:
    socket_path, _ = warm.slot(MODEL)
    server = LocalServer(_ScriptedEngine(), unix_path=socket_path, idle_timeout_s=0.5)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    thread.join(10)
    assert not thread.is_alive()
    server.httpd.server_close()


@pytest.mark.model
def test_a_real_warm_server_gives_the_in_process_engines_candidates(run_dir: Path) -> None:
    """A server process on the socket, started as a command with local.warm = "start" starts it, answered by
    the real engine (the 0.5B): the same candidates, tokens and log-probabilities as in-process for a seed."""
    from assistant.backends.ov import OpenVINOBackend
    from assistant.pipeline.pipeline import load_generator

    options = {"engine": "openvino", "context": 4096, "decoding": "auto"}
    backend = load_generator("local", MODEL, warm="start", **options)
    try:
        assert isinstance(backend, warm.WarmBackend)
        state = backend.state
        assert state.pid != os.getpid() and warm.pid_alive(state.pid)
        local = OpenVINOBackend.load(MODEL, context=4096)
        assert backend.identity == local.identity and backend.context == local.context
        prompt = Prompt(messages=({"role": "user", "content": "Write add(a, b) in Python."},))
        params = SamplingParams(n=3, temperature=0.8, top_p=0.95, max_new_tokens=48, seed=5)
        heard: dict[str, list[str]] = {"warm": [], "local": []}
        for name, engine in (("warm", backend), ("local", local)):
            with streaming(lambda call, text, name=name: heard[name].append(text)):
                sampled = engine.sample(prompt, params)
            heard[name + " samples"] = sampled  # type: ignore[assignment]
        assert heard["warm samples"] == heard["local samples"]
        assert heard["warm"] == heard["local"] and len(heard["warm"]) > 3  # the terminal sees the same first row
        pairs = [(prompt, "def add(a, b):\n    return a + b\n")]
        assert backend.logprob(pairs) == local.logprob(pairs)
        # a second command finds the running one
        again = load_generator("local", MODEL, warm="auto", **options)
        assert isinstance(again, warm.WarmBackend) and again.state.pid == state.pid
    finally:
        _, state_path = warm.slot(MODEL)
        current = warm.live_state(state_path)
        if current is not None:
            assert warm.stop_server(current, state_path)
    assert not state_path.exists()


def test_doctor_shows_the_running_server_and_whether_it_is_used_here(
    scripted, run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from assistant.ui.doctor import warm_checks

    (none,) = warm_checks()
    assert none.name == "warm server" and none.ok is True and "none runs (local.warm = off)" in none.detail
    monkeypatch.setenv("ASSIST_LOCAL_WARM", "auto")  # the tests run with off
    _, state_path = warm.slot(MODEL)
    warm.write_state(state_path, _state(run_dir))
    monkeypatch.setenv("ASSIST_MODEL", MODEL)
    (line,) = warm_checks()
    assert line.name == f"warm server {MODEL}" and line.ok is True
    assert line.detail.startswith("used by commands here: ") and f"pid {os.getpid()}" in line.detail
    assert "idle for" in line.detail
    monkeypatch.setenv("ASSIST_LOCAL_CONTEXT", "4096")
    assert warm_checks()[0].detail.startswith("not used here")
    state_path.chmod(0o666)
    (refused,) = warm_checks()
    assert refused.ok is None and "writable by group or others" in refused.detail


def test_an_ended_server_that_no_one_reaped_is_not_alive() -> None:
    """`assist serve --stop` runs in another process than the server's parent: a server that ended but was not
    reaped (its parent alive and not waiting, or an init that never reaps) is a zombie, and must count as gone."""
    script = "import os, time\npid = os.fork()\nif pid == 0:\n    os._exit(0)\nprint(pid, flush=True)\ntime.sleep(30)\n"
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        stat = Path(f"/proc/{child}/stat")
        deadline = time.monotonic() + 10
        while " Z " not in stat.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert " Z " in stat.read_text()  # ended, not reaped
        assert not warm.pid_alive(child)
        assert warm.pid_alive(parent.pid)
    finally:
        parent.kill()
        parent.wait()


def test_start_leaves_a_models_first_conversion_to_the_command(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a fresh install the model is not converted yet: `start` must not convert it in a background server (its
    progress hidden in a log, the command waiting on it, the two racing over one cache); the command converts it
    in-process, and a later command starts the server."""
    from assistant.backends import models

    started: list[dict] = []
    monkeypatch.setattr(warm, "start_server", lambda wanted, *args, **kwargs: started.append(wanted))
    monkeypatch.setattr(models, "ov_ready", lambda spec, weights: False)
    assert warm.warm_backend("qwen2.5-coder-0.5b", {}, "start") is None
    assert started == []
    monkeypatch.setattr(models, "ov_ready", lambda spec, weights: True)
    assert warm.warm_backend("qwen2.5-coder-0.5b", {"weights": "int4"}, "start") is None  # the stand-in started none
    assert [(wanted["model"], wanted["weights"]) for wanted in started] == [("qwen2.5-coder-0.5b", "int4")]
