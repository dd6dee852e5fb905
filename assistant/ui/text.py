"""Text from repositories and models, made safe to show on a terminal (no rich, textual or typer: the TUI and the
CLI both use it, and the TUI starts without typer)."""

from __future__ import annotations

from collections.abc import Sequence

# Bidirectional embeddings, overrides and isolates, and the Arabic letter mark: they make code read otherwise than
# it runs ("Trojan Source").
BIDI_CONTROLS = frozenset([*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x061C, 0x200E, 0x200F])
# Characters a terminal draws as nothing (or as a line break): a candidate could hide `"admin\u200b"` or a soft
# hyphen in a name, or a forged line behind U+2028. Tag characters (U+E0000-E007F) carry invisible text.
_INVISIBLE = [
    0x00AD,
    0x034F,
    0x115F,
    0x1160,
    0x17B4,
    0x17B5,
    0x180E,
    *range(0x200B, 0x200E),
    0x2028,
    0x2029,
    *range(0x2060, 0x2066),
    0x3164,
    *range(0xFE00, 0xFE10),
    0xFEFF,
    0xFFA0,
    *range(0xFFF9, 0xFFFC),
    *range(0xE0000, 0xE0080),
    *range(0xD800, 0xE000),  # lone surrogates: a file name that is not UTF-8 (they would not even encode)
]
# C0 controls but tab and newline (rich drops BEL, BS, VT, FF and CR silently: `"admin\b"` showed as `"admin"`
# while --apply wrote the backspace), DEL, C1, the bidi controls and the invisible characters: shown as `\u0008`,
# never sent (a repo's docstring or a candidate could otherwise retitle the terminal, hide text or, on some
# terminals, answer back as if typed). JSON reads `\u0008` as the same character, so `--json` keeps its meaning.
_CONTROLS = {
    code: f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
    for code in [*range(0x20), 0x7F, *range(0x80, 0xA0), *BIDI_CONTROLS, *_INVISIBLE]
    if chr(code) not in "\t\n"
}
_ONE_LINE = {**_CONTROLS, ord("\t"): "\\t", ord("\n"): "\\n"}


def printable(text: str) -> str:
    """`text` with every terminal control and invisible character (but tab and newline) written out as `\\uXXXX`."""
    return text.translate(_CONTROLS)


def one_line(text: str) -> str:
    """:func:`printable`, with tabs and newlines written out too: for a file name or other text shown in a list, where
    a newline would start a line the repository wrote."""
    return text.translate(_ONE_LINE)


def bidi_controls(text: str) -> list[str]:
    """The bidirectional controls in `text`, each written out once (`\\u202e`), in order of first appearance."""
    return list(dict.fromkeys(_CONTROLS[ord(char)] for char in text if ord(char) in BIDI_CONTROLS))


def bidi_warning(text: str) -> str | None:
    """A one-line warning when `text` (a candidate's code) holds bidirectional controls, else None."""
    found = bidi_controls(text)
    if not found:
        return None
    return (
        f"this candidate holds bidirectional control characters ({', '.join(found)}, shown written out): "
        "its code may run otherwise than an editor shows it; read it before applying"
    )


def demotions(undefined: Sequence[str], dropped: Sequence[str]) -> list[str]:
    """Why a candidate ranks below the others whatever its scores, one line each, as every door says it: the names
    its edit reads that nothing defines, and what it also wrote that its edit leaves out ("rewrites f()" said as
    "rewrote f()")."""
    lines = []
    if undefined:
        lines.append(
            f"{reads_undefined(undefined)} ({undefined_error(undefined)} when it runs): ranked below the others"
        )
    if dropped:
        also = ", ".join(_past(what) for what in dropped)
        lines.append(
            f"also {also}: left out of its edit, and ranked below the candidates that only wrote what was asked"
        )
    return lines


def reads_undefined(names: Sequence[str]) -> str:
    """ "reads `x`, `y`, defined nowhere in the file": how every door names what a candidate reads that nothing
    defines ("" for none)."""
    return f"reads {', '.join(f'`{name}`' for name in names)}, defined nowhere in the file" if names else ""


def undefined_error(names: Sequence[str]) -> str:
    """What reading them raises: "a NameError" for a bare name, "an AttributeError" for `self.x`, or both."""
    kinds = {"." in name for name in names}
    return " or ".join(
        error for dotted, error in ((False, "a NameError"), (True, "an AttributeError")) if dotted in kinds
    )


def _past(dropped: str) -> str:
    """What a candidate also wrote, as the output says it: "rewrites f()" → "rewrote f()", "adds g()" → "wrote g()"."""
    for present, past in (("rewrites ", "rewrote "), ("adds ", "wrote ")):
        if dropped.startswith(present):
            return past + dropped[len(present) :]
    return dropped


def counted(number: int, noun: str) -> str:
    """`number` and `noun`, plural unless one: "1 file", "2 files" (the nouns these messages count take an s)."""
    return f"{number} {noun}{'' if number == 1 else 's'}"
