"""`assist eval codegen`: sample n programs per task and strategy, run the tests in the sandbox, and score
pass@k plus every ranker's pick, all on the SAME cached samples.

The rankers are the ones `assist generate` ships: the same objects, built by the same registry
(:func:`assistant.pipeline.registry.make_rankers`), ranking each task's parsable samples. Each record stores
the picks it was scored with, and `assist eval report` reads them back (it ranks nothing), so a committed
figure reproduces from the committed records whatever the rankers do later. Records written before the
evaluation used the users' rankers (no `picks_by`) carry the harness's own first/random/logprob picks; a run
that resumes such a folder ranks those records again with the users' rankers (no sampling, no tests).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path
from typing import NamedTuple

from assistant import sandbox
from assistant.backends import Backend, Completion, SamplingParams
from assistant.backends.prompts import Prompt
from assistant.cache import JsonlCache, LayeredCache, cache_key, jsonl_exists, supersede
from assistant.code.examples import Example
from assistant.code.fences import extract_code
from assistant.code.parse import parse_module
from assistant.core.candidates import Candidate
from assistant.core.rank import Problem, Ranker, rank
from assistant.datasets import Task
from assistant.evaluate.metrics import bootstrap_ci, paired_difference, pass_at_k
from assistant.evaluate.strategies import Pool, in_strategy_order, make_strategy
from assistant.pipeline.registry import make_rankers
from assistant.progress import Progress

# The report's columns: the users' rankers, then the oracle (the first sample that passes: an upper bound).
RANKERS = ("first", "random", "logprob", "oracle")
USER_RANKERS = "first+random+logprob"  # a `--ranker` spec, built by the registry `assist generate` uses
# Rankers measured only when asked (`--rankers agree`): each costs model calls or sandbox runs per task. Their
# column appears when every record of a strategy has their pick.
EXTRA_RANKERS = ("agree", "reviewer", "coder-reviewer")
PICKS_BY = "rankers"  # marks a record whose picks the users' ranker objects made


def task_seed(seed: int, task_id: str) -> int:
    """One sampling seed per task, shared by all strategies (common random numbers lower the variance)."""
    return int(cache_key(seed=seed, task=task_id)[:8], 16)


# Samples are drawn, and cached, in blocks of this many: a run at -n 10 reuses the -n 5 run's samples as its
# first block and draws only the second (`eval codegen --extend`), so a ranker's pass@1 at n = 5 and 10 is
# measured on nested samples.
SAMPLE_BLOCK = 5


def sample_blocks(params: SamplingParams, seed: int, task_id: str) -> list[SamplingParams]:
    """The sampling calls for one task: `params.n` samples in blocks of SAMPLE_BLOCK (the last may be smaller),
    the first block seeded as a run of n <= SAMPLE_BLOCK always was (so its cache keys are unchanged), each
    later block with a seed of its own."""
    blocks = []
    for start in range(0, params.n, SAMPLE_BLOCK):
        block = start // SAMPLE_BLOCK
        blocks.append(
            SamplingParams(
                n=min(SAMPLE_BLOCK, params.n - start),
                temperature=params.temperature,
                top_p=params.top_p,
                max_new_tokens=params.max_new_tokens,
                seed=task_seed(seed, task_id if block == 0 else f"{task_id}#block{block}"),
            )
        )
    return blocks


def _parses(code: str) -> bool:
    try:
        parse_module(code)
        return True
    except (SyntaxError, ValueError):
        return False


def user_rankers(backend: Backend) -> list[Ranker]:
    """The ranker objects the evaluation measures: `assist generate --ranker first|random|logprob`'s own."""
    return make_rankers(USER_RANKERS, backend)


def sample_candidates(samples: Sequence[dict], prefix: str = "") -> list[Candidate]:
    """A record's parsable samples as candidates, in sampling order, each with `prefix` (the task's imports) before
    it; a sample's recorded mean log-probability stands for its token log-probabilities."""
    return [
        Candidate(
            code=(prefix + "\n" + sample["code"]) if prefix else sample["code"],
            sample=i,
            tokens=sample.get("tokens", 0),
            logprobs=(sample["logprob"],) if sample["logprob"] is not None else None,
        )
        for i, sample in enumerate(samples)
        if sample["parsed"]
    ]


def picks(
    samples: list[dict],
    problem: Problem,
    rankers: Sequence[Ranker],
    prefix: str = "",
    scores: dict[str, list[float | None]] | None = None,
) -> dict[str, int | None]:
    """Which sample each ranker chooses among those that parse (None when none parse), and the oracle's.

    Each ranker ranks the parsable samples as candidates, in sampling order, with `rank` (ties keep that order).
    A sample's recorded mean log-probability stands for its token log-probabilities (the logprob ranker takes
    their mean); without any (a server that does not return them) the logprob ranker has no pick. `prefix`
    (the task's imports) goes before each candidate, as when its tests run: a ranker that runs candidates
    (`agree`) needs it. `scores`, when given, receives each ranker's score of every sample (None where it did
    not score one), so rankers can be compared and combined per sample later.
    """
    names = [ranker.name for ranker in rankers]
    parsed = [i for i, s in enumerate(samples) if s["parsed"]]
    if scores is not None:
        scores.update({name: [None] * len(samples) for name in names})
    if not parsed:
        return dict.fromkeys([*names, "oracle"])
    candidates = sample_candidates(samples, prefix)
    chosen: dict[str, int | None] = {}
    for ranker in rankers:
        # The logprob ranker would score a candidate without log-probabilities with the model: not here.
        mine = [c for c in candidates if c.logprobs] if ranker.name == "logprob" else candidates
        ranked = rank(problem, mine, [ranker]) if mine else []
        chosen[ranker.name] = ranked[0].candidate.sample if ranked else None
        if scores is not None:
            for item in ranked:
                scores[ranker.name][item.candidate.sample] = item.scores[ranker.name].value
    correct = [i for i in parsed if samples[i]["passed"]]
    chosen["oracle"] = correct[0] if correct else parsed[0]
    return chosen


def _missing(record: dict, rankers: Sequence[Ranker]) -> list[Ranker]:
    """The rankers a cached record has no pick or no per-sample scores from (all of them for records picked
    before `picks_by`)."""
    if record.get("picks_by") != PICKS_BY:
        return list(rankers)
    have = record.get("scores", {})
    return [ranker for ranker in rankers if ranker.name not in record["picks"] or ranker.name not in have]


def completions_json(completions: Sequence[Completion]) -> list[dict]:
    """The samples as the caches keep them (`eval codegen`'s and `eval repo`'s): text, tokens, finish, logprobs."""
    return [
        {
            "text": c.text,
            "tokens": c.tokens,
            "finish": c.finish_reason,
            "logprobs": list(c.logprobs) if c.logprobs else None,
        }
        for c in completions
    ]


def _sample_group(backend: Backend, prompts: list, params: list[SamplingParams]) -> list[list]:
    """Samples for one prompt, or for several in one batched call (backends that batch prompts)."""
    if len(prompts) > 1:
        # Each task keeps its own seed: its samples do not depend on which tasks share the batch.
        return backend.sample_batch(prompts, params[0], seeds=[p.seed for p in params])
    return [backend.sample(prompts[0], params[0])]


class _Job(NamedTuple):
    """One (strategy, task) of a codegen run: its demonstrations and prompt, its sample blocks with their cache
    keys, and its record's key."""

    strategy: str
    task: Task
    chosen: list[Example]
    prompt: Prompt
    units: list[tuple[SamplingParams, str]]
    record_key: str


def _plan(
    tasks: Sequence[Task],
    pool: Pool,
    strategies: Sequence[str],
    backend: Backend,
    params: SamplingParams,
    demos: int,
    seed: int,
) -> list[_Job]:
    """Every job of the run, strategy by strategy, each with its prompt and the cache keys of its sample blocks."""
    jobs = []
    for strategy in strategies:
        select = make_strategy(strategy, pool, seed, backend.model)  # a trained retriever: the one for this model
        for task in tasks:
            chosen = select(task, demos)
            prompt = task.prompt(chosen)
            units = [
                (
                    block,
                    cache_key(
                        kind="sample",
                        backend=backend.identity.kind,  # `local`, `openai-chat`...: the strings committed caches hold
                        model=backend.model,
                        prompt=prompt.to_json(),
                        params=block.__dict__,
                    ),
                )
                for block in sample_blocks(params, seed, task.task_id)
            ]
            # One block keeps the key records had before samples came in blocks.
            samples_key = units[0][1] if len(units) == 1 else [key for _, key in units]
            record_key = cache_key(kind="record", sample=samples_key, task=task.task_id, strategy=strategy)
            jobs.append(_Job(strategy, task, chosen, prompt, units, record_key))
    return jobs


def _rescored(record: dict, missing: Sequence[Ranker], problem: Problem, task: Task) -> dict:
    """A cached record with the picks and scores of the rankers it lacks, from its recorded samples: no sampling
    and no tests."""
    rescored: dict[str, list[float | None]] = {}
    new = picks(record["samples"], problem, missing, task.prefix, rescored)
    return {
        **record,
        "picks": {**record.get("picks", {}), **new},
        "scores": {**record.get("scores", {}), **rescored},
        "picks_by": PICKS_BY,
    }


def _draw(
    backend: Backend,
    job: _Job,
    later: Sequence[_Job],
    records: JsonlCache,
    cache: JsonlCache | LayeredCache,
    batch: int,
    shares: dict[str, dict[str, float]],
) -> None:
    """Sample the job's uncached blocks into the cache, each call topped up with the uncached blocks of the `later`
    jobs that have no record yet, and note in `shares` each block's share of the usage of the call that drew it."""
    while missing := [(job.prompt, block, key) for block, key in job.units if key not in cache]:
        # Sample this task's missing blocks together with the next uncached ones (distinct keys, and the
        # same number of samples: one batched call draws n for every prompt).
        group = missing[:1]
        # Only a backend that batches prompts gains from grouping; for the others, one block at a time keeps
        # every finished block cached the moment it is done (a server that dies loses nothing).
        size = batch if backend.batches_prompts else 1
        waiting = [
            (other.prompt, block, key)
            for other in later
            if other.record_key not in records
            for block, key in other.units
        ]
        for unit in [*missing[1:], *waiting]:
            if len(group) >= max(1, size):
                break
            if unit[1].n == group[0][1].n and unit[2] not in cache and all(unit[2] != g[2] for g in group):
                group.append(unit)
        before = backend.usage.to_json()
        sampled = _sample_group(backend, [g[0] for g in group], [g[1] for g in group])
        spent = backend.usage.since(before)
        for _, _, group_key in group:  # each block's share, counted by the task it belongs to
            shares[group_key] = {name: value / len(group) for name, value in spent.items()}
        for (_, _, group_key), completions in zip(group, sampled, strict=True):
            cache.put(group_key, completions_json(completions))


def _tested_samples(job: _Job, cache: JsonlCache | LayeredCache, limits: sandbox.Limits) -> list[dict]:
    """The job's cached completions as samples: the code, whether it parses, its length and mean log-probability,
    and whether it passed the task's tests in the sandbox."""
    task = job.task
    samples = []
    for completion in [c for _, key in job.units for c in cache.get(key)]:
        code = extract_code(completion["text"])
        lp = completion["logprobs"]
        samples.append(
            {
                "code": code,
                "parsed": _parses(code),
                "tokens": completion["tokens"],
                "logprob": sum(lp) / len(lp) if lp else None,
            }
        )
    runs = sandbox.run_many(
        [((task.prefix + "\n" + s["code"]) if task.prefix else s["code"], task.tests, task.setup) for s in samples],
        limits=limits,
    )
    for sample, run in zip(samples, runs, strict=True):
        sample["passed"] = run.ok and sample["parsed"]
        sample["status"] = run.status
    return samples


def _new_record(
    job: _Job,
    problem: Problem,
    rankers: Sequence[Ranker],
    backend: Backend,
    samples: list[dict],
    usage: dict[str, float] | None,
) -> dict:
    """The job's record: its tested samples, each ranker's pick and scores, and the `usage` that drew them."""
    scores: dict[str, list[float | None]] = {}
    chosen_by = picks(samples, problem, rankers, job.task.prefix, scores)
    return {
        "task_id": job.task.task_id,
        "strategy": job.strategy,
        "demonstrations": [e.path or e.name for e in job.chosen],
        "prompt_tokens": backend.count_tokens(job.prompt),
        "n": len(samples),
        "correct": sum(s["passed"] for s in samples),
        "samples": samples,
        "picks": chosen_by,
        "scores": scores,  # each ranker's score of each sample (None: unparsable, or no log-probabilities)
        "picks_by": PICKS_BY,
        "usage": usage,  # the calls that drew its samples (its share of each batch); None when all were cached
    }


def run_codegen(
    tasks: Sequence[Task],
    pool: Pool,
    strategies: Sequence[str],
    backend: Backend,
    out: Path,
    *,
    params: SamplingParams,
    demos: int = 4,
    seed: int = 0,
    batch: int = 1,
    cache: JsonlCache | LayeredCache | None = None,
    limits: sandbox.Limits | None = None,
    rankers: Sequence[Ranker] | None = None,
    progress: Progress | None = None,
) -> list[dict]:
    """Run (or resume) a codegen evaluation; returns one record per (task, strategy), also in out/records.jsonl.

    `batch` tasks are sampled in one call when the backend can batch prompts (the local one can: on a CPU
    that is faster than one task at a time); the cache is written after every call. `rankers` are the
    first, random and logprob ranker objects to pick with (default: the registry's, as `assist generate` builds them).
    Samples are drawn and cached in blocks of SAMPLE_BLOCK (`sample_blocks`), so a `cache` that reads through to
    an earlier run at a smaller n (a LayeredCache) makes that run's samples the first of these.
    """
    report = progress or (lambda stage, done, total: None)
    out.mkdir(parents=True, exist_ok=True)
    cache = cache or JsonlCache(out / "samples.jsonl")
    records = JsonlCache(out / "records.jsonl")
    limits = limits or sandbox.Limits(timeout_s=10, cpu_s=10, memory_mb=1024)
    rankers = list(rankers) if rankers is not None else user_rankers(backend)
    jobs = _plan(tasks, pool, strategies, backend, params, demos, seed)
    # A strategy whose prompts changed since an earlier run into this folder (a retrained retriever) gets new
    # record keys: its old records must go, or the report would count each task twice.
    supersede(records, {(job.task.task_id, job.strategy): job.record_key for job in jobs})
    # Progress is per strategy, and a resumed strategy reports its cached tasks at once: the rate and ETA then
    # count only the tasks this run samples.
    per_strategy = {s: sum(1 for job in jobs if job.strategy == s) for s in strategies}
    # A cached record that lacks a ranker's pick (`--rankers agree` added later) counts once it is picked.
    done = [job for job in jobs if job.record_key in records and not _missing(records.get(job.record_key), rankers)]
    counted = {s: sum(1 for job in done if job.strategy == s) for s in strategies}
    reported: set[str] = set()
    results = []
    shares: dict[str, dict[str, float]] = {}  # block → its share of the batched call that drew it
    for position, job in enumerate(jobs, start=1):
        if job.strategy not in reported:
            reported.add(job.strategy)
            report(f"codegen {job.strategy}", counted[job.strategy], per_strategy[job.strategy])
        # The requirement without the tests: a ranker must not see the hidden tests (MBPP shows them in the prompt).
        problem = Problem(requirement=job.task.requirement, prompt=job.prompt, setup=job.task.setup)
        if job.record_key in records:
            record = records.get(job.record_key)
            missing = _missing(record, rankers)
            if not missing:
                results.append(record)
                continue
            # No sampling and no tests: only the missing rankers pick, from the recorded samples.
            record = _rescored(record, missing, problem, job.task)
        else:
            _draw(backend, job, jobs[position:], records, cache, batch, shares)
            spent = [shares.pop(key) for _, key in job.units if key in shares]
            record = _new_record(job, problem, rankers, backend, _tested_samples(job, cache, limits), _usage(spent))
        records.put(job.record_key, record)
        results.append(record)
        counted[job.strategy] += 1
        report(f"codegen {job.strategy}", counted[job.strategy], per_strategy[job.strategy])
    return results


def _usage(spent: list[dict[str, float]]) -> dict[str, float] | None:
    """A record's usage: the sum of its blocks' shares of the calls that drew them; None when all were cached."""
    return {name: round(sum(s[name] for s in spent), 3) for name in spent[0]} if spent else None


def recorded_reviews(folders: Sequence[Path], tasks: Sequence[Task], backend: Backend) -> dict[str, float]:
    """The reviewer scores that the records of `folders` hold, under the keys the reviewer's cache uses
    (`review_key`): an extended or resumed run then scores only candidates no earlier run scored."""
    from assistant.code.docstrings import bare_code
    from assistant.core.review import review_key

    by_id = {task.task_id: task for task in tasks}
    found: dict[str, float] = {}
    for folder in folders:
        path = folder / "records.jsonl"
        if not jsonl_exists(path):
            continue
        for record in JsonlCache(path).entries.values():
            task = by_id.get(record.get("task_id")) if isinstance(record, dict) else None
            reviews = record.get("scores", {}).get("reviewer") if task else None
            for sample, value in zip(record["samples"], reviews or [], strict=False):
                if value is not None:
                    code = (task.prefix + "\n" + sample["code"]) if task.prefix else sample["code"]
                    found[review_key(backend, task.requirement.strip(), bare_code(code))] = value
    return found


def auto_pick(record: dict) -> int | None:
    """What `auto` picks without tests (agree, ties broken by mean log-probability, then sampling order), from a
    record's recorded agree scores; None when no sample parsed or agree did not score the record."""
    agree = record.get("scores", {}).get("agree")
    parsed = [i for i, s in enumerate(record["samples"]) if s["parsed"]]
    if not parsed or agree is None:
        return None

    def key(i: int) -> tuple[float, float, int]:
        logprob = record["samples"][i]["logprob"]
        return (-(agree[i] or 0.0), -(logprob if logprob is not None else float("-inf")), i)

    return min(parsed, key=key)


def ranker_columns(picked: Sequence[Collection[str]], every: bool = True) -> list[str]:
    """The rankers to report: the users', the extra ones `picked` names (each item names the rankers a record
    picked with, or a summary row measured; with `every`, all of them must name it), then the oracle."""
    found = all if every else any
    extra = [name for name in EXTRA_RANKERS if picked and found(name in item for item in picked)]
    return [*RANKERS[:-1], *extra, RANKERS[-1]]


def ranker_gains(records: Sequence[dict]) -> list[dict]:
    """Per strategy and ranker: the paired pass@1 difference of its pick against the first sample's (95% CI),
    and the share of the first-to-oracle gap it closes (the gain divided by oracle − first; None without a gap),
    both over the tasks the ranker was measured on (`--rankers agree` may have run on a subset). A task counts
    only if both picks exist (a logprob ranker without log-probabilities has none)."""
    rows = []
    for strategy in in_strategy_order(r["strategy"] for r in records):
        mine = [r for r in records if r["strategy"] == strategy]
        for ranker in ranker_columns([r["picks"] for r in mine], every=False):
            if ranker == "first":
                continue
            subset = [r for r in mine if ranker in r["picks"]]
            picked, first, oracle = (_correct(subset, name) for name in (ranker, "first", "oracle"))
            difference = paired_difference(picked, first)
            if difference is None:
                continue
            shared = [t for t in picked if t in first]
            gap = sum(oracle[t] - first[t] for t in first if t in oracle)
            rows.append(
                {
                    "strategy": strategy,
                    "ranker": ranker,
                    "tasks": len(shared),
                    "vs_first": difference,
                    "gap_closed": sum(picked[t] - first[t] for t in shared) / gap if gap else None,
                }
            )
    return rows


def _correct(records: Sequence[dict], ranker: str) -> dict[str, float]:
    """task → whether `ranker`'s pick passed, for the records where it picked a sample."""
    return {
        r["task_id"]: float(r["samples"][r["picks"][ranker]]["passed"])
        for r in records
        if r["picks"].get(ranker) is not None
    }


def per_task_pass_at_k(records: Sequence[dict], k: int) -> dict[str, dict[str, float]]:
    """strategy → task → unbiased pass@k, for the records with at least k samples (what pairing compares)."""
    values: dict[str, dict[str, float]] = {}
    for r in records:
        if r["n"] >= k:
            values.setdefault(r["strategy"], {})[r["task_id"]] = pass_at_k(r["n"], r["correct"], k)
    return values


def summarize_codegen(records: Sequence[dict], ks: Sequence[int]) -> list[dict]:
    """Per strategy: pass@k (mean over tasks, 95% bootstrap interval), each ranker's pass@1, and the paired
    pass@1 difference from zero-shot on the tasks both ran (`vs_zero`)."""
    pass_at_1 = per_task_pass_at_k(records, 1)
    zero = pass_at_1.get("zero", {})
    rows = []
    for strategy in in_strategy_order(r["strategy"] for r in records):
        # Sorted by task: the intervals must not depend on the order the records were written in.
        mine = sorted((r for r in records if r["strategy"] == strategy), key=lambda r: r["task_id"])
        row: dict = {"strategy": strategy, "tasks": len(mine)}
        for k in ks:
            values = [pass_at_k(r["n"], r["correct"], k) for r in mine if r["n"] >= k]
            row[f"pass@{k}"] = bootstrap_ci(values)
        for ranker in ranker_columns([r["picks"] for r in mine]):
            if ranker == "logprob" and not any(s["logprob"] is not None for r in mine for s in r["samples"]):
                row[ranker] = None  # no log-probabilities were returned: the ranker was unavailable
                continue
            values = [
                float(r["picks"][ranker] is not None and r["samples"][r["picks"][ranker]]["passed"]) for r in mine
            ]
            row[f"{ranker}"] = bootstrap_ci(values)
        # Both strategies share each task's sampling seed, so pairing by task is fair as well as tight.
        difference = paired_difference(pass_at_1.get(strategy, {}), zero) if strategy != "zero" else None
        if difference is not None:
            row["vs_zero"] = difference
        spent = [r["usage"] for r in mine if r.get("usage")]
        row["usage"] = {key: round(sum(u[key] for u in spent), 3) for key in spent[0]} if spent else None
        rows.append(row)
    return rows
