"""Reports: markdown tables (with 95% intervals) and one PNG bar chart per metric, from a results folder."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from assistant.cache import JsonlCache, jsonl_exists, read_jsonl_lines
from assistant.errors import UsageError
from assistant.evaluate.codegen import per_task_pass_at_k, ranker_columns, ranker_gains, summarize_codegen
from assistant.evaluate.likelihood import per_task_logprob, summarize_likelihood
from assistant.evaluate.metrics import interval_cell, paired_difference
from assistant.evaluate.strategies import in_strategy_order
from assistant.indexing.index import Index
from assistant.methods.artifacts import METHODS, artifact_identity
from assistant.paths import atomic_write_text

RESULTS_ENV = "ASSIST_RESULTS_DIR"


def results_dir() -> Path:
    """Where `assist eval` puts a run's folder when no `--out` is given: `$ASSIST_RESULTS_DIR`, else `results/`
    in the user's data folder (`~/.local/share/assist/results` on Linux; platformdirs' `user_data_dir`).

    Never the working folder: a run started from anywhere lands in one known place."""
    override = os.environ.get(RESULTS_ENV)
    if override:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_data_dir("assist")) / "results"


def codegen_table(rows: Sequence[dict], ks: Sequence[int]) -> str:
    """Pass@k per strategy, its paired pass@1 difference from zero-shot, then pass@1 after each ranker on the
    same samples (percent, 95% CI)."""
    columns = ranker_columns(rows, every=False)
    header = ["strategy", "tasks", *[f"pass@{k}" for k in ks], "pass@1 vs zero"]
    header += [f"top-1 by {r}" for r in columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = [row["strategy"], str(row["tasks"])]
        cells += [interval_cell(row[f"pass@{k}"]) if f"pass@{k}" in row else "" for k in ks]
        cells.append(interval_cell(row["vs_zero"]) if "vs_zero" in row else "")
        cells += [interval_cell(row[r]) if row.get(r) is not None else "n/a" for r in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def ranker_gains_table(rows: Sequence[dict]) -> str:
    """Each ranker's pick against the first sample, paired by task (points, 95% CI), and the share of the
    first-to-oracle gap it closes."""
    lines = ["| strategy | ranker | tasks | pass@1 − first | gap to oracle closed |", "|---|---|---|---|---|"]
    for row in rows:
        share = f"{100 * row['gap_closed']:.0f}%" if row["gap_closed"] is not None else "no gap"
        gain = interval_cell(row["vs_first"], signed=True)
        lines.append(f"| {row['strategy']} | {row['ranker']} | {row['tasks']} | {gain} | {share} |")
    return "\n".join(lines)


def usage_table(rows: Sequence[dict]) -> str:
    """Requests, tokens in and out, and backend wall time per strategy (empty when all came from the cache)."""
    spent = [r for r in rows if r.get("usage")]
    if not spent:
        return ""
    lines = ["| strategy | requests | prompt tokens | completion tokens | backend seconds |", "|---|---|---|---|---|"]
    for row in spent:
        u = row["usage"]
        lines.append(
            f"| {row['strategy']} | {u['requests']:g} | {u['prompt_tokens']:g} | {u['completion_tokens']:g} "
            f"| {u['seconds']:.1f} |"
        )
    return "\n".join(lines)


def likelihood_table(rows: Sequence[dict]) -> str:
    """Mean log-probability of the reference per strategy, and the paired gain over zero-shot (95% CI)."""
    lines = ["| strategy | tasks | mean log-prob of reference | gain vs zero-shot |", "|---|---|---|---|"]
    for row in rows:
        gain = interval_cell(row["gain_vs_zero"], 1, 4) if "gain_vs_zero" in row else ""
        lines.append(f"| {row['strategy']} | {row['tasks']} | {interval_cell(row['logprob'], 1, 4)} | {gain} |")
    return "\n".join(lines)


def versus_table(per_task: dict[str, dict[str, dict[str, float]]], versus: str, scale: float, digits: int) -> str:
    """Each strategy minus `versus`, paired over the tasks both ran (95% CI), one column per metric.

    `per_task` maps metric → strategy → task → value. Pairing asks "better than that strategy?" directly,
    on far fewer tasks than comparing two intervals would need."""
    metrics = list(per_task)
    strategies = in_strategy_order(s for values in per_task.values() for s in values)
    if versus not in strategies:
        raise UsageError(f"no strategy {versus!r} in this run; it holds {', '.join(strategies)}")
    lines = [
        "| strategy | tasks | " + " | ".join(f"{m} − {versus}" for m in metrics) + " |",
        "|" + "---|" * (len(metrics) + 2),
    ]
    for strategy in strategies:
        if strategy == versus:
            continue
        first = per_task[metrics[0]]
        shared = sum(1 for task in first.get(strategy, {}) if task in first[versus])
        cells = []
        for metric in metrics:
            difference = paired_difference(per_task[metric].get(strategy, {}), per_task[metric][versus])
            cells.append(interval_cell(difference, scale, digits) if difference is not None else "")
        lines.append(f"| {strategy} | {shared} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def bar_chart(
    path: Path, title: str, labels: Sequence[str], values: Sequence[tuple[float, float, float]], ylabel: str
) -> bool:
    """A bar chart with 95% interval whiskers; False when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    means = [v[0] for v in values]
    errors = [[v[0] - v[1] for v in values], [v[2] - v[0] for v in values]]
    figure, axes = plt.subplots(figsize=(max(4, 1.2 * len(labels) + 2), 3.5))
    axes.bar(labels, means, yerr=errors, capsize=4, color="#4C72B0")
    axes.set_title(title)
    axes.set_ylabel(ylabel)
    axes.tick_params(axis="x", rotation=20)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return True


RETRIEVERS_FILE = "retrievers.json"
REPO_STORES = ("function.jsonl", "line.jsonl", "line-retrieval.jsonl")  # what `eval repo` keeps


def retriever_identities(index: Index, strategies: Sequence[str], generator: str | None = None) -> dict[str, dict]:
    """strategy → identity of the trained artifact it would load now for `generator` (None: the unkeyed one), for
    the trained strategies given."""
    found = {name: artifact_identity(index, name, generator) for name in strategies if name in METHODS}
    return {name: identity for name, identity in found.items() if identity is not None}


def read_retrievers(out: Path) -> dict:
    """The folder's `retrievers.json`; empty when missing or unreadable (the next run writes it anew)."""
    try:
        known = json.loads((Path(out) / RETRIEVERS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return known if isinstance(known, dict) else {}


def record_retrievers(out: Path, identities: dict[str, dict], tasks: Sequence[str]) -> dict:
    """After a completed run, note in `retrievers.json` which trained artifact made each trained strategy's
    figures: its manifest, the sha256 of its weights, and the tasks it covered.

    A retrained retriever's records supersede the old ones only for the tasks a run covers, so an entry keeps
    the task ids: same weights as before add to them, new weights start them afresh. The report then says how
    many of the folder's tasks the named training made. Strategies this run did not use keep their entry."""
    known = read_retrievers(out)
    for name, identity in identities.items():
        covered = set(tasks)
        previous = known.get(name)
        if isinstance(previous, dict) and previous.get("weights_sha256") == identity["weights_sha256"]:
            covered |= set(previous.get("tasks", []))
        known[name] = identity | {"tasks": sorted(covered)}
    if known:
        atomic_write_text(Path(out) / RETRIEVERS_FILE, json.dumps(known, indent=1))
    return known


def retrievers_table(known: dict, held: dict[str, set[str]]) -> str:
    """One line per trained strategy: when and how it was trained, its weights' hashes, and how many of the
    folder's tasks (`held`: strategy → task ids with records) that training made."""
    lines = ["| strategy | tasks made by it | trained | settings | weights sha256 |", "|---|---|---|---|---|"]
    for name, identity in known.items():
        config = identity.get("config", {})
        if identity.get("method") == "lail":
            config = {"loss": "infonce", **config}  # artifacts trained before the option existed used InfoNCE
        settings = ", ".join(f"{k} {v}" for k, v in config.items() if k in ("candidates", "loss", "epochs"))
        labeler = identity.get("labeler", {})
        if labeler.get("model"):
            settings += f", labeler {labeler['model']}"
            if labeler.get("precision", "fp32") != "fp32":  # recorded since bf16 could label; fp32 before
                settings += f" in {labeler['precision']}"
        if str(identity.get("embedder", "")).startswith("openai:"):  # TST^R over an embeddings endpoint
            settings += f", embeddings {identity['embedder']}"
        shas = ", ".join(f"{path} {sha[:12]}" for path, sha in identity.get("weights_sha256", {}).items())
        mine = held.get(name, set())
        made = f"{len(mine & set(identity.get('tasks', [])))} of {len(mine)}"
        lines.append(f"| {name} | {made} | {identity.get('trained', '')} | {settings} | {shas} |")
    return "\n".join(lines)


def read_records(path: Path) -> list[dict] | None:
    """A results store's records (None when the folder has no such store)."""
    if not jsonl_exists(path):
        return None
    return [r for r in JsonlCache(path).entries.values() if isinstance(r, dict) and "strategy" in r]


def complete_tasks(records: Sequence[dict]) -> list[dict]:
    """The latest record of each (task, strategy), for the tasks that every strategy of the records ran (a run
    stopped in the middle of a task leaves it out, so every strategy is compared on the same tasks)."""
    latest = {(r["task_id"], r["strategy"]): r for r in records}
    strategies = {strategy for _, strategy in latest}
    ran: dict[str, set[str]] = {}
    for task, strategy in latest:
        ran.setdefault(task, set()).add(strategy)
    return [r for (task, _), r in latest.items() if ran[task] == strategies]


def _repo_sections(stores: dict[str, list[dict] | None], n: int) -> list[str]:
    """`eval repo`'s tables, rebuilt from its records (also from a run that was stopped)."""
    from assistant.evaluate.repo.run import (
        function_table,
        line_table,
        project_table,
        retrieval_table,
        summarize_functions,
        summarize_lines,
        summarize_retrieval,
    )

    sections = []
    functions = stores["function.jsonl"]
    if functions:
        kept = complete_tasks(functions)
        tasks = len({r["task_id"] for r in kept})
        rows = summarize_functions(kept, [k for k in (1, 5) if k <= n])
        sections += [f"## Function level: {tasks} tasks (percent, 95% bootstrap intervals; differences paired by "
                     "task)", "", function_table(rows), "", "pass@1 by project:", "", project_table(kept, "pass@1"),
                     ""]  # fmt: skip
    ranks = stores["line-retrieval.jsonl"]
    if ranks:
        kept = complete_tasks(ranks)
        tasks = len({r["task_id"] for r in kept})
        sections += [f"## Retrieval on the line tasks: {tasks} tasks (the fragment holding the hidden line; 0-1, 95% "
                     "bootstrap intervals)", "", retrieval_table(summarize_retrieval(kept)), ""]  # fmt: skip
    lines = stores["line.jsonl"]
    if lines:
        kept = complete_tasks(lines)
        tasks = len({r["task_id"] for r in kept})
        sections += [f"## Line level: {tasks} tasks (EM, ES in percent; R@k and MRR@10 of the fragment holding the "
                     "line)", "", line_table(summarize_lines(kept)), "", "ES by project:", "",
                     project_table(kept, "es"), ""]  # fmt: skip
    return sections


def _read_config(out: Path) -> dict:
    """A results folder's config.json, refused with one line when it is missing, unreadable or not an object."""
    config_path = out / "config.json"
    if not config_path.exists():
        raise UsageError(f"{out} is not an assist results folder (no config.json)")
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        reason = " ".join(str(exc).split())[:120]
        raise UsageError(f"{config_path} is unreadable ({reason}); restore it from git or the run's output") from None
    if not isinstance(config, dict):
        raise UsageError(f"{config_path} holds a {type(config).__name__}, not the run's settings (an object)")
    return config


def _codegen_sections(out: Path, records: list[dict], ks: list[int], versus: str | None) -> tuple[list[str], list[str]]:
    """The report's code generation sections, and the charts drawn for them in `out`."""
    rows = summarize_codegen(records, ks)
    sections = ["## Code generation (percent, 95% bootstrap interval over tasks)", "", codegen_table(rows, ks), ""]
    sections += [
        "## Rankers against the first sample, paired by task (points, 95% bootstrap interval)",
        "",
        ranker_gains_table(ranker_gains(records)),
        "",
    ]
    charts = []
    for k in ks:
        labels = [r["strategy"] for r in rows if f"pass@{k}" in r]
        if labels and bar_chart(
            out / f"pass_at_{k}.png",
            f"pass@{k}",
            labels,
            [r[f"pass@{k}"] for r in rows if f"pass@{k}" in r],
            "fraction of tasks",
        ):
            charts.append(f"pass_at_{k}.png")
    for ranker in ranker_columns(rows, every=False):
        available = [r for r in rows if r.get(ranker) is not None]
        if available and bar_chart(
            out / f"top1_{ranker}.png",
            f"pass@1 after ranking by {ranker}",
            [r["strategy"] for r in available],
            [r[ranker] for r in available],
            "fraction of tasks",
        ):
            charts.append(f"top1_{ranker}.png")
    if versus is not None:
        per_task = {f"pass@{k}": per_task_pass_at_k(records, k) for k in ks}
        sections += [
            f"## Against {versus}, paired by task (percentage points, 95% bootstrap interval)",
            "",
            versus_table(per_task, versus, 100.0, 1),
            "",
        ]
    usage = usage_table(rows)
    if usage:
        sections += ["## Backend usage (requests made in this run; cached samples cost nothing)", "", usage, ""]
    return sections, charts


def _likelihood_sections(out: Path, records: list[dict], versus: str | None) -> tuple[list[str], list[str]]:
    """The report's likelihood sections, and the chart drawn for them in `out`."""
    rows = summarize_likelihood(records)
    sections = [
        "## Likelihood of the reference solution (mean token log-prob, higher is better)",
        "",
        likelihood_table(rows),
        "",
    ]
    if versus is not None:
        sections += [
            f"## Against {versus}, paired by task (mean log-prob difference, 95% bootstrap interval)",
            "",
            versus_table({"log-prob": per_task_logprob(records)}, versus, 1.0, 4),
            "",
        ]
    charts = []
    if bar_chart(
        out / "likelihood.png",
        "mean log-prob of the reference",
        [r["strategy"] for r in rows],
        [r["logprob"] for r in rows],
        "mean token log-prob",
    ):
        charts.append("likelihood.png")
    return sections, charts


def _docstring_sections(records: list[dict], versus: str | None) -> list[str]:
    """A docstring run's metrics per strategy, and each strategy paired by function against `versus` (default:
    dense where it ran, else the first strategy), as `assist eval docstring` printed them."""
    from assistant.evaluate.docstring_eval import docstring_table, paired_rows, paired_table, summarize_docstrings

    strategies = list(dict.fromkeys(r["strategy"] for r in records))
    baseline = versus if versus in strategies else "dense" if "dense" in strategies else strategies[0]
    sections = ["## Docstrings", "", docstring_table(summarize_docstrings(records)), ""]
    paired = paired_rows(records, baseline=baseline)
    if paired:
        sections += ["Paired by function (95% bootstrap):", "", paired_table(paired), ""]
    return sections


def write_report(out: Path, versus: str | None = None) -> str:
    """Build report.md (and PNG charts) from what a results folder holds; returns the markdown.

    With `versus` (a strategy of the run), add tables of every strategy's paired difference from it. The choice
    is kept in config.json, so the report a later run rewrites keeps those tables; "none" forgets it."""
    out = Path(out)
    config_path = out / "config.json"
    config = _read_config(out)
    codegen_records = read_records(out / "records.jsonl")
    likelihood_records = read_records(out / "likelihood.jsonl")
    held: dict[str, set[str]] = {}  # strategy → the task ids the folder holds records for
    repo_stores = {name: read_records(out / name) for name in REPO_STORES}  # read once: `held` and the tables
    repo_records = [r for records in repo_stores.values() for r in records or []]
    for record in (codegen_records or []) + (likelihood_records or []) + repo_records:
        held.setdefault(record["strategy"], set()).add(record["task_id"])
    remembered = config.pop("versus", None)
    if versus is None:
        # A remembered strategy whose records are gone is dropped rather than failing every later run.
        versus = remembered if remembered in held else None
    elif versus == "none":
        versus = None
    if versus is not None:
        config["versus"] = versus
    sections = [f"# assist evaluation: {out.name}", "", "```", json.dumps(config, indent=1), "```", ""]
    known = read_retrievers(out)
    if known:
        sections += ["## Trained retrievers these figures come from", "", retrievers_table(known, held), ""]
    charts: list[str] = []
    if codegen_records is not None:
        more, drawn = _codegen_sections(out, codegen_records, config.get("ks", [1]), versus)
        sections += more
        charts += drawn
    if likelihood_records is not None:
        more, drawn = _likelihood_sections(out, likelihood_records, versus)
        sections += more
        charts += drawn
    sections += _repo_sections(repo_stores, config.get("n", 1))
    if jsonl_exists(out / "docstring-records.jsonl"):  # an `eval docstring` run (or a docstring benchmark's)
        sections += _docstring_sections(read_jsonl_lines(out / "docstring-records.jsonl"), versus)
    sections += [f"![{name}]({name})" for name in charts]
    text = "\n".join(sections) + "\n"
    atomic_write_text(out / "report.md", text)
    if versus != remembered:  # only once its tables were built: an unknown strategy raised above
        atomic_write_text(config_path, json.dumps(config, indent=1))
    return text
