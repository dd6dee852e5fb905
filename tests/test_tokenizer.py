"""The engines' tokenizer and encoder without transformers or torch: the same ids, text and vectors as the
transformers and torch ones they replace, and the processes that use them never import either."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from assistant.backends.tokenizer import ChatTokenizer
from assistant.errors import ConversionFailed, ModelError

# A chat template in the style of the registered models' (Qwen's ChatML), using what transformers offers
# templates: trimmed blocks, loop controls, `raise_exception` and a `tojson` that keeps non-ASCII.
TEMPLATE = """{%- if messages[0]['role'] == 'system' %}
    {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
{%- else %}
    {{- '<|im_start|>system\\nYou help.' + eos_token + '\\n' }}
{%- endif %}
{%- for message in messages %}
    {%- if message.role == 'tool' %}{{ raise_exception('no tools here') }}{% endif %}
    {%- if loop.first and message.role == 'system' %}{% continue %}{% endif %}
    {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- if message.meta is defined %}{{ message.meta | tojson }}{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}"""

TEXTS = [
    "def f(x):\n    return x * 2\n",
    "héllo wörld  \t\n\n  x",
    "",
    " ",
    "<|im_start|>user\nhi<|im_end|>",
    "日本語のテキスト 🙂",
    "def g():\r\n    return 1\r\n",
    "class A:\n    '''Doc.'''\n\n    def m(self) -> None: ...\n" * 3,
    "cafe\u0301 e\u0301t\u00e9",  # a combining accent (as macOS writes file names): NFC composes it first
]


@pytest.fixture(scope="module")
def tokenizer_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small byte-level BPE tokenizer with ChatML's special tokens, saved as transformers saves one."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    folder = tmp_path_factory.mktemp("tokenizer")
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    trainer = trainers.BpeTrainer(
        vocab_size=600, special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    bpe.train_from_iterator([Path(__file__).read_text(encoding="utf-8"), *TEXTS], trainer)
    bpe.save(str(folder / "tokenizer.json"))
    config = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "tokenizer_class": "PreTrainedTokenizerFast"}
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    (folder / "chat_template.jinja").write_text(TEMPLATE, encoding="utf-8")
    return folder


def assert_same(fast: ChatTokenizer, slow, texts: list[str]) -> None:
    """Every call the engines make gives the same result on both tokenizers."""
    assert (fast.pad_token_id, fast.eos_token_id) == (slow.pad_token_id, slow.eos_token_id)
    for text in texts:
        a = fast(text, add_special_tokens=False, return_offsets_mapping=True)
        b = slow(text, add_special_tokens=False, return_offsets_mapping=True)
        assert a["input_ids"] == b["input_ids"], text
        assert a["offset_mapping"] == [tuple(pair) for pair in b["offset_mapping"]], text
        ids = a["input_ids"]
        for cut in (ids, ids[1:], ids[: len(ids) // 2], ids[len(ids) // 3 :]):
            for skip in (False, True):
                assert fast.decode(cut, skip_special_tokens=skip) == slow.decode(cut, skip_special_tokens=skip)
        assert fast.convert_ids_to_tokens(ids) == slow.convert_ids_to_tokens(ids)
    conversations = [
        [{"role": "user", "content": texts[0]}],
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": texts[1]}],
        [
            {"role": "user", "content": texts[2] + "?"},
            {"role": "assistant", "content": texts[-1]},
            {"role": "user", "content": "again ✓"},
        ],
    ]
    for messages in conversations:
        for generation in (False, True):
            expected = slow.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation)
            assert fast.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation) == expected


def _variant(folder: Path, name: str, **config: object) -> Path:
    """A copy of the tokenizer folder with settings of tokenizer_config.json changed."""
    copy = folder.parent / name
    copy.mkdir(exist_ok=True)
    for file in ("tokenizer.json", "chat_template.jinja"):
        (copy / file).write_bytes((folder / file).read_bytes())
    settings = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    (copy / "tokenizer_config.json").write_text(json.dumps({**settings, **config}), encoding="utf-8")
    return copy


def test_chat_tokenizer_gives_what_transformers_gives(tokenizer_folder: Path) -> None:
    from transformers import AutoTokenizer

    assert_same(ChatTokenizer(tokenizer_folder), AutoTokenizer.from_pretrained(str(tokenizer_folder)), TEXTS)


def test_a_qwen2_tokenizer_is_built_as_transformers_builds_it(tokenizer_folder: Path) -> None:
    """transformers 5 builds Qwen2Tokenizer's pipeline in code around the file's vocabulary (NFC first), which a
    file written from a GGUF lacks: "e" and a combining accent are one token there, two in the bare file."""
    from transformers import AutoTokenizer

    folder = _variant(tokenizer_folder, "qwen2", tokenizer_class="Qwen2Tokenizer")
    slow = AutoTokenizer.from_pretrained(str(folder))
    assert_same(ChatTokenizer(folder), slow, TEXTS)
    composed = ChatTokenizer(folder)("e\u0301")["input_ids"]
    assert composed == slow("\u00e9", add_special_tokens=False)["input_ids"]
    assert ChatTokenizer(tokenizer_folder)("e\u0301")["input_ids"] != composed  # the bare file does not compose


def test_a_tokenizer_class_it_cannot_reproduce_is_refused(tokenizer_folder: Path) -> None:
    with pytest.raises(ModelError, match="LlamaTokenizer"):
        ChatTokenizer(_variant(tokenizer_folder, "llama", tokenizer_class="LlamaTokenizer"))


def test_padding_falls_back_to_the_end_token_as_the_engines_set_it(tokenizer_folder: Path) -> None:
    from assistant.backends.local import read_prompt_files
    from assistant.backends.models import resolve

    folder = _variant(tokenizer_folder, "odd-pad", pad_token="<pad>")  # not in the vocabulary
    (folder / "config.json").write_text(json.dumps({"max_position_embeddings": 512}), encoding="utf-8")

    class Engine:
        pass

    engine = Engine()
    read_prompt_files(engine, resolve(None), folder, None)
    assert engine.tokenizer.pad_token_id == engine.tokenizer.eos_token_id is not None
    assert engine.window == 512


def test_a_template_reaches_what_transformers_lets_it_reach(tokenizer_folder: Path) -> None:
    import jinja2

    tokenizer = ChatTokenizer(tokenizer_folder)
    text = tokenizer.apply_chat_template([{"role": "user", "content": "x", "meta": {"é": 1}}])
    assert '{"é": 1}' in text  # tojson keeps non-ASCII, as transformers' does
    with pytest.raises(jinja2.exceptions.TemplateError, match="no tools here"):
        tokenizer.apply_chat_template([{"role": "tool", "content": "x"}])
    # The sandbox: a template cannot reach Python's internals.
    folder = tokenizer_folder.parent / "escape"
    folder.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (folder / name).write_bytes((tokenizer_folder / name).read_bytes())
    (folder / "chat_template.jinja").write_text("{{ messages.__class__.__mro__ }}", encoding="utf-8")
    with pytest.raises(jinja2.exceptions.SecurityError):
        ChatTokenizer(folder).apply_chat_template([{"role": "user", "content": "x"}])


def test_a_damaged_tokenizer_folder_is_one_clear_error(tmp_path: Path, tokenizer_folder: Path) -> None:
    with pytest.raises(ModelError, match="could not be read"):
        ChatTokenizer(tmp_path)
    (tmp_path / "tokenizer.json").write_bytes((tokenizer_folder / "tokenizer.json").read_bytes())
    (tmp_path / "tokenizer_config.json").write_text("{}", encoding="utf-8")
    with pytest.raises(ModelError, match="no chat template"):
        ChatTokenizer(tmp_path)


def _code_texts() -> list[str]:
    """Code as the index holds it: functions of the standard library, a long one (truncated at 256 tokens), and
    texts at the edges."""
    import textwrap

    source = Path(textwrap.__file__).read_text(encoding="utf-8")
    chunks = [source[i : i + 700] for i in range(0, 14_000, 700)]
    return [*chunks, source[:20_000], "", "x", "日本語 🙂"]


def test_the_openvino_encoder_gives_the_torch_encoders_vectors(encoder) -> None:
    from assistant.backends.encoder import OvEncoder, load_encoder

    fast = load_encoder()
    assert isinstance(fast, OvEncoder)
    assert (fast.name, fast.dim, fast.max_length) == (encoder.name, encoder.dim, encoder.max_length)
    texts = _code_texts()
    ours, theirs = fast.encode(texts), encoder.encode(texts)
    assert np.abs(ours - theirs).max() < 1e-5
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    # Same order of a query's neighbours, the thing retrieval reads.
    scores = ours[1:] @ ours[0], theirs[1:] @ theirs[0]
    assert list(np.argsort(-scores[0])) == list(np.argsort(-scores[1]))


def test_a_query_loads_neither_torch_nor_transformers(tmp_path: Path) -> None:
    """The encoder a query uses, and the scoring after it, in a process of their own."""
    script = (
        "import sys\n"
        "from assistant.pipeline.pipeline import load_encoder\n"
        "from assistant.backends.encoder import dot_scores\n"
        "e = load_encoder()\n"
        "v = e.encode(['def f(): return 1', 'class A: pass'])\n"
        "print(round(float(dot_scores(v, v[0])[0]), 4), 'torch' in sys.modules, 'transformers' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1.0", "False", "False"]


def test_a_damaged_converted_encoder_falls_back_to_torch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from assistant.backends import encoder as module
    from assistant.backends.models import ov_encoder_failure, resolve

    monkeypatch.setenv("ASSIST_MODELS_DIR", str(tmp_path / "models"))
    broken = tmp_path / "ov-encoder"
    broken.mkdir()
    (broken / "encoder.xml").write_text("<not a graph>", encoding="utf-8")
    asked: list[bool] = []

    def converted(spec, force: bool = False) -> Path:
        asked.append(force)
        return broken

    monkeypatch.setattr(module, "ov_encoder_path", converted)
    loaded = module.load_encoder()
    assert isinstance(loaded, module.Encoder)
    assert loaded.encode(["x"]).shape == (1, loaded.dim)
    assert asked == [False, True]  # an unreadable graph is converted once more before torch takes over
    # Still unreadable when fresh: this machine cannot run it, recorded so later commands skip the attempt.
    assert "could not be loaded" in (ov_encoder_failure(resolve(None, "encoder")) or "")


def test_a_failed_conversion_is_recorded_and_not_retried(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from assistant.backends import encoder as module
    from assistant.backends import models

    monkeypatch.setenv("ASSIST_MODELS_DIR", str(tmp_path))
    spec = models.resolve(None, "encoder")
    attempts: list[str] = []

    status = [-9]  # killed (out of memory): may not happen again, so not recorded

    def failing(*args, **kwargs) -> Path:
        attempts.append("convert")
        raise ConversionFailed("converting all-minilm-l6-v2 to OpenVINO failed: no luck", status[0])

    monkeypatch.setattr(models, "_converted", failing)
    assert isinstance(module.load_encoder(), module.Encoder)
    assert models.ov_encoder_failure(spec) is None
    attempts.clear()
    status[0] = 1  # the converter's own error: recorded
    for _ in range(2):
        assert isinstance(module.load_encoder(), module.Encoder)
    assert attempts == ["convert"]  # the second command went straight to torch
    assert "no luck" in (models.ov_encoder_failure(spec) or "")
    with pytest.raises(ModelError, match="no luck"):
        models.ov_encoder_path(spec, force=True)  # --force tries again
    assert attempts == ["convert", "convert"]


@pytest.mark.model
def test_the_default_models_tokenizer_gives_what_transformers_gives() -> None:
    from transformers import AutoTokenizer

    from assistant.backends.models import resolve, tokenizer_dir

    folder = tokenizer_dir(resolve(None))
    slow = AutoTokenizer.from_pretrained(str(folder))
    slow.pad_token = slow.pad_token or slow.eos_token
    import textwrap

    texts = [*TEXTS, Path(textwrap.__file__).read_text(encoding="utf-8")[:8000]]
    assert_same(ChatTokenizer(folder), slow, texts)


@pytest.mark.model
def test_filling_a_stub_with_the_default_engine_loads_neither_torch_nor_transformers(scratch_repo: Path) -> None:
    """`assist generate --function` end to end (retrieval, the OpenVINO model, the prompt, a ranker), in a
    process of its own."""
    target = scratch_repo / "mathutils.py"
    target.write_text(
        target.read_text(encoding="utf-8") + '\n\ndef halve(n):\n    """Return half of n."""\n    ...\n',
        encoding="utf-8",
    )
    script = (
        "import sys\n"
        "from assistant.ui.cli import main\n"
        "sys.argv = ['assist', 'generate', '--file', 'mathutils.py', '--function', 'halve', '-n', '1',\n"
        "            '--ranker', 'logprob', '--seed', '0', '--max-new-tokens', '48', '--json']\n"
        "try:\n"
        "    main()\n"
        "finally:\n"
        "    print('modules', 'torch' in sys.modules, 'transformers' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=scratch_repo, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr
    assert '"function"' in result.stdout  # the JSON result came
    assert result.stdout.strip().splitlines()[-1] == "modules False False"
