"""The repo's own docstrings as exemplars where it is not indexed: exemplars from a project's other files against
the embedded default bank, for functions documented as if their file were new (no exemplar from it).

    .venv/bin/python benchmarks/docstring_repo_pool.py [--out results/docstring-repo-pool] [--per-project 50]
        [--k 2] [--model qwen2.5-coder-1.5b] [--projects click,jinja2,rich,requests]

Targets: documented public functions of real projects as installed here (their version is recorded), chosen as
`assist eval docstring` chooses them. Two arms, each k exemplars by code tokens (BM25), none from the target's own
file: `bank` from the embedded default bank (what a repo that was never indexed gets), and `repo` from the
documented functions of the project's other files. Prints both arms' metrics, the paired difference (repo − bank,
95% bootstrap) overall, per project, and without the targets where a chosen exemplar's summary is the reference
word for word. Cached and resumable (`docstrings.jsonl` in --out); `assist eval report OUT` re-scores the kept
`docstring-records.jsonl`. Plan: `results/docstring-repo-pool/plan.md`.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse
import importlib.metadata
import importlib.util
import random
from pathlib import Path

from assistant.backends import load_backend
from assistant.code.examples import Example, read_bank
from assistant.code.extract import extract_python, first_paragraph
from assistant.core.docwriter import ExemplarIndex, split_docstring_safe
from assistant.evaluate.docstring_eval import (
    Item,
    _usable,
    docstring_table,
    paired_rows,
    paired_table,
    run_and_keep,
    summarize_docstrings,
)
from assistant.indexing.sources import default_bank

OUT = Path(__file__).resolve().parent.parent / "results" / "docstring-repo-pool"
PROJECTS = "click,jinja2,rich,requests"


def project_functions(package: str) -> list[Example]:
    """Every function and method extracted from the package's `.py` files (paths relative to its folder's parent),
    test folders left out."""
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise SystemExit(f"{package} is not installed here")
    folder = Path(spec.origin).parent
    found: list[Example] = []
    for file in sorted(folder.rglob("*.py")):
        relative = file.relative_to(folder.parent)
        if any(part in ("tests", "test") for part in relative.parts):
            continue
        found.extend(extract_python(file.read_text(encoding="utf-8"), str(relative)))
    return found


def project_items(functions: list[Example], count: int, seed: int) -> list[tuple[Item, str]]:
    """`count` targets (seeded), each with its file: usable as `assist eval docstring` judges, distinct code."""
    items: list[tuple[Item, str]] = []
    seen: set[str] = set()
    for example in functions:
        if not _usable(example, 40):
            continue
        code, doc = split_docstring_safe(example.code)
        if code in seen:
            continue
        seen.add(code)
        items.append((Item(f"{example.path}:{example.name}", code, first_paragraph(doc)), example.path))
    random.Random(seed).shuffle(items)
    return items[:count]


class OtherFiles:
    """The repo arm: exemplars from the project's documented functions outside the target's file."""

    def __init__(self, functions: list[Example], owner: dict[str, str]) -> None:
        self.index = ExemplarIndex(functions)
        self.owner = owner  # an item's code → its file

    def search(self, code: str, k: int) -> list[Example]:
        path = self.owner[code]
        return self.index.search(code, k, lambda example: example.path == path)


class Bank:
    """The bank arm: the embedded default bank, whatever the target's file (none of its functions is in it)."""

    def __init__(self, index: ExemplarIndex) -> None:
        self.index = index

    def search(self, code: str, k: int) -> list[Example]:
        return self.index.search(code, k)


def copied(records: list[dict], summaries: dict[str, str]) -> set[str]:
    """Items where some arm's exemplar carries the reference's summary word for word."""
    found = set()
    for record in records:
        words = " ".join(record["reference"].split())
        if any(" ".join(summaries.get(name, "").split()) == words for name in record["exemplars"]):
            found.add(record["item"])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--per-project", type=int, default=50)
    parser.add_argument("--k", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--projects", default=PROJECTS)
    args = parser.parse_args()
    projects = args.projects.split(",")
    bank = Bank(ExemplarIndex(read_bank(default_bank())))
    items: list[Item] = []
    arms: dict[str, dict] = {"bank": {}, "repo": {}}
    summaries: dict[str, str] = {}
    for package in projects:
        functions = project_functions(package)
        chosen = project_items(functions, args.per_project, args.seed)
        items += [item for item, _ in chosen]
        arms["repo"][package] = OtherFiles(functions, {item.code: path for item, path in chosen})
        for example in functions:
            summaries[f"{example.path}:{example.name}"] = first_paragraph(split_docstring_safe(example.code)[1])
    repo = _ByProject(arms["repo"])
    backend = load_backend("local-ov", args.model)
    versions = {package: importlib.metadata.version(package) for package in projects}
    config = {"k": args.k, "seed": args.seed, "model": args.model, "strategies": ["bank", "repo"],
              "per_project": args.per_project, "projects": versions}  # fmt: skip
    records = run_and_keep(items, {"bank": bank, "repo": repo}, backend, args.out, args.k, config)
    named = ", ".join(f"{package} {version}" for package, version in versions.items())
    print(f"\n{len(items)} functions of {named}; k = {args.k}, {args.model}")
    print(docstring_table(summarize_docstrings(records)))
    print("\nPaired by function, repo − bank (95% bootstrap):\n")
    print(paired_table(paired_rows(records, baseline="bank")))
    for package in projects:
        mine = [r for r in records if r["item"].split("/", 1)[0] == package]
        print(f"\n{package}:\n" + paired_table(paired_rows(mine, baseline="bank")))
    same = copied(records, summaries)
    kept = [r for r in records if r["item"] not in same]
    print(f"\nWithout the {len(same)} targets where an exemplar's summary is the reference word for word:\n")
    print(paired_table(paired_rows(kept, baseline="bank")))


class _ByProject:
    """The repo arm over several projects: each target's exemplars from its own project."""

    def __init__(self, by_project: dict[str, OtherFiles]) -> None:
        self.by_project = by_project

    def search(self, code: str, k: int) -> list[Example]:
        for arm in self.by_project.values():
            if code in arm.owner:
                return arm.search(code, k)
        raise KeyError("a target of no project")


if __name__ == "__main__":
    main()
