import json
import math
from pathlib import Path

import pytest

from assistant.backends import Backend, SamplingParams, TokenLogprobs, Usage
from assistant.backends.prompts import Prompt
from assistant.cache import JsonlCache, LayeredCache, cache_key, supersede
from assistant.core.rank import FirstRanker, LogprobRanker, Problem, RandomRanker
from assistant.datasets import Task
from assistant.errors import UsageError
from assistant.evaluate import (
    bootstrap_ci,
    load_humaneval,
    load_mbpp,
    load_pool,
    pass_at_k,
    run_codegen,
    run_likelihood,
    subset,
    summarize_codegen,
    write_report,
)
from assistant.evaluate.codegen import picks, ranker_gains, user_rankers
from assistant.evaluate.likelihood import summarize_likelihood
from assistant.evaluate.metrics import paired_difference
from assistant.evaluate.report import codegen_table
from assistant.ui.eval_cmd import _prepare

MBPP = Path(__file__).resolve().parents[2] / "shared" / "data" / "mbpp.jsonl"
needs_mbpp = pytest.mark.skipif(not MBPP.exists(), reason=f"MBPP not found at {MBPP} (../shared/data)")


def test_pass_at_k_matches_the_closed_form():
    for n, c, k in [(5, 0, 1), (5, 2, 1), (5, 2, 3), (10, 3, 5), (5, 5, 5)]:
        expected = 1 - math.comb(n - c, k) / math.comb(n, k)
        assert pass_at_k(n, c, k) == pytest.approx(expected)
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 5)


def test_bootstrap_interval_contains_the_mean_and_narrows_with_data():
    mean, low, high = bootstrap_ci([0, 1] * 10)
    assert low < mean == 0.5 < high
    _, low_big, high_big = bootstrap_ci([0, 1] * 500)
    assert high_big - low_big < high - low


def test_paired_difference_uses_only_shared_tasks():
    assert paired_difference({"a": 0.5, "b": 1.0, "c": 9.0}, {"a": 0.25, "b": 0.75}) == (0.25, 0.25, 0.25)
    assert paired_difference({"a": 1.0}, {"b": 0.0}) is None


def test_a_results_folder_accepts_more_strategies_tasks_and_ks_but_not_other_sampling(tmp_path):
    config = {"command": "codegen", "n": 5, "ks": [1, 3, 5], "limit": 40, "strategies": ["zero"]}
    _prepare(tmp_path, config)
    # -k 1,5 on the same samples only changes the report: the folder keeps every k asked for so far.
    _prepare(tmp_path, {**config, "ks": [1, 5], "limit": 100, "strategies": ["bm25"]})
    saved = json.loads((tmp_path / "config.json").read_text())
    assert (saved["ks"], saved["limit"], saved["strategies"]) == ([1, 3, 5], 100, ["zero", "bm25"])
    with pytest.raises(UsageError, match=r"other settings \(n\)"):
        _prepare(tmp_path, {**config, "n": 10})
    # A setting added later: a folder written before it holds its old value (`legacy`), and only that resumes it.
    with pytest.raises(UsageError, match=r"other settings \(line_fragments\)"):
        _prepare(tmp_path, {**config, "line_fragments": "other-files"}, legacy={"line_fragments": "any"})
    _prepare(tmp_path, {**config, "line_fragments": "any"}, legacy={"line_fragments": "any"})
    # The engine (or server) that draws the samples, recorded later: a folder from before resumes without a guess
    # written into it; a folder that records it refuses a resume with another.
    resumed = {**config, "line_fragments": "any", "engine": "openvino"}
    _prepare(tmp_path, resumed, unrecorded=("engine",))
    assert "engine" not in json.loads((tmp_path / "config.json").read_text())
    fresh = tmp_path / "fresh"
    _prepare(fresh, resumed, unrecorded=("engine",))
    assert json.loads((fresh / "config.json").read_text())["engine"] == "openvino"
    with pytest.raises(UsageError, match=r"other settings \(engine\)"):
        _prepare(fresh, {**resumed, "engine": "ct2"}, unrecorded=("engine",))


def test_subsets_are_fixed_nested_and_in_dataset_order():
    tasks = list(range(100))
    small, large = subset(tasks, 10, seed=3), subset(tasks, 40, seed=3)
    assert small == sorted(small) and set(small) <= set(large) and small == subset(tasks, 10, seed=3)
    assert subset(tasks, 10, seed=4) != small


@needs_mbpp
def test_mbpp_splits_and_references_pass_their_own_tests():
    from assistant import sandbox

    test, train = load_mbpp(MBPP, "test"), load_mbpp(MBPP, "train")
    assert (len(test), len(train)) == (500, 374)
    assert test[0].task_id == "mbpp/11" and train[0].task_id == "mbpp/601"
    sample = subset(test, 8, seed=0)
    results = sandbox.run_many([(t.reference, t.tests, t.setup) for t in sample])
    assert all(r.ok for r in results), [r for r in results if not r.ok]
    with pytest.raises(UsageError, match="unknown MBPP split"):
        load_mbpp(MBPP, "dev")


def test_humaneval_reference_solutions_pass_and_a_wrong_one_fails():
    from assistant import sandbox

    tasks = load_humaneval()
    assert len(tasks) == 164
    chosen = tasks[:3]
    runs = sandbox.run_many([(t.prefix + "\n" + t.reference, t.tests, "") for t in chosen])
    assert all(r.ok for r in runs)
    wrong = sandbox.run(f"def {chosen[0].entry_point}(*args):\n    return None", chosen[0].tests)
    assert wrong.status == "failed"


def test_strategies_come_from_the_retriever_registry():
    from assistant.evaluate.strategies import parse_strategies

    assert parse_strategies(" zero, hybrid ") == ["zero", "hybrid"]
    assert parse_strategies("lail,tstr") == ["lail", "tstr"]  # trained retrievers register as strategies
    with pytest.raises(
        UsageError, match="unknown strategy 'vote'; choose from zero, random, bm25, dense, hybrid, tstr"
    ):
        parse_strategies("zero,vote")


def test_cache_survives_a_torn_line(tmp_path):
    cache = JsonlCache(tmp_path / "c.jsonl")
    cache.put("a", {"x": 1})
    with open(tmp_path / "c.jsonl", "a") as handle:
        handle.write('{"key": "b", "val')  # interrupted mid-write
    again = JsonlCache(tmp_path / "c.jsonl")
    assert again.get("a") == {"x": 1} and "b" not in again
    again.put("c", {"x": 3})  # appended after the torn line, not glued onto it
    assert JsonlCache(tmp_path / "c.jsonl").get("c") == {"x": 3}


def test_cache_survives_a_line_torn_inside_a_character(tmp_path):
    cache = JsonlCache(tmp_path / "c.jsonl")
    cache.put("a", {"text": "café"})
    cache.put("b", {"text": "ünïcode"})
    data = (tmp_path / "c.jsonl").read_bytes()
    (tmp_path / "c.jsonl").write_bytes(data[: data.index("ü".encode()) + 1])  # cut after ü's first byte
    again = JsonlCache(tmp_path / "c.jsonl")
    assert again.get("a") == {"text": "café"} and "b" not in again
    again.put("c", {"text": "ß"})
    assert JsonlCache(tmp_path / "c.jsonl").get("c") == {"text": "ß"}


def test_a_compressed_cache_reads_and_resumes_in_gzip(tmp_path):
    import gzip

    plain = JsonlCache(tmp_path / "c.jsonl")
    plain.put("a", {"x": 1})
    plain.put("b", {"x": 2})
    (tmp_path / "c.jsonl.gz").write_bytes(gzip.compress((tmp_path / "c.jsonl").read_bytes()))
    (tmp_path / "c.jsonl").unlink()  # what a committed results folder holds: only the compressed cache
    cache = JsonlCache(tmp_path / "c.jsonl")
    assert cache.entries == {"a": {"x": 1}, "b": {"x": 2}}
    cache.put("c", {"x": 3})  # appended to the .gz as its own member: still one valid gzip file
    assert not (tmp_path / "c.jsonl").exists()
    lines = gzip.decompress((tmp_path / "c.jsonl.gz").read_bytes()).decode().splitlines()
    assert [json.loads(line)["key"] for line in lines] == ["a", "b", "c"]
    # A member cut short by an interruption is ignored, and the next entry replaces it.
    with open(tmp_path / "c.jsonl.gz", "ab") as handle:
        handle.write(gzip.compress(b'{"key": "d", "value": 4}\n')[:-6])
    again = JsonlCache(tmp_path / "c.jsonl")
    assert list(again.entries) == ["a", "b", "c"]
    again.put("e", {"x": 5})
    assert list(JsonlCache(tmp_path / "c.jsonl").entries) == ["a", "b", "c", "e"]
    # Discarding rewrites it compressed.
    assert again.discard(["a"]) == 1 and list(JsonlCache(tmp_path / "c.jsonl").entries) == ["b", "c", "e"]
    assert not (tmp_path / "c.jsonl").exists()
    # Beside a plain file, the .gz is read first and the plain file's entries win; new ones go to the plain file.
    (tmp_path / "c.jsonl").write_text(json.dumps({"key": "b", "value": "newer"}) + "\n")
    both = JsonlCache(tmp_path / "c.jsonl")
    assert both.get("b") == "newer" and both.get("c") == {"x": 3}
    both.put("f", 6)
    assert '"f"' in (tmp_path / "c.jsonl").read_text()


def test_dataset_specs_have_one_parser():
    from assistant.datasets import MBPP_DEFAULT_PATH, is_mbpp, parse_dataset

    assert parse_dataset("humaneval").name == "humaneval" and not parse_dataset("humaneval").is_mbpp
    assert parse_dataset("mbpp").file == Path(MBPP_DEFAULT_PATH)
    spec = parse_dataset("mbpp:/data/m.jsonl")
    assert (spec.name, spec.file, str(spec)) == ("mbpp", Path("/data/m.jsonl"), "mbpp:/data/m.jsonl")
    assert is_mbpp("mbpp") and is_mbpp("mbpp:x.jsonl") and not is_mbpp("bank.jsonl")
    with pytest.raises(UsageError, match="unknown dataset 'apps'; use humaneval or mbpp"):
        parse_dataset("apps")


def test_eval_writes_under_out_or_the_user_data_folder_never_the_working_folder(tmp_path, monkeypatch):
    from assistant.evaluate.report import results_dir
    from assistant.ui.eval_cmd import _default_folder

    monkeypatch.setenv("ASSIST_RESULTS_DIR", str(tmp_path / "runs"))
    assert _default_folder("codegen-x") == tmp_path / "runs" / "codegen-x"
    monkeypatch.delenv("ASSIST_RESULTS_DIR")
    monkeypatch.chdir(tmp_path)
    assert results_dir().is_absolute() and results_dir().name == "results" and tmp_path not in results_dir().parents


def test_supersede_keeps_one_record_per_task_and_strategy(tmp_path):
    store = JsonlCache(tmp_path / "records.jsonl")
    store.put("old-lail-t1", {"task_id": "t1", "strategy": "lail", "logprob": -1.0})
    store.put("dense-t1", {"task_id": "t1", "strategy": "dense", "logprob": -1.1})
    store.put("old-lail-t2", {"task_id": "t2", "strategy": "lail", "logprob": -1.2})
    with open(tmp_path / "records.jsonl", "a") as handle:
        handle.write('{"key": "x", "val')  # a torn line is dropped by the rewrite
    store = JsonlCache(tmp_path / "records.jsonl")
    # The retrained lail is about to record t1 under a new key; t2 and dense are not in this run, so they stay.
    assert supersede(store, {("t1", "lail"): "new-lail-t1", ("t1", "dense"): "dense-t1"}) == 1
    store.put("new-lail-t1", {"task_id": "t1", "strategy": "lail", "logprob": -0.9})
    assert list(JsonlCache(tmp_path / "records.jsonl").entries) == ["dense-t1", "old-lail-t2", "new-lail-t1"]
    assert supersede(store, {("t1", "lail"): "new-lail-t1"}) == 0  # nothing stale: the file is left alone


class NoScoring:
    """A backend the logprob ranker may hold but must never ask: samples carry their log-probabilities."""

    name = model = "none"
    can_score = False
    scoring_unavailable = "it is a stand-in"

    def logprob(self, pairs):
        raise AssertionError("the evaluation asked the model to score a sample")


RANKERS = user_rankers(NoScoring())


def _problem(requirement: str = "t") -> Problem:
    return Problem(requirement=requirement, prompt=Prompt(()))


def test_rankers_pick_among_parsable_samples():
    samples = [
        {"code": "a", "parsed": False, "passed": False, "logprob": -0.1},
        {"code": "b", "parsed": True, "passed": False, "logprob": -0.9},
        {"code": "c", "parsed": True, "passed": True, "logprob": -0.2},
    ]
    chosen = picks(samples, _problem(), RANKERS)
    assert (chosen["first"], chosen["logprob"], chosen["oracle"]) == (1, 2, 2)
    assert chosen["random"] in (1, 2)
    unparsable = [{"code": "(", "parsed": False, "passed": False, "logprob": None}]
    assert set(picks(unparsable, _problem(), RANKERS).values()) == {None}
    # Without log-probabilities the logprob ranker has no pick (the model is never asked), the others do.
    unscored = [{**s, "logprob": None} for s in samples]
    assert picks(unscored, _problem(), RANKERS) == {"first": 1, "random": chosen["random"], "logprob": None,
                                                    "oracle": 2}  # fmt: skip
    # Each ranker's score of each sample is kept (None: unparsable, or nothing to score it with).
    scores: dict = {}
    picks(samples, _problem(), RANKERS, scores=scores)
    assert scores["first"] == [None, -1.0, -2.0] and scores["logprob"] == [None, -0.9, -0.2]
    picks(unscored, _problem(), RANKERS, scores=scores)
    assert scores["logprob"] == [None, None, None]


def test_the_evaluation_ranks_with_the_rankers_users_get():
    # The registry's objects, as `assist generate --ranker first|random|logprob` builds them.
    assert [type(r) for r in RANKERS] == [FirstRanker, RandomRanker, LogprobRanker]
    # So the random pick is RandomRanker's draw for the task's requirement: the one generate would make.
    from assistant.core.candidates import Candidate
    from assistant.core.rank import rank

    samples = [{"code": f"x = {i}", "parsed": True, "passed": False, "logprob": -1.0} for i in range(5)]
    for requirement in ("reverse a list", "sum the digits", "is it prime"):
        candidates = [Candidate(code=s["code"], sample=i) for i, s in enumerate(samples)]
        expected = rank(_problem(requirement), candidates, [RandomRanker()])[0].candidate.sample
        assert picks(samples, _problem(requirement), RANKERS)["random"] == expected
    # Ties in log-probability go to the earlier sample, as before.
    assert picks(samples, _problem(), RANKERS)["logprob"] == 0


def _record(task: str, strategy: str, correct: int, n: int = 4) -> dict:
    samples = [{"code": f"x = {i}", "parsed": True, "passed": i < correct, "logprob": -1.0} for i in range(n)]
    return {
        "task_id": task,
        "strategy": strategy,
        "n": n,
        "correct": correct,
        "samples": samples,
        "picks": picks(samples, _problem(task), RANKERS),
    }


def test_codegen_summary_pairs_each_strategy_with_zero_shot_on_shared_tasks():
    # bm25 is one sample in four better on every task, though the tasks themselves vary widely: the paired
    # difference is exactly +25 points, while the two pass@1 intervals overlap.
    zero = [_record(f"t{i}", "zero", c) for i, c in enumerate([0, 1, 2, 3, 0, 1, 2, 3])]
    bm25 = [_record(f"t{i}", "bm25", c + 1) for i, c in enumerate([0, 1, 2, 3, 0, 1, 2, 3])]
    extra = [_record("t9", "bm25", 4)]  # a task zero-shot never ran is left out of the pairing
    rows = {r["strategy"]: r for r in summarize_codegen(zero + bm25 + extra, [1])}
    assert "vs_zero" not in rows["zero"]
    assert rows["bm25"]["vs_zero"] == pytest.approx((0.25, 0.25, 0.25))
    assert rows["bm25"]["pass@1"][1] < rows["zero"]["pass@1"][2]
    assert "pass@1 vs zero" in codegen_table(list(rows.values()), [1])


def test_summaries_do_not_depend_on_the_order_records_were_written():
    # A resumed run holds cached records first and new ones after; `eval report` reads the file's order.
    # Both must print the same intervals, to the last digit.
    counts = [(i * 7) % 5 for i in range(30)]
    codegen = [_record(f"t{i}", s, min(4, c + (s == "bm25"))) for s in ("zero", "bm25") for i, c in enumerate(counts)]
    likelihood = [
        {"task_id": f"t{i}", "strategy": s, "logprob": -1.0 - 0.1 * c + 0.01 * i * (s == "bm25")}
        for s in ("zero", "bm25")
        for i, c in enumerate(counts)
    ]
    rotated = codegen[7:30] + codegen[:7] + codegen[42:] + codegen[30:42]
    assert summarize_codegen(rotated, [1, 2]) == summarize_codegen(codegen, [1, 2])
    rotated = likelihood[7:30] + likelihood[:7] + likelihood[42:] + likelihood[30:42]
    assert summarize_likelihood(rotated) == summarize_likelihood(likelihood)
    # Rows come in the strategies' own order, not the order the records were written in.
    assert summarize_codegen(codegen[::-1], [1, 2]) == summarize_codegen(codegen, [1, 2])
    assert [row["strategy"] for row in summarize_likelihood(likelihood[::-1])] == ["zero", "bm25"]
    gains = {f"t{i}": 0.01 * i * i for i in range(30)}
    assert paired_difference(dict(reversed(gains.items())), {t: 0.0 for t in gains}) == paired_difference(
        gains, {t: 0.0 for t in gains}
    )


def test_report_versus_pairs_every_strategy_with_the_named_one(tmp_path):
    # lail is one sample in four better than dense on each of the 6 tasks both ran; a seventh lail task is
    # left out of the pairing. Likelihood: lail is 0.1 above dense on every task.
    counts = [0, 1, 2, 3, 0, 1]
    records = JsonlCache(tmp_path / "records.jsonl")
    for i, c in enumerate(counts):
        records.put(f"d{i}", _record(f"t{i}", "dense", c))
        records.put(f"l{i}", _record(f"t{i}", "lail", c + 1))
        records.put(f"z{i}", _record(f"t{i}", "zero", 0))
    records.put("l9", _record("t9", "lail", 4))
    scores = JsonlCache(tmp_path / "likelihood.jsonl")
    for i in range(6):
        scores.put(f"d{i}", {"task_id": f"t{i}", "strategy": "dense", "logprob": -1.0 - i / 10})
        scores.put(f"l{i}", {"task_id": f"t{i}", "strategy": "lail", "logprob": -0.9 - i / 10})
    (tmp_path / "config.json").write_text(json.dumps({"command": "codegen", "ks": [1]}))
    assert "## Against" not in write_report(tmp_path)  # only when asked
    report = write_report(tmp_path, versus="dense")
    against = report.split("## Against dense, paired by task (percentage")[1].split("\n## ")[0]
    assert "| lail | 6 | 25.0 [25.0, 25.0] |" in against and "| zero | 6 | -" in against
    assert "| dense |" not in against
    assert "| lail | 6 | 0.1000 [0.1000, 0.1000] |" in report.split("## Against dense, paired by task (mean")[1]
    with pytest.raises(UsageError, match=r"no strategy 'bm25'.*zero, dense, lail"):
        write_report(tmp_path, versus="bm25")
    # Once asked, the choice is remembered (a bad one is not): a later run's rewritten report keeps the tables,
    # and so does a run that prepares the folder again.
    _prepare(tmp_path, {"command": "codegen", "ks": [1], "strategies": ["lail"], "limit": None})
    assert json.loads((tmp_path / "config.json").read_text())["versus"] == "dense"
    assert write_report(tmp_path).split("```")[-1] == report.split("```")[-1]  # the same tables after config
    assert "## Against" not in write_report(tmp_path, versus="none")  # forgotten
    assert "## Against" not in write_report(tmp_path)
    # A remembered strategy whose records are gone is dropped, not an error in every later run.
    write_report(tmp_path, versus="lail")
    records.discard([f"l{i}" for i in range(6)] + ["l9"])
    scores.discard([f"l{i}" for i in range(6)])
    assert "## Against" not in write_report(tmp_path)
    assert "versus" not in json.loads((tmp_path / "config.json").read_text())


class Lengths:
    """Records, per call, the prompt lengths a likelihood run sends (no model: batching order only)."""

    name, model = "fake", "fake"

    def __init__(self):
        self.calls: list[list[int]] = []

    def logprob(self, pairs):
        self.calls.append([len(prompt.messages[-1]["content"]) for prompt, _ in pairs])
        return [TokenLogprobs(tokens=["x"], logprobs=[-1.0]) for _ in pairs]


def test_likelihood_batches_prompts_of_similar_length_and_records_in_task_order(tmp_path):
    sizes = [40, 5, 300, 7, 120, 6, 250, 9]
    tasks = [Task(f"t{i}", "w" * size, "pass", ()) for i, size in enumerate(sizes)]
    backend = Lengths()
    records = run_likelihood(tasks, None, ["zero"], backend, tmp_path, batch=4)
    sent = [length for call in backend.calls for length in call]
    assert len(backend.calls) == 2 and sent == sorted(sent, reverse=True)  # each batch pads little
    assert [r["task_id"] for r in records] == [t.task_id for t in tasks]  # output keeps the tasks' order


class Counting:
    """Delegates to the real backend and counts the calls that reach the model."""

    def __init__(self, backend):
        self.backend, self.calls = backend, 0
        self.name, self.model, self.context = backend.name, backend.model, backend.context
        self.usage, self.can_score = backend.usage, backend.can_score
        self.identity, self.batches_prompts = backend.identity, backend.batches_prompts

    def count_tokens(self, prompt):
        return self.backend.count_tokens(prompt)

    def sample(self, prompt, params, step=None):
        self.calls += 1
        return self.backend.sample(prompt, params, step)

    def sample_batch(self, prompts, params, step=None, seeds=None):
        self.calls += 1
        return self.backend.sample_batch(prompts, params, step, seeds)

    def logprob(self, pairs):
        self.calls += 1
        return self.backend.logprob(pairs)


class Scripted(Backend):
    """Five fixed samples per prompt, with log-probabilities; no model, no batching."""

    name, model = "scripted", "scripted"

    def __init__(self):
        self.usage, self.calls = Usage(), 0

    def count_tokens(self, prompt):
        return 1

    def sample(self, prompt, params, step=None):
        from assistant.backends import Completion

        self.calls += 1
        bodies = ["return 1", "return 2", "return (", "return 2", "return 3"]
        return [Completion(f"def f():\n    {b}\n", 3, "stop", (-0.1 * (i + 1), -0.2)) for i, b in enumerate(bodies)]


def test_codegen_records_the_users_rankers_picks_and_repicks_older_records_on_resume(tmp_path):
    tasks = [Task(f"t{i}", f"return {i} from f", "def f():\n    return 2", ("assert f() == 2",)) for i in range(3)]
    backend = Scripted()
    first = run_codegen(tasks, None, ["zero"], backend, tmp_path, params=SamplingParams(n=5))
    assert backend.calls == 3 and all(r["picks_by"] == "rankers" for r in first)
    for record, task in zip(first, tasks, strict=True):
        assert record["picks"] == picks(record["samples"], _problem(task.requirement), RANKERS)
        assert (record["picks"]["first"], record["picks"]["logprob"], record["picks"]["oracle"]) == (0, 0, 1)
    # A record from before the evaluation used the users' rankers: its picks are the harness's own. The report
    # reads the stored picks (so a committed figure reproduces); a run that resumes the folder picks again.
    store = JsonlCache(tmp_path / "records.jsonl")
    key = next(iter(store.entries))
    old = {k: v for k, v in store.get(key).items() if k != "picks_by"}
    store.put(key, {**old, "picks": {**old["picks"], "random": 4}})
    (tmp_path / "config.json").write_text(json.dumps({"command": "codegen", "ks": [1]}))
    write_report(tmp_path)
    assert JsonlCache(tmp_path / "records.jsonl").get(key)["picks"]["random"] == 4
    again = run_codegen(tasks, None, ["zero"], backend, tmp_path, params=SamplingParams(n=5))
    assert backend.calls == 3 and again == first  # nothing sampled; the old record picked again
    assert JsonlCache(tmp_path / "records.jsonl").get(key) == first[0]


class Seeded(Scripted):
    """n samples per prompt that depend on the call's seed, as a real sampler's do; records the n asked for."""

    def __init__(self):
        super().__init__()
        self.asked = []

    def sample(self, prompt, params, step=None):
        from assistant.backends import Completion

        self.calls += 1
        self.asked.append(params.n)
        return [
            Completion(f"def f():\n    return {params.seed % 97 + i}\n", 3, "stop", (-0.1,)) for i in range(params.n)
        ]


def test_a_larger_n_extends_an_earlier_run_drawing_only_the_missing_blocks(tmp_path):
    tasks = [Task(f"t{i}", f"return {i} from f", "def f():\n    return 2", ("assert f() == 2",)) for i in range(3)]
    backend = Seeded()
    small = run_codegen(tasks, None, ["zero"], backend, tmp_path / "n5", params=SamplingParams(n=5))
    assert backend.asked == [5, 5, 5]
    before = (tmp_path / "n5" / "samples.jsonl").read_bytes()

    def extended(n):
        cache = LayeredCache(
            JsonlCache(tmp_path / "n12" / "samples.jsonl"), [JsonlCache(tmp_path / "n5" / "samples.jsonl")]
        )
        return run_codegen(tasks, None, ["zero"], backend, tmp_path / "n12", params=SamplingParams(n=n), cache=cache)

    large = extended(12)
    # Blocks of 5: the earlier run's block is reused, two more are drawn per task (5, then the last 2).
    assert backend.asked == [5, 5, 5, 5, 2, 5, 2, 5, 2] and [r["n"] for r in large] == [12, 12, 12]
    for old, new in zip(small, large, strict=True):
        assert new["samples"][:5] == old["samples"]
        assert {s["code"] for s in new["samples"][5:10]}.isdisjoint(s["code"] for s in old["samples"])  # own seed
    assert (tmp_path / "n5" / "samples.jsonl").read_bytes() == before  # the earlier folder is only read
    assert extended(12) == large and len(backend.asked) == 9  # resumed: nothing drawn again


def test_the_first_block_keeps_the_cache_key_of_a_run_before_blocks() -> None:
    from assistant.evaluate.codegen import sample_blocks, task_seed

    params = SamplingParams(n=5, temperature=0.8, top_p=0.95, max_new_tokens=384)
    before = SamplingParams(n=5, temperature=0.8, top_p=0.95, max_new_tokens=384, seed=task_seed(0, "HumanEval/0"))
    blocks = sample_blocks(params, 0, "HumanEval/0")
    assert len(blocks) == 1 and blocks[0].__dict__ == before.__dict__  # committed n = 5 caches stay valid
    assert task_seed(0, "HumanEval/0") == int(cache_key(seed=0, task="HumanEval/0")[:8], 16)
    assert [b.n for b in sample_blocks(SamplingParams(n=12), 0, "t")] == [5, 5, 2]
    assert len({b.seed for b in sample_blocks(SamplingParams(n=15), 0, "t")}) == 3


class BatchedSeeded(Seeded):
    """Seeded, drawing several prompts in one call, and counting each call's usage as a real backend does."""

    batches_prompts = True

    def sample_batch(self, prompts, params, step=None, seeds=None):
        from dataclasses import replace

        self.usage.add(prompt_tokens=10 * len(prompts), completion_tokens=params.n * len(prompts), seconds=1.0)
        return [self.sample(prompt, replace(params, seed=seed)) for prompt, seed in zip(prompts, seeds, strict=True)]


def test_every_task_is_charged_its_share_of_the_batched_calls_that_drew_its_samples(tmp_path):
    tasks = [Task(f"t{i}", f"return {i} from f", "def f():\n    return 2", ("assert f() == 2",)) for i in range(5)]
    backend = BatchedSeeded()
    records = run_codegen(tasks, None, ["zero"], backend, tmp_path, params=SamplingParams(n=10), batch=4)
    charged = [r["usage"] for r in records]
    assert all(u is not None for u in charged)  # not only the task whose turn started each call
    total = backend.usage.to_json()
    for name in ("requests", "prompt_tokens", "completion_tokens", "seconds"):
        assert sum(u[name] for u in charged) == pytest.approx(total[name])


class SeededScoring(Seeded):
    """Seeded, and a scorer: each reviewer score is a function of the code shown; counts the pairs scored."""

    can_score = True

    def __init__(self):
        super().__init__()
        self.scored = 0

    def logprob(self, pairs):
        self.scored += len(pairs)
        return [
            TokenLogprobs(tokens=["x"], logprobs=[-len(prompt.messages[-1]["content"]) / 1000]) for prompt, _ in pairs
        ]


def test_an_extended_run_scores_with_the_reviewer_only_the_new_samples(tmp_path):
    from assistant.core.review import ReviewerRanker, forget_reviews
    from assistant.evaluate.codegen import recorded_reviews

    tasks = [Task(f"t{i}", f"return {i} from f", "def f():\n    return 2", ("assert f() == 2",)) for i in range(3)]
    backend = SeededScoring()
    small = run_codegen(
        tasks,
        None,
        ["zero"],
        backend,
        tmp_path / "n5",
        params=SamplingParams(n=5),
        rankers=[*RANKERS, ReviewerRanker(backend)],
    )
    assert backend.scored == 15
    forget_reviews(backend)  # a new process: only what the folders hold is known
    reviewer = ReviewerRanker(backend)
    reviewer.cache = LayeredCache(
        JsonlCache(tmp_path / "n10" / "review-scores.jsonl"), [recorded_reviews([tmp_path / "n5"], tasks, backend)]
    )
    cache = LayeredCache(
        JsonlCache(tmp_path / "n10" / "samples.jsonl"), [JsonlCache(tmp_path / "n5" / "samples.jsonl")]
    )
    large = run_codegen(
        tasks,
        None,
        ["zero"],
        backend,
        tmp_path / "n10",
        params=SamplingParams(n=10),
        cache=cache,
        rankers=[*RANKERS, reviewer],
    )
    assert backend.scored == 30  # the five new samples of each task, not the five recorded ones
    for old, new in zip(small, large, strict=True):
        assert new["scores"]["reviewer"][:5] == old["scores"]["reviewer"] and None not in new["scores"]["reviewer"]
    assert len(JsonlCache(tmp_path / "n10" / "review-scores.jsonl").entries) == 15


@needs_mbpp
@pytest.mark.model
def test_codegen_and_likelihood_runs_resume_without_calling_the_model_again(tmp_path, backend, encoder):
    pool = load_pool(f"mbpp:{MBPP}", encoder)
    tasks = subset(load_mbpp(MBPP, "test"), 1, seed=0)
    counting = Counting(backend)
    params = SamplingParams(n=2, max_new_tokens=48)  # whether the samples pass does not matter here
    (tmp_path / "config.json").write_text(json.dumps({"ks": [1, 2]}))
    # --batch 2: both strategies' prompts are sampled in one batched call.
    reports = []
    first = run_codegen(
        tasks,
        pool,
        ["zero", "bm25"],
        counting,
        tmp_path,
        params=params,
        demos=2,
        batch=2,
        progress=lambda *r: reports.append(r),
    )
    assert counting.calls == 1 and len(first) == 2 and all(r["n"] == 2 for r in first)
    assert first[1]["demonstrations"] and all(d.startswith("mbpp/") for d in first[1]["demonstrations"])
    # Progress is per strategy, counted in tasks.
    assert reports == [("codegen zero", 0, 1), ("codegen zero", 1, 1), ("codegen bm25", 0, 1), ("codegen bm25", 1, 1)]
    reports.clear()
    again = run_codegen(
        tasks, pool, ["zero", "bm25"], counting, tmp_path, params=params, demos=2, progress=lambda *r: reports.append(r)
    )
    assert counting.calls == 1 and again == first
    # A resumed strategy reports its cached tasks in one step, so no rate is computed from cache hits.
    assert reports == [("codegen zero", 1, 1), ("codegen bm25", 1, 1)]
    rows = summarize_codegen(first, [1, 2])
    assert [r["strategy"] for r in rows] == ["zero", "bm25"] and 0 <= rows[0]["pass@1"][0] <= 1

    scores = run_likelihood(tasks, pool, ["zero", "bm25"], counting, tmp_path, demos=2)
    assert counting.calls == 3 and all(s["logprob"] < 0 for s in scores)  # one batch per strategy
    run_likelihood(tasks, pool, ["zero", "bm25"], counting, tmp_path, demos=2)
    assert counting.calls == 3
    report = write_report(tmp_path)
    assert "| zero | 1 |" in report and "gain vs zero-shot" in report and (tmp_path / "report.md").exists()

    # bm25's prompts change (as a retrained retriever's would): its new records replace the old, zero's stay.
    changed = run_codegen(tasks, pool, ["bm25"], counting, tmp_path, params=params, demos=1)
    assert counting.calls == 4 and changed[0]["demonstrations"] != first[1]["demonstrations"]
    records = list(JsonlCache(tmp_path / "records.jsonl").entries.values())
    assert sorted(r["strategy"] for r in records) == ["bm25", "zero"] and changed[0] in records
    run_likelihood(tasks, pool, ["bm25"], counting, tmp_path, demos=1)
    assert counting.calls == 5
    report = write_report(tmp_path)
    assert "| bm25 | 1 |" in report and "| zero | 1 |" in report


def test_retrievers_table_says_how_each_retriever_was_trained() -> None:
    from assistant.evaluate.report import retrievers_table

    known = {
        "lail": {
            "method": "lail",
            "config": {"candidates": 16},
            "labeler": {"model": "m", "precision": "bf16"},
            "weights_sha256": {"w.safetensors": "ab" * 32},
            "tasks": ["t1"],
        },
        "old": {"method": "lail", "config": {"candidates": 8}, "labeler": {"model": "m"}, "tasks": []},
        "tstr": {"method": "tstr", "config": {"epochs": 60}, "embedder": "openai:e5", "tasks": []},
        "tstr-local": {"method": "tstr", "config": {"epochs": 60}, "embedder": "all-minilm-l6-v2", "tasks": []},
    }
    rows = retrievers_table(known, {"lail": {"t1", "t2"}}).splitlines()[2:]
    assert rows[0].startswith("| lail | 1 of 2 |")
    assert "| loss infonce, candidates 16, labeler m in bf16 | w.safetensors abababababab |" in rows[0]
    assert "| loss infonce, candidates 8, labeler m |" in rows[1]  # trained before bf16: fp32, not named
    assert "| epochs 60, embeddings openai:e5 |" in rows[2]
    assert "| epochs 60 |" in rows[3]  # the default embeddings go unnamed, as in the reports made before


def test_an_added_ranker_picks_from_the_cached_samples_and_its_tests_are_cached(tmp_path):
    from assistant.core.agreement import AgreementRanker

    from .conftest import ScriptedBackend

    # Sample 0 returns 1 (wrong), 1 and 2 return 2, 4 returns 3; the model's own tests say f() == 2.
    bodies = ["return 1", "return 2", "return 2", "return (", "return 3"]
    script = {
        "Write 8 different test cases": ["assert f() == 2\nassert f() != 3\n"],
        "from f": [f"def f():\n    {b}\n" for b in bodies],
    }
    tasks = [
        Task(f"t{i}", f"return 2 from f, case {i}", "def f():\n    return 2", ("assert f() == 2",)) for i in range(2)
    ]
    backend = ScriptedBackend(script)
    params = SamplingParams(n=5)
    first = run_codegen(tasks, None, ["zero"], backend, tmp_path, params=params, rankers=RANKERS)
    drawn = backend.calls
    assert all("agree" not in r["picks"] for r in first)
    # `--rankers agree` on the finished folder: no sample is drawn again, only the tests, once per task.
    agree = AgreementRanker(backend, cache=JsonlCache(tmp_path / "agree-tests.jsonl"))
    again = run_codegen(tasks, None, ["zero"], backend, tmp_path, params=params, rankers=[*RANKERS, agree])
    assert backend.calls == drawn + 2 * len(tasks)  # TEST_SAMPLES completions per task
    # The two candidates that pass both written tests agree: the first of them wins, over the first sample.
    assert [r["picks"]["agree"] for r in again] == [1, 1] and [r["picks"]["first"] for r in again] == [0, 0]
    # Its score of every sample is kept beside the picks: cluster size × tests passed / (4 candidates × 2 tests).
    assert again[0]["scores"]["agree"] == [1 * 1 / 8, 2 * 2 / 8, 2 * 2 / 8, None, 0.0]
    assert all(
        {k: v for k, v in a["picks"].items() if k != "agree"} == f["picks"] for a, f in zip(again, first, strict=True)
    )
    rows = summarize_codegen(again, [1])
    assert rows[0]["agree"][0] == 1.0 and rows[0]["first"][0] == 0.0
    assert "top-1 by agree" in codegen_table(rows, [1])
    # Resumed once more, the written tests come from the folder's cache: the model is not asked again.
    fresh = AgreementRanker(backend, cache=JsonlCache(tmp_path / "agree-tests.jsonl"))
    store = JsonlCache(tmp_path / "records.jsonl")
    for key in list(store.entries):
        record = store.get(key)
        store.put(key, {**record, "picks": {k: v for k, v in record["picks"].items() if k != "agree"}})
    calls = backend.calls
    assert run_codegen(tasks, None, ["zero"], backend, tmp_path, params=params, rankers=[*RANKERS, fresh]) == again
    assert backend.calls == calls
    gains = {row["ranker"]: row for row in ranker_gains(again)}
    assert gains["agree"]["gap_closed"] == 1.0 and gains["agree"]["vs_first"][0] == 1.0


def test_the_docstring_eval_cache_is_keyed_by_what_decides_the_docstring(tmp_path):
    from assistant.evaluate.docstring_eval import Item, run_docstring_eval

    from .conftest import ScriptedBackend

    backend = ScriptedBackend(("Add one.",))
    item = Item("json/x.py:f", "def f(a):\n    return a + 1\n", "Add one to a.")
    run_docstring_eval([item], {"zero": None}, backend, tmp_path)
    run_docstring_eval([item], {"zero": None}, backend, tmp_path)
    assert len(backend.prompts) == 1  # the same item again: from the cache
    changed = Item(item.item_id, "def f(a):\n    return a - 1\n", "Subtract one from a.")  # another Python's stdlib
    run_docstring_eval([changed], {"zero": None}, backend, tmp_path)
    assert len(backend.prompts) == 2 and "return a - 1" in str(backend.prompts[-1].to_json())
