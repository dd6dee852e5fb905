"""`assist serve`: the local model, loaded once on its fast engine, behind an OpenAI-compatible API on 127.0.0.1.

The TUI, the hook and repeated `assist generate` calls then skip the model load: point them at it with
`ASSIST_BACKEND=openai OPENAI_BASE_URL=http://127.0.0.1:PORT/v1 ASSIST_OPENAI_API=completions`. With the
completions endpoint the client renders the prompt with the model's own chat template, so the served model sees
exactly what the local backend would, and scoring works (`echo` returns every prompt token's log-probability).

Endpoints: `GET /v1/models` (with `max_model_len`), `POST /v1/completions` (`prompt`, `n`, `max_tokens`,
`temperature`, `top_p`, `seed`, `stop`, `logprobs`, `echo`) and `POST /v1/chat/completions` (`messages` and the
same sampling fields). `echo` scores the prompt and generates nothing. With `"stream": true` either answers as
OpenAI's streaming does (server-sent events: a chunk as the first choice's text grows, the other choices' text at
the end, then `data: [DONE]`), which editors' clients ask for by default. Requests run one at a time; a generation
whose client hung up is stopped (checked between decoding steps), and a client that leaves early is no error.
No network access beyond the loopback interface, no authentication: it is for this machine's user.

On a Unix socket (a warm server, :mod:`assistant.backends.warm`) it also answers assist's own calls, which run the
engine's `sample_batch`, `sample_groups` and `logprob` on the prompts themselves, so the candidates and scores are
exactly the in-process engine's: `POST /v1/assist/sample` (`prompts`, `params`, `seeds`), `POST
/v1/assist/sample-groups` (`groups`, each with its `prompts`, `params` and `seeds`, decoded together) and `POST
/v1/assist/score` (`pairs`). Their answers are lines of JSON: `{"step": [done, total]}` as the work goes on, then
`{"result": ...}` or `{"error": {"kind", "message"}}`. Such a server stops itself after an idle timeout.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import socketserver
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from assistant.backends import Completion, RowStream, SampleGroup, SamplingParams, Step, streaming
from assistant.backends.prompts import Prompt
from assistant.config import DEFAULT_MAX_NEW_TOKENS, SEED_MAX
from assistant.errors import AssistError

MAX_BODY_BYTES = 8 << 20  # a request larger than this is refused before it is read
MAX_N = 64


CHECK_EVERY_S = 0.05  # how often a generation looks whether its client is still there


class RequestError(Exception):
    """A bad request: answered with HTTP 400 and this message."""


class ClientGone(Exception):
    """The client closed its connection: its generation is stopped and nothing is answered."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hung up or reset mid-request is its own business: no traceback per connection.
        if isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            return
        super().handle_error(request, client_address)


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    handle_error = _Server.handle_error

    def server_bind(self) -> None:
        # Made with no rights for group or others from the start: no moment when another user could connect.
        old = os.umask(0o177)
        try:
            super().server_bind()
        finally:
            os.umask(old)


def hung_up(connection: socket.socket) -> bool:
    """Whether the peer of `connection` has closed or reset it (data it sent ahead is not a hang-up)."""
    try:
        readable, _, _ = select.select([connection], [], [], 0)
        return bool(readable) and connection.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):  # reset, or closed here already
        return True


def watch(connection: socket.socket) -> Step:
    """A progress callback for the engine that raises :class:`ClientGone` once the client has hung up (looked at
    no more often than every `CHECK_EVERY_S`): the engine then cancels the generation."""
    last = [float("-inf")]

    def step(done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] >= CHECK_EVERY_S:
            last[0] = now
            if hung_up(connection):
                raise ClientGone

    return step


class LocalServer:
    """An OpenAI-compatible HTTP server over a loaded local backend (one with `sample_texts` and `echo`, such as
    `local-ov`), listening on 127.0.0.1 (`port`) or on a Unix socket (`unix_path`); `start()` serves from a thread,
    `stop()` shuts it down. With `idle_timeout_s`, serving ends after that long without a request."""

    def __init__(
        self, backend: Any, port: int = 0, unix_path: Path | None = None, idle_timeout_s: float | None = None
    ) -> None:
        if not hasattr(backend, "sample_texts") or not hasattr(backend, "echo"):
            raise AssistError(
                f"the {backend.name} backend cannot be served; use the openvino engine",
                setting="engine:not_served",
                values={"backend": backend.name},
            )
        self.backend = backend
        self.unix_path = unix_path
        self.idle_timeout_s = idle_timeout_s
        self.last_used = time.monotonic()
        self.busy = 0  # requests being answered; an idle timeout never cuts one
        self._busy_lock = threading.Lock()
        self.httpd: socketserver.BaseServer = self._listen(port, unix_path)
        self._thread: threading.Thread | None = None

    def _listen(self, port: int, unix_path: Path | None) -> socketserver.BaseServer:
        if unix_path is not None:
            unix_path.unlink(missing_ok=True)  # a stale socket of a server that is gone (its owner checked that)
            try:
                httpd: socketserver.BaseServer = _UnixServer(str(unix_path), _handler(self))
            except OSError as exc:
                raise AssistError(f"cannot listen on {unix_path} ({exc.strerror})") from None
            self.port = None
            self.base_url = f"unix:{unix_path}"
            return httpd
        try:
            httpd = _Server(("127.0.0.1", port), _handler(self))
        except OSError as exc:
            raise AssistError(
                f"cannot listen on 127.0.0.1:{port} ({exc.strerror}); choose another port",
                setting="port:taken",
                values={"port": port, "error": exc.strerror},
            ) from None
        self.port = httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        return httpd

    def start(self) -> LocalServer:
        """Serve from a background thread."""
        self._thread = threading.Thread(target=self.serve_forever, name="assist-serve", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until `stop()`, Ctrl-C or the idle timeout."""
        if self.idle_timeout_s:
            threading.Thread(target=self._stop_when_idle, name="assist-serve-idle", daemon=True).start()
        self.httpd.serve_forever()

    def _stop_when_idle(self) -> None:
        while True:
            time.sleep(min(5.0, self.idle_timeout_s or 5.0))
            if self.busy == 0 and self.idle_s() >= (self.idle_timeout_s or float("inf")):
                self.httpd.shutdown()
                return

    def idle_s(self) -> float:
        """Seconds since the last request ended (0 while one runs)."""
        return 0.0 if self.busy else time.monotonic() - self.last_used

    def working(self, delta: int) -> None:
        """Count a request in (1) or out (-1): the idle time runs from the last one out."""
        with self._busy_lock:
            self.busy += delta
            self.last_used = time.monotonic()

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the API ---------------------------------------------------------------------------------------------

    def models(self) -> dict[str, Any]:
        """`GET /v1/models`: the one model served, with its context (`max_model_len`, as vLLM says it)."""
        model = {"id": self.backend.model, "object": "model", "owned_by": "assist"}
        listing: dict[str, Any] = {"object": "list", "data": [model | {"max_model_len": self.backend.context}]}
        if self.unix_path is not None:  # what `assist serve --status` shows
            listing["assist"] = {"idle_s": round(self.idle_s(), 1), "busy": self.busy, "pid": os.getpid()}
        return listing

    def assist_sample(self, body: dict[str, Any], step: Step | None = None, emit: Any = None) -> dict[str, Any]:
        """`POST /v1/assist/sample`: the engine's `sample_batch` on the client's prompts, as it would run in the
        client's process (the same prompts, parameters and seeds: the same candidates). With `stream`, the first
        row's text as it is written goes to `emit` as `{"text": [call, text]}` lines (for the client's terminal)."""
        prompts = [prompt_from_json(p) for p in _list(body, "prompts")]
        params = SamplingParams(**_dict(body, "params"))
        seeds = body.get("seeds")
        before = self.backend.usage.to_json()
        with _streaming_to(emit if body.get("stream") else None):
            rows = self.backend.sample_batch(prompts, params, step, seeds)
        completions = [[asdict(c) for c in row] for row in rows]
        return {"completions": completions, "usage": self.backend.usage.since(before)}

    def assist_sample_groups(self, body: dict[str, Any], step: Step | None = None, emit: Any = None) -> dict[str, Any]:
        """`POST /v1/assist/sample-groups`: the engine's `sample_groups` on the client's groups (each an object with
        `prompts`, `params` and `seeds`, as `/v1/assist/sample` takes them), as it would run in the client's process;
        with `stream`, the first group's first row goes to `emit` (the sampling call's first; no later one's)."""
        groups = []
        for group in _list(body, "groups"):
            if not isinstance(group, dict):
                raise RequestError("each group must be an object")
            seeds = group.get("seeds")
            prompts = tuple(prompt_from_json(p) for p in _list(group, "prompts"))
            params = SamplingParams(**_dict(group, "params"))
            groups.append(SampleGroup(prompts, params, None if seeds is None else tuple(seeds)))
        before = self.backend.usage.to_json()
        first = None if emit is None else (lambda call, text: emit(call, text) if call == 0 else None)
        with _streaming_to(first if body.get("stream") else None):
            sampled = self.backend.sample_groups(groups, step)
        completions = [[[asdict(c) for c in row] for row in rows] for rows in sampled]
        return {"groups": completions, "usage": self.backend.usage.since(before)}

    def assist_score(self, body: dict[str, Any], step: Step | None = None, emit: Any = None) -> dict[str, Any]:
        """`POST /v1/assist/score`: the engine's `logprob` on the client's (prompt, continuation) pairs."""
        pairs = [(prompt_from_json(p), str(text)) for p, text in _list(body, "pairs")]
        before = self.backend.usage.to_json()
        scores = self.backend.logprob(pairs)
        return {"scores": [[s.tokens, s.logprobs] for s in scores], "usage": self.backend.usage.since(before)}

    def completions(self, body: dict[str, Any], step: Step | None = None, emit: Emit | None = None) -> dict[str, Any]:
        """`POST /v1/completions`: candidates continuing the prompt text, or with `echo` its tokens' log-probs;
        `step` hears the decoding's progress and may raise to stop it; `emit` hears the first choice's text as it
        grows (a streamed answer)."""
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1:
            prompt = prompt[0]
        if not isinstance(prompt, str) or not prompt:
            raise RequestError("prompt must be one non-empty string")
        self._check_model(body)
        if body.get("echo"):
            if emit is not None:
                raise RequestError("echo scores the prompt and writes nothing to stream; ask without stream")
            return self._echo(prompt)
        params, stops = _sampling(body)
        logprobs = body.get("logprobs") is not None

        def choice(completion: Completion) -> dict[str, Any]:
            fields: dict[str, Any] = {"text": completion.text, "finish_reason": completion.finish_reason}
            if logprobs and completion.logprobs is not None:
                fields["logprobs"] = {"token_logprobs": list(completion.logprobs)}
            return fields

        return self._sampled("text_completion", prompt, params, stops, step, choice, emit)

    def chat(self, body: dict[str, Any], step: Step | None = None, emit: Emit | None = None) -> dict[str, Any]:
        """`POST /v1/chat/completions`: the messages through the model's chat template, then candidates (`step`
        and `emit` as for :meth:`completions`)."""
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise RequestError("messages must be a non-empty list")
        for message in messages:
            if not isinstance(message, dict) or not isinstance(message.get("content"), str):
                raise RequestError("each message needs a role and a string content")
        self._check_model(body)
        params, stops = _sampling(body)
        tokenizer = self.backend.tokenizer
        text = tokenizer.apply_chat_template(
            [{"role": str(m.get("role", "user")), "content": m["content"]} for m in messages],
            tokenize=False,
            add_generation_prompt=True,
        )
        logprobs = bool(body.get("logprobs"))

        def choice(completion: Completion) -> dict[str, Any]:
            message = {"role": "assistant", "content": completion.text}
            fields: dict[str, Any] = {"message": message, "finish_reason": completion.finish_reason}
            entries = _token_entries(tokenizer, completion) if logprobs else None
            if entries is not None:
                fields["logprobs"] = {"content": entries}
            return fields

        return self._sampled("chat.completion", text, params, stops, step, choice, emit)

    def _sampled(
        self,
        kind: str,
        text: str,
        params: SamplingParams,
        stops: tuple[str, ...],
        step: Step | None,
        choice: Callable[[Completion], dict[str, Any]],
        emit: Emit | None = None,
    ) -> dict[str, Any]:
        """Both endpoints' answer: candidates continuing `text` (refused first if it and the token limit do not fit
        the context), numbered choices of `choice`'s fields, and the usage. `emit` hears the first choice's text
        as it is decoded, up to what a stop string or an unfinished character could still take back."""
        self._check_fits(text, params.max_new_tokens)
        if emit is None:
            (completions,) = self.backend.sample_texts([text], params, [stops], step=step)
        else:
            stream = RowStream(lambda call, shown: emit(settled(shown, stops)), 0, "", stops)
            (completions,) = self.backend.sample_texts([text], params, [stops], step=step, stream=stream)
        choices = [{"index": index, **choice(completion)} for index, completion in enumerate(completions)]
        return self._response(kind, text, choices, completions)

    def _echo(self, prompt: str) -> dict[str, Any]:
        self._check_fits(prompt, 1)
        tokens = self.backend.echo(prompt)
        logprobs = {
            "tokens": [token for _, token, _ in tokens],
            "token_logprobs": [value for _, _, value in tokens],
            "text_offset": [offset for offset, _, _ in tokens],
        }
        choice = {"index": 0, "text": prompt, "finish_reason": "length", "logprobs": logprobs}
        return self._response("text_completion", prompt, [choice], [])

    def _response(self, kind: str, prompt: str, choices: list, completions: list[Completion]) -> dict[str, Any]:
        prompt_tokens = len(self.backend.tokenizer(prompt, add_special_tokens=False)["input_ids"])
        generated = sum(c.tokens for c in completions)
        return {
            "id": f"assist-{uuid.uuid4().hex[:12]}",
            "object": kind,
            "created": int(time.time()),
            "model": self.backend.model,
            "choices": choices,
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": generated,
                "total_tokens": prompt_tokens + generated,
            },
        }

    def _check_model(self, body: dict[str, Any]) -> None:
        model = body.get("model")
        if model not in (None, "", self.backend.model):
            raise RequestError(f"this server serves {self.backend.model}, not {model}")

    def _check_fits(self, text: str, new_tokens: int) -> None:
        used = len(self.backend.tokenizer(text, add_special_tokens=False)["input_ids"])
        if used + new_tokens > self.backend.context:
            raise RequestError(
                f"the prompt takes {used} tokens and {new_tokens} more are asked for, over the context of "
                f"{self.backend.context}"
            )


Emit = Callable[[str], None]  # hears a streamed choice's text so far


def settled(text: str, stops: tuple[str, ...]) -> str:
    """What of a row's text so far can be sent and never taken back: without an unfinished character at its end
    (decoded from part of a token) or an ending that a stop string could begin (the answer is cut there)."""
    text = text.rstrip("\ufffd")
    held = max((n for stop in stops for n in range(1, len(stop)) if text.endswith(stop[:n])), default=0)
    return text[: len(text) - held]


def prompt_to_json(prompt: Prompt) -> dict[str, Any]:
    """A prompt as the warm server reads it back (:func:`prompt_from_json`)."""
    return {"messages": [dict(m) for m in prompt.messages], "answer_prefix": prompt.answer_prefix, "stop": prompt.stop}


def prompt_from_json(data: Any) -> Prompt:
    """The prompt a client sent; a malformed one is a ValueError."""
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise ValueError("a prompt needs a list of messages")
    messages = tuple({str(k): str(v) for k, v in m.items()} for m in data["messages"] if isinstance(m, dict))
    stop = data.get("stop")
    if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
        raise ValueError("a prompt's stop must be a list of strings")
    return Prompt(messages=messages, answer_prefix=str(data.get("answer_prefix", "")), stop=tuple(stop))


@contextlib.contextmanager
def _streaming_to(emit: Any) -> Iterator[None]:
    """Within the block, the engine's streamed first row goes to `emit` (nothing without it)."""
    if emit is None:
        yield
        return
    with streaming(emit):
        yield


def _list(body: dict[str, Any], key: str) -> list[Any]:
    value = body.get(key)
    if not isinstance(value, list) or not value:
        raise RequestError(f"{key} must be a non-empty list")
    return value


def _dict(body: dict[str, Any], key: str) -> dict[str, Any]:
    value = body.get(key)
    if not isinstance(value, dict):
        raise RequestError(f"{key} must be an object")
    return value


def _sampling(body: dict[str, Any]) -> tuple[SamplingParams, tuple[str, ...]]:
    """Sampling settings from an OpenAI request body, checked (OpenAI's defaults where absent)."""

    def number(key: str, default: float, low: float, high: float) -> float:
        value = body.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
            raise RequestError(f"{key} must be a number from {low:g} to {high:g}")
        return value

    n = body.get("n", 1)
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_N:
        raise RequestError(f"n must be an integer from 1 to {MAX_N}")
    tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    max_tokens = DEFAULT_MAX_NEW_TOKENS if tokens is None else tokens
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise RequestError("max_tokens must be a positive integer")
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= SEED_MAX):
        raise RequestError(f"seed must be an integer from 0 to {SEED_MAX}")
    stop = body.get("stop") or []
    stops = (stop,) if isinstance(stop, str) else tuple(stop) if isinstance(stop, list) else (None,)
    if not all(isinstance(s, str) and s for s in stops) or len(stops) > 4:
        raise RequestError("stop must be a string or up to 4 non-empty strings")
    top_p = number("top_p", 1.0, 0, 1)
    if top_p == 0:
        raise RequestError("top_p must be above 0")
    params = SamplingParams(
        n=n,
        temperature=number("temperature", 1.0, 0, 2),
        top_p=top_p,
        max_new_tokens=max_tokens,
        seed=seed,
    )
    return params, stops


def _token_entries(tokenizer: Any, completion: Completion) -> list[dict[str, Any]] | None:
    """Chat log-probabilities as OpenAI lists them, one entry per token of the answer; None when the answer's
    text does not re-tokenize to as many tokens as there are values (rare: a token split across the cut)."""
    if completion.logprobs is None:
        return None
    ids = tokenizer(completion.text, add_special_tokens=False)["input_ids"]
    if len(ids) != len(completion.logprobs):
        return None
    pieces = [tokenizer.decode([token]) for token in ids]
    return [{"token": piece, "logprob": value} for piece, value in zip(pieces, completion.logprobs, strict=True)]


def _handler(server: LocalServer) -> type[BaseHTTPRequestHandler]:
    """The request handler class of `server` (OpenAI's routes, and on a Unix socket assist's own)."""
    routes = {"/v1/completions": server.completions, "/v1/chat/completions": server.chat}
    if server.unix_path is not None:
        streamed = {
            "/v1/assist/sample": server.assist_sample,
            "/v1/assist/sample-groups": server.assist_sample_groups,
            "/v1/assist/score": server.assist_score,
        }
    else:
        streamed = {}
    return type("Handler", (_Handler,), {"app": server, "routes": routes, "streamed": streamed})


def _setting_of(exc: AssistError) -> dict[str, Any]:
    """The setting an error is about and its values, as JSON (a path as text), so that the client's door words it
    as it would the in-process engine's error (the command line with its flags); {} for an error about none."""
    if exc.setting is None:
        return {}
    plain = (str, int, float, bool, type(None))
    values = {key: value if isinstance(value, plain) else str(value) for key, value in exc.values.items()}
    return {"setting": exc.setting, "values": values}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 60  # seconds a client may take to send its request; a stalled one does not hold a thread
    app: LocalServer
    routes: dict[str, Any]
    streamed: dict[str, Any]

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the terminal shows assist's own lines
        return

    def _refused(self) -> bool:
        """Refuse what a web page in a browser could send: another Host (DNS rebinding) or a body that is not
        declared JSON (a form or text/plain POST needs no permission from the page's user). A Unix socket is out
        of a browser's reach, and only its user can open it: any Host is fine there."""
        port = self.app.port
        if port is not None and self.headers.get("Host", "") not in (f"127.0.0.1:{port}", f"localhost:{port}"):
            self._error(HTTPStatus.FORBIDDEN, "only requests to 127.0.0.1 or localhost are served")
            return True
        if self.command == "POST" and not self.headers.get("Content-Type", "").startswith("application/json"):
            self._error(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "the body must be JSON (Content-Type: application/json)")
            return True
        return False

    def do_GET(self) -> None:
        if self._refused():
            return
        if self.path.rstrip("/") == "/v1/models":
            self._reply(HTTPStatus.OK, self.app.models())
        else:
            self._error(HTTPStatus.NOT_FOUND, f"no such endpoint: GET {self.path}")

    def do_POST(self) -> None:
        if self._refused():
            return
        path = self.path.rstrip("/")
        route = self.routes.get(path) or self.streamed.get(path)
        if route is None:
            self._error(HTTPStatus.NOT_FOUND, f"no such endpoint: POST {self.path}")
            return
        body = self._body()
        if body is None:
            return
        self.app.working(1)
        try:
            if path in self.streamed:
                self._stream(route, body)
            elif body.get("stream"):
                self._events(route, body, chat=path.endswith("/chat/completions"))
            else:
                self._answer(route, body)
        finally:
            self.app.working(-1)

    def _body(self) -> dict[str, Any] | None:
        """The request's JSON object, or None once a 400 says what is wrong with it."""
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 < length <= MAX_BODY_BYTES:
            self._error(HTTPStatus.BAD_REQUEST, f"a JSON body of at most {MAX_BODY_BYTES} bytes is required")
            return None
        try:
            body = json.loads(self.rfile.read(length))
        except ValueError as exc:
            self._error(HTTPStatus.BAD_REQUEST, str(exc))
            return None
        if not isinstance(body, dict):
            self._error(HTTPStatus.BAD_REQUEST, "the body must be a JSON object")
            return None
        return body

    def _answer(self, route: Any, body: dict[str, Any]) -> None:
        try:
            self._reply(HTTPStatus.OK, route(body, watch(self.connection)))
        except ClientGone:  # its generation was stopped; there is no one to answer
            self.close_connection = True
        except (RequestError, ValueError) as exc:
            self._error(HTTPStatus.BAD_REQUEST, str(exc))
        except Exception as exc:  # the model failed: say so rather than drop the connection
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}")

    def _events(self, route: Any, body: dict[str, Any], chat: bool) -> None:
        """OpenAI's streamed answer to a `"stream": true` request (see :class:`_Chunks`); an error before the first
        chunk is the usual JSON error, one after it an error event."""
        chunks = _Chunks(self, chat, self.app.backend.model)
        options = body.get("stream_options")
        usage = isinstance(options, dict) and bool(options.get("include_usage"))
        try:
            chunks.finish(route(body, watch(self.connection), chunks.grow), usage)
        except ClientGone:
            self.close_connection = True
        except (RequestError, ValueError) as exc:
            chunks.fail(HTTPStatus.BAD_REQUEST, str(exc))
        except Exception as exc:  # the model failed: say so rather than drop the connection
            chunks.fail(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}")

    def _stream(self, route: Any, body: dict[str, Any]) -> None:
        """Answer with lines of JSON: progress as it comes, then the result or the error (its kind kept, so the
        client raises what the engine raised in its own process)."""
        self.close_connection = True
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Connection", "close")
        self.end_headers()
        gone = watch(self.connection)

        def step(done: int, total: int) -> None:
            gone(done, total)
            self._line({"step": [done, total]})

        try:
            self._line({"result": route(body, step, lambda call, text: self._line({"text": [call, text]}))})
        except ClientGone:
            return
        except (RequestError, TypeError, KeyError, ValueError) as exc:
            self._line({"error": {"kind": "ModelError", "message": f"the warm server refused the request: {exc}"}})
        except AssistError as exc:  # the engine's own one-line errors, as the in-process engine raises them
            self._line({"error": {"kind": type(exc).__name__, "message": str(exc), **_setting_of(exc)}})
        except Exception as exc:
            self._line({"error": {"kind": "ModelError", "message": f"{type(exc).__name__}: {exc}"}})

    def _line(self, payload: dict[str, Any]) -> None:
        try:
            self.wfile.write(json.dumps(payload).encode() + b"\n")
            self.wfile.flush()
        except OSError:
            raise ClientGone from None

    def _reply(self, status: HTTPStatus, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: HTTPStatus, message: str) -> None:
        kind = "invalid_request_error" if status < 500 else "server_error"
        self._reply(status, {"error": {"message": message, "type": kind, "code": int(status)}})


class _Chunks:
    """One streamed answer as OpenAI sends it: server-sent events, each a chunk object (`chat.completion.chunk`,
    or `text_completion` for the completions endpoint); a chunk as the first choice's text grows, then each
    choice's rest with its finish reason and, when asked for, all its log-probabilities (choices after the first
    arrive whole, as the engine hands them over together; a client joins each choice's chunks), the usage when
    asked for, and `data: [DONE]`. The headers go with the first chunk, so an error found before it can still be
    an HTTP error."""

    def __init__(self, handler: _Handler, chat: bool, model: str) -> None:
        self.handler, self.chat = handler, chat
        kind = "chat.completion.chunk" if chat else "text_completion"
        self.head = {
            "id": f"assist-{uuid.uuid4().hex[:12]}",
            "object": kind,
            "created": int(time.time()),
            "model": model,
        }
        self.sent = ""  # the first choice's text sent so far
        self.started = False  # whether the headers went (with the first chunk)
        self.begun: set[int] = set()  # choices whose first chunk went (a chat delta names the role in it)

    def grow(self, text: str) -> None:
        """The first choice's text so far: what it adds to what was sent goes out as one chunk."""
        if len(text) > len(self.sent) and text.startswith(self.sent):
            piece, self.sent = text[len(self.sent) :], text
            self._chunk([self._choice(0, piece, None)])

    def finish(self, response: dict[str, Any], usage: bool) -> None:
        """The end of the answer: each choice's text not sent yet, with its finish reason; then the usage (if
        `usage`) and `[DONE]`."""
        for choice in response["choices"]:
            text = choice["message"]["content"] if self.chat else choice["text"]
            rest = text
            if choice["index"] == 0:  # what was sent stands (a stream cannot take back): only what follows it
                rest = text[len(self.sent) :] if text.startswith(self.sent) else ""
            last = self._choice(choice["index"], rest, choice["finish_reason"])
            last["logprobs"] = choice.get("logprobs")  # the row's, in one piece: the engine scores it as a whole
            self._chunk([last])
        if usage:
            self._chunk([], usage=response["usage"])
        self._write(b"[DONE]")

    def fail(self, status: HTTPStatus, message: str) -> None:
        """An error: the usual JSON reply before any chunk went, else an error event (and the stream ends)."""
        if not self.started:
            self.handler._error(status, message)
            return
        kind = "invalid_request_error" if status < 500 else "server_error"
        self._write(json.dumps({"error": {"message": message, "type": kind, "code": int(status)}}).encode())

    def _choice(self, index: int, piece: str, finish: str | None) -> dict[str, Any]:
        if not self.chat:
            return {"index": index, "text": piece, "logprobs": None, "finish_reason": finish}
        delta = {"content": piece} if index in self.begun else {"role": "assistant", "content": piece}
        self.begun.add(index)
        return {"index": index, "delta": delta, "finish_reason": finish}

    def _chunk(self, choices: list[dict[str, Any]], **extra: Any) -> None:
        if not self.started:
            self._start()
        self._write(json.dumps({**self.head, "choices": choices, **extra}).encode())

    def _start(self) -> None:
        self.started = True
        handler = self.handler
        handler.close_connection = True  # the stream's end is the connection's
        handler.send_response(HTTPStatus.OK)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Cache-Control", "no-cache")
        handler.send_header("Connection", "close")
        handler.end_headers()

    def _write(self, data: bytes) -> None:
        try:
            self.handler.wfile.write(b"data: " + data + b"\n\n")
            self.handler.wfile.flush()
        except OSError:
            raise ClientGone from None
