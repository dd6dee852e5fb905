from assistant.backends import Completion
from assistant.code.fences import extract_code
from assistant.core.candidates import collect, cut_off_note, repeats_itself


def test_extract_code_from_fences_or_plain_text():
    assert extract_code("Sure:\n```python\ndef f():\n    return 1\n```\nDone.") == "def f():\n    return 1"
    assert extract_code("def g():\n    pass\n") == "def g():\n    pass"
    assert extract_code("```py\nx = 1\n") == "x = 1"  # unterminated fence


def test_collect_drops_unparsable_empty_and_duplicates_keeping_sample_order():
    texts = [
        "def f(x):\n    return x + 1\n",
        "def f(x):\n    return (x+1)  # same tree, other formatting\n",
        "def f(x:\n",
        "   \n",
        "def f(x):\n    return x - 1\n",
    ]
    kept, dropped = collect([Completion(text=t, tokens=5, finish_reason="stop", logprobs=(-0.5,)) for t in texts])
    assert [c.sample for c in kept] == [0, 4]
    assert dict(dropped) == {"duplicate": 1, "syntax": 1, "empty": 1}
    assert kept[0].logprobs == (-0.5,)


def test_repeats_itself_tells_a_loop_from_a_body_with_a_few_repeated_lines():
    loop = "    x = f(x)\n    if x:\n        return x\n" + "    x = f(x)\n    if x:\n        return x\n" * 4
    assert repeats_itself(loop)
    body = (
        "    if not items:\n        return None\n    total = 0\n    for item in items:\n"
        "        if item is None:\n            continue\n        total += item\n    if total < 0:\n"
        "        return None\n    return total\n"
    )
    assert not repeats_itself(body)  # `return None` twice is a body, not a loop
    assert not repeats_itself("    a\n    a\n    a\n")  # too short to tell
    assert not repeats_itself("\n\n\n    a = 1\n\n\n\n    return a\n")  # blank lines do not count


def test_the_cut_off_note_says_what_would_help():
    assert cut_off_note(2, 5, 160, 0, "MORE", "SAMPLE") == (
        "2 of 5 samples ran into the 160-token limit before the code ended and were left out; MORE"
    )
    assert cut_off_note(1, 1, None, 1, "MORE", "SAMPLE").endswith(
        "the token limit before the code ended and was left out; it went round in a loop, which more room would "
        "not end: SAMPLE"
    )
    assert cut_off_note(3, 5, 160, 3, "MORE", "SAMPLE").endswith(
        "; all went round in a loop, which more room would not end: SAMPLE"
    )
    assert cut_off_note(3, 5, 160, 1, "MORE", "SAMPLE").endswith(
        "; 1 of them went round in a loop, which more room would not end; for the others, MORE"
    )
