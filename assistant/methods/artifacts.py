"""The one artifact store of the trained methods (LAIL, TST^R, JOINTCOM, Condor): where each lives, how it is
saved, and the provenance it carries.

Every method saves through :func:`save_artifact`: its files are written aside first, then swapped in, and the
manifest (config, data, statistics, and the store's provenance: method, time, versions, each file's sha256) is
written last, so a folder with a manifest is always complete and a reader keeps the previous artifact until the
swap. Every method loads through :func:`load_manifest`.

Trained retrievers: a repo's are in `<repo>/.assist/retrievers/<method>/` (git-ignored with the rest of
`.assist/`). A bank's, or an evaluation pool's, are in the user cache under `retrievers/<method>-<fingerprint>/`,
where the fingerprint is a hash of the examples' requirements and code: the same pool finds the same artifacts.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import platform
import shutil
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from assistant.code.examples import Example
from assistant.errors import UsageError
from assistant.indexing.index import Index, TextEncoder
from assistant.paths import atomic_write_bytes, atomic_write_text, cache_dir, file_sha256, read_regular_file, repo_dir

METHODS = ("lail", "tstr")  # the trained retrievers, best first
MANIFEST_BYTES = 16 * 2**20  # a manifest is a few KB; a larger file is not one


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
        return repo_dir(Path(source["path"])) / "retrievers" / method
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
    """The artifact's manifest, or None when missing or unreadable (a link, not a JSON object, not UTF-8)."""
    data = read_regular_file(directory / "manifest.json", limit=MANIFEST_BYTES)
    if data is None:
        return None
    try:
        manifest = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None
    return manifest if isinstance(manifest, dict) else None


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def save_artifact(directory: Path, method: str, write: Callable[[Path], None], manifest: dict[str, Any]) -> dict:
    """Save a trained method's artifact: `write(folder)` writes its files into a staging folder; they then replace
    the same-named entries of `directory` (other files there, e.g. a resumable labels cache, stay), and the manifest
    is written last with the store's provenance. Returns the manifest as written.

    The old manifest goes only once the new files are complete, so a reader uses the previous artifact while
    training runs, and never sees half of the new one."""
    directory.mkdir(parents=True, exist_ok=True)
    staging = directory / ".partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        write(staging)
        files = {p.relative_to(staging).as_posix(): file_sha256(p) for p in sorted(staging.rglob("*")) if p.is_file()}
        (directory / "manifest.json").unlink(missing_ok=True)
        for entry in sorted(staging.iterdir()):
            target = directory / entry.name
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            else:
                target.unlink(missing_ok=True)
            entry.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    provenance = {
        "method": method,
        "saved": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "assist": _version("assist"),
        "python": platform.python_version(),
        "torch": _version("torch"),
        "files_sha256": files,
    }
    written = {"method": method, **manifest, "provenance": provenance}
    write_manifest(directory, written)
    return written


def load_manifest(directory: Path, method: str, what: str, how_to_train: str) -> dict[str, Any]:
    """The manifest of `method`'s artifact in `directory`; none (or another method's) is a one-line error naming
    `what` is missing and saying how to train one."""
    manifest = read_manifest(directory)
    if manifest is None or manifest.get("method", method) != method:
        raise UsageError(f"no trained {what} in {directory}; {how_to_train}")
    return manifest


def save_encoder(model: Any, tokenizer: Any, folder: Path) -> None:
    """A fine-tuned transformers encoder and its tokenizer, as safetensors (what LAIL, JOINTCOM and Condor train)."""
    model.save_pretrained(str(folder / "encoder"), safe_serialization=True)
    tokenizer.save_pretrained(str(folder / "encoder"))


def artifact_identity(index: Index, method: str) -> dict[str, Any] | None:
    """What identifies the trained artifact `method` keeps for this index's pool (see `directory_identity`)."""
    return directory_identity(artifact_dir(index, method))


def directory_identity(directory: Path) -> dict[str, Any] | None:
    """What identifies a trained artifact in a results folder: its manifest (less the training statistics) and
    the sha256 of each weight file (as `sha256sum` prints it), which tells two trainings apart even when their
    settings are the same. None when the folder holds no artifact."""
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
    return {key: value for key, value in manifest.items() if key not in ("stats", "provenance")} | {
        "weights_sha256": weights
    }


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
