"""Dense text encoder: a sentence-transformers style model (mean pooling, L2-normalised), loaded from disk."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from assistant.backends.models import ModelSpec, encoder_dir, quiet_transformers, resolve
from assistant.errors import ModelError


def mean_pool(model, batch, normalize: bool = True):  # -> torch.Tensor (rows, dim)
    """Mean of the last hidden states over real tokens (padding masked out), L2-normalised unless asked not to.

    One pooling for every encoder assist runs or trains: the index encoder, LAIL, JOINTCOM and Condor.
    """
    import torch

    hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, dim=-1) if normalize else pooled


# Tokens embedded per text. Training (LAIL) and retrieval share it: an encoder trained on truncated texts
# would otherwise meet longer ones at query time.
MAX_TOKENS = 256


def embed_texts(model, tokenizer, texts: Sequence[str], max_length: int):  # -> torch.Tensor
    """Tokenize (padded, truncated) and mean-pool `texts` with a trainable encoder; gradients flow."""
    batch = tokenizer(list(texts), padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    return mean_pool(model, batch)


def dot_scores(pool: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """`pool @ vector` computed by torch, for query-time scoring right after an `Encoder.encode`.

    numpy's BLAS keeps its own thread pool; run straight after torch's, the two contend for the cores and
    a 0.3 ms product took up to 100 ms (p95) on 2 cores. torch reuses the pool the encoder just used.
    """
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
            self.tokenizer = AutoTokenizer.from_pretrained(str(directory))
            self.model = AutoModel.from_pretrained(str(directory), dtype=torch.float32).eval()
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
