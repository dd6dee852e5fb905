"""Dense text encoder: a sentence-transformers style model (mean pooling, L2-normalised), loaded from disk.

Two engines run the same weights: `Encoder` (torch and transformers; what training fine-tunes, and what trained
encoders run) and `OvEncoder` (the registered encoder converted once to OpenVINO IR, fp32, pooling included),
which `load_encoder` picks: the same vectors to float precision (max difference 3e-7 on code), loaded in under a
second where torch and transformers take 5-8 s to import, so a query in `generate` no longer waits for them."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from assistant.backends.models import (
    ModelSpec,
    encoder_dir,
    ov_encoder_path,
    quiet_transformers,
    record_ov_encoder_failure,
    resolve,
)
from assistant.backends.pooling import mean_pool
from assistant.errors import ModelError

log = logging.getLogger(__name__)


# Tokens embedded per text. Training (LAIL) and retrieval share it: an encoder trained on truncated texts
# would otherwise meet longer ones at query time.
MAX_TOKENS = 256


def embed_texts(model, tokenizer, texts: Sequence[str], max_length: int):  # -> torch.Tensor
    """Tokenize (padded, truncated) and mean-pool `texts` with a trainable encoder; gradients flow."""
    batch = tokenizer(list(texts), padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    return mean_pool(model, batch)


def dot_scores(pool: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """`pool @ vector`, for query-time scoring right after an encoder's `encode`: by torch where the encoder
    is torch's, else by numpy.

    numpy's BLAS keeps its own thread pool; run straight after torch's, the two contend for the cores and
    a 0.3 ms product took up to 100 ms (p95) on 2 cores. torch reuses the pool the encoder just used. Where
    torch is not loaded (the OpenVINO encoder, `OvEncoder`), importing it would cost seconds for nothing.
    """
    if "torch" not in sys.modules:
        return np.ascontiguousarray(pool, dtype=np.float32) @ np.ascontiguousarray(vector, dtype=np.float32)
    import torch

    with torch.inference_mode():
        matrix = torch.from_numpy(np.ascontiguousarray(pool, dtype=np.float32))
        return (matrix @ torch.from_numpy(np.ascontiguousarray(vector, dtype=np.float32))).numpy()


class Encoder:
    """Turns texts into unit vectors; cosine similarity is then a dot product.

    Texts are encoded in batches sorted by length, so padding stays small: on 2 CPU cores this is
    several times faster than encoding in input order.
    """

    def __init__(self, directory: str | Path, name: str, max_length: int = MAX_TOKENS, batch_size: int = 64) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        quiet_transformers()

        try:
            self.tokenizer = AutoTokenizer.from_pretrained(str(directory), trust_remote_code=False)
            self.model = AutoModel.from_pretrained(str(directory), dtype=torch.float32, trust_remote_code=False).eval()
        except Exception as exc:  # any failure to load (safetensors, config, tokenizer) means a bad model dir
            raise ModelError(f"encoder {name} at {directory} could not be loaded: {str(exc).splitlines()[0]}") from None
        self.name = name
        self.max_length = max_length
        self.batch_size = batch_size
        self.dim = int(self.model.config.hidden_size)

    @classmethod
    def load(cls, spec: ModelSpec | str | None = None) -> Encoder:
        """Load a registered encoder (default: all-MiniLM-L6-v2) from its package."""
        spec = spec if isinstance(spec, ModelSpec) else resolve(spec, "encoder")
        return cls(encoder_dir(spec), spec.name, max_length=min(spec.context, MAX_TOKENS))

    def encode(self, texts: Sequence[str], progress: Callable[[int, int], None] | None = None) -> np.ndarray:
        """Embed `texts` → float32 array (len(texts), dim) of unit vectors, in input order."""
        import torch

        vectors = np.zeros((len(texts), self.dim), dtype="float32")
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        done = 0
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                chunk = order[start : start + self.batch_size]
                batch = self.tokenizer(
                    [texts[i] for i in chunk],
                    padding=True,
                    truncation=True,
                    max_length=self.max_length,
                    return_tensors="pt",
                )
                vectors[chunk] = mean_pool(self.model, batch).numpy()
                done += len(chunk)
                if progress:
                    progress(done, len(texts))
        return vectors


class OvEncoder:
    """A registered encoder run by OpenVINO: the graph converted from `Encoder`'s model with `mean_pool` inside
    it (`ov_convert --encoder`), fp32 throughout, and the model's own `tokenizer.json` run by the tokenizers
    library, truncated and padded as `Encoder` asks transformers to. Same interface as `Encoder`."""

    def __init__(
        self, graph: Path, source: Path, name: str, max_length: int = MAX_TOKENS, batch_size: int = 64
    ) -> None:
        import json

        try:
            import openvino
            from tokenizers import Tokenizer

            self.tokenizer = Tokenizer.from_file(str(source / "tokenizer.json"))
            config = json.loads((source / "tokenizer_config.json").read_text(encoding="utf-8"))
            pad = config.get("pad_token", "[PAD]")
            pad = pad.get("content") if isinstance(pad, dict) else pad
            pad_id = self.tokenizer.token_to_id(pad)
            if pad_id is None:
                raise ValueError(f"no padding token {pad!r}")
            self.tokenizer.enable_truncation(max_length)
            self.tokenizer.enable_padding(pad_id=pad_id, pad_token=pad)  # to the longest text of each batch
            # fp32 kept: a CPU with bf16 units would otherwise run it in bf16 and part from the torch vectors.
            self.model = openvino.Core().compile_model(
                str(graph / "encoder.xml"), "CPU", {"INFERENCE_PRECISION_HINT": "f32"}
            )
        except Exception as exc:  # a damaged graph or tokenizer file
            raise ModelError(
                f"encoder {name} (OpenVINO, {graph}) could not be loaded: {str(exc).splitlines()[0]}"
            ) from None
        self.name = name
        self.max_length = max_length
        self.batch_size = batch_size
        self.dim = int(self.model.output(0).get_partial_shape()[-1].get_length())

    def encode(self, texts: Sequence[str], progress: Callable[[int, int], None] | None = None) -> np.ndarray:
        """Embed `texts` → float32 array (len(texts), dim) of unit vectors, in input order (batches sorted by
        length, as `Encoder.encode`)."""
        vectors = np.zeros((len(texts), self.dim), dtype="float32")
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        done = 0
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            encoded = self.tokenizer.encode_batch([texts[i] for i in chunk])
            feed = {
                "input_ids": np.array([e.ids for e in encoded], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in encoded], dtype=np.int64),
                "token_type_ids": np.array([e.type_ids for e in encoded], dtype=np.int64),
            }
            vectors[chunk] = self.model(feed)[0]
            done += len(chunk)
            if progress:
                progress(done, len(texts))
        return vectors


def load_encoder(spec: ModelSpec | str | None = None) -> Encoder | OvEncoder:
    """A registered encoder (default: all-MiniLM-L6-v2) on OpenVINO, converted on first use (about 15 s, once);
    on torch where OpenVINO is not installed or cannot run it (a warning says why; a failed conversion is
    recorded, so later commands go straight to torch, until `assist models pull NAME --force`)."""
    spec = spec if isinstance(spec, ModelSpec) else resolve(spec, "encoder")
    max_length = min(spec.context, MAX_TOKENS)
    source = encoder_dir(spec)
    try:
        return _ov_encoder(spec, source, max_length)
    except (ModelError, OSError, ImportError) as exc:
        log.warning("the encoder runs on torch instead of OpenVINO: %s", str(exc).splitlines()[0] if str(exc) else exc)
    return Encoder(source, spec.name, max_length=max_length)


def _ov_encoder(spec: ModelSpec, source: Path, max_length: int) -> OvEncoder:
    import importlib.util

    if importlib.util.find_spec("openvino") is None:
        raise ImportError("openvino is not installed")
    graph = ov_encoder_path(spec)
    try:
        return OvEncoder(graph, source, spec.name, max_length=max_length)
    except ModelError:  # converted, but unreadable now (a file damaged at its recorded size): convert once more
        graph = ov_encoder_path(spec, force=True)
    try:
        return OvEncoder(graph, source, spec.name, max_length=max_length)
    except ModelError as exc:  # a fresh conversion does not load either: this machine cannot run it
        record_ov_encoder_failure(spec, str(exc))
        raise
