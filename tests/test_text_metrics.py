"""Docstring metrics: checked against NLTK's BLEU (computed once, offline) and by hand."""

from __future__ import annotations

import pytest

from assistant.evaluate.text_metrics import corpus_bleu, meteor, rouge_l, score_all, sentence_bleu

HYPOTHESES = [
    "return the sum of the squares of a list of numbers",
    "compute the mean value of the list",
    "open a file and read its lines into a list",
]
REFERENCES = [
    "return the sum of squares of the numbers in a list",
    "return the mean of a list of values",
    "read the lines of a file into a list",
]


def test_corpus_bleu_matches_nltk() -> None:
    # nltk.translate.bleu_score.corpus_bleu on the same tokens gives 0.21541034531036557.
    assert corpus_bleu(HYPOTHESES, REFERENCES) == pytest.approx(0.21541034531036557, abs=1e-12)


def test_identical_and_disjoint_texts() -> None:
    text = "Return the squares of the numbers in a list."
    assert sentence_bleu(text, text) == pytest.approx(1.0)
    assert rouge_l(text, text) == pytest.approx(1.0)
    # One chunk of 10 matches: METEOR's fragmentation penalty is 0.5 * (1/10)^3.
    assert meteor(text, text) == pytest.approx(1 - 0.5 * (1 / 10) ** 3)
    assert sentence_bleu("alpha beta", "gamma delta") == 0.0
    assert rouge_l("alpha beta", "gamma delta") == 0.0 and meteor("", text) == 0.0


def test_rouge_l_by_hand() -> None:
    # LCS("the cat sat on the mat", "the cat is on the mat") = 5; P = R = 5/6.
    assert rouge_l("the cat sat on the mat", "the cat is on the mat") == pytest.approx(5 / 6)


def test_meteor_matches_stems_and_penalises_fragments() -> None:
    assert meteor("returns the squares", "return the squares") > meteor("gives the squares", "return the squares")
    assert meteor("list the of squares", "the squares of list") < meteor("the squares of list", "the squares of list")


def test_score_all_reports_percentages() -> None:
    scores = score_all(HYPOTHESES, REFERENCES)
    assert set(scores) == {"corpus_bleu4", "sentence_bleu4", "rouge_l", "meteor"}
    assert scores["corpus_bleu4"] == pytest.approx(21.541034531036557)
    assert all(0 < value < 100 for value in scores.values())


def test_stdlib_split_is_disjoint_and_items_hide_their_docstring() -> None:
    from assistant.evaluate.docstring_eval import load_docstring_task, split_modules

    train, test = split_modules()
    assert train and test and not set(train) & set(test)
    assert split_modules() == (train, test)  # seeded
    pool, items, split = load_docstring_task(limit=20, seed=0)
    assert len(items) == 20 and split["test_modules"] == test
    assert all(item.item_id.split("/")[0].split(":")[0] in test for item in items)
    assert all('"""' not in item.code and item.reference for item in items)
    assert all(e.path.split("/")[0] in train for e in pool)


def test_exemplars_are_retrieved_by_code() -> None:
    from assistant.code.examples import Example
    from assistant.core.docwriter import ExemplarIndex

    examples = [
        Example("a", 'def add(a, b):\n    """Add two numbers."""\n    return a + b\n', name="add", path="m.py"),
        Example(
            "b", 'def read(path):\n    """Read a file."""\n    return open(path).read()\n', name="read", path="m.py"
        ),
        Example("c", "def bare(x):\n    return x\n", name="bare", path="m.py"),  # no docstring: not an exemplar
    ]
    index = ExemplarIndex(examples)
    assert len(index) == 2
    assert [e.name for e in index.search("def load(p):\n    return open(p).read()", 1)] == ["read"]
    assert (
        index.search("def load(p):\n    return open(p).read()", 2, exclude=lambda e: e.name == "read")[0].name == "add"
    )


def test_docstring_strategies_are_paired_by_function_against_dense() -> None:
    from assistant.evaluate.docstring_eval import paired_rows, paired_table

    def record(strategy: str, item: str, hypothesis: str) -> dict:
        return {
            "strategy": strategy,
            "item": item,
            "reference": "return the squares of a list",
            "hypothesis": hypothesis,
        }

    records = [
        record("dense", "a", "return the squares"),
        record("dense", "b", "compute things"),
        record("jointcom", "a", "return the squares of a list"),  # better on a
        record("jointcom", "b", "compute things"),  # level on b
        record("jointcom", "c", "only jointcom ran this one"),  # unpaired: left out
    ]
    (row,) = paired_rows(records)
    assert (row["strategy"], row["versus"], row["n"]) == ("jointcom", "dense", 2)
    mean, low, high = row["sentence_bleu4"]
    assert mean > 0 and low <= mean <= high
    assert row["rouge_l"][0] > 0
    assert "sentence BLEU-4 − dense" in paired_table([row])
    assert paired_rows([r for r in records if r["strategy"] != "dense"]) == []  # no baseline, nothing paired
