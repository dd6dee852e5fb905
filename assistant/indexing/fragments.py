"""20-line fragments of a file: the unit RepoEval and SelfRACG retrieve (code, not demonstrations).

Fragments are non-overlapping windows of `FRAGMENT_LINES` lines from a file's first line; a fragment of only
blank lines is skipped, and a window's text is cut at `MAX_FRAGMENT_CHARS`. Each is an :class:`Example` of kind
"fragment" whose code is the window's text, so it is indexed, saved and carried over by blob hash exactly as
functions are.
"""

from __future__ import annotations

from assistant.code.examples import Example

FRAGMENT_LINES = 20
# At most this many characters of a window are kept: 20 lines of a generated file (a protobuf module, a minified
# table) can hold hundreds of thousands, which would swamp BM25 and any prompt that shows the fragment.
MAX_FRAGMENT_CHARS = 4000


def split_fragments(text: str, path: str = "", blob: str = "", lines: int = FRAGMENT_LINES) -> list[Example]:
    """The file's `lines`-line windows, in file order (1-based, inclusive line spans)."""
    if lines < 1:
        raise ValueError("a fragment needs at least one line")
    all_lines = text.splitlines()
    fragments = []
    for start in range(0, len(all_lines), lines):
        window = all_lines[start : start + lines]
        if not any(line.strip() for line in window):
            continue
        fragments.append(
            Example(
                requirement="",
                code="\n".join(window)[:MAX_FRAGMENT_CHARS],
                name=f"{path}:{start + 1}",
                path=path,
                start_line=start + 1,
                end_line=start + len(window),
                blob=blob,
                kind="fragment",
            )
        )
    return fragments


def fragment_holding(fragments: list[Example], path: str, line: int) -> Example | None:
    """The fragment of `path` whose span holds `line`, if any."""
    for fragment in fragments:
        if fragment.path == path and fragment.start_line <= line <= fragment.end_line:
            return fragment
    return None
