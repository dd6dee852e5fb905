"""The local model through OpenVINO GenAI (int8 weights on the CPU, or int4 by the `local.weights` setting): the
`local-ov` backend, the default engine.

Same prompts, tokenizer and stop rule as the transformers `local` backend (its prompt building is reused, not
copied), several times faster on a CPU. OpenVINO's continuous-batching pipeline reads the prompt once for the
n samples, decodes every request added to it together, and reports each sampled token's log-probability. What
differs from the transformers engine, and why its identity is its own (`local-ov`, `<model>@ov-int8`; with int4
weights `local-ov-int4`, `<model>@ov-int4`), so caches never mix its samples or scores with the fp32 ones:

- Log-probabilities come from int8 (Q8_0) weights; against transformers fp32 the mean token log-probability of a
  continuation moves by about 0.01 (tests/test_backend_ov.py, benchmarks/generation_speed.py).
- Seeds: each request has its own random generator (`rng_seed`), so a prompt's samples do not depend on the other
  prompts of a batch. The pipeline streams the tokens of one-row requests only, so a prompt's n samples are n
  one-row requests (row i seeded with seed * 1009 + i, as the transformers engine seeds its rows, from another
  generator: the samples differ from its own), each watched on its own: a row going round in a loop, or running
  far past its finished siblings, is ended there and reported as cut off (`assistant.backends.loops`). The
  first row reads the prompt; the others are added once it has, and read it from the prefix cache.
- Teacher-forced scoring is a one-token request with `echo`: the pipeline returns the log-probability of every
  prompt token, and the continuation's are read off its tail.
- Sampling caches prompt prefixes: a prompt read before (a redraw, a retry, the same function asked for again)
  costs only its new tokens. Scoring runs on a second pipeline without that cache, made on first use.
- Stop strings of one-row requests are matched here, between steps, not by the engine: OpenVINO GenAI 2026.4's
  sampler deadlocked now and then while matching them (`assistant.backends.watchdog`). The match reproduces the
  engine's own rule and its holding back of the last tokens (`StopMatch`), so rows, and everything read from them
  while they decode, are what the engine gave when it matched them itself.
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from assistant.backends import (
    BackendIdentity,
    Completion,
    Progress,
    RowStream,
    SampleGroup,
    SamplingParams,
    Seeds,
    Step,
    TokenLogprobs,
    Usage,
    first_row_stream,
)
from assistant.backends.local import ConvertedBackend, _length_batches, read_prompt_files
from assistant.backends.loops import RowWatch
from assistant.backends.models import ModelSpec, ov_path, resolve, tokenizer_dir, weights_for
from assistant.backends.prompts import Prompt
from assistant.backends.watchdog import Watchdog, stall_limit
from assistant.config import LOCAL_DECODINGS as DECODINGS
from assistant.errors import ModelError, UsageError

# Tokens the pipeline computes in one step (prompt chunks and decode rows together): bounds the memory of scoring
# (a scored position holds the whole vocabulary's logits, 0.6 MB) while keeping prompts in large chunks.
STEP_TOKENS = 1024
# Seconds one pipeline step may take before the engine counts as stuck (ASSIST_STALL_S overrides): a step reads
# at most STEP_TOKENS tokens (~7 s for the 0.5B on 2 cores, scaled from a timed 1,493-token prompt), so only a
# deadlock comes near it.
STALL_S = 300.0
# Gigabytes kept for the attention cache, by the precision it is stored in (a ceiling it grows to, not memory taken
# up front): in u8 ~12 kB a token for the 0.5B model, so 1 GB holds ~80,000 tokens; 16 bits take twice the room.
CACHE_GB = {None: 1, "u8": 1, "f16": 2}
# The attention cache's precision: None leaves it to OpenVINO (u8 on x86 CPUs, values scaled per token). With u8
# the same prompt and seed drew other samples from one process to the next when the prompt's length was a whole
# number of the cache's 32-token blocks (with one thread they repeat: the CPU plugin's threaded u8 path is not
# deterministic there; tests/test_backend_ov.py holds such a prompt). f16 repeats them, not measurably slower (−0.62 s
# [−1.66, +0.65] a stub request) and with no loss of pass@1 shown (results/speed-attention-cache, plan 2): f16 is the
# default, u8 may be asked for by name.
ATTENTION_CACHE: str | None = "f16"
# Tokens of scored pairs handed to the pipeline at once (well within the attention cache).
SCORE_GROUP_TOKENS = 16384
# Speculative decoding: the smaller model with the same tokenizer that drafts tokens for each generator, and how
# many it drafts a step (the generator checks them all in one pass and keeps those it would have chosen).
DRAFT_MODELS = {"qwen2.5-coder-1.5b": "qwen2.5-coder-0.5b"}
ASSISTANT_TOKENS = 4
# Prompt-lookup decoding: the longest run of the last tokens looked up in the prompt, whose continuation there is
# offered as the draft (an answer that copies its prompt's names gains; others pay a little).
LOOKUP_NGRAM = 3
LOOKUP_TOKENS = 4
# What `local.decoding = "auto"` drafts sampled rows with, per model: only what measured faster. On an idle 2-core
# CPU (benchmarks/speed_report.py's decoding part, 96 tokens, 2026-12-05) neither drafting did, for the 1.5B: greedy
# 23.2 / 24.5 tok/s plain (stub fill / request) against 18.7 / 19.3 speculative and 22.0 / 20.0 prompt lookup; five
# sampled rows 68.2 / 67.0 plain against 34.5 / 58.3 and 42.2 / 39.4 (the 0.5B draft costs half a 1.5B step here,
# and speculative reads each row's prompt afresh). So auto is plain everywhere; the settings stay for other CPUs.
AUTO_DECODING: dict[str, str] = {}


def check_attention_cache(precision: str | None) -> str | None:
    """`precision` if the engine can keep its attention cache in it (a key of CACHE_GB), else a ValueError."""
    if precision not in CACHE_GB:
        named = ", ".join(name for name in CACHE_GB if name is not None)
        raise ValueError(f"attention_cache is one of {named} (or None: OpenVINO's default), not {precision!r}")
    return precision


class OpenVINOBackend(ConvertedBackend):
    """The local model converted to OpenVINO (int8 or int4 weights): sampling with per-token log-probs,
    teacher-forced scoring."""

    name = "local-ov"
    description = "the local model through OpenVINO (int8, or int4) on this machine's CPU (the default local engine)"
    batches_prompts = True
    batches_groups = True  # sample_groups decodes every group in one run of the pipeline
    streams = True  # one-row requests hand over their tokens step by step

    def __init__(
        self,
        spec: ModelSpec,
        directory: Path,
        tokenizer_directory: Path,
        threads: int | None = None,
        context: int | None = None,
        prefix_caching: bool = True,
        decoding: str = "auto",
        progress: Progress | None = None,
        attention_cache: str | None = ATTENTION_CACHE,
        weights: str = "int8",
    ) -> None:
        self.attention_cache = check_attention_cache(attention_cache)
        self.weights = weights  # what `directory` holds (`models.ov_path`): int8 or int4
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
        self.prefix_caching = prefix_caching
        self.decoding = decoding_for(spec.name, decoding)  # how sampled rows decode
        # `auto` drafts sampled rows only: a drafted greedy answer parts from the plain one at near ties, and the
        # pipeline drafts every request or none, so greedy requests then have a plain pipeline of their own.
        self.greedy_decoding = "plain" if decoding == "auto" else self.decoding
        draft = self._draft_directory(progress) if self.decoding == "speculative" else None
        self._lanes: dict[str, tuple[Any, bool]] = {}  # decoding -> (its pipeline, whether it caches prefixes)
        try:
            read_prompt_files(self, spec, tokenizer_directory, context)
            for lane in dict.fromkeys((self.greedy_decoding, self.decoding)):
                # OpenVINO GenAI 2026.4 fails a speculative request whose prompt it cached before ("content_length
                # <= prompt_ids.size() + m_generated_ids.size()"): speculative decoding reads every prompt afresh.
                caches = prefix_caching and lane != "speculative"
                pipeline = self._make_pipeline(caches, lane, draft if lane == "speculative" else None)
                self._lanes[lane] = (pipeline, caches)
            self.pipeline = self._lanes[self.greedy_decoding][0]
            if self._lanes.get("plain", (None, True))[1] is False:
                # it computes every position: it can score, no second copy needed
                self._scorer = self._lanes["plain"][0]
        except Exception as exc:  # a bad folder, tokenizer or converted model
            raise self._load_error(exc) from None

    def _draft_directory(self, progress: Progress | None) -> Path:
        """The converted draft model of speculative decoding (converted on first use, like the generator; int8, as
        the identity's `decoding` label assumes)."""
        return ov_path(resolve(DRAFT_MODELS[self.spec.name], "generator"), progress=progress, weights="int8")

    def _make_pipeline(self, prefix_caching: bool, decoding: str = "plain", draft: Path | None = None) -> Any:
        """A continuous-batching pipeline over the converted model.

        With `prefix_caching`, the attention cache keeps what a prompt computed, and a later request that starts
        with the same tokens reads only the rest: redrawing an empty sample, carrying on a cut-off one, or asking
        again for the same function in the TUI or through `assist serve` skips most of the prompt. What it reuses
        is computed in other steps than a fresh read would, so a reused prompt's samples may part from a fresh
        one's by float noise (as on another CPU); they are draws from the same model. Scoring cannot use it: a
        cached position's log-probability is never computed again, and echo needs every one."""
        import openvino_genai

        scheduler = openvino_genai.SchedulerConfig()
        scheduler.cache_size = CACHE_GB[self.attention_cache]
        scheduler.max_num_batched_tokens = STEP_TOKENS
        scheduler.enable_prefix_caching = prefix_caching
        properties: dict[str, Any] = {"INFERENCE_NUM_THREADS": self.threads}
        if self.attention_cache is not None:  # else OpenVINO's own choice for this CPU, as before the setting
            properties["KV_CACHE_PRECISION"] = self.attention_cache
        if draft is not None:
            properties["draft_model"] = openvino_genai.draft_model(str(draft), "CPU")
        elif decoding == "prompt-lookup":
            properties["prompt_lookup"] = True
        return openvino_genai.ContinuousBatchingPipeline(
            str(self.directory), scheduler_config=scheduler, device="CPU", properties=properties
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
        decoding: str = "auto",
        attention_cache: str | None = ATTENTION_CACHE,
        weights: str = "auto",
    ) -> OpenVINOBackend:
        """Load a registered generator, converting it to OpenVINO first if this is its first use (~30 s once, and
        a few seconds for its tokenizer if the model was never pulled). `prefix_caching=False` reads every prompt
        afresh (what `benchmarks/redraw_cost.py` compares against). `decoding` (the `local.decoding` setting):
        plain, speculative (a smaller model drafts, `DRAFT_MODELS`), prompt-lookup (the prompt drafts), or auto
        (sampled rows as measured faster for this model on a CPU, `AUTO_DECODING`, plain where nothing did; greedy
        requests always plain, on a pipeline of their own when the sampled rows are drafted). `attention_cache`:
        the precision the attention cache is kept in, u8 or f16; None (`ATTENTION_CACHE`) leaves it to OpenVINO.
        `weights` (the `local.weights` setting): int8, int4, or auto (`models.AUTO_WEIGHTS`, else int8)."""
        check_attention_cache(attention_cache)  # before a first use's conversion, not after
        spec = resolve(model, "generator")
        weights = weights_for(spec.name, weights)
        directory = ov_path(spec, progress=progress, weights=weights)
        return cls(
            spec,
            directory,
            tokenizer_dir(spec, progress),
            threads=threads,
            context=context,
            prefix_caching=prefix_caching,
            decoding=decoding,
            progress=progress,
            attention_cache=attention_cache,
            weights=weights,
        )

    @property
    def identity(self) -> BackendIdentity:
        """Its own name, kind and label: samples and scores from int8 weights are keyed apart from fp32 ones, and
        samples drawn with a draft (speculative, prompt-lookup: the same model's draws, but not the same draws for a
        seed) apart from plain ones. Scores are always plain, so the label stays. An attention cache in another
        precision than u8 (OpenVINO's on the x86 CPUs every cache before 2026-12-08 was drawn on) parts samples and
        scores by rounding: it marks the kind, the label and the details, the default f16 included, so nothing
        drawn with u8 is taken for its draws; so do int4 weights (int8's strings are those every committed cache
        holds)."""
        plain = self.decoding == "plain"
        cache = "" if self.attention_cache in (None, "u8") else f"-kv{self.attention_cache}"
        engine = self.name if self.weights == "int8" else f"{self.name}-{self.weights}"
        return BackendIdentity(
            self.name,
            self.model,
            kind=(engine if plain else f"{engine}-{self.decoding}") + cache,
            label=f"{self.model}@ov-{self.weights}{cache}",
            details=(
                ("engine", "openvino"),
                ("precision", self.weights),
                *(() if plain else (("decoding", self.decoding),)),
                *((("attention cache", self.attention_cache),) if cache else ()),
            ),
        )

    def _request_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def _run(
        self,
        requests: list[tuple[list[int], Any]],
        report: Step | None,
        total: int,
        scoring: bool = False,
        watch: _Watch | None = None,
        pipeline: Any = None,
        stream: RowStream | None = None,
    ) -> list[list[list[Any]]]:
        """Add every request, step the pipeline until all are done, and return each one's rows in sampling order,
        each as [token ids, their log-probabilities] (a row ends at its limit, an end token or a stop string).
        `scoring` requests (echo) run on the pipeline that computes every prompt position, others on `pipeline`
        (default: the greedy requests' one).

        `watch` (sampling) ends a one-row request at a stop string of its `watch.stops` (matched here, see
        `StopMatch`). It groups one-row requests by prompt: a row going round in a loop, or running far past its
        finished siblings, is stopped there (its tokens so far kept, its reason in `watch.cut`), and the rows it
        names as `later` are added once their prompt's first row has read the prompt (from the prefix cache).

        `report` hears the progress after every step: a running request gains one token a step (all its rows
        decode together), a finished one counts as complete. The pipeline streams no tokens for several rows, so
        steps are what can be counted. If `report` raises, every request is cancelled and the exception reaches
        the caller. `stream` hears the first request's first row after every step."""
        import numpy as np
        import openvino as ov
        import openvino_genai

        running = openvino_genai.GenerationStatus.RUNNING
        watch = watch or _Watch([], {}, set())
        handles: dict[int, Any] = {}
        rows: list[dict[int, list[Any]]] = [{} for _ in requests]
        steps = [0] * len(requests)
        with self._lock:
            pipeline = self._scoring_pipeline() if scoring else (pipeline or self.pipeline)

            def add(position: int) -> None:
                ids, config = requests[position]
                tensor = ov.Tensor(np.asarray([ids], dtype=np.int64))
                handles[position] = pipeline.add_request(self._request_id(), tensor, config)

            try:
                for position in range(len(requests)):
                    if position not in watch.later:
                        add(position)
                while pipeline.has_non_finished_requests() or len(handles) < len(requests):
                    with self._watchdog.watch():
                        pipeline.step()
                    for position, handle in handles.items():
                        watch.collect(position, handle, rows[position], running)
                    if stream is not None and rows[0]:
                        stream.text(self._decode(rows[0][min(rows[0])][0]))
                    for position in watch.ready(handles, rows, running):
                        add(position)
                    watch.cut_stragglers(handles, rows, running)
                    if report is not None:
                        report(*_progress(requests, handles, steps, running, total))
            except BaseException:
                for handle in handles.values():
                    handle.cancel()
                with contextlib.suppress(Exception):  # the first error is the one to report
                    while pipeline.has_non_finished_requests():  # release the cancelled requests
                        with self._watchdog.watch():
                            pipeline.step()
                raise
            for position, handle in handles.items():
                watch.collect(position, handle, rows[position], running)
            finished = openvino_genai.GenerationStatus.FINISHED
            ended_here = watch.cut.keys() | watch.matched
            if any(h.get_status() != finished for p, h in handles.items() if p not in ended_here):
                # The scheduler drops a request its attention cache cannot hold: never return fewer rows quietly.
                gigabytes = CACHE_GB[self.attention_cache]
                raise ModelError(
                    f"the OpenVINO engine could not hold this request in its {gigabytes} GB attention cache; "
                    "ask for fewer candidates (n), fewer tokens (max_new_tokens) or a shorter prompt",
                    setting="n:cache",
                    values={"cache_gb": gigabytes},
                )
        return [[own[key] for key in sorted(own)] for own in rows]

    def _config(self, params: SamplingParams, stops: Sequence[str], seed: int | None, lane: str = "plain") -> Any:
        """A request's generation config; `lane` is the decoding of the pipeline it goes to (which drafts every
        request or none). Only a request for several rows has the engine match its `stops`: a one-row request's
        are matched between steps (`StopMatch`, registered in the `_Watch`)."""
        import openvino_genai

        config = openvino_genai.GenerationConfig()
        config.max_new_tokens = params.max_new_tokens
        config.apply_chat_template = False  # the prompt is rendered here, exactly as the transformers engine does
        config.logprobs = 1
        config.stop_token_ids = set(self.end_ids)
        if params.temperature > 0 and params.n > 1:
            # The pipeline hands a request's rows over only once all of them are done, so they cannot be matched
            # between steps: the engine matches them itself (the deadlock's risk, on the one path that needs it).
            config.stop_strings = set(stops)
        config.include_stop_str_in_output = True  # cut below, the same way for every engine
        if lane == "speculative":
            config.num_assistant_tokens = ASSISTANT_TOKENS
        elif lane == "prompt-lookup":
            config.num_assistant_tokens = LOOKUP_TOKENS
            config.max_ngram_size = LOOKUP_NGRAM
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

    def sample_batch(
        self, prompts: Sequence[Prompt], params: SamplingParams, step: Step | None = None, seeds: Seeds | None = None
    ) -> list[list[Completion]]:
        """`params.n` candidates for each prompt, all decoded together; each prompt has its own seed (`seeds`, else
        `params.seed`), so its samples do not depend on its neighbours. A row stops at an end token or its closing
        fence; `step` hears the decoding's progress and may raise to cancel it."""
        prompt_tokens = self.check_batch(prompts, params, seeds)
        texts = [self.render(prompt) for prompt in prompts]
        stream = first_row_stream(prompts)
        return self.sample_texts(texts, params, [p.stop for p in prompts], step, seeds, prompt_tokens, stream)

    def sample_groups(self, groups: Sequence[SampleGroup], step: Step | None = None) -> list[list[list[Completion]]]:
        """Each group's `sample_batch`, all groups decoded together in one run of the pipeline: a step reads the
        weights once for all its rows, so a side request (agree's tests beside a stub's samples) costs little more
        than its own rows. A group's rows are what `sample_batch` gives it alone for the same prompts and seeds, up
        to the rounding of batched arithmetic: a row decoded beside other rows may part by float noise in its
        log-probabilities (1e-4 to 0.03 on a token) and, now and then, a sampled token that flips (the 0.5B on 8
        stubs: a sample's text in 2, agree's tests in 2). Groups whose rows go to different pipelines (drafted
        sampled rows beside greedy ones) run one after another."""
        if not groups or len({self._lane(group.params) for group in groups}) > 1:
            return super().sample_groups(groups, step)
        parts, prompt_tokens = [], 0
        for group in groups:
            prompt_tokens += self.check_batch(group.prompts, group.params, group.seeds)
            stops = [prompt.stop for prompt in group.prompts]
            parts.append(_Texts([self.render(p) for p in group.prompts], group.params, stops, group.seeds))
        stream = first_row_stream(groups[0].prompts)
        return self._sample_parts(parts, step, prompt_tokens, stream)

    def _lane(self, params: SamplingParams) -> str:
        """The decoding of the pipeline a request with these parameters goes to."""
        return self.decoding if params.temperature > 0 else self.greedy_decoding

    def sample_texts(
        self,
        texts: Sequence[str],
        params: SamplingParams,
        stops: Sequence[Sequence[str]],
        step: Step | None = None,
        seeds: Seeds | None = None,
        prompt_tokens: int | None = None,
        stream: RowStream | None = None,
    ) -> list[list[Completion]]:
        """`sample_batch` on prompts already rendered as text (what `assist serve` is sent): each text's
        candidates, cut at the first of its `stops`. A row going round in a loop, or running far past the
        others of its prompt, is ended early and reported as cut off (`Completion.cut_reason`). `stream` hears
        the first text's first row as it is decoded (when that row is a request of its own)."""
        return self._sample_parts([_Texts(texts, params, stops, seeds)], step, prompt_tokens, stream)[0]

    def _sample_parts(
        self, parts: Sequence[_Texts], step: Step | None, prompt_tokens: int | None, stream: RowStream | None
    ) -> list[list[list[Completion]]]:
        """:meth:`sample_texts` for several parts (texts with their own parameters, stops and seeds) decoded in one
        run of the pipeline; each part's candidates per text. The texts of parts after the first are added once the
        first text has read its prompt (with the prefix cache): a prompt beginning as it does (the same system
        message) reads that beginning from the cache, as a call made after it would."""
        started = time.perf_counter()
        flat = [(part, at) for part in parts for at in range(len(part.texts))]
        requests: list[tuple[list[int], Any]] = []
        owners: list[int] = []  # the text each request answers
        watch = _Watch([], {}, set())
        lane = self._lane(parts[0].params)
        pipeline, caches = self._lanes[lane]
        for position, (part, at) in enumerate(flat):
            params = part.params
            # The pipeline streams only one-row requests: a prompt's n samples are asked for as n one-row requests
            # (each seeded by its number), so each row can be read, and ended, on its own. Without the prefix cache
            # each would read the prompt afresh: then the n rows stay one request, unwatched, unless drafted
            # decoding (which takes one-row requests only) is on.
            split = params.temperature > 0 and params.n > 1 and (caches or lane != "plain")
            ids = self.tokenizer(part.texts[at], add_special_tokens=False)["input_ids"]
            seed = params.seed if part.seeds is None else part.seeds[at]
            rows = params.n if split else 1
            watch.watches[position] = RowWatch(rows, self._decode)
            first = len(requests)
            leader = 0 if part is not parts[0] and caches else first  # whose first token lets this one in
            owners += [position] * rows
            if not split:
                requests.append((ids, self._config(params, part.stops[at], seed, lane)))
                watched = params.temperature <= 0 or params.n == 1
                watch.groups.append((position, 0, leader) if watched else None)
            else:
                for row in range(rows):
                    own = None if seed is None else seed * 1009 + row
                    requests.append((ids, self._config(replace(params, n=1), part.stops[at], own, lane)))
                    watch.groups.append((position, row, leader if row == 0 else first))
                    if row and caches:
                        watch.later.add(first + row)
            if leader != first:
                watch.later.add(first)
        # Every one-row request (each watched one) has its stop strings matched between steps (see `_config`).
        matches = [self._stop_match(part.stops[at]) for part, at in flat]
        watch.stops = {r: matches[place[0]] for r, place in enumerate(watch.groups) if place and matches[place[0]]}
        total = sum(part.params.max_new_tokens for part, _ in flat)
        if step is not None:
            step(0, total)
        rows_by_request = self._run(requests, step, total, watch=watch, pipeline=pipeline, stream=stream)
        ends = set(self.end_ids)
        results: list[list[Completion]] = [[] for _ in flat]
        for position, own in enumerate(rows_by_request):
            part, at = flat[owners[position]]
            for ids, values in own:
                kept = [(t, v) for t, v in zip(ids, values, strict=True) if t not in ends]
                tokens, logprobs = [t for t, _ in kept], [float(v) for _, v in kept]
                completion = self._completion(
                    tokens, logprobs, part.stops[at], part.params.max_new_tokens, watch.cut.get(position)
                )
                results[owners[position]].append(completion)
        generated = sum(c.tokens for own in results for c in own)
        if prompt_tokens is None:
            prompt_tokens = sum(len(requests[owners.index(p)][0]) for p in range(len(flat)))
        self.usage.add(prompt_tokens, generated, time.perf_counter() - started, len(flat))
        grouped, start = [], 0
        for part in parts:
            grouped.append(results[start : start + len(part.texts)])
            start += len(part.texts)
        return grouped

    def _decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def _stop_match(self, stops: Sequence[str]) -> StopMatch | None:
        """How a one-row request ends at these stop strings (None when it has none): the engine's rule, with the
        engine's window (the most tokens any of them takes encoded alone, as the engine encodes it)."""
        if not stops:
            return None
        window = max(len(self.tokenizer(stop, add_special_tokens=False)["input_ids"]) for stop in stops)
        return StopMatch(tuple(sorted(set(stops))), window, self._decode)

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


def decoding_for(model: str, decoding: str) -> str:
    """The decoding the engine uses for `model` when asked for `decoding` (auto: `AUTO_DECODING`'s, else plain);
    speculative decoding for a model without a draft model is a one-line error."""
    if decoding not in DECODINGS:
        raise UsageError(f"unknown decoding {decoding!r}; choose {', '.join(DECODINGS)}")
    if decoding == "auto":
        return AUTO_DECODING.get(model, "plain")
    if decoding == "speculative" and model not in DRAFT_MODELS:
        drafted = ", ".join(DRAFT_MODELS)
        raise UsageError(f"speculative decoding needs a draft model, and {model} has none (those that do: {drafted})")
    return decoding


@dataclass(frozen=True)
class StopMatch:
    """A one-row request's stop strings, matched between steps exactly as OpenVINO GenAI 2026.4's sampler matches
    them (`match_stop_string` in src/cpp/src/sampling/sampler.cpp), so a row ends at the token, and keeps the
    tokens, it did when the engine matched them (whose matching could deadlock: `assistant.backends.watchdog`).

    After each token that leaves the row running, the engine decodes only the last `window` tokens (the most any
    stop string takes, encoded alone) and looks for the stop strings there, in sorted order. At the first found,
    it keeps the tokens up to the first whose decoding, from the window's start, holds the window's text up to
    the stop string's end less its trailing spaces and line ends, so one ending in a space or line end may keep
    its text without that character. While a row runs the engine hands over all but its last `window` tokens (a
    stop string might remove them): `_Watch.collect` shows them the same way.

    One departure: the engine misses a stop string spread over more tokens than its own encoding (the 1.5B
    closed a fence as "``" then "`\n\n" in 6 of the 100 rows of 20 stub requests, then wrote an explanation to
    its end token: 85 tokens more in one of them). Here such a row ends at the token that completes it. The text and
    log-probabilities are the same either way (`_completion` cuts both at the stop string); only the tokens
    decoded after it are saved."""

    stops: tuple[str, ...]  # sorted, as the engine's std::set holds them
    window: int
    decode: Callable[[Sequence[int]], str]

    def kept(self, ids: Sequence[int], end: int) -> int | None:
        """How many tokens a running row whose first `end` tokens are `ids[:end]` keeps when a stop string ends
        in its window, else None (no stop string yet)."""
        if end < self.window:
            return None
        kept = self._engine_kept(ids, end)
        return kept if kept is not None else self._spread(ids, end)

    def _spread(self, ids: Sequence[int], end: int) -> int | None:
        """`end` when token `end` completes a stop string spread over more tokens than the window (what the
        engine misses), else None. A token decodes to at least one character, so a stop string spans at most
        as many tokens as it has characters."""
        for stop in self.stops:
            start = max(0, end - len(stop))
            if stop in self.decode(ids[start:end]) and stop not in self.decode(ids[start : end - 1]):
                return end
        return None

    def _engine_kept(self, ids: Sequence[int], end: int) -> int | None:
        """The engine's own rule (the class's docstring)."""
        start = end - self.window
        text = self.decode(ids[start:end])
        for stop in self.stops:
            at = text.find(stop)
            if at < 0:
                continue
            head = text[: at + len(stop)].rstrip(" \n")
            if not head:
                return start  # the engine then removes the whole window
            within = (count for count in range(1, self.window + 1) if head in self.decode(ids[start : start + count]))
            return start + next(within, self.window)
        return None


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


@dataclass(frozen=True)
class _Texts:
    """Prompts rendered as text with their sampling parameters, stop strings and seeds (default `params.seed`):
    one part of a run of the pipeline (`OpenVINOBackend._sample_parts`)."""

    texts: Sequence[str]
    params: SamplingParams
    stops: Sequence[Sequence[str]]
    seeds: Seeds | None = None


@dataclass
class _Watch:
    """How `OpenVINOBackend._run` reads sampling requests: their stop strings (`StopMatch`) and stragglers
    (`assistant.backends.loops`)."""

    # Per request: (its prompt, its row among the prompt's, the prompt's first request), or None: not watched
    # (a request for several rows, which the pipeline hands over only when all of them are done).
    groups: list[tuple[int, int, int] | None]
    watches: dict[int, RowWatch]  # per prompt
    later: set[int]  # requests added once their prompt's first request has read the prompt
    cut: dict[int, str] = field(default_factory=dict)  # request -> why it was ended early
    stops: dict[int, StopMatch] = field(default_factory=dict)  # one-row request -> its stop strings, matched here
    read: dict[int, dict[int, list[Any]]] = field(default_factory=dict)  # request -> all read of its row so far
    matched: set[int] = field(default_factory=set)  # requests ended here at a stop string

    def collect(self, position: int, handle: Any, shown: dict[int, list[Any]], running: Any) -> None:
        """Read what a request's handle has ready into `shown` (its rows, as `_collect` keeps them). A one-row
        request in `stops` is matched after each new token and stopped at a stop string; `shown` then holds what
        the engine handed over when it matched them itself, so every reader of the rows sees the same: all but
        the last `window` tokens while the row runs, every kept one once it ended, nothing more once it was cut
        (the engine dropped the tokens it held back)."""
        match = self.stops.get(position)
        if match is None:
            _collect(handle, shown)
            return
        if position in self.matched:
            return
        read = self.read.setdefault(position, {})
        if position in self.cut:
            # A cut row the engine's next step finds alone (nothing to compute) is ended as out of memory, which
            # handed over the tokens it held back: show them then, as it did.
            if handle.get_status().name == "IGNORED":
                for key, (ids, values) in read.items():
                    shown[key] = [list(ids), list(values)]
            return
        before = next((len(ids) for ids, _ in read.values()), 0)
        _collect(handle, read)
        ended = handle.get_status() != running
        for key, (ids, values) in read.items():  # the one row
            # The engine matches after each token that leaves the row running: not after an end token or the limit.
            for end in range(before + 1, len(ids) + (0 if ended else 1)):
                kept = match.kept(ids, end)
                if kept is not None:
                    del ids[kept:], values[kept:]
                    if not ended:
                        handle.stop()  # the pipeline computes nothing more for it; it frees it at the next step
                    self.matched.add(position)
                    ended = True
                    break
            count = len(ids) if ended else len(ids) - match.window
            if count > 0 or ended:  # tokens it holds back are never removed from what it showed
                row = shown.setdefault(key, [[], []])
                row[0].extend(ids[len(row[0]) : count])
                row[1].extend(values[len(row[1]) : count])

    def _watched(self, handles: dict[int, Any]) -> Iterator[tuple[int, Any, tuple[int, int, int]]]:
        for position, handle in handles.items():
            place = self.groups[position] if position < len(self.groups) else None
            if place is not None:
                yield position, handle, place

    def ready(self, handles: dict[int, Any], rows: list[dict[int, list[Any]]], running: Any) -> list[int]:
        """The later requests to add now: their prompt's first request has a token (it read the prompt, which
        the prefix cache now holds) or has ended."""
        due = []
        for position in sorted(self.later - handles.keys()):
            place = self.groups[position]
            leader = handles.get(place[2]) if place else None  # a later request of its own may lead it
            if leader is not None and (rows[place[2]] or leader.get_status() != running):
                due.append(position)
        return due

    def cut_stragglers(self, handles: dict[int, Any], rows: list[dict[int, list[Any]]], running: Any) -> None:
        """Record the rows that ended, and stop the running ones that loop or run far past their siblings."""
        for position, handle, (prompt, row, _) in self._watched(handles):
            if position in self.cut:
                continue
            ids = next(iter(rows[position].values()))[0] if rows[position] else []
            watch = self.watches[prompt]
            if handle.get_status() != running:
                watch.finish(row, len(ids))
                continue
            reason = watch.verdict(row, ids)
            if reason is not None:
                handle.stop()  # its tokens so far were read; the pipeline frees it at the next step
                self.cut[position] = reason


def _progress(
    requests: list[tuple[list[int], Any]], handles: dict[int, Any], steps: list[int], running: Any, total: int
) -> tuple[int, int]:
    """(done, total) after a step: each added request's tokens so far (one a step while it runs, its limit once it
    ended), out of every request's limit, scaled to `total`."""
    limits = [config.max_new_tokens for _, config in requests]
    done = 0
    for position, handle in handles.items():
        if handle.get_status() == running:
            steps[position] += 1
            done += min(steps[position], limits[position])
        else:
            done += limits[position]
    return min(total, done * total // max(1, sum(limits))), total
