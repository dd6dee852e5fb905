"""A warm model: the local model kept loaded by a server process that later commands use without any flag.

`assist serve` (or a command whose `local.warm` setting is `start`) runs the OpenVINO engine behind
:class:`~assistant.backends.local_server.LocalServer` on a Unix socket in a folder only this user can open
(`$XDG_RUNTIME_DIR/assist`, else `<cache>/run`, mode 0700), and writes a state file beside it (`<model>.json`:
model, engine, decoding, context, weights, pid, socket, started, idle timeout). A command that would load the same
model on the same engine with the same decoding, context and weights finds that file and sends its prompts there instead
(:class:`WarmBackend`): the server runs the very calls the in-process engine would (`sample_batch`,
`sample_groups`, `logprob`), so the candidates are the same for a fixed seed. A state file whose process is gone
is removed; one of another model or settings is left alone; a socket, state file or folder owned by another user,
or writable by group or others, is refused. The server stops itself after `IDLE_TIMEOUT_S` without a request.

Nothing here is chosen by a repo's settings: the folder is fixed, and `local.warm` is read from the user's config
or the environment only.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from assistant.backends import (
    BackendIdentity,
    Completion,
    SampleGroup,
    SamplingParams,
    Seeds,
    Step,
    TokenLogprobs,
    Usage,
    first_row_stream,
)
from assistant.backends.local import ConvertedBackend, read_prompt_files
from assistant.backends.local_server import prompt_to_json
from assistant.backends.models import resolve, tokenizer_dir
from assistant.backends.prompts import Prompt
from assistant.errors import AssistError, ModelError, UsageError
from assistant.progress import Progress

log = logging.getLogger("assistant")

IDLE_TIMEOUT_S = 900.0  # a server stops after 15 minutes without a request
START_TIMEOUT_S = 300.0  # how long a command waits for a server it started to load its model
POLL_S = 0.2  # how often a waiting client lets its step callback cancel
WARM_MODES = ("auto", "off", "start")
SOCKET_PATH_MAX = 107  # bytes of an AF_UNIX path (sun_path holds 108, with the closing NUL)


class Refused(AssistError):
    """A warm server's folder, state file or socket that is not this user's alone: never used."""


@dataclass(frozen=True)
class ServerState:
    """What a warm server's state file records."""

    model: str
    engine: str
    decoding: str
    context: int | None
    pid: int
    socket: str
    started: float
    idle_timeout_s: float
    status: str  # "loading" while the model loads, then "ready"
    identity: dict[str, Any] | None = None  # the served backend's identity (BackendIdentity fields)
    weights: str = "int8"  # the OpenVINO weights it runs (a state file from before the setting: int8)

    def matches(self, model: str, engine: str, decoding: str, context: int | None, weights: str) -> bool:
        """Whether this server gives what an in-process engine loaded with these settings would."""
        mine = (self.model, self.engine, self.decoding, self.context, self.weights)
        return mine == (model, engine, decoding, context, weights)


# -- where servers live, and the checks on use -----------------------------------------------------------------


def run_dir(create: bool = True) -> Path:
    """The folder of this user's warm servers: `$XDG_RUNTIME_DIR/assist` when that runtime folder is the user's,
    else `<cache>/run`; made 0700, and refused (:class:`Refused`) if another user owns it or others may open it."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_absolute() and _owned_private(Path(runtime)):
        folder = Path(runtime) / "assist"
    else:
        from assistant.paths import cache_dir

        folder = cache_dir() / "run"
    if create:
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=0o700)
    check_private_dir(folder)
    return folder


def _owned_private(folder: Path) -> bool:
    try:
        info = os.lstat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o077


def check_private_dir(folder: Path) -> None:
    """Refuse a folder that is not a real folder of this user's with no rights for group or others."""
    try:
        info = os.lstat(folder)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise Refused(f"{folder} is not a folder only you can open (mode {info.st_mode & 0o777:o}); not used")


def check_own_file(path: Path, kind: str) -> os.stat_result:
    """Refuse a state file or socket (`kind`: "file" or "socket") that is a link, of another kind, owned by
    another user, or writable by group or others."""
    info = os.lstat(path)
    right_kind = stat.S_ISSOCK(info.st_mode) if kind == "socket" else stat.S_ISREG(info.st_mode)
    if not right_kind:
        raise Refused(f"{path} is not a {kind}; not used")
    if info.st_uid != os.getuid():
        raise Refused(f"{path} belongs to another user (uid {info.st_uid}); not used")
    if info.st_mode & 0o022:
        raise Refused(f"{path} is writable by group or others (mode {info.st_mode & 0o777:o}); not used")
    return info


def slot(model: str, folder: Path | None = None) -> tuple[Path, Path]:
    """The socket and state file of `model`'s server (one per model)."""
    folder = folder or run_dir()
    return folder / f"{model}.sock", folder / f"{model}.json"


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists (possibly another user's); a server this process started and that
    has ended is reaped here, not counted as alive."""
    if not isinstance(pid, int) or pid <= 1:  # 0 and -1 name groups of processes, never one server
        return False
    with contextlib.suppress(ChildProcessError, OSError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """Whether `pid` has ended but was not reaped yet: a server whose parent is gone is reaped by init, which in a
    container may never happen, so a stopped server would otherwise look alive for ever."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] == ["Z"]  # the state follows the command name, which may hold ")"


def read_state(path: Path) -> ServerState:
    """A state file, checked (:func:`check_own_file`); a file that does not parse is a :class:`Refused`."""
    check_own_file(path, "file")
    try:
        state = ServerState(**json.loads(path.read_bytes()[: 1 << 16]))
        if isinstance(state.pid, bool) or not isinstance(state.pid, int) or state.pid <= 1:
            raise ValueError("no process id")
        return state
    except (ValueError, TypeError) as exc:
        raise Refused(f"{path} is not a warm server's state ({type(exc).__name__}); not used") from None


def write_state(path: Path, state: ServerState) -> None:
    """Write the state file atomically, readable and writable by this user only."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(asdict(state), handle)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def remove_slot(state_path: Path, state: ServerState | None) -> None:
    """Remove a server's state file and its socket (this user's own files only)."""
    state_path.unlink(missing_ok=True)
    if state is not None and Path(state.socket).parent == state_path.parent:
        Path(state.socket).unlink(missing_ok=True)


def live_state(state_path: Path) -> ServerState | None:
    """The state of a running server at `state_path`; None when there is none. A state whose process is gone
    is removed; a file not this user's alone raises :class:`Refused`."""
    if not state_path.exists() and not state_path.is_symlink():
        return None
    state = read_state(state_path)
    if not pid_alive(state.pid):
        log.info("removing a stale warm-server state (pid %d is gone): %s", state.pid, state_path)
        remove_slot(state_path, state)
        return None
    return state


def find_server(model: str, engine: str, decoding: str, context: int | None, weights: str) -> ServerState | None:
    """A ready server of this model, engine, decoding, context and weights, or None (none runs, another's settings
    run, it is still loading, or its files are refused: then a warning says why)."""
    try:
        socket_path, state_path = slot(model)
        state = live_state(state_path)
        if state is None or state.status != "ready" or not state.matches(model, engine, decoding, context, weights):
            return None
        if Path(state.socket) != socket_path:
            raise Refused(f"{state_path} names a socket outside {socket_path.parent}; not used")
        check_own_file(socket_path, "socket")
        return state
    except Refused as exc:
        log.warning("warm server: %s", exc)
        return None
    except FileNotFoundError:
        return None


def all_servers() -> list[tuple[Path, ServerState | None, str | None]]:
    """Every server in the folder: (state file, its live state, None), or (state file, None, why it is refused);
    stale state files are removed on the way."""
    folder = run_dir(create=False)
    if not folder.is_dir():
        return []
    found = []
    for path in sorted(folder.glob("*.json")):
        try:
            state = live_state(path)
            if state is not None:  # a stale one was removed: nothing to show
                found.append((path, state, None))
        except Refused as exc:
            found.append((path, None, str(exc)))
    return found


def stop_server(state: ServerState, state_path: Path, wait_s: float = 15.0) -> bool:
    """Ask a server to stop (SIGTERM), wait for it to go, then tidy its files; False if it is still there."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(state.pid, signal.SIGTERM)
    deadline = time.monotonic() + wait_s
    while pid_alive(state.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if pid_alive(state.pid):
        return False
    remove_slot(state_path, state)
    return True


# -- the client ------------------------------------------------------------------------------------------------


def ask(
    socket_path: str, route: str, payload: dict[str, Any] | None, step: Step | None = None, on_text: Any = None
) -> Any:
    """One request to a warm server: POST `payload` (GET when None) to `route`. A streamed answer's progress lines
    go to `step` (called again every `POLL_S` while waiting, so a step that raises cancels: the connection closes,
    and the server stops the work), its text lines to `on_text(call, text)`. Returns the `result` (or a plain JSON
    answer whole); a server-side error is raised as its kind."""
    body = b"" if payload is None else json.dumps(payload).encode()
    head = f"{'GET' if payload is None else 'POST'} {route} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
    if payload is not None:
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        try:
            conn.connect(socket_path)
            conn.sendall(head.encode() + b"\r\n" + body)
        except OSError as exc:
            raise ModelError(f"the warm model server at {socket_path} cannot be reached ({exc.strerror})") from None
        data = _read_all(conn, step, on_text)
    header, _, text = data.partition(b"\r\n\r\n")
    if not header.startswith(b"HTTP/1."):
        raise ModelError(f"the warm model server at {socket_path} closed the connection without an answer")
    return _result(text, socket_path)


def _read_all(conn: socket.socket, step: Step | None, on_text: Any = None) -> bytes:
    """Everything the server sends until it closes, passing streamed progress lines to `step` and text lines to
    `on_text` as they come."""
    chunks: list[bytes] = []
    last: tuple[int, int] | None = None
    pending = b""
    while True:
        ready, _, _ = select.select([conn], [], [], POLL_S)
        if not ready:
            if step is not None and last is not None:
                step(*last)
            continue
        chunk = conn.recv(1 << 16)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        if step is None and on_text is None:
            continue
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if line.startswith(b'{"step"') and step is not None:
                last = tuple(json.loads(line)["step"])  # type: ignore[assignment]
                step(*last)  # type: ignore[misc]
            elif line.startswith(b'{"text"') and on_text is not None:
                on_text(*json.loads(line)["text"])


def _result(text: bytes, socket_path: str) -> Any:
    """The `result` of a server's answer (its last line), or its error raised as the same kind of error."""
    lines = [line for line in text.split(b"\n") if line.strip()]
    try:
        answer = json.loads(lines[-1]) if lines else {}
    except ValueError:
        answer = {}
    if "result" in answer:
        return answer["result"]
    if answer and not {"error", "step", "text"} & answer.keys():  # a plain JSON answer (GET /v1/models)
        return answer
    error = answer.get("error") or {}
    message = error.get("message") or f"the warm model server at {socket_path} stopped before it answered"
    import assistant.errors

    kind = getattr(assistant.errors, str(error.get("kind")), None)
    raised = (kind if isinstance(kind, type) and issubclass(kind, AssistError) else ModelError)(message)
    if isinstance(error.get("setting"), str) and isinstance(error.get("values"), dict):
        raised.setting, raised.values = error["setting"], error["values"]  # for the door's wording, as in-process
    raise raised


def completion_from_json(data: dict[str, Any]) -> Completion:
    """A candidate as the server sent it (the fields of :class:`Completion`)."""
    logprobs = data.get("logprobs")
    return Completion(
        text=data["text"],
        tokens=int(data["tokens"]),
        finish_reason=data["finish_reason"],
        logprobs=None if logprobs is None else tuple(float(v) for v in logprobs),
        cut_reason=data.get("cut_reason"),
    )


class WarmBackend(ConvertedBackend):
    """The OpenVINO engine of a running warm server: the same name, identity, prompts and candidates as the
    in-process `local-ov` backend, without loading the model. Prompts are rendered and counted here (the model's
    tokenizer is read locally, as the engine reads it); sampling and scoring run in the server."""

    name = "local-ov"
    description = "the local model through a running warm server (`assist serve`)"
    batches_prompts = True
    batches_groups = True
    streams = True  # the server tells the first row as it is written

    def __init__(self, state: ServerState, progress: Progress | None = None) -> None:
        self.state = state
        self.spec = resolve(state.model, "generator")
        self.model = self.spec.name
        self.decoding = state.decoding
        self.usage = Usage()
        read_prompt_files(self, self.spec, tokenizer_dir(self.spec, progress), state.context)
        ident = state.identity or {}
        self._identity = BackendIdentity(
            backend=ident.get("backend", self.name),
            model=ident.get("model", self.model),
            kind=ident.get("kind", self.name),
            label=ident.get("label", self.model),
            details=tuple(tuple(pair) for pair in ident.get("details", ())),  # type: ignore[misc]
        )

    @property
    def identity(self) -> BackendIdentity:
        """The served engine's identity: caches and manifests cannot tell the two apart, as they should not."""
        return self._identity

    def sample_batch(
        self, prompts: Sequence[Prompt], params: SamplingParams, step: Step | None = None, seeds: Seeds | None = None
    ) -> list[list[Completion]]:
        """The server's engine's `sample_batch` on these prompts; a prompt that cannot fit is refused here first,
        with the engine's own words."""
        self.check_batch(prompts, params, seeds)
        # Someone listening (a terminal) hears the first row as the server's engine writes it.
        stream = first_row_stream(prompts)
        payload = {
            "prompts": [prompt_to_json(p) for p in prompts],
            "params": asdict(params),
            "seeds": None if seeds is None else list(seeds),
            "stream": stream is not None,
        }
        on_text = None if stream is None else (lambda call, text: stream.on_text(stream.call, text))
        result = self._ask("/v1/assist/sample", payload, step, on_text)
        return [[completion_from_json(c) for c in row] for row in result["completions"]]

    def sample_groups(self, groups: Sequence[SampleGroup], step: Step | None = None) -> list[list[list[Completion]]]:
        """The server's engine's `sample_groups` on these groups, in one request; a server started by an assist
        that lacks that call (it answers "no such endpoint") gets the groups one after another."""
        for group in groups:
            self.check_batch(group.prompts, group.params, group.seeds)
        stream = first_row_stream(groups[0].prompts) if groups else None
        payload = {
            "groups": [
                {
                    "prompts": [prompt_to_json(p) for p in group.prompts],
                    "params": asdict(group.params),
                    "seeds": None if group.seeds is None else list(group.seeds),
                }
                for group in groups
            ],
            "stream": stream is not None,
        }
        on_text = None if stream is None else (lambda call, text: stream.on_text(stream.call, text))
        try:
            result = self._ask("/v1/assist/sample-groups", payload, step, on_text)
        except ModelError as exc:
            if not str(exc).startswith("no such endpoint"):
                raise
            return super().sample_groups(groups, step)
        return [[[completion_from_json(c) for c in row] for row in rows] for rows in result["groups"]]

    def logprob(self, pairs: Sequence[tuple[Prompt, str]]) -> list[TokenLogprobs]:
        """The server's engine's teacher-forced scores of each continuation given its prompt."""
        payload = {"pairs": [[prompt_to_json(p), text] for p, text in pairs]}
        result = self._ask("/v1/assist/score", payload, None)
        return [TokenLogprobs(tokens=list(t), logprobs=[float(v) for v in lp]) for t, lp in result["scores"]]

    def _ask(self, route: str, payload: dict[str, Any], step: Step | None, on_text: Any = None) -> dict[str, Any]:
        result = ask(self.state.socket, route, payload, step, on_text)
        used = result["usage"]
        self.usage.add(used["prompt_tokens"], used["completion_tokens"], used["seconds"], used["requests"])
        return result


# -- starting one ----------------------------------------------------------------------------------------------


def warm_backend(
    model: str | None, options: dict[str, Any], mode: str, progress: Progress | None = None
) -> WarmBackend | None:
    """The warm server's backend for the in-process OpenVINO engine that `model` and `options` (context, threads,
    decoding, weights) would load, per `mode` (the `local.warm` setting): `off` never; `auto` when one of these settings
    runs; `start` also starts one when none runs and waits for it to load (once the model is converted: a first
    use converts it in-process, where its progress shows, rather than in a server's log). None: load in-process."""
    from assistant.backends.models import weights_for
    from assistant.backends.ov import decoding_for

    if mode not in WARM_MODES:
        raise UsageError(f"unknown local.warm {mode!r}; choose {', '.join(WARM_MODES)}")
    if mode == "off":
        return None
    spec = resolve(model, "generator")
    decoding = decoding_for(spec.name, options.get("decoding") or "auto")
    weights = weights_for(spec.name, options.get("weights") or "auto")
    context = options.get("context")
    try:
        if len(os.fsencode(slot(spec.name)[0])) > SOCKET_PATH_MAX:
            log.info("warm server: the socket's path would be too long for a Unix socket; loading the model here")
            return None
    except Refused as exc:
        log.warning("warm server: %s", exc)
        return None
    state = find_server(spec.name, "openvino", decoding, context, weights)
    if state is None and mode == "start":
        from assistant.backends import models

        if not models.ov_ready(spec, weights):  # a first use converts here, with its progress shown
            return None
        config = {"model": spec.name, "decoding": decoding, "context": context, "weights": weights}
        state = start_server(config, options.get("threads"), progress)
    return None if state is None else WarmBackend(state, progress)


def start_server(wanted: dict[str, Any], threads: int | None, progress: Progress | None = None) -> ServerState | None:
    """Start a warm server for the settings `wanted` (model, decoding, context, weights) in the background and wait
    until it serves; None (with a warning) when it cannot (the slot holds another server, or it failed: its log
    says why)."""
    try:
        _, state_path = slot(wanted["model"])
        process = None
        if live_state(state_path) is None:
            process = _spawn({**wanted, "threads": threads}, state_path.with_suffix(".log"))
        status = getattr(progress, "status", None)  # the CLI's and TUI's progress say what happens now
        if callable(status):
            status("Starting the warm model server")
        return _wait_ready(wanted, state_path, process)
    except Refused as exc:
        log.warning("warm server: %s", exc)
        return None


def _spawn(config: dict[str, Any], log_path: Path) -> subprocess.Popen:
    """The background server process (:func:`main`), its output appended to `log_path` (this user's only)."""
    with open(log_path, "ab") as log_file:  # handed to the child
        os.chmod(log_path, 0o600)
        return subprocess.Popen(
            [sys.executable, "-P", "-m", "assistant.backends.warm", json.dumps(config)],
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            cwd="/",  # it holds no repo's folder open while it runs
            start_new_session=True,  # it outlives this command, and Ctrl-C here does not reach it
            close_fds=True,
        )


def _wait_ready(wanted: dict[str, Any], state_path: Path, process: subprocess.Popen | None) -> ServerState | None:
    """The started server's state once it serves; None (with a warning) if it ended first, serves other settings
    (another command started it), or is not ready within `START_TIMEOUT_S`."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            log.warning(
                "warm server: it did not start (see %s); loading the model here", state_path.with_suffix(".log")
            )
            return None
        state = live_state(state_path) if state_path.exists() else None
        if state is not None and state.status == "ready":
            settings = (wanted["model"], "openvino", wanted["decoding"], wanted["context"], wanted["weights"])
            if state.matches(*settings):
                return find_server(*settings)
            log.warning("warm server: %s serves other settings; loading the model here", state_path)
            return None
        time.sleep(0.2)
    log.warning("warm server: none was ready within %.0f s (see %s)", START_TIMEOUT_S, state_path.with_suffix(".log"))
    return None


def serve(
    model: str | None,
    *,
    decoding: str = "auto",
    context: int | None = None,
    threads: int | None = None,
    weights: str = "auto",
    idle_timeout_s: float | None = IDLE_TIMEOUT_S,
    progress: Progress | None = None,
    ready: Any = None,
) -> None:
    """Load the model on the OpenVINO engine and serve it on this user's socket until stopped (SIGTERM, Ctrl-C)
    or idle for `idle_timeout_s` (None: never). `ready(server, state)` is called once it serves."""
    from assistant.backends import load_backend
    from assistant.backends.local_server import LocalServer
    from assistant.backends.models import weights_for
    from assistant.backends.ov import decoding_for

    spec = resolve(model, "generator")
    decoding = decoding_for(spec.name, decoding)
    weights = weights_for(spec.name, weights)
    socket_path, state_path = slot(spec.name)
    if (other := live_state(state_path)) is not None and other.pid != os.getpid():
        raise UsageError(f"a warm server of {spec.name} already runs (pid {other.pid})")
    state = ServerState(
        spec.name,
        "openvino",
        decoding,
        context,
        os.getpid(),
        str(socket_path),
        time.time(),
        idle_timeout_s or 0,
        "loading",
        weights=weights,
    )
    write_state(state_path, state)
    signal.signal(signal.SIGTERM, _exit_on_term)
    server = None
    try:
        options = {"context": context, "threads": threads, "decoding": decoding, "weights": weights}
        backend = load_backend("local-ov", spec.name, progress=progress, **options)
        server = LocalServer(backend, unix_path=socket_path, idle_timeout_s=idle_timeout_s)
        identity = asdict(backend.identity)
        state = ServerState(**{**asdict(state), "status": "ready", "identity": identity})
        write_state(state_path, state)
        if ready is not None:
            ready(server, state)
        server.serve_forever()
    finally:
        if server is not None:
            server.httpd.server_close()
        current = None
        with contextlib.suppress(Exception):
            current = read_state(state_path)
        if current is not None and current.pid == os.getpid():
            remove_slot(state_path, state)


def _exit_on_term(signum: int, frame: Any) -> None:
    raise SystemExit(0)


def main(argv: Sequence[str]) -> int:
    """The background server a command starts (`local.warm = "start"`): its settings as one JSON argument."""
    config = json.loads(argv[0])
    try:
        settings = {key: config.get(key) for key in ("decoding", "context", "threads")}
        serve(config["model"], weights=config.get("weights") or "auto", **settings)
    except AssistError as exc:
        print(f"warm server: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
