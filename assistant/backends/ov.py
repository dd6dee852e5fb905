"""The local model through OpenVINO GenAI (int8 weights on the CPU): the `local-ov` backend, the default engine.

Same prompts, tokenizer and stop rule as the transformers `local` backend (its prompt building is reused, not
copied), several times faster on a CPU. OpenVINO's continuous-batching pipeline reads the prompt once for the
n samples, decodes every request added to it together, and reports each sampled token's log-probability. What
differs from the transformers engine, and why its identity is its own (`local-ov`, `<model>@ov-int8`), so caches
never mix its samples or scores with the fp32 ones:

- Log-probabilities come from int8 (Q8_0) weights; against transformers fp32 the mean token log-probability of a
  continuation moves by about 0.01 (tests/test_backend_ov.py, benchmarks/generation_speed.py).
- Seeds: each request has its own random generator (`rng_seed`), so a prompt's samples do not depend on the other
  prompts of a batch; the n rows of a request are drawn from that one stream (no per-row seeds), so its samples
  differ from the transformers backend's for the same seed.
- Teacher-forced scoring is a one-token request with `echo`: the pipeline returns the log-probability of every
  prompt token, and the continuation's are read off its tail.
- Sampling caches prompt prefixes: a prompt read before (a redraw, a retry, the same function asked for again)
  costs only its new tokens. Scoring runs on a second pipeline without that cache, made on first use.
"""

from __future__ import annotations

import contextlib
import os
import random
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
)
from assistant.backends.local import ConvertedBackend, _length_batches, read_prompt_files
from assistant.backends.models import ModelSpec, ov_path, resolve, tokenizer_dir
from assistant.backends.prompts import Prompt
from assistant.backends.watchdog import Watchdog, stall_limit
from assistant.errors import ModelError

# Tokens the pipeline computes in one step (prompt chunks and decode rows together): bounds the memory of scoring
# (a scored position holds the whole vocabulary's logits, 0.6 MB) while keeping prompts in large chunks.
STEP_TOKENS = 1024
# Seconds one pipeline step may take before the engine counts as stuck (ASSIST_STALL_S overrides): a step reads
# at most STEP_TOKENS tokens (~7 s for the 0.5B on 2 cores, scaled from a timed 1,493-token prompt), so only a
# deadlock comes near it.
STALL_S = 300.0
# Gigabytes kept for the attention cache: ~12 kB a token for the 0.5B model, so 1 GB holds ~80,000 tokens.
CACHE_GB = 1
# Tokens of scored pairs handed to the pipeline at once (well within the attention cache).
SCORE_GROUP_TOKENS = 16384


class OpenVINOBackend(ConvertedBackend):
    """The local model converted to OpenVINO int8: sampling with per-token log-probs, teacher-forced scoring."""

    name = "local-ov"
    description = "the local model through OpenVINO int8 on this machine's CPU (the default local engine)"
    batches_prompts = True

    def __init__(
        self,
        spec: ModelSpec,
        directory: Path,
        tokenizer_directory: Path,
        threads: int | None = None,
        context: int | None = None,
        prefix_caching: bool = True,
    ) -> None:
        self.spec = spec
        self.model = spec.name
        self.directory = directory
        self.threads = threads or os.cpu_count() or 1
        self.usage = Usage()
        self._lock = threading.Lock()  # one call drives the pipeline at a time
        # A step that never returns (an engine deadlock) ends the process with a clear error, not a silent hang.
        self._watchdog = Watchdog(stall_limit(STALL_S), "the OpenVINO engine")
        self._next_id = 0
        self._scorer: Any = None  # the pipeline that scores, made on first use (see `_scoring_pipeline`)
        try:
            read_prompt_files(self, spec, tokenizer_directory, context)
            self.pipeline = self._make_pipeline(prefix_caching=prefix_caching)
            if not prefix_caching:
                self._scorer = self.pipeline  # it computes every position: it can score, no second copy needed
        except Exception as exc:  # a bad folder, tokenizer or converted model
            raise self._load_error(exc) from None

    def _make_pipeline(self, prefix_caching: bool) -> Any:
        """A continuous-batching pipeline over the converted model.

        With `prefix_caching`, the attention cache keeps what a prompt computed, and a later request that starts
        with the same tokens reads only the rest: redrawing an empty sample, carrying on a cut-off one, or asking
        again for the same function in the TUI or through `assist serve` skips most of the prompt. What it reuses
        is computed in other steps than a fresh read would, so a reused prompt's samples may part from a fresh
        one's by float noise (as on another CPU); they are draws from the same model. Scoring cannot use it: a
        cached position's log-probability is never computed again, and echo needs every one."""
        import openvino_genai

        scheduler = openvino_genai.SchedulerConfig()
        scheduler.cache_size = CACHE_GB
        scheduler.max_num_batched_tokens = STEP_TOKENS
        scheduler.enable_prefix_caching = prefix_caching
        return openvino_genai.ContinuousBatchingPipeline(
            str(self.directory),
            scheduler_config=scheduler,
            device="CPU",
            properties={"INFERENCE_NUM_THREADS": self.threads},
        )

    def _load_error(self, exc: Exception) -> ModelError:
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        return ModelError(
            f"model {self.spec.name} could not be loaded with OpenVINO ({first_line}); "
            f"run `assist models pull {self.spec.name} --force`"
        )

    def _scoring_pipeline(self) -> Any:
        """The pipeline without prefix caching that teacher-forced scoring (`echo`, `logprob`) runs on: the
        sampling one when it does not cache, else one made on first use, so a process that only samples holds one
        copy of the model."""
        if self._scorer is None:
            try:
                self._scorer = self._make_pipeline(prefix_caching=False)
            except Exception as exc:
                raise self._load_error(exc) from None
        return self._scorer

    @classmethod
    def load(
        cls,
        model: str | None = None,
        progress: Progress | None = None,
        context: int | None = None,
        threads: int | None = None,
        prefix_caching: bool = True,
    ) -> OpenVINOBackend:
        """Load a registered generator, converting it to OpenVINO first if this is its first use (~30 s once, and
        a few seconds for its tokenizer if the model was never pulled). `prefix_caching=False` reads every prompt
        afresh (what `benchmarks/redraw_cost.py` compares against)."""
        spec = resolve(model, "generator")
        directory = ov_path(spec, progress=progress)
        return cls(
            spec,
            directory,
            tokenizer_dir(spec, progress),
            threads=threads,
            context=context,
            prefix_caching=prefix_caching,
        )

    @property
    def identity(self) -> BackendIdentity:
        """Its own name, kind and label: samples and scores from int8 weights are keyed apart from fp32 ones."""
        return BackendIdentity(
            self.name,
            self.model,
            kind=self.name,
            label=f"{self.model}@ov-int8",
            details=(("engine", "openvino"), ("precision", "int8")),
        )

    def _request_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def _run(
        self, requests: list[tuple[list[int], Any]], report: Step | None, total: int, scoring: bool = False
    ) -> list[list[list[Any]]]:
        """Add every request, step the pipeline until all are done, and return each one's rows in sampling order,
        each as [token ids, their log-probabilities] (a row ends at its limit, an end token or a stop string).
        `scoring` requests (echo) run on the pipeline that computes every prompt position.

        `report` hears the progress after every step: a running request gains one token a step (all its rows
        decode together), a finished one counts as complete. The pipeline streams no tokens for several rows, so
        steps are what can be counted. If `report` raises, every request is cancelled and the exception reaches
        the caller."""
        import numpy as np
        import openvino as ov
        import openvino_genai

        running = openvino_genai.GenerationStatus.RUNNING
        handles = []
        rows: list[dict[int, list[Any]]] = [{} for _ in requests]
        each = total // max(1, len(requests))
        steps = [0] * len(requests)
        with self._lock:
            pipeline = self._scoring_pipeline() if scoring else self.pipeline
            try:
                for ids, config in requests:
                    tensor = ov.Tensor(np.asarray([ids], dtype=np.int64))
                    handles.append(pipeline.add_request(self._request_id(), tensor, config))
                while pipeline.has_non_finished_requests():
                    with self._watchdog.watch():
                        pipeline.step()
                    for handle, own in zip(handles, rows, strict=True):
                        _collect(handle, own)
                    if report is None:
                        continue
                    done = 0
                    for position, handle in enumerate(handles):
                        if handle.get_status() == running:
                            steps[position] += 1
                            done += min(steps[position], each)
                        else:
                            done += each
                    report(min(done, total), total)
            except BaseException:
                for handle in handles:
                    handle.cancel()
                with contextlib.suppress(Exception):  # the first error is the one to report
                    while pipeline.has_non_finished_requests():  # release the cancelled requests
                        with self._watchdog.watch():
                            pipeline.step()
                raise
            for handle, own in zip(handles, rows, strict=True):
                _collect(handle, own)
            finished = openvino_genai.GenerationStatus.FINISHED
            if any(handle.get_status() != finished for handle in handles):
                # The scheduler drops a request its attention cache cannot hold: never return fewer rows quietly.
                raise ModelError(
                    f"the OpenVINO engine could not hold this request in its {CACHE_GB} GB attention cache; "
                    "ask for fewer candidates (-n), fewer tokens (--max-new-tokens) or a shorter prompt"
                )
        return [[own[key] for key in sorted(own)] for own in rows]

    def _config(self, params: SamplingParams, stops: Sequence[str], seed: int | None) -> Any:
        import openvino_genai

        config = openvino_genai.GenerationConfig()
        config.max_new_tokens = params.max_new_tokens
        config.apply_chat_template = False  # the prompt is rendered here, exactly as the transformers engine does
        config.logprobs = 1
        config.stop_token_ids = set(self.end_ids)
        config.stop_strings = set(stops)
        config.include_stop_str_in_output = True  # cut below, the same way for every engine
        if params.temperature <= 0:
            config.do_sample = False
        else:
            config.do_sample = True
            config.temperature = params.temperature
            config.top_p = params.top_p
            config.num_return_sequences = params.n
            config.rng_seed = seed if seed is not None else random.SystemRandom().randrange(2**31)
        return config

    def _echo_config(self) -> Any:
        """A one-token greedy request that returns every prompt token's log-probability (teacher forcing)."""
        config = self._config(SamplingParams(n=1, temperature=0, max_new_tokens=1), (), None)
        config.echo = True
        config.stop_token_ids = set()
        return config

    def sample(self, prompt: Prompt, params: SamplingParams, step: Step | None = None) -> list[Completion]:
        """`params.n` candidates of one prompt, with each token's raw log-probability (see `sample_batch`)."""
        return self.sample_batch([prompt], params, step)[0]

    def sample_batch(
        self,
        prompts: Sequence[Prompt],
        params: SamplingParams,
        step: Step | None = None,
        seeds: Sequence[int | None] | None = None,
    ) -> list[list[Completion]]:
        """`params.n` candidates for each prompt, all decoded together; each prompt has its own seed (`seeds`, else
        `params.seed`), so its samples do not depend on its neighbours. A row stops at an end token or its closing
        fence; `step` hears the decoding's progress and may raise to cancel it."""
        if seeds is not None and len(seeds) != len(prompts):
            raise ValueError("one seed per prompt")
        prompt_tokens = sum(self.check_fits(prompt, params.max_new_tokens) for prompt in prompts)
        texts = [self.render(prompt) for prompt in prompts]
        return self.sample_texts(texts, params, [p.stop for p in prompts], step, seeds, prompt_tokens)

    def sample_texts(
        self,
        texts: Sequence[str],
        params: SamplingParams,
        stops: Sequence[Sequence[str]],
        step: Step | None = None,
        seeds: Sequence[int | None] | None = None,
        prompt_tokens: int | None = None,
    ) -> list[list[Completion]]:
        """`sample_batch` on prompts already rendered as text (what `assist serve` is sent): each text's
        candidates, cut at the first of its `stops`."""
        started = time.perf_counter()
        requests = []
        for position, text in enumerate(texts):
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            seed = params.seed if seeds is None else seeds[position]
            requests.append((ids, self._config(params, stops[position], seed)))
        total = params.max_new_tokens * len(texts)
        if step is not None:
            step(0, total)
        rows = self._run(requests, step, total)
        ends = set(self.end_ids)
        results = []
        for own_stops, own in zip(stops, rows, strict=True):
            completions = []
            for ids, values in own:
                kept = [(t, v) for t, v in zip(ids, values, strict=True) if t not in ends]
                tokens, logprobs = [t for t, _ in kept], [float(v) for _, v in kept]
                completions.append(self._completion(tokens, logprobs, own_stops, params.max_new_tokens))
            results.append(completions)
        generated = sum(c.tokens for own in results for c in own)
        if prompt_tokens is None:
            prompt_tokens = sum(len(ids) for ids, _ in requests)
        self.usage.add(prompt_tokens, generated, time.perf_counter() - started, len(texts))
        return results

    def echo(self, text: str) -> list[tuple[int, str, float | None]]:
        """Every token of `text` with its character offset and log-probability given the tokens before it (None
        for the first): what a completions endpoint's `echo` returns."""
        encoded = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        ids, offsets = encoded["input_ids"], encoded["offset_mapping"]
        if not ids:
            return []
        ((row,),) = self._run([(ids, self._echo_config())], None, 0, scoring=True)
        values = [None, *(float(v) for v in row[1][1 : len(ids)])]
        return [(start, text[start:end], value) for (start, end), value in zip(offsets, values, strict=True)]

    def logprob(self, pairs: Sequence[tuple[Prompt, str]]) -> list[TokenLogprobs]:
        """Token log-probabilities of each continuation given its prompt (teacher-forced: a one-token request that
        echoes the log-probability of every prompt token). All pairs go to the pipeline at once; it computes
        `STEP_TOKENS` positions a step. Pairs with an empty continuation get an empty result."""
        encoded = self._encode_pairs(pairs)
        results = [TokenLogprobs() for _ in encoded]
        started = time.perf_counter()
        # Handed over in groups of about SCORE_GROUP_TOKENS (the shared length grouping; empty continuations are
        # left out), so the attention cache holds a whole group.
        for group in _length_batches(encoded, SCORE_GROUP_TOKENS):
            requests = [(encoded[i][0] + encoded[i][1], self._echo_config()) for i in group]
            for i, (row,) in zip(group, self._run(requests, None, 0, scoring=True), strict=True):
                head, tail = encoded[i]
                # row[1][j] is the log-probability of token j given the tokens before it (j = 0 has no context).
                results[i] = TokenLogprobs(
                    tokens=self.tokenizer.convert_ids_to_tokens(tail),
                    logprobs=[float(v) for v in row[1][len(head) : len(head) + len(tail)]],
                )
        self.usage.add(
            sum(len(h) for h, _ in encoded), sum(len(t) for _, t in encoded), time.perf_counter() - started, len(pairs)
        )
        return results


def _collect(handle: Any, rows: dict[int, list[Any]]) -> None:
    """Add what a request's handle has ready to its rows ({sequence id: [token ids, log-probs]}).

    A one-row request streams its tokens step by step; a request for several rows hands them all over when it
    finished. `read` keys them by sequence id (in sampling order); `read_all` would sort them by likelihood and
    turn "the first sample" into "the likeliest" for every caller."""
    while handle.can_read():
        for key, output in handle.read().items():
            row = rows.setdefault(key, [[], []])
            row[0].extend(output.generated_ids)
            row[1].extend(output.generated_log_probs)
