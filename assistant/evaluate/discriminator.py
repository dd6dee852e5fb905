"""`assist eval discriminator`: Condor and its ablations, on held-out problems and on cached candidates.

1. Classification: every variant is trained on the same train problems and scored on the same held-out
   problems (precision / recall / F1 of "correct", on all held-out programs and on those in near-identical
   pairs). Variants that keep the contrastive stage share one stage-1 run.
2. Ranking: each variant scores the candidates cached by `assist eval codegen` runs (the SAME samples the
   first / random / logprob rankers were scored on) and its top pick's pass rate is reported beside
   theirs and the oracle's.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from assistant.cache import JsonlCache, cache_key
from assistant.datasets import read_run
from assistant.errors import UsageError
from assistant.evaluate.codegen import auto_pick
from assistant.evaluate.metrics import bootstrap_ci, interval_cell, paired_difference
from assistant.methods.artifacts import read_manifest, recorded_generator
from assistant.methods.condor.data import PROBLEM_CHARS, Dataset
from assistant.methods.condor.generator import GENERATOR
from assistant.methods.condor.model import (
    Condor,
    CondorConfig,
    _predict,
    evaluate_discriminator,
    make_manifest,
    planned_generator,
    shared_stage1,
    train_discriminator,
)
from assistant.paths import atomic_write_text
from assistant.progress import Progress

VARIANTS = {
    "condor": {"contrastive": True, "partial_fixes": True},
    "no-contrastive": {"contrastive": False, "partial_fixes": True},
    "no-partial-fixes": {"contrastive": True, "partial_fixes": False},
    "plain": {"contrastive": False, "partial_fixes": False},  # CodeRanker-style: a fine-tuned classifier
    # The local generator, frozen, and a head over its hidden states: each program is encoded once, so the head
    # gets more epochs than a fine-tuned encoder at next to no cost; no contrastive stage (it moves the backbone).
    "generator": {"backbone": "generator", "contrastive": False, "partial_fixes": True, "epochs": 20},
}


def parse_variants(spec: str) -> list[str]:
    names = [part.strip() for part in spec.split(",") if part.strip()]
    unknown = [n for n in names if n not in VARIANTS]
    if not names or unknown:
        raise UsageError(f"unknown variant {unknown[0] if unknown else ''!r}; choose from {', '.join(VARIANTS)}")
    return names


def load_candidates(folder: Path) -> tuple[dict, list[tuple[str, list[dict]]]]:
    """An `assist eval codegen` run to rank (any split but MBPP's train split, which is training data).

    Returns its config and one (name, records) per demonstration strategy, each in task order. A folder that
    holds one strategy keeps its own name; otherwise each is named "folder (strategy)". Pooling strategies
    would count a task once per strategy and mix samples drawn from different prompts.
    """
    config, records = read_run(folder)
    if config.get("dataset") == "mbpp" and config.get("split") == "train":
        raise UsageError(f"{folder} holds MBPP train candidates: those are training data, not an evaluation")
    by_strategy: dict[str, list[dict]] = {}
    for record in records:
        by_strategy.setdefault(record["strategy"], []).append(record)
    if len(by_strategy) == 1:
        return config, [(folder.name, _in_task_order(records))]
    return config, [(f"{folder.name} ({name})", _in_task_order(group)) for name, group in by_strategy.items()]


def _in_task_order(records: Sequence[dict]) -> list[dict]:
    """Records sorted by task, so a bootstrap interval does not depend on the order they were written in."""
    return sorted(records, key=lambda r: r["task_id"])


def run_discriminator_eval(
    data: Dataset,
    variants: Sequence[str],
    base: CondorConfig,
    candidate_runs: Sequence[tuple[str, list[dict], dict[str, str]]],
    out: Path,
    *,
    holdout: float = 0.2,
    progress: Progress | None = None,
) -> dict:
    """Train each variant on the train problems; classification scores on held-out ones; ranking on candidates.

    `candidate_runs` holds (name, codegen records, task_id → problem text). Results go to out/results.json.
    """
    report = progress or (lambda stage, done, total: None)
    out.mkdir(parents=True, exist_ok=True)
    train, held = data.split(holdout, base.seed)
    if not held.programs:
        raise UsageError("the held-out part is empty: use more problems or a larger holdout", setting="holdout:empty")
    results: dict = {"data": {"train": train.describe(), "held_out": held.describe()}, "variants": {}}
    stage1: dict | None = None
    # The generator backbone's features, kept on disk beside the models (keyed by model and precision): encoding
    # an evaluation's pairs takes hours with a large model, and a stopped run resumes from them.
    features = out / "models" / "generator-features"
    for name in variants:
        config = replace(base, **VARIANTS[name])
        directory = out / "models" / name
        identity = _identity(train, held, config)
        manifest = read_manifest(directory)
        if manifest is not None and _resumable(manifest, identity, config):
            # Trained by an earlier run on the same data and settings: resume instead of retraining.
            model = Condor.load(directory, features).model
            stats, scores = manifest["stats"], manifest["held_out"]
        else:
            if config.contrastive and stage1 is None:
                stage1 = _stage1(train, held, config, out / "models" / "stage1.pt", report)
            model, stats = train_discriminator(
                train,
                config,
                lambda s, d, t, name=name: report(f"{name}: {s}", d, t),
                start_from=stage1 if config.contrastive else None,
                features=features,
            )
            scores = evaluate_discriminator(model, held, config)
            (directory / "scores.jsonl").unlink(missing_ok=True)  # an earlier model's probabilities
            manifest = {**make_manifest(config, train, stats, scores, {"holdout": holdout}), "identity": identity}
            Condor(model, manifest).save(directory)
        entry = {"config": VARIANTS[name], "stats": stats, "held_out": scores}
        # Each candidate's probability is kept beside the model: a run over more samples scores only the new ones.
        cache = JsonlCache(directory / "scores.jsonl")
        entry["ranking"] = {
            run: _rank_candidates(model, records, texts, config, cache, identity)
            for run, records, texts in candidate_runs
        }
        results["variants"][name] = entry
        atomic_write_text(out / "results.json", json.dumps(results, indent=1))
    results["baselines"] = {run: _baseline_picks(records) for run, records, _ in candidate_runs}
    atomic_write_text(out / "results.json", json.dumps(results, indent=1))
    return results


def _resumable(manifest: dict | None, identity: str, config: CondorConfig) -> bool:
    """Whether a variant an earlier run saved is the one this run trains: the same data and settings, and for a
    head over the generator's hidden states, the same generator (its `generator` backbone names no model: the
    default one, which may have changed since)."""
    if manifest is None or manifest.get("identity") != identity:
        return False
    over_generator = config.backbone.partition(":")[0] == GENERATOR
    return not over_generator or recorded_generator(manifest) == planned_generator(config, {})


def _stage1(train: Dataset, held: Dataset, config: CondorConfig, path: Path, report: Progress) -> dict:
    """The shared stage 1, kept on disk so that a variant trained in a later run reuses it too."""
    import torch

    identity = _identity(train, held, replace(config, partial_fixes=True, epochs=0))  # what stage 1 depends on
    if path.exists():
        saved = torch.load(path, weights_only=True)
        if saved.get("identity") == identity:
            return saved
    stage1 = shared_stage1(train, config, lambda s, d, t: report(f"stage 1 (shared): {s}", d, t))
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    torch.save({**stage1, "identity": identity}, partial)
    partial.replace(path)
    return stage1


def _identity(train: Dataset, held: Dataset, config: CondorConfig) -> str:
    """What a trained variant depends on: its settings and the exact programs and pairs of the split."""
    digest = hashlib.sha256(json.dumps(asdict(config), sort_keys=True).encode())
    for part in (train, held):
        for program in sorted([*part.programs, *part.partials], key=lambda p: (p.problem, p.code)):
            digest.update(f"{program.problem}\x00{program.code}\x00{program.correct}\x01".encode())
        digest.update(str(len(part.pairs)).encode())
    return digest.hexdigest()[:16]


def _rank_candidates(
    model: Any,
    records: list[dict],
    texts: dict[str, str],
    config: CondorConfig,
    cache: JsonlCache | None = None,
    identity: str = "",
) -> dict:
    """Pass@1 of the variant's top pick among each task's parsed candidates (ties: sampling order), and whether
    it passed, by task (for paired differences). `cache` keeps each (problem, code)'s probability under the
    trained model's `identity`, so only candidates it has not scored are run through the model."""
    records = _in_task_order(records)
    jobs = []
    for r, record in enumerate(records):
        for s, sample in enumerate(record["samples"]):
            if sample["parsed"]:
                jobs.append((r, s, texts[record["task_id"]][:PROBLEM_CHARS], sample["code"]))
    keys = [cache_key(kind="condor", model=identity, problem=text, code=code) for _, _, text, code in jobs]
    todo = [i for i, key in enumerate(keys) if cache is None or key not in cache]
    fresh = _predict(model, [jobs[i][2:] for i in todo], config.max_length) if todo else []
    found = dict(zip(todo, (float(p) for p in fresh), strict=True))
    if cache is not None:
        for i, value in found.items():
            cache.put(keys[i], value)
    probabilities = [found[i] if i in found else cache.get(keys[i]) for i in range(len(jobs))]
    best: dict[int, tuple[float, int]] = {}
    for (r, s, _, _), p in zip(jobs, probabilities, strict=True):
        if r not in best or p > best[r][0]:
            best[r] = (float(p), s)
    values = [float(r in best and records[r]["samples"][best[r][1]]["passed"]) for r in range(len(records))]
    passed = {record["task_id"]: value for record, value in zip(records, values, strict=True)}
    return {"pass@1": bootstrap_ci(values), "tasks": len(records), "passed": passed}


# The rankers an `eval codegen` run may have scored its samples with (`--rankers`), in the table's order;
# agree+logprob is what `auto` does without tests, ordered from the recorded scores as `rank` orders them.
BASELINES = ("first", "random", "logprob", "reviewer", "coder-reviewer", "agree", "agree+logprob", "oracle")


def _baseline_picks(records: list[dict]) -> dict:
    """Pass@1 of the rankers the codegen run already scored on the same samples (those it has), with whether
    each pick passed, by task. A ranker the run scored on part of its tasks only (agree on a seeded subset) gets
    its row over those tasks, with their count as `tasks`."""
    records = _in_task_order(records)
    rows: dict = {}
    for ranker in BASELINES:
        if ranker == "logprob" and not any(s.get("logprob") is not None for r in records for s in r["samples"]):
            continue  # the server returned no log-probabilities: no such ranker on these samples
        if ranker == "agree+logprob":
            held = [r for r in records if "agree" in r.get("scores", {})]
            chosen = [auto_pick(r) for r in held]
        else:
            held = [r for r in records if ranker in r["picks"]]
            chosen = [r["picks"][ranker] for r in held]
        if not held:
            continue
        values = [float(c is not None and r["samples"][c]["passed"]) for r, c in zip(held, chosen, strict=True)]
        passed = {r["task_id"]: v for r, v in zip(held, values, strict=True)}
        rows[ranker] = {"pass@1": bootstrap_ci(values), "passed": passed}
        if len(held) < len(records):
            rows[ranker]["tasks"] = len(held)
    rows["tasks"] = len(records)
    return rows


def gap_closed(row: dict, first: dict, oracle: dict) -> float | None:
    """The share of the first-to-oracle gap a ranker's row closes, over the tasks it was scored on (all of the
    run's, or the subset a `tasks` count marks); None where there is no gap."""
    if "passed" in row and "passed" in first and "passed" in oracle:
        shared = [task for task in row["passed"] if task in first["passed"] and task in oracle["passed"]]
        gap = sum(oracle["passed"][t] - first["passed"][t] for t in shared)
        return sum(row["passed"][t] - first["passed"][t] for t in shared) / gap if gap > 0 else None
    gap = oracle["pass@1"][0] - first["pass@1"][0]
    return (row["pass@1"][0] - first["pass@1"][0]) / gap if gap > 0 else None


def ranker_label(name: str, row: dict, tasks: int) -> str:
    """A ranker's name in a table, with the share of the run's tasks it was scored on where that is not all."""
    return f"{name} (on {row['tasks']} of {tasks} tasks)" if row.get("tasks", tasks) < tasks else name


def discriminator_tables(results: dict) -> str:
    """Markdown: classification on held-out problems, then pass@1 after ranking per candidate run, each ranker
    paired with the first sample, and the share of the first-to-oracle gap it closes."""
    lines = [
        "| variant | held-out P | R | F1 | pairs P | R | F1 | train s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, entry in results["variants"].items():
        a, p = entry["held_out"]["all"], entry["held_out"]["pairs"]
        lines.append(
            f"| {name} | {a['precision']:.3f} | {a['recall']:.3f} | {a['f1']:.3f} | {p['precision']:.3f} | "
            f"{p['recall']:.3f} | {p['f1']:.3f} | {entry['stats']['seconds']:.0f} |"
        )
    for run, base in results.get("baselines", {}).items():
        lines += ["", f"Pass@1 after ranking the same candidates: {run} ({base['tasks']} tasks)", ""]
        lines += ["| ranker | pass@1 (95% CI) | vs first (paired) | share of the first→oracle gap closed |"]
        lines += ["|---|---|---|---|"]
        # Folders written before the per-task picks were kept hold a bare interval per ranker.
        entries = {r: v if isinstance(v, dict) else {"pass@1": v} for r, v in base.items() if r != "tasks" and v}
        rows = [(r, entries[r]) for r in BASELINES if r in entries and r != "oracle"]
        rows += [(f"condor: {name}", entry["ranking"][run]) for name, entry in results["variants"].items()]
        rows.append(("oracle (any correct)", entries["oracle"]))
        first, oracle = entries["first"], entries["oracle"]
        for name, row in rows:
            share = gap_closed(row, first, oracle)
            closed = f"{100 * share:+.0f}%" if share is not None else "n/a"
            versus = (
                paired_difference(row["passed"], first["passed"]) if "passed" in row and "passed" in first else None
            )
            cells = f"{interval_cell(row['pass@1'])} | {interval_cell(versus, signed=True)}"
            lines.append(f"| {ranker_label(name, row, base['tasks'])} | {cells} | {closed} |")
    return "\n".join(lines)
