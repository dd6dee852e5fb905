"""Text from repositories and models, made safe to show on a terminal (no rich, textual or typer: the TUI and the
CLI both use it, and the TUI starts without typer)."""

from __future__ import annotations

# C0 controls but tab and newline, DEL and C1: shown as `\u001b`, never sent (a repo's docstring or a candidate
# could otherwise retitle the terminal, hide text or, on some terminals, answer back as if typed); so are the
# bidirectional overrides and isolates, which make code read otherwise than it runs ("Trojan Source"). JSON reads
# `\u001b` as the same character, so `--json` output keeps its meaning.
_BIDI = [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]
_CONTROLS = {
    code: f"\\u{code:04x}" for code in [*range(0x20), 0x7F, *range(0x80, 0xA0), *_BIDI] if chr(code) not in "\t\n"
}


def printable(text: str) -> str:
    """`text` with every terminal control character (but tab and newline) written out as `\\uXXXX`."""
    return text.translate(_CONTROLS)
