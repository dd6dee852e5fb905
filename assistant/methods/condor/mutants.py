"""Near-identical variants of correct code: the small slips a discriminator must catch (Condor's data).

`mutants(code)` makes semantic mutants of known-correct code, each one realistic edit at one place:

| operator | example |
|---|---|
| `compare` | `<` ↔ `<=`, `>` ↔ `>=`, `==` ↔ `!=` |
| `boolop` | `and` ↔ `or` |
| `anyall` | `any(` ↔ `all(` |
| `not` | `not x` → `x` |
| `number` | an integer literal ±1 (`range(1, n)` → `range(2, n)`, `x[0]` → `x[1]`) |
| `range` | `range(..., stop)` → `range(..., stop + 1)` / `stop - 1` |
| `arith` | binary `+` ↔ `-`, `//` ↔ `/` |
| `variable` | one use of a local name replaced by another local of the same function |
| `return` | the `return` after a loop moved into the loop body (returns after the first iteration) |

plus `rename`, a meaning-preserving edit (one local variable renamed everywhere), which gives correct
variants near-identical to the original. Edits are made on the source text at token positions, so the
rest of the code (comments, spacing) is untouched and a pair differs only where the slip is.

`partial_fixes(wrong, right)` is Condor's intermediate data: the diff from wrong to right split into hunks
(a single hunk into its lines), applied one at a time; every version before the last is still wrong.
"""

from __future__ import annotations

import ast
import builtins
import difflib
import io
import itertools
import keyword
import random
import re
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass

from assistant.code.parse import parse_module

OPERATORS = ("compare", "boolop", "anyall", "not", "number", "range", "arith", "variable", "return")
PRESERVING = ("rename",)

_COMPARE = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "=="}
_ARITH = {"+": "-", "-": "+", "//": "/", "/": "//"}
_BINARY_LEFT = {tokenize.NAME, tokenize.NUMBER, tokenize.STRING}


@dataclass(frozen=True)
class Edit:
    """Replace source[start:end] (character offsets) with `text`."""

    start: int
    end: int
    text: str


@dataclass(frozen=True)
class Mutant:
    """A variant of the original code; `operator` names the edit(s), `line` the first line changed (1-based)."""

    code: str
    operator: str
    line: int
    preserving: bool = False  # True for rename: meant to behave like the original


def apply(code: str, edits: list[Edit]) -> str:
    """Apply non-overlapping edits (any order) to `code`."""
    for edit in sorted(edits, key=lambda e: e.start, reverse=True):
        code = code[: edit.start] + edit.text + code[edit.end :]
    return code


def _lines(code: str) -> list[str]:
    """Lines as tokenize and ast count them: split at "\n" only (`splitlines` also splits at form feeds)."""
    parts = code.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _line_starts(code: str) -> list[int]:
    starts = [0, 0]  # 1-based line numbers
    for line in _lines(code):
        starts.append(starts[-1] + len(line))
    return starts


def _tokens(code: str) -> list[tokenize.TokenInfo]:
    try:
        return list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return []


def _token_edits(code: str) -> Iterator[tuple[str, Edit]]:
    """Single-token edits: comparisons, boolean operators, any/all, not, integers, arithmetic."""
    starts = _line_starts(code)
    tokens = [t for t in _tokens(code) if t.type not in (tokenize.NL, tokenize.COMMENT)]

    def span(token: tokenize.TokenInfo) -> tuple[int, int]:
        return starts[token.start[0]] + token.start[1], starts[token.end[0]] + token.end[1]

    for i, token in enumerate(tokens):
        before = tokens[i - 1] if i else None
        after = tokens[i + 1] if i + 1 < len(tokens) else None
        start, end = span(token)
        if token.type == tokenize.OP and token.string in _COMPARE:
            yield "compare", Edit(start, end, _COMPARE[token.string])
        elif token.type == tokenize.NAME and token.string in ("and", "or"):
            yield "boolop", Edit(start, end, "or" if token.string == "and" else "and")
        elif token.type == tokenize.NAME and token.string in ("any", "all") and after and after.string == "(":
            if not (before and before.string in (".", "def")):
                yield "anyall", Edit(start, end, "all" if token.string == "any" else "any")
        elif token.type == tokenize.NAME and token.string == "not":
            # `not x` → `x`; `is not` and `not in` are comparisons, left to `compare`-like slips.
            if (before and before.string == "is") or after is None or after.string == "in":
                continue
            following = span(after)[0]
            yield "not", Edit(start, following, "")
        elif token.type == tokenize.NUMBER and re.fullmatch(r"\d{1,3}", token.string):
            value = int(token.string)
            yield "number", Edit(start, end, str(value + 1))
            if value > 0:
                yield "number", Edit(start, end, str(value - 1))
        elif (
            token.type == tokenize.OP
            and token.string in _ARITH
            # Binary only: the left neighbour must end an operand (a unary minus follows an operator or `(`).
            and before
            and (before.type in _BINARY_LEFT or before.string in (")", "]", "}"))
            # `return -1`, `not -x`, `in -y`: a keyword before the sign makes it unary (True/None are values).
            and not (keyword.iskeyword(before.string) and before.string not in ("True", "False", "None"))
        ):
            yield "arith", Edit(start, end, _ARITH[token.string])


def _offset(starts: list[int], lines: list[str], lineno: int, col: int) -> int:
    """Character offset of an AST position (AST columns are UTF-8 byte offsets)."""
    line = lines[lineno - 1] if lineno - 1 < len(lines) else ""
    return starts[lineno] + len(line.encode("utf-8")[:col].decode("utf-8", errors="ignore"))


def _local_names(function: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[set[str], set[str]]:
    """(parameters, assigned locals) of a function, not counting nested functions' own."""
    params = {a.arg for a in (*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs)}
    params |= {a.arg for a in (function.args.vararg, function.args.kwarg) if a is not None}
    assigned: set[str] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            assigned.add(node.id)
    return params, assigned - params


def _functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def _ast_edits(code: str, tree: ast.AST) -> Iterator[tuple[str, Site]]:
    """Edits that need the syntax tree: range stops, wrong variables, early returns, renames."""
    starts = _line_starts(code)
    lines = _lines(code)

    def where(node: ast.AST) -> tuple[int, int]:
        return (
            _offset(starts, lines, node.lineno, node.col_offset),
            _offset(starts, lines, node.end_lineno or node.lineno, node.end_col_offset or 0),
        )

    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "range"
            and 1 <= len(node.args) <= 3
        ):
            stop = node.args[0] if len(node.args) == 1 else node.args[1]
            if not isinstance(stop, ast.Constant):  # integer stops are the `number` operator's
                _, end = where(stop)
                yield "range", Edit(end, end, " + 1")
                yield "range", Edit(end, end, " - 1")
    # A renamed variable must not take a name the code already uses anywhere (a global, a builtin it calls).
    everywhere = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
    }
    for function in _functions(tree):
        params, assigned = _local_names(function)
        names = sorted(params | assigned)
        loads = [
            n
            for n in ast.walk(function)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in names and n.id not in keyword.kwlist
        ]
        for use in loads:
            for other in names:
                if other != use.id:
                    start, end = where(use)
                    yield "variable", Edit(start, end, other)
        for body in _bodies(function):
            for first, second in itertools.pairwise(body):
                if (
                    isinstance(first, ast.For | ast.While)
                    and isinstance(second, ast.Return)
                    and second.lineno == second.end_lineno
                    and first.body
                ):
                    inner = lines[first.body[-1].lineno - 1]
                    indent = inner[: len(inner) - len(inner.lstrip())]
                    line_start = starts[second.lineno]
                    old = lines[second.lineno - 1]
                    old_indent = old[: len(old) - len(old.lstrip())]
                    if len(indent) > len(old_indent):
                        yield "return", Edit(line_start, line_start + len(old_indent), indent)
        for name in sorted(assigned):
            if name.startswith("_"):
                continue
            new = _fresh_name(name, sorted(everywhere | set(names) | set(dir(builtins))))
            edits = [
                Edit(*where(n), new)
                for n in ast.walk(function)
                if isinstance(n, ast.Name) and n.id == name and n.end_col_offset is not None
            ]
            if edits and not _used_outside(tree, function, name):
                yield "rename", tuple(edits)  # every use of the name, changed together


def _bodies(function: ast.AST) -> Iterator[list[ast.stmt]]:
    for node in ast.walk(function):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                yield body


def _fresh_name(name: str, taken: list[str]) -> str:
    for candidate in (f"{name}_value", f"{name}2", f"the_{name}", f"{name}_"):
        if candidate not in taken:
            return candidate
    return f"{name}_{len(taken)}"


def _used_outside(tree: ast.AST, function: ast.AST, name: str) -> bool:
    """Whether `name` is declared global/nonlocal or used by a nested scope (a rename could change meaning)."""
    for node in ast.walk(function):
        if isinstance(node, ast.Global | ast.Nonlocal) and name in node.names:
            return True
        nested = node is not function and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        if nested and any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node)):
            return True
    return False


def _parse(code: str) -> ast.AST | None:
    try:
        return parse_module(code)
    except (SyntaxError, ValueError):
        return None


Site = Edit | tuple[Edit, ...]  # one edit, or several made together (a rename)


def _as_edits(site: Site) -> list[Edit]:
    return [site] if isinstance(site, Edit) else list(site)


def _start(site: Site) -> int:
    return min(e.start for e in _as_edits(site))


def _line_of(code: str, offset: int) -> int:
    return code.count("\n", 0, offset) + 1


def mutants(code: str, limit: int = 4, seed: int = 0, doubles: float = 0.25) -> list[Mutant]:
    """Up to `limit` distinct mutants of `code` that parse, plus up to one meaning-preserving rename.

    Sites are drawn at random (seeded) across operators so that one frequent operator does not crowd out
    the others. About `doubles` of them combine two slips on different lines (whose partial fixes are the
    single slips). Code that does not parse has no mutants.
    """
    tree = _parse(code)
    if tree is None or limit <= 0:
        return []
    rng = random.Random(f"{seed}:{code}")
    by_operator: dict[str, list[Site]] = {}
    for operator, edit in [*_token_edits(code), *_ast_edits(code, tree)]:
        by_operator.setdefault(operator, []).append(edit)
    seen = {code}
    found: list[Mutant] = []
    singles: list[tuple[str, Site]] = []
    operators = [op for op in OPERATORS if op in by_operator]
    attempts = 0
    while operators and len(singles) < limit and attempts < limit * 8:
        attempts += 1
        operator = rng.choice(operators)
        edit = rng.choice(by_operator[operator])
        variant = apply(code, _as_edits(edit))
        if variant in seen or _parse(variant) is None:
            continue
        seen.add(variant)
        singles.append((operator, edit))
    pairs = [
        (a, b)
        for i, a in enumerate(singles)
        for b in singles[i + 1 :]
        if _line_of(code, _start(a[1])) != _line_of(code, _start(b[1]))
    ]
    rng.shuffle(pairs)
    doubled: list[Mutant] = []
    for (op_a, a), (op_b, b) in pairs:
        if len(doubled) >= round(len(singles) * doubles):
            break
        variant = apply(code, [*_as_edits(a), *_as_edits(b)])
        if variant not in seen and _parse(variant) is not None:
            seen.add(variant)
            doubled.append(Mutant(variant, f"{op_a}+{op_b}", _line_of(code, min(_start(a), _start(b)))))
    # Doubles replace some singles (the total stays at `limit`); when none could be made, all singles stay.
    for operator, edit in singles[: len(singles) - len(doubled)]:
        found.append(Mutant(apply(code, _as_edits(edit)), operator, _line_of(code, _start(edit))))
    found.extend(doubled)
    for edit in by_operator.get("rename", [])[:1]:
        variant = apply(code, _as_edits(edit))
        if variant not in seen and _parse(variant) is not None:
            found.append(Mutant(variant, "rename", _line_of(code, _start(edit)), preserving=True))
    return found


def code_tokens(code: str) -> set[str]:
    """The set of lexical tokens of `code` (regex fallback when it does not tokenize)."""
    tokens = [t.string for t in _tokens(code) if t.string.strip() and t.type != tokenize.COMMENT]
    return set(tokens) if tokens else set(re.findall(r"\w+|[^\w\s]+", code))


def token_jaccard(a: str, b: str) -> float:
    """Jaccard similarity of the two programs' token sets (Condor keeps pairs above 0.9)."""
    left, right = code_tokens(a), code_tokens(b)
    if not left and not right:
        return 1.0
    return len(left & right) / len(left | right)


def partial_fixes(wrong: str, right: str) -> list[str]:
    """Intermediate versions on the way from `wrong` to `right` (Condor's data augmentation).

    The line diff is split into hunks, or, when there is a single hunk, into its single-line changes;
    applying the first j of m changes (j < m) gives m - 1 partial versions, each still containing a slip.
    Versions equal to either end, and versions that do not parse, are dropped.
    """
    old = wrong.splitlines(keepends=True)
    new = right.splitlines(keepends=True)
    hunks = [op for op in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes() if op[0] != "equal"]
    if len(hunks) == 1:
        _, i1, i2, j1, j2 = hunks[0]
        width = max(i2 - i1, j2 - j1)
        # One line-level change per row of the hunk: old line k becomes new line k (or is removed/added).
        changes = []
        for k in range(width):
            a = (i1 + k, i1 + k + 1) if i1 + k < i2 else (i2, i2)
            b = (j1 + k, j1 + k + 1) if j1 + k < j2 else (j2, j2)
            changes.append(("replace", *a, *b))
        hunks = changes
    versions = []
    for count in range(1, len(hunks)):
        applied = hunks[:count]
        lines: list[str] = []
        position = 0
        for _, i1, i2, j1, j2 in applied:
            lines.extend(old[position:i1])
            lines.extend(new[j1:j2])
            position = i2
        lines.extend(old[position:])
        version = "".join(lines)
        # A half-applied block can leave code that does not parse (an `if` with no body): not a useful negative.
        if version not in (wrong, right) and version not in versions and _parse(version) is not None:
            versions.append(version)
    return versions
