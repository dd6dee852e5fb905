"""Replay: one-sentence plain docstrings where most of the codebase's docstrings are one line (no model runs).

    python benchmarks/docstring_one_line.py [RUN_FOLDER] [--json]

Reads an `assist eval docstring` run's records (default: the 1.5B's, `results/docstring-stdlib-1.5b-s0`) and
applies the rule of `results/docstring-one-line-rule/plan.md` to each hypothesis: where the item's codebase (its
top-level standard-library module or package, as a repo is in the product) has at least 5 other docstrings and at
least half of them are one line, the docstring becomes its first sentence. Prints, per strategy, how many items the
rule touches and the paired difference (rule − as written) of sentence BLEU-4 and ROUGE-L with the eval's own
metrics and bootstrap (95%), over all items and over the touched ones.
"""

from __future__ import annotations

import argparse
import ast
import gzip
import inspect
import json
import re
from functools import cache
from pathlib import Path

from assistant.evaluate.docstring_eval import stdlib_dir
from assistant.evaluate.metrics import paired_difference
from assistant.evaluate.text_metrics import rouge_l, sentence_bleu

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "results" / "docstring-stdlib-1.5b-s0"
LEAST_DOCSTRINGS = 5
ONE_LINE_SHARE = 0.5


def first_sentence(text: str) -> str:
    """`text` up to its first full stop, exclamation or question mark followed by whitespace or the end."""
    found = re.search(r"[.!?](?=\s|$)", text)
    return text[: found.end()] if found else text


def _docstrings(file: Path) -> list[tuple[str, str]]:
    """(qualified name, docstring) of the module, classes and functions of `file` ("" names the module)."""
    try:
        tree = ast.parse(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return []
    found = [("", ast.get_docstring(tree) or "")]

    def walk(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = prefix + node.name
                found.append((name, ast.get_docstring(node) or ""))
                walk(node.body, name + ".")

    walk(tree.body, "")
    return [(name, doc) for name, doc in found if doc]


@cache
def _codebase(top: str) -> tuple[tuple[str, str, str], ...]:
    """(file relative to the standard library, qualified name, docstring) of every docstring under `top`."""
    root = stdlib_dir()
    path = root / top
    files = [path] if path.is_file() else sorted(path.rglob("*.py"))
    return tuple((str(f.relative_to(root)), name, doc) for f in files for name, doc in _docstrings(f))


def one_line_codebase(item: str) -> bool:
    """The rule's condition for an item ("path:qualname"): its codebase's other docstrings are at least
    LEAST_DOCSTRINGS and at least ONE_LINE_SHARE of them one line."""
    path, name = item.split(":", 1)
    others = [doc for file, qualname, doc in _codebase(path.split("/")[0]) if (file, qualname) != (path, name)]
    one_line = sum("\n" not in inspect.cleandoc(doc) for doc in others)
    return len(others) >= LEAST_DOCSTRINGS and one_line >= ONE_LINE_SHARE * len(others)


def _paired(scores: dict[str, tuple[float, float]], keep: set[str] | None) -> tuple[float, float, float] | None:
    """(mean, low, high) of rule − as written over the items in `keep` (all for None)."""
    chosen = {item: pair for item, pair in scores.items() if keep is None or item in keep}
    return paired_difference({i: p[0] for i, p in chosen.items()}, {i: p[1] for i, p in chosen.items()})


def replay(records: list[dict]) -> list[dict]:
    """Per strategy: items, items touched, and the paired differences over all and over the touched."""
    rows = []
    for strategy in dict.fromkeys(r["strategy"] for r in records):
        mine = [r for r in records if r["strategy"] == strategy]
        bleu: dict[str, tuple[float, float]] = {}  # item -> (with the rule, as written)
        rouge: dict[str, tuple[float, float]] = {}
        touched = set()
        for r in mine:
            written, reference = r["hypothesis"], r["reference"]
            ruled = first_sentence(written) if one_line_codebase(r["item"]) else written
            if ruled != written:
                touched.add(r["item"])
            bleu[r["item"]] = (sentence_bleu(ruled, reference), sentence_bleu(written, reference))
            rouge[r["item"]] = (rouge_l(ruled, reference), rouge_l(written, reference))
        rows.append(
            {
                "strategy": strategy,
                "items": len(mine),
                "touched": len(touched),
                "sentence_bleu4_all": _paired(bleu, None),
                "rouge_l_all": _paired(rouge, None),
                "sentence_bleu4_touched": _paired(bleu, touched),
                "rouge_l_touched": _paired(rouge, touched),
            }
        )
    return rows


def _cell(value: tuple[float, float, float] | None) -> str:
    return "" if value is None else f"{100 * value[0]:+.2f} [{100 * value[1]:+.2f}, {100 * value[2]:+.2f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", nargs="?", type=Path, default=RUN, help="an `eval docstring` run folder")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args()
    with gzip.open(args.run / "docstring-records.jsonl.gz", "rt", encoding="utf-8") as lines:
        records = [json.loads(line) for line in lines]
    rows = replay(records)
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print("| strategy | items | touched | sentence BLEU-4, all | ROUGE-L, all | BLEU-4, touched | ROUGE-L, touched |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        cells = [
            _cell(row[key])
            for key in ("sentence_bleu4_all", "rouge_l_all", "sentence_bleu4_touched", "rouge_l_touched")
        ]
        print(f"| {row['strategy']} | {row['items']} | {row['touched']} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
