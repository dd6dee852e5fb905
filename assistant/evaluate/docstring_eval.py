"""`assist eval docstring`: docstring generation measured on code no one here wrote, the Python standard library.

The library's top-level modules are split by a seeded shuffle into exemplar modules (the retrieval pool,
and JOINTCOM's training data) and held-out test modules; the split is written to the results folder. A
test item is a documented public function from a test module: the model sees its code with the
docstring removed, and the reference is the docstring's first paragraph (the summary, which is what the
plain style asks for). Outputs are cached per (model, strategy, item, exemplars), so a run resumes.
"""

from __future__ import annotations

import json
import random
import sysconfig
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assistant.backends import Backend
from assistant.cache import JsonlCache, cache_key
from assistant.code.docstrings import find_missing
from assistant.code.examples import Example
from assistant.code.extract import extract_python, first_paragraph
from assistant.core.docwriter import ExemplarIndex, build_docstring_prompt, split_docstring_safe, write_docstrings
from assistant.evaluate.metrics import interval_cell, paired_difference
from assistant.evaluate.text_metrics import rouge_l, score_all, sentence_bleu

# Not library code a user's repo resembles: tests, demos, GUI toolkits, vendored or generated code.
SKIPPED_MODULES = {
    "test", "idlelib", "tkinter", "turtledemo", "lib2to3", "ensurepip", "pydoc_data", "site-packages",
    "__pycache__", "encodings", "distutils", "config-3", "venv", "turtle.py", "this.py", "antigravity.py",
}  # fmt: skip
STRATEGIES = ("zero", "bm25", "dense", "jointcom")


@dataclass(frozen=True)
class Item:
    """One test function: its code without the docstring, and the reference summary."""

    item_id: str  # module path:qualname
    code: str
    reference: str


def stdlib_dir() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def split_modules(root: Path | None = None, test_share: float = 0.25, seed: int = 0) -> tuple[list[str], list[str]]:
    """(exemplar modules, test modules): top-level stdlib modules and packages, seeded shuffle."""
    root = root or stdlib_dir()
    names = sorted(
        p.name
        for p in root.iterdir()
        if p.name not in SKIPPED_MODULES
        and not p.name.startswith(("_", "config-"))
        and ((p.is_file() and p.suffix == ".py") or (p.is_dir() and (p / "__init__.py").exists()))
    )
    random.Random(seed).shuffle(names)
    cut = max(1, int(len(names) * test_share))
    return sorted(names[cut:]), sorted(names[:cut])


def _functions(root: Path, modules: Sequence[str]) -> list[Example]:
    found: list[Example] = []
    for module in modules:
        path = root / module
        files = [path] if path.is_file() else sorted(path.rglob("*.py"))
        for file in files:
            try:
                text = file.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            found.extend(extract_python(text, str(file.relative_to(root))))
    return found


def _usable(example: Example, max_lines: int) -> bool:
    leaf = example.name.rsplit(".", 1)[-1]
    code, doc = split_docstring_safe(example.code)
    summary = first_paragraph(doc) if doc else ""
    return (
        bool(summary)
        and not leaf.startswith("_")
        and len(code.splitlines()) <= max_lines
        and 3 <= len(summary.split()) <= 60
        and "test" not in example.path.split("/")[0]
    )


def load_docstring_task(
    limit: int | None = None, seed: int = 0, max_lines: int = 40, root: Path | None = None
) -> tuple[list[Example], list[Item], dict]:
    """The exemplar pool, the test items (seeded sample of `limit`) and a description of the split."""
    root = root or stdlib_dir()
    train_modules, test_modules = split_modules(root, seed=seed)
    pool = [e for e in _functions(root, train_modules) if _usable(e, max_lines)]
    items: list[Item] = []
    seen: set[str] = set()
    for example in _functions(root, test_modules):
        if not _usable(example, max_lines):
            continue
        code, doc = split_docstring_safe(example.code)
        if code in seen:
            continue
        seen.add(code)
        items.append(Item(f"{example.path}:{example.name}", code, first_paragraph(doc)))
    random.Random(seed).shuffle(items)
    chosen = items[:limit] if limit else items
    split = {
        "stdlib": str(root),
        "exemplar_modules": train_modules,
        "test_modules": test_modules,
        "pool_functions": len(pool),
        "test_functions_available": len(items),
        "test_functions_used": len(chosen),
    }
    return pool, chosen, split


def run_docstring_eval(
    items: Sequence[Item],
    exemplar_indexes: dict[str, ExemplarIndex | None],
    backend: Backend,
    out: Path,
    *,
    k: int = 1,
    progress: Callable[[str, int, int], None] | None = None,
) -> list[dict]:
    """Generate a plain docstring for each item under each strategy (cached), and return the records."""
    report = progress or (lambda stage, done, total: None)
    cache = JsonlCache(out / "docstrings.jsonl")
    records: list[dict] = []
    for strategy, index in exemplar_indexes.items():
        jobs = []
        for item in items:
            chosen = index.search(item.code, k) if index is not None and k > 0 else []
            # Everything that decides the docstring: who writes it (precision included), the prompt (the item's
            # code, the exemplars' code, the templates), and the strategy and item it is recorded under.
            target = find_missing(item.code)[0]
            prompt = build_docstring_prompt(target, chosen[::-1], "plain")
            key = cache_key(
                kind="docstring-eval",
                writer=backend.identity.label,
                prompt=prompt.to_json(),
                strategy=strategy,
                item=item.item_id,
                k=k,
            )
            jobs.append((item, chosen, key, target))
        # Cached items are reported at once, so a resumed run's rate and ETA count only new generations.
        done = sum(1 for *_, key, _ in jobs if key in cache)
        report(f"docstring {strategy}", done, len(jobs))
        for item, chosen, key, target in jobs:
            if key not in cache:
                written = write_docstrings([target], backend, style="plain", exemplars=_Fixed(chosen), k=k)
                cache.put(key, {"hypothesis": written.docstrings.get(target.key, "")})
                done += 1
                report(f"docstring {strategy}", done, len(jobs))
            records.append(
                {
                    "strategy": strategy,
                    "item": item.item_id,
                    "exemplars": [f"{e.path}:{e.name}" for e in chosen],
                    "reference": item.reference,
                    "hypothesis": cache.get(key)["hypothesis"],
                }
            )
    return records


def run_and_keep(
    items: Sequence[Item], indexes: dict[str, Any], backend: Backend, out: Path, k: int, config: dict
) -> list[dict]:
    """A study's docstring run, kept in `out` so `assist eval report` can re-score it: `config` (config.json), the
    generations (cached, resumable), and the records (docstring-records.jsonl); progress printed every 25 items.
    `indexes`: each arm's exemplar source (anything with `search(code, k)`)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps({"task": "docstring", **config}, indent=1) + "\n")

    def progress(stage: str, done: int, total: int) -> None:
        if done % 25 == 0 or done == total:
            print(f"{stage}: {done}/{total}", flush=True)

    records = run_docstring_eval(items, indexes, backend, out, k=k, progress=progress)
    (out / "docstring-records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return records


class _Fixed(ExemplarIndex):
    """The exemplars already chosen for an item (so the cache key and the prompt agree)."""

    def __init__(self, chosen: list[Example]) -> None:
        self.examples = chosen
        self.name = "fixed"

    def search(self, code: str, k: int, exclude: Callable[[Example], bool] | None = None) -> list[Example]:
        return self.examples[:k]


def summarize_docstrings(records: Sequence[dict]) -> list[dict]:
    """Per strategy: the four metrics (percentages) and how many items had an empty output."""
    rows = []
    for strategy in dict.fromkeys(r["strategy"] for r in records):
        mine = [r for r in records if r["strategy"] == strategy]
        scores = score_all([r["hypothesis"] for r in mine], [r["reference"] for r in mine])
        rows.append({"strategy": strategy, "n": len(mine), "empty": sum(not r["hypothesis"] for r in mine), **scores})
    return rows


def paired_rows(records: Sequence[dict], baseline: str = "dense") -> list[dict]:
    """Each other strategy against `baseline`, paired by function: the mean difference of sentence BLEU-4 and of
    ROUGE-L (percentage points) with a 95% bootstrap interval over the functions both hold. Pairing is what can
    tell two exemplar retrievers apart on 200 functions; corpus BLEU has no per-function value to pair. Empty
    where the baseline did not run."""
    scores: dict[str, dict[str, tuple[float, float]]] = {}
    for r in records:
        hypothesis, reference = r["hypothesis"], r["reference"]
        scores.setdefault(r["strategy"], {})[r["item"]] = (
            sentence_bleu(hypothesis, reference),
            rouge_l(hypothesis, reference),
        )
    base = scores.get(baseline)
    if base is None:
        return []
    rows = []
    for strategy, mine in scores.items():
        if strategy == baseline:
            continue
        bleu = paired_difference({i: s[0] for i, s in mine.items()}, {i: s[0] for i, s in base.items()})
        rouge = paired_difference({i: s[1] for i, s in mine.items()}, {i: s[1] for i, s in base.items()})
        rows.append({"strategy": strategy, "versus": baseline, "n": len(set(mine) & set(base)),
                     "sentence_bleu4": bleu, "rouge_l": rouge})  # fmt: skip
    return rows


def paired_table(rows: Sequence[dict]) -> str:
    """`paired_rows` as a Markdown table (points, 95% bootstrap intervals)."""
    if not rows:
        return ""
    lines = [
        f"| strategy | n | sentence BLEU-4 − {rows[0]['versus']} | ROUGE-L − {rows[0]['versus']} |",
        "|---|---|---|---|",
    ]
    for r in rows:
        bleu = interval_cell(r["sentence_bleu4"], digits=2, signed=True)
        lines.append(f"| {r['strategy']} | {r['n']} | {bleu} | {interval_cell(r['rouge_l'], digits=2, signed=True)} |")
    return "\n".join(lines)


def docstring_table(rows: Sequence[dict]) -> str:
    lines = [
        "| strategy | n | corpus BLEU-4 | sentence BLEU-4 | ROUGE-L | METEOR | empty |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['strategy']} | {r['n']} | {r['corpus_bleu4']:.2f} | {r['sentence_bleu4']:.2f} | "
            f"{r['rouge_l']:.2f} | {r['meteor']:.2f} | {r['empty']} |"
        )
    return "\n".join(lines)
