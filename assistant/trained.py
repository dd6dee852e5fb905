"""Where trained retrievers live, and how a retriever finds the one trained for its index.

A repo's are in `<repo>/.assist/retrievers/<method>/` (git-ignored with the rest of `.assist/`). A bank's,
or an evaluation pool's, are in the user cache under `retrievers/<method>-<fingerprint>/`, where the
fingerprint is a hash of the examples' requirements and code: the same pool finds the same artifacts.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .examples import Example
from .index import Index
from .paths import REPO_DIR_NAME, atomic_write_text, cache_dir

METHODS = ("lail", "tstr")  # the trained retrievers, best first


def fingerprint(examples: Sequence[Example]) -> str:
    """A stable hash of a pool's content (order-independent)."""
    digest = hashlib.sha256()
    for line in sorted(f"{e.requirement}\x00{e.code}" for e in examples):
        digest.update(line.encode("utf-8"))
        digest.update(b"\x01")
    return digest.hexdigest()


def artifact_dir(index: Index, method: str) -> Path:
    """The folder holding `method`'s trained artifacts for this index's pool."""
    source = index.meta.get("source", {})
    if source.get("kind") == "repo":
        return Path(source["path"]) / REPO_DIR_NAME / "retrievers" / method
    return cache_dir() / "retrievers" / f"{method}-{fingerprint(index.examples)[:16]}"


def describe_pool(index: Index) -> str:
    """How a pool reads in messages and provenance records."""
    source = index.meta.get("source", {})
    kind = source.get("kind", "memory")
    where = source.get("path") or source.get("name") or ""
    return f"{kind} {where}".strip() + f" ({len(index)} examples)"


def write_manifest(directory: Path, data: dict[str, Any]) -> None:
    """The artifact's config and provenance, written last: its presence means the artifact is complete."""
    atomic_write_text(directory / "manifest.json", json.dumps(data, indent=1))


def read_manifest(directory: Path) -> dict[str, Any] | None:
    path = directory / "manifest.json"
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def artifact_identity(index: Index, method: str) -> dict[str, Any] | None:
    """What identifies a trained artifact in a results folder: its manifest (less the training statistics) and
    the sha256 of each weight file (as `sha256sum` prints it), which tells two trainings apart even when their
    settings are the same."""
    directory = artifact_dir(index, method)
    manifest = read_manifest(directory)
    if manifest is None:
        return None
    weights = {}
    for path in sorted(directory.rglob("*.safetensors")):
        digest = hashlib.sha256()
        with path.open("rb") as stream:
            for block in iter(lambda: stream.read(1 << 20), b""):
                digest.update(block)
        weights[path.relative_to(directory).as_posix()] = digest.hexdigest()
    return {key: value for key, value in manifest.items() if key != "stats"} | {"weights_sha256": weights}


def trained_methods(index: Index) -> list[str]:
    """The trained retrievers available for this index, best first (LAIL, then TST^R)."""
    return [m for m in METHODS if read_manifest(artifact_dir(index, m)) is not None]
