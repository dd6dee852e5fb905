"""Command-line options shared by `assist generate`, `assist eval ...` and friends: which backend, which model."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .config import backend_settings

__all__ = [
    "ApiOpt",
    "BackendOpt",
    "BankOpt",
    "BaseUrlOpt",
    "CandidatesOpt",
    "DemosOpt",
    "MaxTokensOpt",
    "ModelOpt",
    "SeedOpt",
    "TimeoutOpt",
    "backend_settings",
]

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

# What `assist generate` and `assist tui` share.
CandidatesOpt = Annotated[int, typer.Option("-n", help="Candidates to sample.")]
DemosOpt = Annotated[int, typer.Option("-k", help="Demonstrations to retrieve (0 for zero-shot).")]
BankOpt = Annotated[Path | None, typer.Option(help="Retrieve from this JSONL bank instead of the repo's index.")]
MaxTokensOpt = Annotated[int, typer.Option(help="Longest candidate, in tokens.")]
SeedOpt = Annotated[int | None, typer.Option(help="Random seed, for repeatable samples.")]
