"""Pass@1 after ranking as the number of samples grows: every ranker at n = 5, 10, ... on the same tasks.

Reads what the measurements already hold (it ranks nothing): the `assist eval discriminator` results, which carry,
for each `eval codegen` run it was given (`--candidates`), every recorded ranker's and each Condor variant's pick
per task, and optionally the learned combination's rows (`benchmarks/ranker_combination.py --json`). Runs of one
dataset at different n (an -n 10 run extending an -n 5 one, `eval codegen --extend`) become the columns. Prints
one markdown table per dataset (pass@1 with its 95% interval, the paired difference against the first sample,
and the share of the first-to-oracle gap closed) and, with --chart, draws pass@1 against n. `--versus RANKER` pairs
the difference against another ranker instead (e.g. `agree+logprob`, what `auto` ranks with when no test runs).
It asserts nothing. From the repo root:

    .venv/bin/python benchmarks/ranker_combination.py --train results/codegen-mbpp-train-n5-ov-seed0 \\
        --test results/codegen-{mbpp-test,humaneval}-all-n{5,10}-ov-seed0 --json > /tmp/combination.json
    .venv/bin/python benchmarks/rankers_by_n.py results/discriminator-mbpp-ov-seed0 \\
        --combination /tmp/combination.json --chart docs/rankers-by-n.png
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

from assistant.evaluate.discriminator import BASELINES, gap_closed, ranker_label
from assistant.evaluate.metrics import interval_cell, paired_difference


def read_results(folder: Path) -> dict:
    """The folder's `results.json`, or the `results.json.gz` that results/ keeps in git."""
    plain = folder / "results.json"
    if plain.exists():
        return json.loads(plain.read_text(encoding="utf-8"))
    return json.loads(gzip.decompress((folder / "results.json.gz").read_bytes()).decode("utf-8"))


def _runs(folder: Path, combination: dict | None) -> dict[str, dict[int, dict[str, dict]]]:
    """run (dataset, split, model, strategy) → n → ranker → {"pass@1": interval, "passed": task → 0/1 (where
    known), "gap": share}."""
    results = read_results(folder)
    found: dict[str, dict[int, dict[str, dict]]] = {}
    for run, base in results.get("baselines", {}).items():
        # A run is named after its folder, "folder (strategy)" when it held several; the codegen folders sit
        # beside the discriminator's, as `assist eval` writes them.
        name, _, strategy = run.partition(" (")
        config = json.loads((folder.parent / name / "config.json").read_text(encoding="utf-8"))
        label = " ".join(
            part
            for part in (
                config["dataset"],
                config.get("split") if config["dataset"] == "mbpp" else "",
                config.get("model") or "",
                strategy.rstrip(")"),
            )
            if part
        )
        if int(config["n"]) in found.get(label, {}):
            raise SystemExit(f"two runs of {label} at n={config['n']}: give the discriminator one of them")
        rows = {name: row for name, row in base.items() if name != "tasks" and isinstance(row, dict)}
        for variant, entry in results["variants"].items():
            if run in entry["ranking"]:
                rows[f"condor: {variant}"] = entry["ranking"][run]
        for path, combined in (combination or {}).get("test", {}).items():
            for row in combined if Path(path).name == run else []:
                if row["ranker"] == "combination":
                    rows["learned combination"] = {
                        "pass@1": row["pass@1"],
                        "gap": row["gap_closed"],
                        "versus": row["vs_first"],
                    }
        found.setdefault(label, {})[int(config["n"])] = rows
    return found


def _order(names: set[str]) -> list[str]:
    known = [b for b in BASELINES if b != "oracle" and b in names]
    others = sorted(n for n in names if n not in BASELINES)
    return [*known, *others, *(["oracle"] if "oracle" in names else [])]


def table(dataset: str, by_n: dict[int, dict[str, dict]], versus: str = "first") -> str:
    """One markdown table: a row per ranker, a column group per n; the middle column is the paired difference
    against `versus` (by task, 95% bootstrap)."""
    sizes = sorted(by_n)
    names = _order(set().union(*(set(rows) for rows in by_n.values())))
    head = "| ranker | " + " | ".join(f"n={n} pass@1 | vs {versus} | gap closed" for n in sizes) + " |"
    lines = [f"{dataset}", "", head, "|---|" + "---|---|---|" * len(sizes)]
    for name in names:
        # A ranker scored on part of the tasks says so (its pass@1 and gap are over those tasks).
        labels = [
            ranker_label(name, by_n[n][name], len(by_n[n]["first"].get("passed", ()))) for n in sizes if name in by_n[n]
        ]
        cells = [labels[0] if labels else name]
        for n in sizes:
            rows = by_n[n]
            row, first, oracle, other = rows.get(name), rows["first"], rows["oracle"], rows.get(versus)
            if row is None:
                cells += ["", "", ""]
                continue
            # A learned combination's row carries its difference against the first sample only.
            difference = row.get("versus") if versus == "first" else None
            if name != versus and other is not None and "passed" in row and "passed" in other:
                difference = paired_difference(row["passed"], other["passed"])
            gap = row.get("gap", gap_closed(row, first, oracle))
            cells += [
                interval_cell(row["pass@1"]),
                interval_cell(difference, signed=True) if difference else "",
                f"{gap:.0%}" if gap is not None and name != "first" else "",
            ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def chart(found: dict[str, dict[int, dict[str, dict]]], path: Path) -> None:
    """pass@1 against n, one panel per dataset, one line per ranker."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(found), figsize=(6 * len(found), 4.5), squeeze=False)
    for axis, (dataset, by_n) in zip(axes[0], sorted(found.items()), strict=True):
        sizes = sorted(by_n)
        for name in _order(set().union(*(set(rows) for rows in by_n.values()))):
            values = [100 * by_n[n][name]["pass@1"][0] if name in by_n[n] else None for n in sizes]
            # The two bounds, first sample and oracle, as dashed grey and black; the rankers in colour between.
            bound = {"first": "0.55", "oracle": "black"}.get(name)
            axis.plot(sizes, values, "--" if bound else "-", color=bound, marker="o", label=name)
        axis.set(title=dataset, xlabel="samples per task (n)", ylabel="pass@1 after ranking (%)", xticks=sizes)
        axis.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("discriminator", type=Path, help="an `assist eval discriminator` results folder")
    parser.add_argument("--combination", type=Path, help="`benchmarks/ranker_combination.py --json` output")
    parser.add_argument("--chart", type=Path, help="write pass@1 against n here (PNG)")
    parser.add_argument("--versus", default="first", help="pair the differences against this ranker (default: first)")
    args = parser.parse_args()
    combination = json.loads(args.combination.read_text(encoding="utf-8")) if args.combination else None
    found = _runs(args.discriminator, combination)
    known = {name for by_n in found.values() for rows in by_n.values() for name in rows}
    if args.versus not in known:
        raise SystemExit(f"--versus {args.versus}: no such ranker here; choose one of: {', '.join(_order(known))}")
    print("\n\n".join(table(dataset, by_n, args.versus) for dataset, by_n in sorted(found.items())))
    if args.chart:
        chart(found, args.chart)
        print(f"\nchart: {args.chart}")


if __name__ == "__main__":
    main()
