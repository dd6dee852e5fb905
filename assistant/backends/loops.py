"""Stragglers: a sample going round in a loop, or running far past the other samples of its prompt.

One looping sample holds a whole request until it reaches the token limit (a 1.5B stub request took 409 s with
one of five samples writing `[tuple(map(lambda i: i, range(r - 1, k, -1)))][0] + ...` with `k` counting up,
while the four others had finished). The engines ask :class:`RowWatch` after each step whether to end a row early;
an ended row is reported as cut off (`Completion.cut_reason`), and the rest of the request goes on without it.

A loop rarely repeats itself word for word: a counter or a name changes in every round. So the text is read as a
sequence of shapes (every name one symbol, every number another, every string a third; keywords, operators and
line ends as themselves), and a loop is the recent text being one period of shapes repeated: at least
`LOOP_REPEATS` rounds covering at least `LOOP_SPAN` shapes. Ordinary code does repeat shapes (a run of
`self.x = x` lines), but not for that long: tests/test_loops.py runs the check over every prefix of every
function body of the standard library's `ast.py`, `argparse.py` and `typing.py`.
"""

from __future__ import annotations

import keyword
import re
import statistics
from collections.abc import Callable, Sequence

# Shapes the repeated period must cover, and rounds it must make. The looping 1.5B sample makes ~27 shapes a round,
# so it is caught after ~8 rounds (~220 tokens). Over the 6,048 function bodies of the standard library's top-level
# modules, checked at every line end, the longest repeated run is 185 shapes (random._test's 15 alike calls).
LOOP_SPAN = 200
LOOP_REPEATS = 4
# The longest period looked for, in shapes (a round of a loop that long is a loop over whole statements).
LOOP_PERIOD = 160
# Characters of the sample's end that are read: enough for LOOP_SPAN shapes (a shape is ~2-4 characters).
LOOP_WINDOW = 1600
# Tokens between two checks of one row (a check decodes and scans the row's end: cheap, but not free per step).
CHECK_EVERY = 16
# A row runs far past the others when most rows of its prompt have ended and it is longer than PAST_FACTOR times
# their median length, and at least PAST_FLOOR tokens (a short median must not cut a body of ordinary length).
PAST_FACTOR = 3.0
PAST_FLOOR = 256

LOOPING = "looping"
RAN_PAST = "ran past the others"

_SHAPES = re.compile(
    r"""(?P<string>[rbfuRBFU]{0,2}(?:'[^'\n]*'|"[^"\n]*"))"""
    r"|(?P<number>\d[\d_]*(?:\.\d*)?(?:[eE][+-]?\d+)?[jJ]?|\.\d+)"
    r"|(?P<name>[^\W\d]\w*)"
    r"|(?P<newline>\n)"
    r"|(?P<other>\S)"
)
_KEYWORDS = frozenset(keyword.kwlist) | frozenset(keyword.softkwlist)


def shapes(text: str) -> list[str]:
    """The text as shapes: every name `n`, every number `0`, every one-line string `s`; keywords, line ends and
    other characters as themselves (indentation and spaces are left out)."""
    found = []
    for match in _SHAPES.finditer(text):
        kind = match.lastgroup
        value = match.group()
        if kind == "name":
            found.append(value if value in _KEYWORDS else "n")
        elif kind == "number":
            found.append("0")
        elif kind == "string":
            found.append("s")
        else:
            found.append(value)
    return found


def repeating_period(items: Sequence[str], span: int = LOOP_SPAN, repeats: int = LOOP_REPEATS) -> int | None:
    """The period of the loop that `items` ends in (the last `span` or more items being one period repeated at
    least `repeats` times), or None."""
    count = len(items)
    for period in range(1, min(LOOP_PERIOD, count // repeats) + 1):
        run = 0  # items from the end that equal the one a period before them
        while run < count - period and items[count - 1 - run] == items[count - 1 - run - period]:
            run += 1
        covered = run + period
        if covered >= span and covered >= repeats * period:
            return period
    return None


def is_looping(text: str) -> bool:
    """Whether the text ends going round in a loop of shapes (see the module's docstring)."""
    return repeating_period(shapes(text[-LOOP_WINDOW:])) is not None


def ran_past(length: int, finished: Sequence[int], rows: int) -> bool:
    """Whether a running row of `length` tokens runs far past the others: more than half of the prompt's `rows`
    have finished (their lengths `finished`), and it is over PAST_FACTOR times their median and PAST_FLOOR."""
    if 2 * len(finished) <= rows or not finished:
        return False
    return length > max(PAST_FLOOR, PAST_FACTOR * statistics.median(finished))


class RowWatch:
    """Decides, step by step, which running rows of one prompt's samples to end early, and why.

    `decode` turns a row's token ids into text (the engine's tokenizer); rows are told by their position."""

    def __init__(self, rows: int, decode: Callable[[Sequence[int]], str]) -> None:
        self.rows = rows
        self.decode = decode
        self.finished: dict[int, int] = {}  # row -> its length, for rows that ended on their own
        self.cut: dict[int, str] = {}  # row -> why it was ended
        self._checked: dict[int, int] = {}  # row -> its length at its last loop check

    def finish(self, row: int, length: int) -> None:
        """A row ended on its own (an end token, a stop string or its limit) with `length` tokens."""
        if row not in self.cut:
            self.finished[row] = length

    def verdict(self, row: int, ids: Sequence[int]) -> str | None:
        """Why the running row with these token ids should end now (LOOPING, RAN_PAST), or None; a row given a
        reason is recorded in `cut`."""
        if row in self.cut or row in self.finished:
            return self.cut.get(row)
        reason = None
        if ran_past(len(ids), list(self.finished.values()), self.rows):
            reason = RAN_PAST
        elif len(ids) - self._checked.get(row, 0) >= CHECK_EVERY:
            self._checked[row] = len(ids)
            # The last tokens hold the window's characters (a token is at least one character).
            if is_looping(self.decode(ids[-LOOP_WINDOW:])):
                reason = LOOPING
        if reason is not None:
            self.cut[row] = reason
        return reason
