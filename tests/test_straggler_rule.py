"""benchmarks/straggler_rule.py replays the engines' straggler rule: at the engines' own constants, a row is cut
exactly where `assistant.backends.loops.ran_past` would end it, and never below the floor."""

from __future__ import annotations

import random
from pathlib import Path

from assistant.backends import loops

from .test_benchmarks import _load

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "straggler_rule.py"


def test_the_replay_cuts_where_the_engines_rule_would(monkeypatch) -> None:
    script = _load(SCRIPT, monkeypatch)
    rng = random.Random(0)
    for _ in range(300):
        lengths = sorted(rng.choice([rng.randint(20, 120), rng.randint(200, 1024)]) for _ in range(5))
        kept = script.replay(lengths, loops.PAST_FACTOR, loops.PAST_FLOOR)
        for i, (length, mine) in enumerate(zip(lengths, kept, strict=True)):
            assert (mine < length) == loops.ran_past(length, lengths[:i], len(lengths))
            assert mine >= min(length, loops.PAST_FLOOR)


def test_a_row_far_past_its_siblings_is_cut_to_the_rules_threshold(monkeypatch) -> None:
    script = _load(SCRIPT, monkeypatch)
    assert script.replay([40, 50, 60, 70, 900], 3.0, 256) == [40, 50, 60, 70, 256]
    assert script.replay([40, 50, 60, 70, 900], 2.0, 100) == [40, 50, 60, 70, 110]  # 2 x the median of 4 ended
    assert script.replay([100, 110, 120, 130, 140], 1.5, 128) == [100, 110, 120, 130, 140]  # nobody ran past
