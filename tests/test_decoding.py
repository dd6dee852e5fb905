"""The `local.decoding` setting: which decoding the OpenVINO engine uses for a model, and the one-line errors."""

from __future__ import annotations

import pytest

from assistant.backends import ov
from assistant.config import load_settings
from assistant.errors import UsageError


def test_auto_picks_what_measured_faster_and_plain_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ov, "AUTO_DECODING", {"qwen2.5-coder-1.5b": "speculative"})
    assert ov.decoding_for("qwen2.5-coder-1.5b", "auto") == "speculative"
    assert ov.decoding_for("qwen2.5-coder-0.5b", "auto") == "plain"
    assert ov.decoding_for("qwen2.5-coder-0.5b", "prompt-lookup") == "prompt-lookup"


def test_speculative_decoding_without_a_draft_model_or_an_unknown_decoding_is_one_line() -> None:
    with pytest.raises(UsageError, match=r"needs a draft model, and qwen2\.5-coder-0\.5b has none"):
        ov.decoding_for("qwen2.5-coder-0.5b", "speculative")
    with pytest.raises(UsageError, match="unknown decoding 'fast'"):
        ov.decoding_for("qwen2.5-coder-1.5b", "fast")
    assert ov.decoding_for("qwen2.5-coder-1.5b", "speculative") == "speculative"


def test_the_setting_reaches_the_openvino_engine_only(monkeypatch: pytest.MonkeyPatch) -> None:
    from assistant.pipeline import pipeline

    monkeypatch.setenv("ASSIST_LOCAL_DECODING", "prompt-lookup")
    settings = load_settings({})
    assert settings["local.decoding"] == "prompt-lookup"
    seen = {}
    monkeypatch.setattr(
        pipeline, "load_backend", lambda name, model, progress=None, **options: seen.update({name: options})
    )
    options = settings.backend_options()
    pipeline.load_generator("local", **dict(options, engine="openvino"))
    pipeline.load_generator("local", **dict(options, engine="transformers"))
    assert seen["local-ov"]["decoding"] == "prompt-lookup" and "decoding" not in seen["local"]
    monkeypatch.setenv("ASSIST_LOCAL_DECODING", "fastest")
    with pytest.raises(UsageError, match=r"local\.decoding"):
        load_settings({})
