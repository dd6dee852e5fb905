"""Stop strings of the OpenVINO engine's one-row requests are matched in Python between steps (`ov.StopMatch`), not
by the engine, whose matching deadlocked now and then (`assistant.backends.watchdog`): the rule is the engine's own,
so rows end where, and keep what, they did when the engine matched them, except that a stop string spread over more
tokens than the engine looks at is seen too. The rule and the step loop on scripted
tokens and a fake pipeline here; against the engine's own matching on the real 0.5B at the end (`-m model`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from assistant.backends import SamplingParams, Usage, row_stream, streaming
from assistant.backends.loops import RowWatch

from .helpers_fake_ov import FakePipeline, fake_ov_backend, ov_status

# Scripted tokens: each id is one entry of this vocabulary, decoded by joining them.
WORDS = ["<end>", "<prompt>", "def f():\n", "    return 1\n", "```", "\n", "more", "``", "`", "    return", " a"]
WORDS += ["\n\n", "x", "xa", "b", "a"]
END = 0


def ids(*words: str) -> list[int]:
    return [WORDS.index(word) for word in words]


def decode(tokens: Any, skip_special_tokens: bool = False) -> str:
    return "".join(WORDS[t] for t in tokens)


def match(stops: tuple[str, ...], window: int) -> Any:
    from assistant.backends.ov import StopMatch

    return StopMatch(tuple(sorted(stops)), window, decode)


def test_a_row_ends_at_the_token_that_completes_a_stop_string_in_its_window() -> None:
    row = ids("def f():\n", "    return 1\n", "```", "\n", "more")
    fence = match(("```",), 1)
    assert [fence.kept(row, end) for end in range(1, 6)] == [None, None, 3, None, None]
    # The engine decodes only the last `window` tokens, so it misses a fence spread over two tokens with a window
    # of one (its row ran on to its end token); here the row ends at the token that completes it, once.
    split = ids("def f():\n", "``", "`", "\n")
    assert [fence.kept(split, end) for end in range(1, 5)] == [None, None, 3, None]
    assert match(("```",), 2).kept(split, 3) == 3
    assert [fence.kept(ids("``", "`"), end) for end in (1, 2)] == [None, 2]  # at the row's very start too
    assert match(("```",), 3).kept(split, 2) is None  # nothing is matched before the window is full


def test_the_kept_tokens_end_at_the_stop_string_less_its_trailing_spaces_and_line_ends() -> None:
    # "return " ends in a space: the engine keeps the tokens up to "    return", not the " a" that held the space.
    assert match(("return ",), 2).kept(ids("def f():\n", "    return", " a"), 3) == 2
    # A stop string of line ends alone leaves nothing to keep in the window: the engine removes the whole window.
    assert match(("\n\n",), 1).kept(ids("def f():\n", "    return 1\n", "\n\n"), 3) == 2
    # The stop strings are tried in sorted order (the engine's std::set), the first found decides.
    assert match(("b", "a"), 2).kept(ids("xa", "b"), 2) == 1
    assert match(("b",), 2).kept(ids("xa", "b"), 2) == 2


class WordTokenizer:
    """The scripted vocabulary as a tokenizer: a text that is one word is that word's id."""

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict[str, list[int]]:
        return {"input_ids": ids(text)}

    def decode(self, tokens: Any, skip_special_tokens: bool = False) -> str:
        return decode(tokens)


def _backend(pipeline: FakePipeline) -> Any:
    backend = fake_ov_backend(pipeline)
    backend.usage = Usage()
    backend.tokenizer = WordTokenizer()
    backend.end_ids = [END]
    backend.decoding = backend.greedy_decoding = "plain"
    backend._lanes = {"plain": (pipeline, True)}
    return backend


def test_sampled_rows_stop_at_their_fence_and_keep_what_the_engine_kept() -> None:
    """The whole sampling call on a fake pipeline that, like the engine now, is given no stop strings."""
    fenced = ids("def f():\n", "    return 1\n", "```", "\n", "more", "more", "<end>")
    split = ids("def f():\n", "``", "`", "\n", "<end>")  # a fence over two tokens, which the engine missed
    endless = ids("def f():\n") + ids("more") * 20
    pipeline = FakePipeline([fenced, split, endless], end=END)
    backend = _backend(pipeline)
    params = SamplingParams(n=3, temperature=0.8, top_p=0.95, max_new_tokens=12, seed=0)
    heard: list[tuple[int, str]] = []
    with streaming(lambda call, text: heard.append((call, text))):
        stream = row_stream("", ("```",))
        (rows,) = backend.sample_texts(["<prompt>"], params, [("```",)], stream=stream)
    assert all(not config.stop_strings for config in pipeline.configs)  # the engine matches nothing
    assert [(c.text, c.tokens, c.finish_reason) for c in rows] == [
        ("def f():\n    return 1\n", 3, "stop"),  # ended at the fence: nothing after it was kept
        ("def f():\n", 3, "stop"),  # ended at the token completing the fence, not at its end token
        ("def f():\n" + "more" * 11, 12, "length"),
    ]
    assert rows[0].logprobs == (-0.25, -0.25)  # those of the tokens before the fence
    statuses = [h.status for h in pipeline.handles]
    assert statuses == [ov_status("STOP"), ov_status("STOP"), ov_status("FINISHED")]
    # The rows are shown one token late while they run, as the engine held back a fence's window: the later rows
    # were added once the first had shown a token (after its second step), and the stream grew the same way.
    assert pipeline.added_at == [0, 2, 2]
    assert [text for _, text in heard] == ["def f():\n", "def f():\n    return 1\n"]


def test_tokens_past_the_stop_string_in_the_same_step_are_dropped_and_a_cut_row_shows_no_held_tokens() -> None:
    from assistant.backends import ov

    fenced = ids("def f():\n", "    return 1\n", "```", "\n", "more", "<end>")
    looping = ids("more") * 20
    # Two tokens a step, as drafted decoding writes them.
    pipeline = FakePipeline([fenced, looping], per_step=2, end=END)
    backend = _backend(pipeline)
    config = type("Config", (), {"max_new_tokens": 40})()
    fence = match(("```",), 1)
    watch = ov._Watch([(0, 0, 0), (1, 0, 1)], {0: RowWatch(1, decode), 1: RowWatch(1, decode)}, set())
    watch.stops = {0: fence, 1: fence}

    def cut_looping_row(done: int, total: int) -> None:
        if pipeline.steps == 2:
            pipeline.handles[1].stop()  # as `_Watch.cut_stragglers` stops a looping row
            watch.cut[1] = "looping"

    rows = backend._run([([1], config), ([1], config)], cut_looping_row, 1, watch=watch)
    assert rows[0] == [[ids("def f():\n", "    return 1\n", "```"), [-0.25] * 3]]  # "\n" came in its step
    assert watch.matched == {0} and pipeline.handles[0].status == ov_status("STOP")
    # The cut row keeps what was shown before it was stopped: 4 tokens read, the last one held back.
    assert rows[1] == [[ids("more") * 3, [-0.25] * 3]]


class LingeringPipeline(FakePipeline):
    """As the engine frees a stopped request: at the end of the next step, and a step with nothing to compute
    ends the stopped requests still held as out of memory (IGNORED)."""

    def has_non_finished_requests(self) -> bool:
        return any(h.status == ov_status("RUNNING") or not getattr(h, "freed", True) for h in self.handles)

    def step(self) -> None:
        alone = not any(h.status == ov_status("RUNNING") for h in self.handles)
        for handle in self.handles:
            if handle.status == ov_status("STOP") and not getattr(handle, "freed", False):
                handle.status = ov_status("IGNORED") if alone else handle.status
                handle.freed = True
            elif handle.status == ov_status("RUNNING"):
                handle.freed = False
        super().step()


def test_a_cut_row_left_alone_shows_the_tokens_the_engine_held_back_as_it_did() -> None:
    from assistant.backends import ov

    pipeline = LingeringPipeline([ids("more") * 20], end=END)
    backend = _backend(pipeline)
    watch = ov._Watch([(0, 0, 0)], {0: RowWatch(1, decode)}, set(), stops={0: match(("```",), 1)})

    def cut(done: int, total: int) -> None:
        if pipeline.steps == 3:
            pipeline.handles[0].stop()
            watch.cut[0] = "looping"

    rows = backend._run([([1], type("Config", (), {"max_new_tokens": 40})())], cut, 1, watch=watch)
    assert pipeline.handles[0].status == ov_status("IGNORED")
    assert rows[0] == [[ids("more") * 3, [-0.25] * 3]]  # 2 shown when it was cut, then the one held back


def test_only_a_request_for_several_rows_gives_the_engine_its_stop_strings() -> None:
    pytest.importorskip("openvino_genai")
    from assistant.backends import ov

    backend = object.__new__(ov.OpenVINOBackend)
    backend.end_ids = [END]
    stops = ("```",)
    several = SamplingParams(n=5, temperature=0.8, top_p=0.95, max_new_tokens=8, seed=0)
    assert backend._config(several, stops, 0).stop_strings == {"```"}  # its rows come only at its end
    assert backend._config(replace(several, n=1), stops, 0).stop_strings == set()
    assert backend._config(SamplingParams(n=5, temperature=0, max_new_tokens=8), stops, None).stop_strings == set()


# -- the real engine ----------------------------------------------------------------------------------------

STOPS = [("```",), ("return ", "```"), ("\n\n", "    return"), (" for ", "):\n")]


@pytest.fixture(scope="module")
def afresh():
    """The 0.5B on OpenVINO reading every prompt afresh: the same request twice computes the same numbers."""
    from assistant.backends.ov import OpenVINOBackend

    from .conftest import PLUMBING_MODEL

    return OpenVINOBackend.load(PLUMBING_MODEL, prefix_caching=False)


@pytest.mark.model
@pytest.mark.parametrize("stops", STOPS, ids=["fence", "space", "blank-line", "colon-line"])
def test_rows_matched_here_equal_the_rows_the_engine_matched(afresh, stops: tuple[str, ...]) -> None:
    """The same requests decoded twice on an engine that reads every prompt afresh: with the engine matching the
    stop strings (as every one-row request did before), then matched here. The same rows, token for token and
    log-probability for log-probability, and the same text streamed while they decode; except a row whose stop
    string the engine missed, spread over more tokens than its own encoding, which ends here where it completes."""
    from assistant.backends import RowStream, ov
    from assistant.backends.prompts import build_prompt

    requirements = ["Write a function to find the shared elements from the given two lists.", "Sum a list."]
    greedy = SamplingParams(n=1, temperature=0, max_new_tokens=96)
    sampled = SamplingParams(n=1, temperature=0.8, top_p=0.95, max_new_tokens=96)
    requests, by_engine, here = [], [], ov._Watch([], {}, set())
    for text in (afresh.render(build_prompt(r)) for r in requirements):
        prompt = afresh.tokenizer(text, add_special_tokens=False)["input_ids"]
        for params, seed in [(greedy, None), (sampled, 0), (sampled, 1), (sampled, 2)]:
            requests.append((prompt, afresh._config(params, stops, seed)))
            engine = afresh._config(params, stops, seed)
            engine.stop_strings = set(stops)
            by_engine.append((prompt, engine))
    here.stops = dict.fromkeys(range(len(requests)), afresh._stop_match(stops))
    heard: list[list[str]] = [[], []]
    expected = afresh._run(by_engine, None, 0, stream=RowStream(lambda _, t: heard[0].append(t), 0, "", stops))
    rows = afresh._run(requests, None, 0, watch=here, stream=RowStream(lambda _, t: heard[1].append(t), 0, "", stops))
    match, spread = here.stops[0], 0
    for ours, engines in zip(rows, expected, strict=True):
        if ours == engines:
            continue
        # The engine missed a stop string spread over more tokens than its own encoding and ran on: here the row
        # ended at the token that completed it, with the same tokens and log-probabilities up to there.
        [[ids, values]], [[their_ids, their_values]] = ours, engines
        assert their_ids[: len(ids)] == ids and their_values[: len(ids)] == values and len(ids) < len(their_ids)
        assert match._engine_kept(ids, len(ids)) is None and match._spread(ids, len(ids)) == len(ids)
        spread += 1
    assert spread <= 2, spread  # measured: 1 row of the 32 (the fence) with the u8 cache, none with f16
    assert heard[1] == heard[0] and len(heard[0]) > 3
    # The stop strings were met, or this compares little (measured: 3 of the 8 rows ended at the fence).
    assert len(here.matched) >= 2, here.matched
