"""`assist serve`: keep the local model loaded, as this user's warm server (a Unix socket that `generate`, `tui`,
`docstring` and the hook find by themselves) or, with --port, behind an OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer

from assistant.backends.models import DEFAULT_GENERATOR, FAST_GENERATOR
from assistant.config import MAX_CONTEXT
from assistant.errors import AssistError, UsageError
from assistant.ui.console import ProgressUI, err, out
from assistant.ui.options import check_range

IDLE_HELP = "Warm server: stop after this many seconds without a request (0: never)."


def serve(
    model: Annotated[
        str | None,
        typer.Option(
            help=f"A registered local model (see `assist models list`; default {DEFAULT_GENERATOR}, "
            f"{FAST_GENERATOR} is the fast, low-memory choice).",
            show_default=False,
        ),
    ] = None,
    engine: Annotated[
        str,
        typer.Option(
            help="openvino (built in, the fast default) or llama.cpp (the optional extra: pip install -e '.[serve]' "
            "in assist's checkout)."
        ),
    ] = "openvino",
    port: Annotated[
        int | None,
        typer.Option(
            help="Serve OpenAI clients on this port of 127.0.0.1 instead (0 picks a free one); without it, the "
            "model is served on your own Unix socket, for assist's commands only.",
            show_default=False,
        ),
    ] = None,
    threads: Annotated[int | None, typer.Option(help="CPU threads (default: all cores).")] = None,
    context: Annotated[
        int | None,
        typer.Option(help="Context window, in tokens (default: the local.context setting, 8192).", show_default=False),
    ] = None,
    log_file: Annotated[
        Path | None,
        typer.Option("--log-file", help="llama.cpp: where the server's own log goes (default: the cache dir)."),
    ] = None,
    idle_timeout: Annotated[float, typer.Option("--idle-timeout", help=IDLE_HELP)] = 900.0,
    status: Annotated[bool, typer.Option("--status", help="Show the warm servers that run, and exit.")] = False,
    stop: Annotated[bool, typer.Option("--stop", help="Stop the warm servers (of --model only, if given).")] = False,
) -> None:
    """Keep the local model loaded, so later commands skip the model load, until Ctrl-C or --idle-timeout.

    Without --port the model is served on a Unix socket only you can open ($XDG_RUNTIME_DIR/assist, else the cache's
    run/ folder): `assist generate`, the TUI, `assist docstring` and the hook use it by themselves when they would
    load the same model on the same engine with the same settings (local.warm = "auto"; "start" also starts one in
    the background; "off" never uses one). With --port it is an OpenAI-compatible server on 127.0.0.1 for other
    clients: set ASSIST_BACKEND=openai, OPENAI_BASE_URL to the printed URL and ASSIST_OPENAI_API=completions.
    --engine llama.cpp (always on a port) needs pip install -e '.[serve]' in assist's checkout (it builds llama.cpp
    from source once: up to an hour on 2 cores).
    """
    if status and stop:  # neither may win silently: say which to run
        raise UsageError("--status and --stop cannot be used together; give one")
    if status or stop:
        _status_or_stop(model, stop)
        return
    check_range("--port", port, 0, 65535)
    check_range("--threads", threads, 1, 4096)
    check_range("--context", context, 1, MAX_CONTEXT)
    if idle_timeout < 0:
        raise UsageError(f"--idle-timeout must be 0 or more seconds, not {idle_timeout:g}")
    if engine not in ("openvino", "llama.cpp"):
        raise UsageError(f"unknown serving engine {engine!r}; choose openvino or llama.cpp")
    if engine == "llama.cpp":
        _serve_llama_cpp(model, 8080 if port is None else port, threads, context or 8192, log_file)
    elif port is None:
        _serve_warm(model, threads, context, idle_timeout or None)
    else:
        _serve_port(model, port, threads, context or 8192)


def _serve_port(model: str | None, port: int, threads: int | None, context: int) -> None:
    """The OpenAI-compatible server on 127.0.0.1:`port`, until Ctrl-C, with the settings' decoding and weights."""
    from assistant import config
    from assistant.backends.local_server import LocalServer
    from assistant.pipeline.pipeline import load_generator

    settings = config.load_settings({"model": model}, check_trust=False)
    engine = {"decoding": settings["local.decoding"], "weights": settings["local.weights"]}
    with ProgressUI(err.is_terminal) as ui:
        ui.status("Loading the model")
        options = {"engine": "openvino", "context": context, "threads": threads, **engine}
        backend = load_generator("local", model, progress=ui, **options)
        server = LocalServer(backend, port=port)
    url = server.base_url
    out.print(f"Serving {backend.model} (OpenVINO {backend.weights}, context {backend.context}) at {url}")
    out.print(f"  export ASSIST_BACKEND=openai OPENAI_BASE_URL={url} ASSIST_OPENAI_API=completions")
    out.print("Ctrl-C stops it.")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        err.print("stopped")
    finally:
        server.httpd.server_close()


def _serve_warm(model: str | None, threads: int | None, context: int | None, idle_timeout: float | None) -> None:
    """This user's warm server, with the settings' model, context, decoding and weights (what commands would
    load)."""
    from assistant import config
    from assistant.backends import warm

    settings = config.load_settings({"model": model}, check_trust=False)
    context = context or settings["local.context"]
    ui = ProgressUI(err.is_terminal)
    ui.__enter__()
    ui.status("Loading the model")

    def ready(server: Any, state: warm.ServerState) -> None:
        ui.__exit__(None, None, None)
        idle = f"after {idle_timeout:g} s without a request" if idle_timeout else "never by itself"
        out.print(
            f"Serving {state.model} (OpenVINO {state.weights}, context {server.backend.context}) on {state.socket}"
        )
        out.print("  assist generate, tui, docstring and the hook use it while it runs (setting local.warm).")
        out.print(f"It stops {idle}; Ctrl-C or `assist serve --stop` stops it.")

    try:
        warm.serve(
            settings.model if settings.backend == "local" else model,
            decoding=settings["local.decoding"],
            weights=settings["local.weights"],
            context=context,
            threads=threads,
            idle_timeout_s=idle_timeout,
            progress=ui,
            ready=ready,
        )
    except KeyboardInterrupt:
        err.print("stopped")
    except UsageError as exc:
        if "already runs" in str(exc):
            raise UsageError(f"{exc}; `assist serve --stop` stops it") from None
        raise
    finally:
        ui.__exit__(None, None, None)


def _status_or_stop(model: str | None, stop: bool) -> None:
    """`--status`: every warm server with what it serves; `--stop`: stop them (of `model` only, if given)."""
    from assistant.backends import warm
    from assistant.backends.models import resolve

    wanted = resolve(model, "generator").name if model else None
    found = [(path, state, why) for path, state, why in warm.all_servers() if wanted in (None, path.stem)]
    if not any(state for _, state, _ in found):
        out.print("No warm model server runs" + (f" for {wanted}." if wanted else "."))
    for path, state, why in found:
        if state is None:
            err.print(f"{path}: {why}", markup=False)
        elif stop:
            gone = warm.stop_server(state, path)
            out.print(f"{'Stopped' if gone else 'Could not stop'} the warm server of {state.model} (pid {state.pid})")
        else:
            out.print(describe_server(state), markup=False)


def describe_server(state: Any) -> str:
    """One line about a running warm server: what it serves, its process, how long it has been idle."""
    from assistant.backends import warm

    idle = "idle for ?"
    try:
        info = warm.ask(state.socket, "/v1/models", None).get("assist") or {}
        idle = "busy" if info.get("busy") else f"idle for {info.get('idle_s', 0):.0f} s"
    except AssistError:
        pass
    limit = f"stops after {state.idle_timeout_s:g} s idle" if state.idle_timeout_s else "no idle timeout"
    up = time.time() - state.started
    return (
        f"{state.model}: {state.status}, engine {state.engine} {state.weights} (decoding {state.decoding}, "
        f"context {state.context}), "
        f"pid {state.pid}, up {up:.0f} s, {idle} ({limit}), socket {state.socket}"
    )


def _serve_llama_cpp(model: str | None, port: int, threads: int | None, context: int, log_file: Path | None) -> None:
    from assistant.backends.serve import LlamaServer
    from assistant.paths import cache_dir

    log = log_file or cache_dir() / "serve.log"
    with ProgressUI(err.is_terminal) as ui:
        server = LlamaServer(model, port=port, threads=threads, context=context, log_file=log, progress=ui)
        ui.status(f"Starting llama.cpp's server for {server.spec.name}")
        server.wait_ready()
    url = server.base_url
    out.print(f"Serving {server.spec.name} (llama.cpp, context {context}) at {url}")
    out.print(f'  assist generate "..." --backend openai --base-url {url}')
    out.print(f"  or: export ASSIST_BACKEND=openai OPENAI_BASE_URL={url} ASSIST_OPENAI_CONTEXT={context}")
    out.print(f"Server log: {log}. Ctrl-C stops it.")
    try:
        code = server.process.wait()
    except KeyboardInterrupt:
        server.stop()
        err.print("stopped")
        return
    server.stop()
    raise AssistError(f"llama.cpp's server exited with code {code}; see {log}")
