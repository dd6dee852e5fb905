"""Where trained retrievers live, and how a retriever finds the one trained for its index.

A repo's are in `<repo>/.assist/retrievers/<method>/` (git-ignored with the rest of `.assist/`). A bank's,
or an evaluation pool's, are in the user cache under `retrievers/<method>-<fingerprint>/`, where the
fingerprint is a hash of the examples' requirements and code: the same pool finds the same artifacts.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from assistant.code.examples import Example
from assistant.indexing.index import Index, TextEncoder
from assistant.paths import REPO_DIR_NAME, atomic_write_bytes, atomic_write_text, cache_dir

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


def cached_vectors(
    path: Path, texts: Sequence[str], encoder: TextEncoder, progress: Callable[[int, int], None] | None = None
) -> np.ndarray:
    """`encoder.encode(texts)`, reusing the vectors stored in `path` (an .npz keyed by encoder and text).

    A pool that gains a few examples embeds only those; the file then holds exactly this pool's vectors.
    """
    keys = [hashlib.sha256(f"{encoder.name}\x00{text}".encode()).hexdigest()[:24] for text in texts]
    known: dict[str, np.ndarray] = {}
    if path.exists():
        stored = np.load(path)
        known = dict(zip(json.loads(str(stored["keys"])), stored["vectors"], strict=True))
    missing = [i for i, key in enumerate(keys) if key not in known]
    if missing:
        fresh = encoder.encode([texts[i] for i in missing], progress)
        known.update({keys[i]: fresh[row] for row, i in enumerate(missing)})
    if not keys:
        return np.zeros((0, encoder.dim), "float32")
    vectors = np.stack([known[key] for key in keys]).astype("float32")
    if missing:
        path.parent.mkdir(parents=True, exist_ok=True)
        buffer = io.BytesIO()
        np.savez(buffer, keys=json.dumps(keys), vectors=vectors)
        atomic_write_bytes(path, buffer.getvalue())
    return vectors
