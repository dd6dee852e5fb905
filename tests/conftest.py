"""Shared fixtures: a hermetic cache per test, one encoder and one generator loaded per session, scratch repos."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# Converted models are shared with the user's cache (converting takes minutes); everything else is per test.
os.environ.setdefault(
    "ASSIST_MODELS_DIR", str(Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "assist" / "models")
)


@pytest.fixture(autouse=True)
def hermetic_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Bank indexes and other cache files go to a temp dir, never the user's cache."""
    path = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("ASSIST_CACHE_DIR", str(path))
    # No user config, and no settings leaking in from the developer's environment.
    monkeypatch.setenv("ASSIST_CONFIG_DIR", str(tmp_path_factory.mktemp("config")))
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "ASSIST_")) and name not in (
            "ASSIST_CACHE_DIR",
            "ASSIST_CONFIG_DIR",
            "ASSIST_MODELS_DIR",
        ):
            monkeypatch.delenv(name)
    return path


@pytest.fixture(scope="session")
def encoder():
    from assistant.backends.encoder import Encoder

    return Encoder.load()


@pytest.fixture(scope="session")
def backend():
    """The default local generator (Qwen2.5-Coder-0.5B-Instruct), loaded once for the whole run."""
    from assistant.backends.local import LocalBackend

    return LocalBackend.load()


def git(cwd: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", "-c", "user.email=test@example.com", "-c", "user.name=test", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout


SCRATCH_FILES = {
    "mathutils.py": '''def is_even(n):
    """Return True when n is even."""
    return n % 2 == 0


def cube_all(values):
    """Return the cubes of the numbers in a list."""
    return [v ** 3 for v in values]
''',
    "text/words.py": '''def word_count(text: str) -> int:
    """Count the words in a string."""
    return len(text.split())
''',
    "README.md": "# scratch\n",
}


@pytest.fixture
def scratch_repo(tmp_path: Path) -> Iterator[Path]:
    """A git repo with three documented functions in two Python files, all committed."""
    root = tmp_path / "repo"
    for rel, text in SCRATCH_FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-qm", "init")
    yield root


def landlock_abi() -> int:
    """The kernel's Landlock ABI (0: none), probed here independently of the code under test."""
    if not sys.platform.startswith("linux"):
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return max(0, libc.syscall(ctypes.c_long(444), None, ctypes.c_long(0), ctypes.c_long(1)))
