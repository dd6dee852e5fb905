"""The local model through CTranslate2 (int8 on the CPU): the `local-ct2` backend, the optional `fast` extra.

Same prompts, tokenizer, stop rule and results as the transformers `local` backend (its prompt building is reused,
not copied); several times faster on a CPU. What differs, and why its identity is its own (`local-ct2`,
`<model>@ct2-int8`), so caches never mix its samples or scores with the transformers ones:

- Log-probabilities come from int8 weights: against transformers fp32 the mean token log-probability of a
  continuation moves by about 0.01 (see tests/test_backend_ct2.py and benchmarks/generation_speed.py).
- Seeds: CTranslate2 draws from one random generator per worker thread, seeded when that thread first samples;
  `set_random_seed` alone does not reset it. A seeded call therefore re-creates the generator (about 0.3 s: the
  weights come from the page cache) after setting the seed, so the same prompt, n and seed give the same samples
  (on the same machine and ctranslate2 version). The n rows are drawn from that one stream, so row i depends on n,
  and there are no per-row seeds: its samples differ from the transformers backend's for the same seed.
- Prompts are sampled one after the other (`batches_prompts` is False): CTranslate2 forwards only the shortest
  prompt's length at once and feeds the rest of longer prompts token by token, and one global seed cannot keep a
  prompt's samples independent of its batch neighbours.
- No shared-prefix scoring (`logprob_shared`): LAIL labeling falls back to `logprob`.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from assistant.backends import (
    BackendIdentity,
    Completion,
    Progress,
    SamplingParams,
    Step,
    TokenLogprobs,
    Usage,
    row_stream,
)
from assistant.backends.local import ConvertedBackend, _length_batches, read_prompt_files
from assistant.backends.models import ModelSpec, ct2_path, resolve
from assistant.backends.prompts import Prompt
from assistant.errors import ModelError, install_extra

DEFAULT_QUANTIZATION = "int8"


class CT2Backend(ConvertedBackend):
    """The local model converted to CTranslate2 int8: sampling with per-token log-probs, teacher-forced scoring."""

    name = "local-ct2"
    description = (
        f"the local model through CTranslate2 int8 on this machine's CPU (optional extra: {install_extra('fast')})"
    )
    batches_prompts = False
    streams = True

    def __init__(
        self,
        spec: ModelSpec,
        directory: Path,
        hf_directory: Path,
        quantization: str = DEFAULT_QUANTIZATION,
        threads: int | None = None,
        context: int | None = None,
    ) -> None:
        self.spec = spec
        self.model = spec.name
        self.quantization = quantization
        self.directory = directory
        self.threads = threads or os.cpu_count() or 1
        self.usage = Usage()
        self._lock = threading.Lock()  # one generation or scoring at a time (seeding re-creates the generator)
        try:
            read_prompt_files(self, spec, hf_directory, context)
            self.generator = self._new_generator()
        except Exception as exc:  # a bad folder, tokenizer or converted model
            first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            raise ModelError(
                f"model {spec.name} could not be loaded with CTranslate2 ({first_line}); "
                f"run `assist models pull {spec.name} --force`"
            ) from None

    def _new_generator(self) -> Any:
        import ctranslate2

        compute = "int8" if self.quantization.startswith("int8") else self.quantization
        return ctranslate2.Generator(
            str(self.directory), device="cpu", compute_type=compute, inter_threads=1, intra_threads=self.threads
        )

    @classmethod
    def load(
        cls,
        model: str | None = None,
        progress: Progress | None = None,
        quantization: str = DEFAULT_QUANTIZATION,
        context: int | None = None,
        threads: int | None = None,
    ) -> CT2Backend:
        """Load a registered generator, converting it to CTranslate2 first if this is its first use (~20 s once;
        the transformers model is assembled and converted before that if it is missing too)."""
        spec = resolve(model, "generator")
        directory = ct2_path(spec, quantization, progress=progress)
        return cls(spec, directory, spec.cache_dir / "hf", quantization=quantization, threads=threads, context=context)

    @property
    def identity(self) -> BackendIdentity:
        """Its own name, kind and label: samples and scores from int8 weights are keyed apart from fp32 ones."""
        return BackendIdentity(
            self.name,
            self.model,
            kind=self.name,
            label=f"{self.model}@ct2-{self.quantization}",
            details=(("engine", "ctranslate2"), ("precision", self.quantization)),
        )

    def _tokens(self, ids: Sequence[int]) -> list[str]:
        return self.tokenizer.convert_ids_to_tokens(list(ids))

    def sample(self, prompt: Prompt, params: SamplingParams, step: Step | None = None) -> list[Completion]:
        """`params.n` candidates of one prompt, decoded together after one call (see the module's note on seeds).

        Each sampled token's raw log-probability (before temperature and top-p) is recorded by the step callback,
        which also stops a row at its closing fence and tells `step` how far decoding has got (a `step` that
        raises stops the decoding there and the exception reaches the caller).
        """
        import ctranslate2

        started = time.perf_counter()
        prompt_tokens = self.check_fits(prompt, params.max_new_tokens)
        ids = self.tokenizer(self.render(prompt), add_special_tokens=False)["input_ids"]
        greedy = params.temperature <= 0
        n = 1 if greedy else params.n
        total = params.max_new_tokens
        stops = list(prompt.stop)
        window = max((len(stop) for stop in stops), default=0) + 2
        ends = set(self.end_ids)
        generated: list[list[int]] = [[] for _ in range(n)]
        logprobs: list[list[float]] = [[] for _ in range(n)]
        report: Step = step or (lambda done, total: None)
        reached = [0]
        stream = row_stream(prompt.answer_prefix, stops)

        def on_token(result: Any) -> bool:
            """Record one row's token; True stops that row (end token or closing fence)."""
            if result.step + 1 > reached[0]:
                reached[0] = result.step + 1
                report(min(reached[0], total), total)  # may raise: cancels the whole call
            row = result.hypothesis_id
            if result.token_id in ends:
                return True
            generated[row].append(result.token_id)
            logprobs[row].append(float(result.log_prob))
            if stream is not None and row == 0:
                stream.text(self.tokenizer.decode(generated[0], skip_special_tokens=True))
            tail = self.tokenizer.decode(generated[row][-window:], skip_special_tokens=True)
            return any(stop in tail for stop in stops)

        report(0, total)
        with self._lock:
            if params.seed is not None and not greedy:
                # The worker thread seeds its random generator when it first samples: a fresh generator makes the
                # seed hold for this call (see the module docstring).
                ctranslate2.set_random_seed(params.seed)
                self.generator = None
                self.generator = self._new_generator()
            self.generator.generate_batch(
                [self._tokens(ids)],
                max_length=total,
                sampling_topk=1 if greedy else 0,  # 0: no top-k cut (CTranslate2's default 1 is greedy)
                sampling_topp=1.0 if greedy else params.top_p,
                sampling_temperature=1.0 if greedy else params.temperature,
                num_hypotheses=n,
                end_token=self.end_ids,
                include_prompt_in_result=False,
                return_scores=True,
                callback=on_token,
            )
        results = [
            self._completion(tokens, values, stops, total) for tokens, values in zip(generated, logprobs, strict=True)
        ]
        self.usage.add(prompt_tokens, sum(c.tokens for c in results), time.perf_counter() - started)
        return results

    def logprob(self, pairs: Sequence[tuple[Prompt, str]], batch_tokens: int = 1024) -> list[TokenLogprobs]:
        """Token log-probabilities of each continuation given its prompt (teacher-forced, `score_batch`).

        CTranslate2 computes the whole vocabulary (152k columns) at every position of a scored row, so batches
        are bounded by padded tokens (`batch_tokens`, ~0.6 GB of log-probabilities at 1,024); a longer pair is
        scored alone. Pairs with an empty continuation get an empty result, as with the transformers backend.
        """
        encoded = self._encode_pairs(pairs)
        results = [TokenLogprobs() for _ in encoded]
        started = time.perf_counter()
        for batch in _length_batches(encoded, batch_tokens):
            rows = [self._tokens(encoded[i][0] + encoded[i][1]) for i in batch]
            with self._lock:
                scored = self.generator.score_batch(rows, max_input_length=0)
            for i, result in zip(batch, scored, strict=True):
                head, tail = encoded[i]
                # log_probs[j] is the log-probability of token j + 1 given the tokens before it.
                values = list(result.log_probs[len(head) - 1 : len(head) - 1 + len(tail)])
                results[i] = TokenLogprobs(tokens=self._tokens(tail), logprobs=values)
        self.usage.add(
            sum(len(h) for h, _ in encoded), sum(len(t) for _, t in encoded), time.perf_counter() - started, len(pairs)
        )
        return results
