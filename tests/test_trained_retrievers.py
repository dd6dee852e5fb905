"""Trained retrievers: code similarity, TST^R, LAIL (labels from the real local model), and `auto`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from assistant.code.codesim import masked_tokens, similarity, similarity_matrix
from assistant.code.examples import Example
from assistant.errors import UsageError
from assistant.evaluate.retrieval import boundary_triplets, random_triplets
from assistant.indexing.index import build_index
from assistant.methods.tstr import TstrConfig, boundary_pairs, train_for_index
from assistant.pipeline.registry import make_retriever

POOL = [
    (
        "Return the sum of a list of numbers.",
        "def total(xs):\n    s = 0\n    for x in xs:\n        s += x\n    return s",
    ),
    (
        "Add up the prices in a list.",
        "def add_prices(prices):\n    t = 0\n    for p in prices:\n        t += p\n    return t",
    ),
    ("Count the vowels in a string.", "def vowels(s):\n    return sum(1 for c in s if c in 'aeiou')"),
    ("Count how many items are even.", "def evens(xs):\n    return sum(1 for x in xs if x % 2 == 0)"),
    ("Reverse a string.", "def rev(s):\n    return s[::-1]"),
    ("Reverse the order of a list.", "def rev_list(xs):\n    return xs[::-1]"),
    (
        "Check whether a number is prime.",
        "def is_prime(n):\n    if n < 2:\n        return False\n    return all(n % d for d in range(2, n))",
    ),
    (
        "Return the largest number in a list.",
        "def largest(xs):\n    best = xs[0]\n    for x in xs:\n        if x > best:\n"
        "            best = x\n    return best",
    ),
    (
        "Return the smallest number in a list.",
        "def smallest(xs):\n    low = xs[0]\n    for x in xs:\n        if x < low:\n"
        "            low = x\n    return low",
    ),
    ("Square every number in a list.", "def squares(xs):\n    return [x * x for x in xs]"),
    ("Double every number in a list.", "def doubles(xs):\n    return [2 * x for x in xs]"),
    ("Join words with spaces.", "def join(words):\n    return ' '.join(words)"),
]


def pool_examples() -> list[Example]:
    return [Example(requirement=r, code=c, name=c.split("(")[0][4:]) for r, c in POOL]


def test_masking_makes_renamed_code_identical_and_keeps_structure() -> None:
    a = "def add(a, b):\n    return a + b  # sum\n"
    b = "def plus(x, y):\n    return x + y\n"
    assert masked_tokens(a) == masked_tokens(b)
    assert masked_tokens("x = 'hi' + 3") == ["ID", "=", "STR", "+", "NUM", "NEWLINE"]
    assert similarity(a, b) == 1.0
    loop = "def f(xs):\n    for x in xs:\n        if x:\n            return True\n    return False\n"
    assert similarity(a, loop) < 0.5
    matrix = similarity_matrix([a, loop])
    assert matrix.shape == (2, 2) and np.allclose(np.diag(matrix), 1.0) and matrix[0, 1] == matrix[1, 0]


def test_boundary_pairs_take_code_neighbours_then_confusing_texts() -> None:
    code = np.array(
        [[1.0, 0.9, 0.8, 0.1, 0.2], [0.9, 1, 0, 0, 0], [0.8, 0, 1, 0, 0], [0.1, 0, 0, 1, 0], [0.2, 0, 0, 0, 1]]
    )
    text = np.array([[1.0, 0.0, 0.0, 0.9, 0.1]] + [[0.0] * 5] * 4)
    pairs = [p for p in boundary_pairs(code, text, lambda_k=1, lambda_s=1) if p[0] == 0]
    # Code-closest is 1; skip 2; of the rest (3, 4) the text-closest is 3.
    assert pairs == [(0, 1), (0, 3)]


def test_triplets_always_order_by_code_similarity() -> None:
    rng = np.random.default_rng(0)
    code = rng.random((5, 20)).astype(np.float32)
    text = rng.random((5, 20)).astype(np.float32)
    for triplets in (boundary_triplets(code, text, 4, 4), random_triplets(code, per_test=10)):
        assert triplets and all(code[t, p] > code[t, n] for t, p, n in triplets)


def test_tstr_trains_saves_and_serves_when_named(encoder) -> None:
    index = build_index(pool_examples(), encoder)
    with pytest.raises(UsageError, match="no TST\\^R retriever trained"):
        make_retriever("tstr", index, encoder)
    assert make_retriever("auto", index, encoder).name == "hybrid"
    directory, stats = train_for_index(index, encoder, TstrConfig(lambda_k=2, lambda_s=1, epochs=40, batch=16))
    assert (directory / "manifest.json").exists() and stats["loss_after"] < stats["loss_before"]
    assert make_retriever("auto", index, encoder).name == "hybrid"  # it did not earn its place in `auto`
    retriever = make_retriever("tstr", index, encoder)
    assert retriever.name == "tstr"
    hits = retriever.search("total of all values in a list", 2, exclude=lambda e: e.name == "total")
    assert len(hits) == 2 and all(h.example.name != "total" for h in hits)
    assert hits[0].why.startswith("tuned cosine")


@pytest.mark.model
def test_shared_prefix_scoring_equals_scoring_each_prompt(backend) -> None:
    from assistant.backends.prompts import build_prompt

    demo = Example(requirement="Add two numbers.", code="def add(a, b):\n    return a + b")
    pairs = [(build_prompt(r, [demo]), c) for r, c in POOL[:3]]
    full = backend.logprob(pairs)
    prefix = backend.tokenizer.apply_chat_template(list(pairs[0][0].messages[:3]), tokenize=False)
    tails = [(backend.render(p)[len(prefix) :], c) for p, c in pairs]
    shared = backend.logprob_shared_prefix(prefix, tails)
    for a, b in zip(full, shared, strict=True):
        assert len(a.logprobs) == len(b.logprobs) > 0
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True)) < 1e-3
    # The prompt-level entry point LAIL uses takes the shared path, not the plain one.
    backend.logprob = lambda pairs: pytest.fail("logprob_shared fell back to scoring each prompt whole")
    try:
        via_prompts = backend.logprob_shared(pairs, shared_messages=3)
    finally:
        del backend.logprob
    assert [r.logprobs for r in via_prompts] == [r.logprobs for r in shared]


def test_precision_auto_picks_bf16_only_where_the_cpu_does_it_natively() -> None:
    from assistant.backends.local import cpu_has_native_bf16, resolve_precision

    assert cpu_has_native_bf16("processor\t: 0\nflags\t\t: fpu sse2 avx512f avx512_bf16 avx512_vnni\n")
    assert cpu_has_native_bf16("flags\t\t: fpu amx_bf16 amx_tile\n")
    assert not cpu_has_native_bf16("flags\t\t: fpu sse2 avx2 avx512f\nbugs\t\t: avx512_bf16\n")
    assert resolve_precision("fp32") == "fp32" and resolve_precision("bf16") == "bf16"
    assert resolve_precision("auto") == ("bf16" if cpu_has_native_bf16() else "fp32")
    with pytest.raises(UsageError, match="unknown precision 'fp16'"):
        resolve_precision("fp16")


@pytest.mark.model
def test_bf16_labels_are_close_to_fp32_and_cached_apart(backend) -> None:
    from assistant.backends.local import LocalBackend
    from assistant.backends.models import generator_dir
    from assistant.backends.prompts import build_prompt
    from assistant.methods.lail import labeler_name

    half = LocalBackend(backend.spec, generator_dir(backend.spec), precision="bf16")
    assert (backend.precision, half.precision) == ("fp32", "bf16")
    assert (labeler_name(backend), labeler_name(half)) == (backend.model, f"{backend.model}@bf16")
    demo = Example(requirement="Add two numbers.", code="def add(a, b):\n    return a + b")
    pairs = [(build_prompt(r, [demo]), c) for r, c in POOL[:4]]
    full = [r.mean for r in backend.logprob_shared(pairs, shared_messages=3)]
    fast = [r.mean for r in half.logprob_shared(pairs, shared_messages=3)]
    # Measured on MBPP: 0.005 nats apart on average, 0.016 at most; a broken bf16 path is far off.
    assert max(abs(a - b) for a, b in zip(full, fast, strict=True)) < 0.05
    assert full != fast  # really computed in another precision


@pytest.mark.model
def test_lail_labels_with_the_model_trains_and_retrieves(backend, encoder) -> None:
    from assistant.backends.models import encoder_dir, resolve
    from assistant.methods.lail import LailConfig, candidate_sets, train_lail

    examples = pool_examples()[:8]
    index = build_index(examples, encoder)
    sets = candidate_sets(index, 2)
    assert all(i not in chosen and len(chosen) == 2 for i, chosen in enumerate(sets))
    config = LailConfig(candidates=2, positives=1, soft_negatives=1, hard_negatives=4, epochs=1, batch=4)
    directory, stats = train_lail(index, encoder, encoder_dir(resolve(None, "encoder")), backend, config)
    assert stats["pairs_labeled"] == 16 and (directory / "encoder" / "config.json").exists()
    labels = (directory / "labels.jsonl").read_text().splitlines()
    assert len(labels) == 16
    # Labels are cached: training again asks the model for nothing.
    calls = []
    backend.logprob_shared = lambda *a, **k: calls.append(a)
    backend.logprob = lambda *a, **k: calls.append(a)
    try:
        train_lail(index, encoder, encoder_dir(resolve(None, "encoder")), backend, config)
    finally:
        del backend.logprob_shared, backend.logprob
    assert calls == []
    from .conftest import PLUMBING_MODEL

    reports: list[tuple[str, int, int]] = []
    retriever = make_retriever(  # the model that labelled
        "lail", index, encoder, generator=PLUMBING_MODEL, progress=lambda *report: reports.append(report)
    )
    assert retriever.name == "lail" and reports[-1] == ("encode", len(index), len(index))  # the pool, shown
    with pytest.raises(UsageError, match=r"not qwen2\.5-coder-1\.5b"):  # never another's
        make_retriever("lail", index, encoder, generator="qwen2.5-coder-1.5b")
    hits = retriever.search("sum of a list", 3)
    assert len(hits) == 3 and hits[0].why.startswith("LAIL cosine")


@pytest.mark.model
def test_lail_labels_from_an_echoing_server_match_the_local_labeler(backend, encoder, tmp_path) -> None:
    from assistant.backends import load_backend
    from assistant.cache import JsonlCache
    from assistant.methods.lail import LailConfig, label_pool

    from .openai_server import Script, model_echo, openai_server

    index = build_index(pool_examples()[:6], encoder)
    config = LailConfig(candidates=2, positives=1, soft_negatives=1)
    local = label_pool(index, backend, config, JsonlCache(tmp_path / "local.jsonl"))
    with openai_server(Script(models=[backend.model], echo=model_echo(backend))) as (url, _):
        server = load_backend("openai", backend.model, base_url=url, api="completions")
        remote = label_pool(index, server, config, JsonlCache(tmp_path / "server.jsonl"))
    assert len(remote) == 6 and all(len(r) == 2 for r in remote)
    for mine, theirs in zip(remote, local, strict=True):
        assert dict(mine) == pytest.approx(dict(theirs), abs=2e-3)


def test_lail_refuses_a_server_without_usable_echo(tmp_path) -> None:
    import json

    from typer.testing import CliRunner

    from assistant.ui.cli import app

    from .openai_server import openai_server

    bank = tmp_path / "bank.jsonl"
    bank.write_text("".join(json.dumps({"requirement": r, "code": c}) + "\n" for r, c in POOL))
    with openai_server() as (url, _):
        result = CliRunner().invoke(
            app,
            ["train", "retriever", "--method", "lail", "--labeler", "openai", "--base-url", url, "--bank", str(bank)],
        )
    assert result.exit_code == 1
    assert "does not return the prompt's log-probabilities" in result.output


MBPP = Path(__file__).resolve().parents[2] / "shared" / "data" / "mbpp.jsonl"


@pytest.mark.skipif(not MBPP.exists(), reason=f"MBPP not found at {MBPP} (../shared/data)")
def test_a_benchmark_pool_is_named_in_the_trained_artifacts_provenance(encoder) -> None:
    from assistant.methods.artifacts import describe_pool
    from assistant.ui.console import ProgressUI
    from assistant.ui.train_cmd import training_index

    index = training_index(Path("."), f"mbpp:{MBPP}", encoder, ProgressUI(False))
    assert describe_pool(index) == f"benchmark mbpp:{MBPP} (train split) ({len(index)} examples)"


def test_listwise_lail_training_learns_the_labels_order_not_the_frozen_encoders(encoder) -> None:
    import torch

    from assistant.backends.encoder import embed_texts
    from assistant.backends.models import encoder_dir, resolve
    from assistant.methods.lail import LailConfig, train_encoder

    examples = pool_examples()
    vectors = encoder.encode([e.requirement for e in examples])
    frozen = vectors @ vectors.T
    # Every example's labels prefer its least similar other example over its most similar one.
    labels = []
    for i in range(len(examples)):
        order = [int(j) for j in np.argsort(-frozen[i]) if j != i]
        labels.append([(order[-1], -0.5), (order[0], -1.5)])
    config = LailConfig(
        candidates=2, positives=1, soft_negatives=1, hard_negatives=4, epochs=3, batch=4, loss="listwise"
    )
    model, tokenizer, losses = train_encoder(examples, labels, encoder_dir(resolve(None, "encoder")), config)
    assert losses[-1] < losses[0]
    with torch.inference_mode():
        trained = embed_texts(model, tokenizer, [e.requirement for e in examples], 128).numpy()
    scores = trained @ trained.T
    flipped = sum(scores[i, labels[i][0][0]] > scores[i, labels[i][1][0]] for i in range(len(examples)))
    assert flipped >= len(examples) - 1
    with pytest.raises(UsageError, match="unknown loss 'pairwise'"):
        LailConfig(loss="pairwise")


def test_a_results_folder_records_which_training_its_figures_come_from(encoder, tmp_path) -> None:
    from assistant.cache import JsonlCache
    from assistant.evaluate.report import record_retrievers, retriever_identities, write_report

    index = build_index(pool_examples(), encoder)
    out = tmp_path / "run"
    out.mkdir()
    (out / "config.json").write_text('{"command": "likelihood"}')
    records = JsonlCache(out / "likelihood.jsonl")
    for task in ("t1", "t2", "t3"):
        records.put(task, {"task_id": task, "strategy": "tstr", "logprob": -1.0})
    assert retriever_identities(index, ["bm25", "tstr"]) == {}  # nothing trained yet
    train_for_index(index, encoder, TstrConfig(lambda_k=2, lambda_s=1, epochs=5, batch=16, seed=0))
    first = retriever_identities(index, ["bm25", "tstr"])
    assert list(first) == ["tstr"] and first["tstr"]["config"]["seed"] == 0 and "stats" not in first["tstr"]
    assert list(first["tstr"]["weights_sha256"]) == ["tstr.safetensors"]
    record_retrievers(out, first, ["t1", "t2"])
    record_retrievers(out, first, ["t3"])  # the same weights: their tasks add up
    assert "| tstr | 3 of 3 |" in write_report(out)
    # Same settings but another seed: the weights differ, and a run over one task makes only that one.
    train_for_index(index, encoder, TstrConfig(lambda_k=2, lambda_s=1, epochs=5, batch=16, seed=1))
    second = retriever_identities(index, ["tstr"])
    assert second["tstr"]["weights_sha256"] != first["tstr"]["weights_sha256"]
    assert record_retrievers(out, {}, ["t1"])["tstr"]["tasks"] == ["t1", "t2", "t3"]  # a run without tstr
    record_retrievers(out, second, ["t1"])
    report = write_report(out)
    assert "| tstr | 1 of 3 |" in report and second["tstr"]["weights_sha256"]["tstr.safetensors"][:12] in report
    (out / "retrievers.json").write_text("{not json")  # a damaged file is rewritten, never a crash
    assert "## Trained retrievers" not in write_report(out)
    assert record_retrievers(out, second, ["t2"])["tstr"]["tasks"] == ["t2"]


def test_an_embeddings_endpoint_is_batched_kept_in_order_and_normalised() -> None:
    from assistant.backends.embeddings import EndpointEncoder

    from .openai_server import Script, openai_server

    # A "model" whose vector is (len(text), 1): the rows' order shows, and no vector has unit length.
    script = Script(models=["emb"], embed=lambda texts: [[float(len(t)), 1.0] for t in texts])
    texts = ["a", "bbb", "", "dddd", "ee"]
    with openai_server(script) as (url, _):
        embedder = EndpointEncoder.connect("emb", base_url=url, batch_size=2)
        vectors = embedder.encode(texts)
    assert embedder.name == "openai:emb" and embedder.dim == 2 and vectors.dtype == np.float32
    raw = np.array([[max(len(t), 1), 1.0] for t in texts])  # the empty text goes out as " "
    assert np.allclose(vectors, raw / np.linalg.norm(raw, axis=1, keepdims=True))
    sizes = [len(r["input"]) for r in script.requests if r["path"].endswith("/embeddings")]
    assert sizes == [1, 2, 2, 1]  # the probe, then batches of 2
    assert all(r["encoding_format"] == "float" for r in script.requests)  # this server refuses base64


def test_an_embedder_that_is_not_there_fails_in_one_line(tmp_path, monkeypatch) -> None:
    import json

    from typer.testing import CliRunner

    from assistant.ui.cli import app

    from .openai_server import Script, openai_server

    bank = tmp_path / "bank.jsonl"
    bank.write_text("".join(json.dumps({"requirement": r, "code": c}) + "\n" for r, c in POOL))
    train = ["train", "retriever", "--method", "tstr", "--bank", str(bank)]
    result = CliRunner().invoke(app, [*train, "--embedder", "minilm-large"])
    assert result.exit_code == 2 and "unknown embedder 'minilm-large'" in result.output
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    result = CliRunner().invoke(app, [*train, "--embedder", "openai:emb"])
    assert result.exit_code == 2 and "an embeddings endpoint needs --base-url" in result.output
    with openai_server(Script(models=["emb"])) as (url, _):  # serves completions, not embeddings
        result = CliRunner().invoke(app, [*train, "--embedder", "openai:emb", "--base-url", url])
    assert result.exit_code == 1 and "no embeddings endpoint" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_tstr_over_an_embeddings_endpoint_retrieves_like_the_local_encoder(
    encoder, tmp_path, caplog, monkeypatch, earned_auto
) -> None:
    import json

    monkeypatch.setenv("ASSIST_OPENAI_RETRIES", "0")  # "cannot reach" below: at once, not after three backoffs

    from typer.testing import CliRunner

    from assistant.errors import ModelError
    from assistant.indexing.index import index_bank
    from assistant.methods.artifacts import artifact_dir, read_manifest
    from assistant.ui.cli import app

    from .openai_server import Script, model_embed, openai_server

    bank = tmp_path / "bank.jsonl"
    bank.write_text("".join(json.dumps({"requirement": r, "code": c}) + "\n" for r, c in POOL))
    train = ["train", "retriever", "--method", "tstr", "--bank", str(bank), "--epochs", "40", "--json"]
    query = "total of all values in a list"
    index = index_bank(bank, encoder)[0]
    # The server embeds with the same real encoder, but answers vectors of length 2: assist normalises them.
    script = Script(models=["minilm"], embed=model_embed(encoder, scale=2.0))
    with openai_server(script) as (url, _):
        result = CliRunner().invoke(app, [*train, "--embedder", "openai:minilm", "--base-url", url])
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)["embedder"] == "openai:minilm"
        manifest = read_manifest(artifact_dir(index, "tstr"))
        assert manifest["embedder"] == "openai:minilm" and manifest["embedder_url"] == url
        embedded = sum(len(r["input"]) for r in script.requests)
        retriever = make_retriever("tstr", index, encoder)  # the manifest says where queries go
        hits = retriever.search(query, 3)
        # The pool's vectors were cached at training: loading asked only for the probe, searching for the query.
        assert sum(len(r["input"]) for r in script.requests) == embedded + 2
        assert script.requests[-1]["input"] == [query]
        # A manifest is a file a repo can ship: one naming a server this user never trained against sends nothing.
        manifest_path = artifact_dir(index, "tstr") / "manifest.json"
        trained_manifest = manifest_path.read_text()
        elsewhere = Script(models=["minilm"], embed=model_embed(encoder))
        with openai_server(elsewhere) as (other_url, _):
            manifest_path.write_text(json.dumps({**manifest, "embedder_url": other_url}))
            with pytest.raises(ModelError, match="did not train it against on this machine"):
                make_retriever("tstr", index, encoder)
            # Nor does one naming no server, which would otherwise go to the user's own endpoint with their key.
            monkeypatch.setenv("OPENAI_BASE_URL", other_url)
            manifest_path.write_text(json.dumps({k: v for k, v in manifest.items() if k != "embedder_url"}))
            with pytest.raises(ModelError, match="no server, which you did not train it against"):
                make_retriever("tstr", index, encoder)
            monkeypatch.delenv("OPENAI_BASE_URL")
        assert elsewhere.requests == []
        # Nor one naming another model at the same server: a gateway picks the provider by the model's name.
        sent = len(script.requests)
        manifest_path.write_text(json.dumps({**manifest, "embedder": "openai:elsewhere/logger"}))
        with pytest.raises(ModelError, match="did not train it against on this machine"):
            make_retriever("tstr", index, encoder)
        assert len(script.requests) == sent
        manifest_path.write_text(trained_manifest)
    assert retriever.embedder.name == "openai:minilm"
    with pytest.raises(ModelError, match="cannot reach"):
        make_retriever("tstr", index, encoder)  # the server is gone
    with caplog.at_level("WARNING", logger="assistant"):
        assert make_retriever("auto", index, encoder).name == "hybrid"  # `auto` says so and uses the next best
    assert "trained tstr retriever is unavailable" in caplog.text
    local = CliRunner().invoke(app, train)  # the same training on the local encoder's own vectors
    assert local.exit_code == 0, local.output
    expected = make_retriever("tstr", index, encoder).search(query, 3)
    assert [h.example.name for h in hits] == [h.example.name for h in expected]
    assert [h.score for h in hits] == pytest.approx([h.score for h in expected], abs=1e-3)


def test_lail_settings_are_checked_before_anything_loads(tmp_path) -> None:
    from typer.testing import CliRunner

    from assistant.ui.cli import app

    train = ["train", "retriever", "--method", "lail", "--bank", str(tmp_path / "missing.jsonl")]
    result = CliRunner().invoke(app, [*train, "--temperature", "0"])
    assert result.exit_code == 2 and "--temperature must be above 0" in result.output
    result = CliRunner().invoke(app, [*train, "--embedder", "openai:e5"])  # each method takes only its own options
    assert result.exit_code == 2 and "No such option: --embedder" in result.output


def test_train_retriever_has_one_subcommand_per_method_and_keeps_the_old_spelling() -> None:
    from assistant.ui.train_cmd import old_spelling

    methods = ["tstr", "lail", "selfracg"]
    assert old_spelling(["--method", "lail", "--bank", "b"], methods) == ["lail", "--bank", "b"]
    assert old_spelling([".", "--method=selfracg", "--pairs", "8"], methods) == ["selfracg", ".", "--pairs", "8"]
    assert old_spelling(["--epochs", "5"], methods) == ["tstr", "--epochs", "5"]  # the old default method
    assert old_spelling(["lail", "--help"], methods) == ["lail", "--help"]
    assert old_spelling(["--help"], methods) == ["--help"]
