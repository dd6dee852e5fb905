"""Condor: mutants, partial fixes, training data, and a real (tiny) discriminator trained and used as a ranker."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from assistant.backends.prompts import build_prompt
from assistant.core.candidates import Candidate
from assistant.core.rank import Problem, rank
from assistant.errors import UsageError
from assistant.methods.condor.data import (
    Dataset,
    ProblemData,
    Program,
    build_dataset,
    near_pairs,
    problems_from_eval,
)
from assistant.methods.condor.model import (
    Condor,
    CondorConfig,
    classification_scores,
    find_discriminator,
    train_and_save,
)
from assistant.methods.condor.mutants import OPERATORS, mutants, partial_fixes, token_jaccard
from assistant.methods.condor.ranker import CondorRanker
from assistant.ui.cli import app

LOOP = '''def count_above(values, limit):
    """How many values exceed the limit."""
    count = 0
    for i in range(len(values)):
        if values[i] > limit and not values[i] == 0:
            count = count + 1
    return count
'''

# Small problems with tests, so mutants are labelled by running them.
BANK = [
    (
        "Return the sum of a and b.",
        "def add(a, b):\n    return a + b\n",
        ["assert add(2, 3) == 5", "assert add(-1, 1) == 0"],
    ),
    (
        "Return the largest element of a non-empty list.",
        "def largest(xs):\n    best = xs[0]\n    for x in xs[1:]:\n"
        "        if x > best:\n            best = x\n    return best\n",
        ["assert largest([3, 9, 2]) == 9", "assert largest([-5, -2]) == -2", "assert largest([4]) == 4"],
    ),
    (
        "Count the even numbers in a list.",
        "def count_even(xs):\n    total = 0\n    for x in xs:\n"
        "        if x % 2 == 0:\n            total += 1\n    return total\n",
        ["assert count_even([1, 2, 4, 5]) == 2", "assert count_even([]) == 0", "assert count_even([7]) == 0"],
    ),
    (
        "Return True if every element is positive.",
        "def all_positive(xs):\n    return all(x > 0 for x in xs)\n",
        ["assert all_positive([1, 2])", "assert not all_positive([1, -2])", "assert all_positive([])"],
    ),
    (
        "Return the first n squares, starting at 1.",
        "def squares(n):\n    return [i * i for i in range(1, n + 1)]\n",
        ["assert squares(3) == [1, 4, 9]", "assert squares(0) == []"],
    ),
    (
        "Reverse the words of a sentence.",
        "def reverse_words(text):\n    words = text.split()\n    return ' '.join(words[::-1])\n",
        ["assert reverse_words('a b c') == 'c b a'", "assert reverse_words('') == ''"],
    ),
]


def problems() -> list[ProblemData]:
    return [
        ProblemData(id=f"p{i}", text=text, correct=(code,), tests=tuple(tests))
        for i, (text, code, tests) in enumerate(BANK)
    ]


def test_mutants_are_single_realistic_slips_that_parse() -> None:
    found = mutants(LOOP, limit=12, seed=0, doubles=0)
    operators = {m.operator for m in found}
    assert len(found) >= 8
    assert {"compare", "boolop", "not", "arith", "range"} & operators
    assert operators <= {*OPERATORS, "rename"}
    for mutant in found:
        ast.parse(mutant.code)
        assert mutant.code != LOOP
        assert token_jaccard(LOOP, mutant.code) > 0.85
        if not mutant.preserving:
            # One slip: exactly one line differs from the original (a rename touches every use).
            changed = [a != b for a, b in zip(LOOP.splitlines(), mutant.code.splitlines(), strict=True)]
            assert sum(changed) == 1, mutant


def test_each_operator_makes_the_slip_it_names() -> None:
    by_operator = {}
    for mutant in mutants(LOOP, limit=40, seed=3, doubles=0):
        by_operator.setdefault(mutant.operator, []).append(mutant.code)
    assert any("values[i] >= limit" in c for c in by_operator.get("compare", []))
    assert any("values[i] > limit or not" in c for c in by_operator.get("boolop", []))
    assert any("and values[i] == 0" in c for c in by_operator.get("not", []))
    assert any("count = count - 1" in c for c in by_operator.get("arith", []))
    assert any("range(len(values) + 1)" in c or "range(len(values) - 1)" in c for c in by_operator.get("range", []))
    early = by_operator.get("return", [])
    assert early and all("\n        return count" in c for c in early)  # moved into the loop body
    rename = [m for m in mutants(LOOP, limit=2, seed=0) if m.preserving]
    assert rename and ("count_value" in rename[0].code or "i_value" in rename[0].code)


def test_mutants_of_code_that_does_not_parse_are_none() -> None:
    assert mutants("def broken(:\n    pass\n") == []


def test_partial_fixes_apply_hunks_one_at_a_time() -> None:
    right = "def f(x):\n    a = x + 1\n    b = 2\n    c = 3\n    d = 4\n    return a * 2\n"
    wrong = "def f(x):\n    a = x - 1\n    b = 2\n    c = 3\n    d = 4\n    return a * 3\n"
    versions = partial_fixes(wrong, right)
    # Two hunks → one partial version: the first fixed, the second not.
    assert versions == ["def f(x):\n    a = x + 1\n    b = 2\n    c = 3\n    d = 4\n    return a * 3\n"]
    # One hunk of two lines → split into its lines.
    wrong_block = "def f(x):\n    a = x - 1\n    b = 3\n    c = 3\n    d = 4\n    return a * 2\n"
    half = "def f(x):\n    a = x + 1\n    b = 3\n    c = 3\n    d = 4\n    return a * 2\n"
    assert partial_fixes(wrong_block, right) == [half]
    assert partial_fixes(right, right) == []
    # A one-line slip has no half-way version.
    assert partial_fixes(right.replace("x + 1", "x - 1"), right) == []


def test_build_dataset_labels_mutants_by_running_the_tests() -> None:
    data = build_dataset(problems(), mutants_per_program=6, seed=0)
    by_code = {(p.problem, p.code): p for p in data.programs}
    add_minus = by_code.get(("p0", "def add(a, b):\n    return a - b\n"))
    assert add_minus is not None and not add_minus.correct
    assert all(p.correct for p in data.programs if p.source == "reference")
    # Equivalent mutants exist (e.g. a rename) and are labelled correct because their tests pass.
    assert any(p.correct and p.source.startswith(("rename", "mutant")) for p in data.programs)
    stats = data.describe()
    assert stats["wrong"] > stats["problems"] and stats["pairs_ec"] > 0
    for pair in data.pairs:
        assert token_jaccard(pair.a, pair.b) > 0.9
        assert pair.label == int(by_code[(pair.problem, pair.a)].correct and by_code[(pair.problem, pair.b)].correct)
    # Partial fixes are never duplicates of other programs.
    codes = {(p.problem, p.code) for p in data.programs}
    assert all((p.problem, p.code) not in codes for p in data.partials)


def test_near_pairs_skip_wrong_wrong_and_dissimilar_pairs() -> None:
    base = "def f(xs):\n    total = 0\n    for x in xs:\n        total += x * 2 + 1\n    return total\n"
    programs = [
        Program("p", base, True, "reference"),
        Program("p", base.replace("x * 2", "x * 3"), False, "mutant"),
        Program("p", base.replace("+ 1", "+ 2"), False, "mutant"),
        Program("p", "def f(xs):\n    return sum(2 * x + 1 for x in xs)\n", True, "sample"),
    ]
    pairs = near_pairs(programs, 0.8)
    assert {(p.a, p.b, p.label) for p in pairs} == {
        (programs[1].code, base, 0),
        (programs[2].code, base, 0),
    }


def test_split_keeps_problems_and_their_copies_apart() -> None:
    # A copy of problem 0 under another id (copy-pasted code in a repo) must land on the same side.
    copy = ProblemData(id="copy", text="Add two numbers.", correct=(BANK[0][1],), tests=tuple(BANK[0][2]))
    data = build_dataset([*problems(), copy], mutants_per_program=2, seed=0)
    for seed in range(6):
        train, held = data.split(0.3, seed=seed)
        assert ("p0" in held.problems) == ("copy" in held.problems)
        assert 1 <= len(held.problems) <= 3 and not held.partials
        held_codes = {p.code for p in held.programs}
        assert not any(p.code in held_codes for p in train.programs if p.source == "reference")


def test_classification_scores() -> None:
    scores = classification_scores([0.9, 0.8, 0.2, 0.6, 0.1], [True, False, True, True, False])
    assert scores["precision"] == pytest.approx(2 / 3, abs=1e-4)
    assert scores["recall"] == pytest.approx(2 / 3, abs=1e-4)
    assert scores["f1"] == pytest.approx(2 / 3, abs=1e-4)
    assert scores["accuracy"] == pytest.approx(0.6)


def test_train_from_eval_refuses_test_split_candidates(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"command": "codegen", "dataset": "mbpp", "split": "test"}))
    (tmp_path / "records.jsonl").write_text("")
    with pytest.raises(Exception, match="train split"):
        problems_from_eval(tmp_path)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real discriminator trained on the small bank (seconds: one short epoch per stage)."""
    directory = tmp_path_factory.mktemp("condor") / "discriminator"
    config = CondorConfig(epochs=3, batch=8, lr=5e-5, seed=0)
    with pytest.MonkeyPatch.context() as patch:  # module scope: the autouse per-test cache is not set up yet
        patch.setenv("ASSIST_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        train_and_save(problems(), config, directory, holdout=0.34, mutants=6, sources={"bank": "test"})
    return directory


def test_trained_discriminator_is_saved_with_provenance_and_scores(trained: Path) -> None:
    manifest = json.loads((trained / "manifest.json").read_text())
    assert manifest["method"] == "condor"
    assert manifest["config"]["contrastive"] and manifest["config"]["partial_fixes"]
    assert manifest["data"]["problems"] == len(BANK) and manifest["data"]["sources"]["bank"] == "test"
    assert manifest["stats"]["contrastive_losses"] and manifest["stats"]["classifier_losses"]
    assert set(manifest["held_out"]["all"]) >= {"precision", "recall", "f1"}
    assert len(manifest["data"]["sources"]["problems_fingerprint"]) == 16
    # It learned something: on its own training problems, correct programs score above the mutants.
    model = Condor.load(trained)
    data = build_dataset(problems(), mutants_per_program=6, seed=0)
    train_ids = set(data.split(0.34, 0)[0].problems)
    right, wrong = [], []
    for program in data.programs:
        if program.problem in train_ids:
            p = model.probabilities(data.problems[program.problem], [program.code])[0]
            assert 0.0 <= p <= 1.0
            (right if program.correct else wrong).append(p)
    assert sum(right) / len(right) > sum(wrong) / len(wrong)


def test_condor_ranker_scores_and_explains(trained: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Outside a repo, the user's discriminator (in the cache) is the one found.
    import shutil

    from assistant.paths import cache_dir

    shutil.copytree(trained, cache_dir() / "discriminator")
    monkeypatch.chdir(tmp_path)
    assert find_discriminator() == cache_dir() / "discriminator"
    text, code, _ = BANK[1]
    candidates = [Candidate(code=code.replace(">", "<"), sample=0), Candidate(code=code, sample=1)]
    problem = Problem(requirement=text, prompt=build_prompt(text))
    ranker = CondorRanker()
    ranked = rank(problem, candidates, [ranker])
    expected = Condor.load(trained).probabilities(text, [c.code for c in candidates])
    by_sample = {r.candidate.sample: r.scores["condor"] for r in ranked}
    assert [by_sample[0].value, by_sample[1].value] == pytest.approx(expected)
    assert by_sample[1].why == f"p(correct) {expected[1]:.2f} by Condor"
    assert CondorRanker().model is ranker.model  # loaded once, reused by later rankings


@pytest.mark.model
def test_condor_on_the_generators_backbone_trains_only_a_head(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    directory = tmp_path / "discriminator"
    config = CondorConfig(backbone="generator", contrastive=False, epochs=30, batch=8, seed=0)
    manifest = train_and_save(problems(), config, directory, holdout=0.34, mutants=6, sources={"bank": "test"})
    assert manifest["config"]["backbone"] == "generator" and not manifest["stats"]["contrastive_losses"]
    assert (directory / "head.safetensors").exists() and not (directory / "encoder").exists()  # the generator's own
    losses = manifest["stats"]["classifier_losses"]
    assert losses[-1] < losses[0]
    model = Condor.load(directory)  # loaded back: the frozen generator and the saved head
    data = build_dataset(problems(), mutants_per_program=6, seed=0)
    train_ids = set(data.split(0.34, 0)[0].problems)
    right, wrong = [], []
    for program in data.programs:
        if program.problem in train_ids:
            (right if program.correct else wrong).append(
                model.probabilities(data.problems[program.problem], [program.code])[0]
            )
    assert sum(right) / len(right) > sum(wrong) / len(wrong)
    with pytest.raises(UsageError, match="no contrastive stage: turn contrastive off"):
        CondorConfig(backbone="generator")


def test_ranker_without_a_trained_discriminator_says_how_to_train(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(Exception, match="assist train discriminator"):
        CondorRanker()


def test_train_discriminator_cli_on_a_repo(scratch_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without tests or a bank, the repo's own functions are the correct programs and their mutants the wrong ones."""
    monkeypatch.chdir(scratch_repo)
    result = CliRunner().invoke(
        app, ["train", "discriminator", "--epochs", "1", "--holdout", "0", "--mutants", "3", "--json"]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    saved = Path(summary["saved"])
    assert saved == scratch_repo / ".assist" / "discriminator"
    assert (saved / "manifest.json").exists() and (saved / "head.safetensors").exists()
    assert summary["data"]["sources"]["repo"] == str(scratch_repo)
    assert summary["data"]["wrong"] >= summary["data"]["problems"]
    from assistant.pipeline.registry import auto_ranker

    from .conftest import ScriptedBackend

    # Named, it ranks; `auto` leaves it out (it did not beat agree and log-probability where measured).
    one = [Candidate("x = 1", 0, 1, logprobs=(-0.5,))]
    assert auto_ranker(ScriptedBackend(), one, has_tests=False) == "logprob"
    assert auto_ranker(ScriptedBackend(), one, has_tests=True) == "exec+logprob"


def test_train_discriminator_cli_errors_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["train", "discriminator"])
    assert result.exit_code != 0 and "not inside a git repository" in result.output
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"command": "codegen", "dataset": "humaneval", "split": "test"}))
    (folder / "records.jsonl").write_text("")
    result = CliRunner().invoke(app, ["train", "discriminator", "--from-eval", str(folder)])
    assert result.exit_code != 0 and "train split" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_discriminator_eval_trains_each_variant_once_and_resumes(tmp_path: Path) -> None:
    from assistant.evaluate.discriminator import discriminator_tables, run_discriminator_eval

    data = build_dataset(problems(), mutants_per_program=6, seed=0)
    records = [
        {
            "task_id": "t1",
            "samples": [
                {"code": BANK[0][1].replace("+", "-"), "parsed": True, "passed": False},
                {"code": BANK[0][1], "parsed": True, "passed": True},
            ],
            "picks": {"first": 0, "random": 1, "logprob": 0, "oracle": 1},
        }
    ]
    runs = [("toy", records, {"t1": BANK[0][0]})]
    config = CondorConfig(epochs=1, batch=8, seed=0)
    names = ["condor", "no-partial-fixes", "plain"]
    first = run_discriminator_eval(data, names, config, runs, tmp_path, holdout=0.34)
    assert list(first["variants"]) == names
    stage1 = first["variants"]["condor"]["stats"]["contrastive_losses"]
    assert stage1 and all(isinstance(x, float) and x > 0 for x in stage1)
    assert first["variants"]["no-partial-fixes"]["stats"]["contrastive_losses"] == stage1  # one shared stage 1
    assert first["variants"]["plain"]["stats"]["contrastive_losses"] == []
    stamps = {n: (tmp_path / "models" / n / "manifest.json").stat().st_mtime_ns for n in names}
    again = run_discriminator_eval(data, names, config, runs, tmp_path, holdout=0.34)
    assert {n: (tmp_path / "models" / n / "manifest.json").stat().st_mtime_ns for n in names} == stamps
    # Each candidate's probability was kept beside its model and read back, not computed again.
    from assistant.cache import JsonlCache, cache_key
    from assistant.methods.artifacts import read_manifest
    from assistant.methods.condor.data import PROBLEM_CHARS

    kept = JsonlCache(tmp_path / "models" / "condor" / "scores.jsonl")
    assert len(kept.entries) == 2 and again["variants"]["condor"]["ranking"] == first["variants"]["condor"]["ranking"]
    identity = read_manifest(tmp_path / "models" / "condor")["identity"]
    for wrong_first, passed in ((1.0, 0.0), (0.0, 1.0)):
        for sample, value in zip(records[0]["samples"], (wrong_first, 1.0 - wrong_first), strict=True):
            kept.put(
                cache_key(kind="condor", model=identity, problem=BANK[0][0][:PROBLEM_CHARS], code=sample["code"]), value
            )
        kept_run = run_discriminator_eval(data, ["condor"], config, runs, tmp_path, holdout=0.34)
        assert kept_run["variants"]["condor"]["ranking"]["toy"]["passed"] == {"t1": passed}
    # A variant trained in a later run reuses the stage 1 kept on disk.
    import shutil

    shutil.rmtree(tmp_path / "models" / "no-partial-fixes")
    later = run_discriminator_eval(data, ["no-partial-fixes"], config, runs, tmp_path, holdout=0.34)
    assert later["variants"]["no-partial-fixes"]["stats"]["contrastive_losses"] == stage1
    assert again["variants"]["condor"]["held_out"] == first["variants"]["condor"]["held_out"]
    table = discriminator_tables(again)
    assert "| condor |" in table and "| plain |" in table and "oracle" in table
    baselines = again["baselines"]["toy"]
    assert baselines["first"]["pass@1"][0] == 0.0 and baselines["oracle"]["pass@1"][0] == 1.0
    assert baselines["first"]["passed"] == {"t1": 0.0} and "agree" not in baselines  # the run had no agree picks
    assert "| oracle (any correct) | 100.0 [100.0, 100.0] | +100.0 [+100.0, +100.0] | +100% |" in table


def test_dataset_describe_counts_sources() -> None:
    data = Dataset(
        problems={"p": "x"},
        programs=[Program("p", "a", True, "reference"), Program("p", "b", False, "mutant:compare")],
        pairs=[],
        partials=[Program("p", "c", False, "partial")],
    )
    assert data.describe()["by_source"] == {"reference": 1, "mutant": 1, "partial": 1}


def test_candidates_are_ranked_per_strategy_in_task_order(tmp_path: Path) -> None:
    """A codegen folder with several strategies gives one run per strategy, and the intervals do not depend
    on the order the records were written in."""
    import random

    from assistant.cache import JsonlCache
    from assistant.evaluate.discriminator import _baseline_picks, load_candidates

    rng = random.Random(0)
    records = []
    for strategy in ("bm25", "lail"):
        for t in range(40):
            passed = [rng.random() < 0.4 for _ in range(3)]
            samples = [{"code": "x = 1\n", "parsed": True, "passed": p} for p in passed]
            picks = {
                "first": 0,
                "random": rng.randrange(3),
                "logprob": 1,
                "oracle": passed.index(True) if any(passed) else 0,
            }
            records.append({"task_id": f"t{t:02d}", "strategy": strategy, "samples": samples, "picks": picks})
    rng.shuffle(records)
    (tmp_path / "config.json").write_text(json.dumps({"command": "codegen", "dataset": "mbpp", "split": "test"}))
    store = JsonlCache(tmp_path / "records.jsonl")
    for r, record in enumerate(records):
        store.put(str(r), record)
    _, groups = load_candidates(tmp_path)
    assert sorted(name for name, _ in groups) == [f"{tmp_path.name} (bm25)", f"{tmp_path.name} (lail)"]
    for _, group in groups:
        assert len(group) == 40 and len({r["strategy"] for r in group}) == 1
        assert [r["task_id"] for r in group] == sorted(r["task_id"] for r in group)
        rotated = group[17:] + group[:17]
        assert _baseline_picks(rotated) == _baseline_picks(group)


def test_a_ranker_scored_on_part_of_the_tasks_gets_its_row_over_those_tasks() -> None:
    """agree written on a seeded subset of a run (the 1.5B's MBPP: 200 of 500) is still a baseline: its row holds
    those tasks only, says how many, and its gap share is over the same tasks; rankers on every task are as before."""
    from assistant.evaluate.discriminator import _baseline_picks, discriminator_tables, gap_closed

    records = []
    for t in range(6):
        passed = [t % 2 == 0, True, False]  # first passes on even tasks; the oracle on all
        samples = [{"code": "x = 1\n", "parsed": True, "passed": p, "logprob": -float(i)} for i, p in enumerate(passed)]
        record = {"task_id": f"t{t}", "samples": samples, "picks": {"first": 0, "oracle": 1}}
        if t < 4:  # agree scored the first four only, and always favours the passing sample 1
            record["scores"] = {"agree": [0.0, 1.0, 0.0]}
            record["picks"]["agree"] = 1
        records.append(record)
    rows = _baseline_picks(records)
    assert rows["tasks"] == 6 and "tasks" not in rows["first"]
    assert rows["agree+logprob"]["tasks"] == 4 and set(rows["agree+logprob"]["passed"]) == {"t0", "t1", "t2", "t3"}
    assert rows["agree+logprob"]["pass@1"][0] == 1.0
    # Over its four tasks first passes two, so agree closes the whole gap (2 of 2), not 2 of all six tasks' 3.
    assert gap_closed(rows["agree+logprob"], rows["first"], rows["oracle"]) == 1.0
    results = {"variants": {}, "baselines": {"toy": rows}}
    table = discriminator_tables(results)
    assert "| agree+logprob (on 4 of 6 tasks) | 100.0" in table and "| first | 50.0" in table
