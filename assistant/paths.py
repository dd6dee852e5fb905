"""Where assist keeps its files: the user cache (models, bank indexes) and the repo's `.assist/` folder."""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

import platformdirs

REPO_DIR_NAME = ".assist"


def cache_dir() -> Path:
    """The user cache: converted models and indexes of banks. `ASSIST_CACHE_DIR` overrides the XDG default."""
    override = os.environ.get("ASSIST_CACHE_DIR")
    path = Path(override) if override else Path(platformdirs.user_cache_dir("assist"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def models_dir() -> Path:
    """Where converted models live: `ASSIST_MODELS_DIR`, else `<cache>/models`."""
    override = os.environ.get("ASSIST_MODELS_DIR")
    path = Path(override) if override else cache_dir() / "models"
    path.mkdir(parents=True, exist_ok=True)
    return path


def data_path(*parts: str) -> Path:
    """A file shipped with assist: `prompts/...` or `index/...`.

    In a source checkout (or an editable install) they sit at the top of the repo; in a wheel they are
    carried inside the package under `_data/`.
    """
    package = Path(__file__).resolve().parent
    for root in (package / "_data", package.parent):
        candidate = root.joinpath(*parts)
        if candidate.exists():
            return candidate
    raise FileNotFoundError(f"assist's data file {'/'.join(parts)} is missing from this installation")


def _new_temp_file(path: Path) -> tuple[int, Path]:
    """An exclusive new file beside `path`, created with mode 0o666 so the kernel applies the umask as for
    `open()` (mkstemp would make it 0o600, and reading the umask means briefly changing it for every thread)."""
    for _ in range(100):
        tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"could not create a temporary file beside {path}")


def atomic_write_bytes(path: Path, data: bytes, mode: int | None = None) -> None:
    """Write `data` to `path` so that readers see the old file or the new one, never half of it.

    The file keeps its permissions (or gets `mode`); a new one gets those `open()` would give it.
    """
    path = Path(path)
    if mode is None and path.exists():
        mode = stat.S_IMODE(path.stat().st_mode)
    fd, tmp = _new_temp_file(path)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str, mode: int | None = None) -> None:
    """Text version of :func:`atomic_write_bytes` (UTF-8, newlines written as given)."""
    atomic_write_bytes(path, text.encode("utf-8"), mode)
