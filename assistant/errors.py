"""Errors that reach the user as one clear line."""

from __future__ import annotations

from collections.abc import Mapping


class AssistError(Exception):
    """A problem the user can fix; the CLI prints its message on one line and exits non-zero.

    The message should say what is wrong and, where there is one, how to fix it, in the library's terms (a setting
    by its name, never a command line's flag). `setting`, when given, names the setting (or settings joined by "+")
    the message is about ("function", "replace+function"; a rule about one setting adds it after a colon,
    "force:untracked"), so that a door can word the message in its own (a command line's flags); None: the message
    stands as it is. `values`: what the message states, by name (a path, the value refused), for the door's wording.
    """

    exit_code: int = 1

    def __init__(self, *args: object, setting: str | None = None, values: Mapping[str, object] | None = None) -> None:
        super().__init__(*args)
        self.setting = setting
        self.values: dict[str, object] = dict(values or {})


class UsageError(AssistError):
    """Bad input from the user (empty requirement, bad path, malformed bank line)."""

    exit_code = 2


class ModelError(AssistError):
    """A model is missing, corrupt or cannot be loaded."""


class ConversionFailed(ModelError):
    """A converter (a child process) exited with an error: `returncode` is its exit status (negative: killed by a
    signal, such as the kernel's out-of-memory killer)."""

    def __init__(self, message: str, returncode: int) -> None:
        super().__init__(message)
        self.returncode = returncode


class Cancelled(AssistError):
    """The user stopped a long job (the TUI's Escape); raised from a progress callback."""


def install_extra(extra: str) -> str:
    """The command that installs the optional extra `extra` (e.g. "serve"), as the docs give it: assist is
    installed from its checkout (`pip install -e .`), not from PyPI, so the command is run in that checkout."""
    return f"pip install -e '.[{extra}]'"
