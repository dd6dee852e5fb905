"""Command-line options shared by `assist generate`, `assist eval ...` and friends: which backend, which model."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from .config import Settings, load_settings

BackendOpt = Annotated[
    str | None,
    typer.Option("--backend", help="Generation backend: local or openai (default: from config, else local)."),
]
ModelOpt = Annotated[
    str | None,
    typer.Option("--model", help="Model name: see `assist models list` (local), or the server's (openai)."),
]
BaseUrlOpt = Annotated[
    str | None,
    typer.Option("--base-url", help="openai backend: the server, e.g. http://127.0.0.1:8080/v1 (env OPENAI_BASE_URL)."),
]
ApiOpt = Annotated[
    str | None, typer.Option("--api", help="openai backend: chat or completions endpoint (default chat).")
]
TimeoutOpt = Annotated[
    float | None, typer.Option("--timeout", help="openai backend: seconds to wait for one request (default 120).")
]


def backend_settings(
    backend: str | None,
    model: str | None,
    base_url: str | None = None,
    api: str | None = None,
    timeout: float | None = None,
    start: Path | None = None,
) -> Settings:
    """Settings with these flags on top of env, the repo's `.assist.toml` and the user config."""
    if base_url is not None and backend is None:
        backend = "openai"  # a server URL on the command line says which backend is meant
    flags: dict[str, Any] = {
        "backend": backend,
        "model": model,
        "openai.base_url": base_url,
        "openai.api": api,
        "openai.timeout": timeout,
    }
    return load_settings(flags, start=start)
