"""JOINTCOM: the docstring-exemplar retriever trained from the (frozen) generator's loss."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assistant.backends import Backend, TokenLogprobs
from assistant.backends.models import encoder_dir, resolve
from assistant.cache import JsonlCache
from assistant.code.examples import Example
from assistant.core.docwriter import ExemplarIndex
from assistant.methods.jointcom import (
    JointcomConfig,
    documented,
    generator_losses,
    train_docstring_retriever,
    trained_encoder,
)


def function(name: str, body: str, doc: str) -> Example:
    code = f'def {name}(values):\n    """{doc}"""\n    {body}\n'
    return Example(requirement=doc, code=code, name=name, path=f"{name}.py")


# Two families of near-identical code: list arithmetic and string handling. Within a family, a "good"
# exemplar's docstring style is what helps; the fake generator below says so through its loss.
POOL = [
    function("sum_all", "return sum(values)", "Return the sum of the values."),
    function("sum_twice", "return 2 * sum(values)", "Return twice the sum of the values."),
    function("good_mean", "return sum(values) / len(values)", "Return the mean of the values."),
    function("sum_sq", "return sum(v * v for v in values)", "Return the sum of squares of the values."),
    function("join_all", "return ''.join(values)", "Join the strings together."),
    function("join_upper", "return ''.join(values).upper()", "Join the strings and upper-case them."),
    function("good_join", "return ' '.join(values)", "Join the strings with spaces."),
    function("join_lower", "return ''.join(values).lower()", "Join the strings and lower-case them."),
]


class LossByExemplar(Backend):
    """A scorer (unit-test double for the frozen generator): low loss when the exemplar is a `good_` one."""

    name, can_score, scoring_unavailable = "fake", True, ""

    def __init__(self) -> None:
        self.model = "fake-model"
        self.pairs = 0

    def logprob(self, pairs):
        self.pairs += len(pairs)
        results = []
        for prompt, _ in pairs:
            exemplar_turn = prompt.messages[1]["content"]
            good = "sum(values) / len(values)" in exemplar_turn or "' '.join(values)" in exemplar_turn
            results.append(TokenLogprobs(tokens=["x"], logprobs=[-0.2 if good else -3.0]))
        return results


def test_documented_keeps_code_without_its_docstring_and_the_summary() -> None:
    items = documented(POOL)
    assert len(items) == len(POOL)
    assert '"""' not in items[0].code and items[0].summary == "Return the sum of the values."


def test_training_moves_the_retriever_towards_low_loss_exemplars(tmp_path: Path) -> None:
    items = documented(POOL)
    queries = [item.code for item in items if not item.example.name.startswith("good_")]
    good = {"good_mean", "good_join"}
    base = ExemplarIndex(POOL, _encoder(encoder_dir(resolve(None, "encoder"))))

    def good_rank(index: ExemplarIndex) -> float:
        """Mean position of the family's good exemplar among each query's results (0 = first)."""
        positions = []
        for code in queries:
            found = [e.name for e in index.search(code, len(POOL), lambda e, c=code: e.code.startswith(c[:12]))]
            positions.append(min(found.index(name) for name in good if name in found))
        return sum(positions) / len(positions)

    scorer = LossByExemplar()
    config = JointcomConfig(k=3, epochs=4, limit=None, batch=4, lr=2e-4, seed=0)
    manifest = train_docstring_retriever(
        POOL, scorer, encoder_dir(resolve(None, "encoder")), tmp_path, config, provenance={"kind": "test"}
    )
    trained = ExemplarIndex(POOL, trained_encoder(tmp_path))
    assert good_rank(trained) < good_rank(base)
    last = manifest["stats"]["epochs"][-1]
    assert last["expected_loss"] < last["uniform_loss"]
    assert json.loads((tmp_path / "manifest.json").read_text())["generator"]["model"] == "fake-model"
    # Losses are cached on disk: a pair is scored by the generator once.
    asked = scorer.pairs
    cache = JsonlCache(tmp_path / "losses.jsonl")
    assert len(cache.entries) == manifest["stats"]["losses_cached"] >= len(queries) * 2
    # A function is never its own exemplar in training, so this pair is new: scored once, then read back.
    generator_losses(scorer, [(items[0], items[0].example)], cache)
    assert scorer.pairs == asked + 1
    generator_losses(scorer, [(items[0], items[0].example)], JsonlCache(tmp_path / "losses.jsonl"))
    assert scorer.pairs == asked + 1


def test_too_small_a_pool_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="documented functions"):
        train_docstring_retriever(POOL[:3], LossByExemplar(), encoder_dir(resolve(None, "encoder")), tmp_path)


@pytest.mark.model
def test_generator_losses_come_from_the_real_model(backend, tmp_path: Path) -> None:
    items = documented(POOL)
    cache = JsonlCache(tmp_path / "losses.jsonl")
    helpful, unrelated = generator_losses(backend, [(items[1], POOL[0]), (items[1], POOL[4])], cache)
    assert 0 < helpful < unrelated  # an exemplar of the same family makes the real summary likelier
    assert len(cache.entries) == 2


def _encoder(directory: Path):
    from assistant.backends.encoder import Encoder

    return Encoder(directory, name="base")
