"""An OpenAI-compatible embeddings endpoint as TST^R's frozen embedder (the default is the local encoder).

TST^R treats the embedding model as a black box (`../shared/docs/methods.md`, section 2), so any server with
`POST /v1/embeddings` will do: OpenAI, vLLM, llama.cpp's server started with `--embedding`, Ollama, infinity.
An embedder is named `default` or `openai:<model>`; the name is recorded in the trained model's manifest, and
retrieval embeds its queries with the same embedder (and the same server) that training used.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

import numpy as np

from assistant.errors import ModelError, UsageError

PREFIX = "openai:"


@dataclass(eq=False, repr=False)  # one connection: equal only to itself, and its client never printed
class EndpointEncoder:
    """Texts → unit vectors from an OpenAI-compatible `/embeddings` endpoint, in batches, in input order.

    Satisfies :class:`assistant.indexing.index.TextEncoder`. Vectors are L2-normalised here: servers differ on it.
    """

    client: Any
    model: str
    _: KW_ONLY
    base_url: str
    timeout: float
    retries: int
    batch_size: int = 64
    name: str = field(init=False)  # `openai:<model>`
    dim: int = field(init=False, default=0)  # learnt from the first answer (`connect` asks at once)

    def __post_init__(self) -> None:
        self.name = f"{PREFIX}{self.model}"

    @classmethod
    def connect(
        cls,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 120.0,
        retries: int = 3,
        batch_size: int = 64,
    ) -> EndpointEncoder:
        """Connect and embed one probe text, so a wrong URL or model fails here with a one-line error."""
        from assistant.backends.openai_api import make_client

        if not model:
            raise UsageError("name the embeddings model: an embedder openai:<model>", setting="embedder:no_model")
        client, url = make_client(base_url, api_key, timeout, retries, what="an embeddings endpoint")
        encoder = cls(client, model, base_url=url, timeout=timeout, retries=retries, batch_size=batch_size)
        encoder.encode(["dimension probe"])
        return encoder

    def encode(self, texts: Sequence[str], progress: Callable[[int, int], None] | None = None) -> np.ndarray:
        """Embed `texts` → float32 array (len(texts), dim) of unit vectors, in input order."""
        rows: list[np.ndarray] = []
        for start in range(0, len(texts), self.batch_size):
            rows.extend(self._batch(list(texts[start : start + self.batch_size])))
            if progress:
                progress(len(rows), len(texts))
        if not rows:
            return np.zeros((0, self.dim), dtype="float32")
        return np.stack(rows)

    def _batch(self, texts: list[str]) -> list[np.ndarray]:
        import openai

        from assistant.backends.openai_api import call_api

        url = f"{self.base_url}/embeddings"
        try:
            response = call_api(
                self.client.embeddings.create,
                url=url,
                timeout=self.timeout,
                retries=self.retries,
                too_long="the embeddings model cannot take texts this long",
                model=self.model,
                # Servers reject empty strings; a space embeds as "nothing said".
                input=[text if text.strip() else " " for text in texts],
                encoding_format="float",  # the client would ask for base64, which not every server speaks
            )
        except ModelError as exc:
            if isinstance(exc.__cause__, openai.NotFoundError):
                raise ModelError(
                    f"{url} answered 404: the server has no embeddings endpoint, or does not serve model "
                    f"{self.model!r} (llama.cpp's server needs --embedding)"
                ) from None
            raise
        data = sorted(getattr(response, "data", None) or [], key=lambda item: item.index)
        if len(data) != len(texts):
            raise ModelError(f"{url} returned {len(data)} embeddings for {len(texts)} texts")
        rows = []
        for item in data:
            vector = np.asarray(item.embedding, dtype=np.float32)
            if vector.ndim != 1 or not vector.size:
                raise ModelError(f"{url} returned an embedding that is not a list of numbers")
            if self.dim and vector.size != self.dim:
                raise ModelError(f"{url} returned {vector.size}-d embeddings after {self.dim}-d ones")
            norm = float(np.linalg.norm(vector))
            if not np.isfinite(norm) or norm == 0.0:
                raise ModelError(f"{url} returned a zero or non-finite embedding")
            self.dim = vector.size
            rows.append(vector / norm)
        return rows


def load_embedder(name: str, *, base_url: str | None = None) -> EndpointEncoder:
    """Connect to the embeddings endpoint `name` (`openai:<model>`); the local encoder needs no connecting.

    The endpoint's URL is `base_url`, else the `openai.base_url` setting (env OPENAI_BASE_URL); the key, timeout
    and retries come from the `openai.*` settings, as for the openai generation backend.
    """
    if not name.startswith(PREFIX):
        raise UsageError(f"unknown embedder {name!r}; use default or openai:<model>")
    from assistant.config import load_settings

    # Only the server matters here: a repo's untrusted backend or model (generation's) does not stop embeddings.
    settings = load_settings({"openai.base_url": base_url}, check_trust=False)
    settings.check_trust(["openai.base_url"])
    return EndpointEncoder.connect(
        name[len(PREFIX) :],
        base_url=settings["openai.base_url"],
        api_key=settings["openai.api_key"],
        timeout=settings["openai.timeout"],
        retries=settings["openai.retries"],
    )
