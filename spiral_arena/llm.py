"""One client for every OpenAI-compatible chat endpoint: provider presets, where keys may go,
retries, and errors free of keys. Games (the Twenty Questions judge), agents and evals all use it,
so it sits below them.

Gemini, Mistral, OpenRouter, OpenAI, vLLM and ``spiral-arena serve`` all accept the same
``POST {base_url}/chat/completions`` with a bearer key, so a single client with provider presets
covers them. Failures are retried with bounded exponential backoff and then raised as one
``APIError``; a game interrupted that way must be reported as an error, never scored.

Keys come only from arguments or environment variables and never leave this module in text.
An environment key goes only where the user chose to send it (``check_key_host``): to loopback, over
https to its provider's own host or a host in $SPIRAL_ARENA_TRUST_HOSTS, or to the URL of a spec that
names its own variable (``#key_env=VAR``: a name ending in ``_API_KEY`` or ``_TOKEN``, or one listed in
$SPIRAL_ARENA_KEY_VARS). Keys travel in clear text only to loopback, or with a
warning on stderr to a URL the user paired with them. Every error message is scrubbed of the key
and of bearer tokens, and reprs show ``***``.
``ChatClient.complete`` also returns what the request cost (``ChatReply``: the provider's token
counts and the latency), and nothing else about the request.
``httpx`` is imported when a client is built, so the package works without the ``api`` extra.
"""

from __future__ import annotations

import email.utils
import hashlib
import ipaddress
import json
import logging
import os
import random
import re
import socket
import sys
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit, urlunsplit

log = logging.getLogger(__name__)

MAX_ERROR_CHARS = 300  # of a server's error message kept in an APIError
_HEADER_SAFE_KEY = re.compile(r"[\x21-\x7e]+")  # printable ASCII without spaces
_BEARER = re.compile(r"(Bearer\s+)[^\s'\",;]+")  # a header value echoed back (prose "bearer token" is left)


@dataclass(frozen=True)
class Provider:
    """Where a provider's OpenAI-compatible endpoint lives and which variable holds its key.
    ``seeded``: its own endpoint takes OpenAI's ``seed`` field (any other URL is taken to: vLLM and
    ``spiral-arena serve`` do)."""

    name: str
    base_url: str
    key_env: str
    base_url_env: str | None = None  # a variable that overrides base_url (OpenAI's SDK convention)
    seeded: bool = True


PROVIDERS: dict[str, Provider] = {
    p.name: p
    for p in (
        Provider("openai", "https://api.openai.com/v1", "OPENAI_API_KEY", "OPENAI_BASE_URL"),
        Provider("gemini", "https://generativelanguage.googleapis.com/v1beta/openai/", "GEMINI_API_KEY", seeded=False),
        Provider("mistral", "https://api.mistral.ai/v1", "MISTRAL_API_KEY", seeded=False),  # it names it random_seed
        Provider("openrouter", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
    )
}


def request_seed(game_seed: int, turn: int) -> int:
    """The ``seed`` of a game's ``turn``-th request (0, 1, ...): a function of the two alone, so a game
    gets the same replies from a seeded server (``spiral-arena serve``) whatever else is in flight."""
    mixed = hashlib.sha256(f"{game_seed}:{turn}".encode()).digest()
    return int.from_bytes(mixed[:4], "little") & 0x7FFFFFFF  # a non-negative int32: every server takes it


class APIError(RuntimeError):
    """A chat request that failed for good (after retries, or at once for a client error).

    ``status`` is the last HTTP status (None for timeouts and connection errors); ``attempts``
    counts the requests sent. The message never contains the API key.
    """

    def __init__(self, message: str, status: int | None = None, attempts: int = 1) -> None:
        super().__init__(message)
        self.status = status
        self.attempts = attempts

    def __reduce__(self) -> tuple[Any, ...]:  # keeps status and attempts across process pools
        return (APIError, (str(self), self.status, self.attempts))


def safe_url(url: str) -> str:
    """``url`` without credentials, query or fragment: fit for logs, errors and stored specs."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:  # not a number: left out rather than echoed
        port = None
    if port is not None:
        host = f"{host}:{port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def resolve_endpoint(
    provider: str,
    base_url: str | None,
    api_key: str | None,
    who: str,
    key_argument: str,
    key_env: str | None = None,
) -> tuple[str, str | None]:
    """The base URL and key for ``provider``: arguments first, then the usual environment variables,
    then the preset. ``key_env`` is the variable a spec chose for its key (``#key_env=VAR``). A missing
    key is an error naming the variable, except on loopback URLs. An environment key only goes where
    ``check_key_host`` allows, and a key about to travel in clear text is warned about on stderr."""
    preset = PROVIDERS[provider]
    env_url = os.environ.get(preset.base_url_env) if preset.base_url_env else None
    url = base_url or env_url or preset.base_url
    if api_key:  # given in code: the caller chose where it goes
        return url, api_key
    if key_env is not None:  # the user paired this key with this spec's URL, whatever its host
        key = key_from_variable(key_env, who)
        _warn_if_clear_text(key_env, url)
        return url, key
    key = os.environ.get(preset.key_env) or None
    if key is None:
        if not is_loopback(url):
            raise ValueError(
                f"{who} needs an API key: set {preset.key_env} or pass {key_argument}=...; "
                "only a loopback base URL (http://127.0.0.1:PORT/v1"
                + (f", e.g. in {preset.base_url_env}" if preset.base_url_env else "")
                + ") may go without one"
            )
    elif base_url and base_url != env_url:
        check_key_host(preset, base_url)  # an environment key follows a URL written in a spec only where safe
    elif url == env_url:  # both set in the environment by the user (the OpenAI SDK's convention)
        _warn_if_clear_text(preset.key_env, url)
    return url, key


TRUST_HOSTS_ENV = "SPIRAL_ARENA_TRUST_HOSTS"
KEY_ENV_OPTION = "key_env"  # the spec option naming a spec's own key variable: openai:m@URL#key_env=MY_API_KEY
KEY_VARIABLES_ENV = "SPIRAL_ARENA_KEY_VARS"  # more names #key_env may use, comma-separated


_VARIABLE_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")
_KEY_VARIABLE = re.compile(r"[A-Z][A-Z0-9_]*_(?:API_KEY|TOKEN)")  # what an API key's variable is called


def key_variable_problem(variable: object) -> str | None:
    """What is wrong with the name in ``#key_env=NAME``, or None. Capitals only, as variables are
    written: a key pasted there by mistake (sk-..., AIza...) is refused without being echoed, before
    it could reach a label or a database. And only a name that looks like an API key's variable
    (``*_API_KEY``, ``*_TOKEN``) or one the user lists in $SPIRAL_ARENA_KEY_VARS: a spec shared in a
    reference-pool file must not be able to send $AWS_SECRET_ACCESS_KEY or $PATH to its URL."""
    if not isinstance(variable, str) or not _VARIABLE_NAME.fullmatch(variable):
        return (
            f"#{KEY_ENV_OPTION} must name an environment variable: capitals, digits and _, e.g. "
            f"#{KEY_ENV_OPTION}=MY_GATEWAY_API_KEY (the value given is not shown, in case it is a key)"
        )
    if _KEY_VARIABLE.fullmatch(variable) or variable in _listed_key_variables():
        return None
    return (
        f"#{KEY_ENV_OPTION}={variable}: only a variable named like an API key's (ending in _API_KEY or _TOKEN) "
        f"or listed in ${KEY_VARIABLES_ENV} may be sent; if ${variable} holds this endpoint's key, run with "
        f"{KEY_VARIABLES_ENV}={variable}"
    )


def _listed_key_variables() -> set[str]:
    return {name.strip() for name in os.environ.get(KEY_VARIABLES_ENV, "").split(",") if name.strip()}


def key_from_variable(variable: str, who: str) -> str:
    """The key in ``$variable``, which a spec named with ``#key_env=VARIABLE``; a bad name, or a
    variable unset or blank, is an error naming it (never a silent fall back to the provider's key)."""
    if (problem := key_variable_problem(variable)) is not None:
        raise ValueError(f"{who}: {problem}")
    key = os.environ.get(variable, "").strip()
    if not key:
        state = "blank" if variable in os.environ else "not set"
        raise ValueError(
            f"{who}: #{KEY_ENV_OPTION}={variable} names ${variable}, which is {state}; "
            f"set {variable} to the API key for this endpoint"
        )
    return key


def check_key_host(preset: Provider, url: str) -> None:
    """Refuse, before any request, to send a provider's key from the environment to a host the user
    did not choose for it, or in clear text to a host off this machine. Allowed: loopback (any
    scheme); over https only, the provider's own host and hosts named in $SPIRAL_ARENA_TRUST_HOSTS
    (comma-separated). A spec such as ``openai:m@http://models.example.org/v1`` would otherwise send
    OPENAI_API_KEY, unencrypted, to whoever serves that address. A spec that must send a key elsewhere
    names its own variable (``#key_env=VAR``): then the user chose that key for that URL."""
    if is_loopback(url):
        return
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    chosen = host == urlsplit(preset.base_url).hostname or host in _trusted_hosts()
    own_variable = f"give this spec its own key variable with #{KEY_ENV_OPTION}=VAR"
    if parts.scheme.lower() == "https":
        if chosen:
            return
        raise ValueError(
            f"refusing to send ${preset.key_env} to {host}: it is not {preset.name}'s host or loopback. If that "
            f"server should get it, allow it with {TRUST_HOSTS_ENV}={host}, or {own_variable}"
        )
    raise ValueError(
        f"refusing to send ${preset.key_env} to {host} over plain http: the key would travel in clear text. "
        "Use an https:// URL"
        + ("" if chosen else f" and allow the host with {TRUST_HOSTS_ENV}={host}")
        + f", or {own_variable}"
    )


def _trusted_hosts() -> set[str]:
    return {h.strip().lower() for h in os.environ.get(TRUST_HOSTS_ENV, "").split(",") if h.strip()}


def _warn_if_clear_text(variable: str, url: str) -> None:
    """One stderr line when a key the user paired with ``url`` will cross the network unencrypted."""
    if urlsplit(url).scheme.lower() == "http" and not is_loopback(url):
        host = urlsplit(url).hostname
        print(
            f"spiral-arena: warning: ${variable} is sent to {host} over plain http: the key travels in clear text "
            "(use https to protect it)",
            file=sys.stderr,
        )


def is_loopback(url: str) -> bool:
    """True for URLs on this machine (localhost, 127.0.0.0/8, ::1), where a key is optional."""
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _import_httpx() -> Any:
    try:
        import httpx
    except ImportError as error:
        raise ImportError("API agents need httpx: pip install 'spiral-arena[api]'") from error
    return httpx


@dataclass(frozen=True)
class _Failure:
    """One failed attempt, already described without secrets."""

    message: str
    status: int | None
    retryable: bool
    retry_after: float | None = None


def _retryable_status(status: int) -> bool:
    return status in (408, 429) or status >= 500


def _retry_after(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (seconds or an HTTP date), or None."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    return max(seconds, 0.0)


def _error_text(data: Any) -> str:
    """The human part of an error body: OpenAI ``{"error": {"message": ...}}``, Gemini's list
    form, FastAPI's ``{"detail": ...}``, or the JSON itself."""
    if isinstance(data, list) and data:
        data = data[0]
    if isinstance(data, dict):
        error = data.get("error", data.get("detail", data.get("message")))
        if isinstance(error, dict):
            error = error.get("message", error)
        if error is not None:
            return error if isinstance(error, str) else json.dumps(error)
    return json.dumps(data)


def _token_count(usage: Any, name: str) -> int | None:
    """``usage[name]`` when it is a whole number >= 0; None (unknown) when absent or malformed."""
    value = usage.get(name) if isinstance(usage, dict) else None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


@dataclass(frozen=True)
class ChatReply:
    """A reply and what it cost. Token counts are the provider's ``usage`` (``prompt_tokens``,
    ``completion_tokens``), None when the reply did not state them (unknown, not zero). ``latency_s``
    is the wall time of the one request that succeeded, from sending it to having read the whole
    reply: failed attempts and the waits between retries are left out, so it measures the endpoint
    and not the retry policy. Nothing else about the request (URL, headers, key) is kept."""

    text: str
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_s: float


def _completion_text(data: Any) -> str:
    """The assistant text of a chat completion; raises KeyError/TypeError/IndexError if malformed, and
    ValueError for ``content: null``.

    ``content: null`` is the endpoint's failure, not an answer (retried, then an ``APIError``), so no
    eval or game scores it as a reply without an answer; only a generation cut by its token limit
    (``finish_reason: "length"``) may come back without content: then it is "".
    """
    choice = data["choices"][0]
    content = choice["message"].get("content")
    if content is None:
        if choice.get("finish_reason") == "length":
            return ""
        raise ValueError("the reply has no content (content: null)")
    if isinstance(content, list):  # content parts
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    if not isinstance(content, str):
        raise TypeError(f"message content is a {type(content).__name__}")
    return content


def _shut_down(sock: socket.socket) -> None:
    """End both directions of a connection: a thread blocked reading it gets end-of-file at once."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already closed or never connected


class ChatClient:
    """A blocking, thread-safe client for ``{base_url}/chat/completions``.

    Retries 408/429/5xx, timeouts, connection errors and malformed replies up to ``max_retries``
    times, waiting ``Retry-After`` when the server sends it, else ``backoff * 2**n`` with jitter;
    every wait is capped at ``max_backoff``. Other 4xx raise at once with the server's message.
    Once ``close`` is called (a run stopping), a failed request is not retried and nothing is logged:
    its error is the close's own doing, not the endpoint's. ``close`` shuts every connection down
    before closing it: a thread waiting for a reply wakes at once (a socket closed under a reader that
    has a timeout leaves it waiting out the timeout, and the interpreter's exit waits for it).
    """

    def __init__(
        self,
        model: str,
        base_url: str,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 4,
        backoff: float = 1.0,
        max_backoff: float = 30.0,
        max_connections: int = 16,
    ) -> None:
        if not model:
            raise ValueError("ChatClient needs a model id")
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base_url must be an http:// or https:// URL with a host, got {safe_url(base_url)!r}")
        if timeout <= 0 or max_retries < 0 or backoff < 0 or max_backoff < 0 or max_connections < 1:
            raise ValueError(
                "need timeout > 0, max_retries >= 0, backoff >= 0, max_backoff >= 0 and max_connections >= 1"
            )
        key = api_key.strip() if api_key else None
        if key and not _HEADER_SAFE_KEY.fullmatch(key):
            # Never echo the key: say what is wrong with it instead.
            raise ValueError("the API key contains spaces or non-ASCII characters, which cannot be sent in a header")
        httpx = _import_httpx()
        self.model = model
        self.base_url = base_url
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._key = key or None
        # the key, and anything secret-like in the base URL (a query such as ?api-key=..., a password),
        # is scrubbed from every error text: a server or httpx may echo the URL
        hidden = [key] if key else []
        hidden += [value for _, value in parse_qsl(parts.query) if len(value) >= 4] + [parts.password or ""]
        self._secrets = sorted({s for h in hidden if h for s in (h, quote(h, safe=""))}, key=len, reverse=True)
        # {base path}/chat/completions, keeping a query the endpoint needs (Azure's ?api-version=...)
        self._url = urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/chat/completions", fragment=""))
        self._jitter = random.Random()
        self._closed = threading.Event()  # set by close(): requests still out stop without retrying
        self._sockets: weakref.WeakSet[socket.socket] = weakref.WeakSet()  # each connection's, for close()
        self._sockets_lock = threading.Lock()
        self._httpx = httpx
        self._http = httpx.Client(
            timeout=httpx.Timeout(timeout),
            headers={"Authorization": f"Bearer {key}"} if key else {},
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
        )

    def __repr__(self) -> str:
        key = "'***'" if self._key else "None"
        return f"ChatClient(model={self.model!r}, base_url={safe_url(self.base_url)!r}, api_key={key})"

    def chat(
        self,
        messages: list[dict[str, Any]],
        temperature: float | None = None,
        top_p: float | None = None,
        max_tokens: int | None = None,
        *,
        extra_body: dict[str, Any] | None = None,
    ) -> str:
        """The assistant's reply text. Sampling settings left as None take the server's default;
        ``extra_body`` adds provider-specific fields (e.g. ``top_k`` for vLLM)."""
        return self.complete(messages, temperature, top_p, max_tokens, extra_body=extra_body).text

    def complete(
        self,
        messages: list[dict[str, Any]],
        temperature: float | None = None,
        top_p: float | None = None,
        max_tokens: int | None = None,
        *,
        extra_body: dict[str, Any] | None = None,
    ) -> ChatReply:
        """Like ``chat``, with the reply's token counts and latency (see ``ChatReply``)."""
        payload: dict[str, Any] = {"model": self.model, "messages": messages, **(extra_body or {})}
        for name, value in (("temperature", temperature), ("top_p", top_p), ("max_tokens", max_tokens)):
            if value is not None:
                payload[name] = value
        attempts = self.max_retries + 1
        for attempt in range(1, attempts + 1):
            outcome = self._attempt(payload)
            if isinstance(outcome, ChatReply):
                return outcome
            if self._closed.is_set():
                break
            if not outcome.retryable or attempt == attempts:
                tries = f" (gave up after {attempt} attempts)" if attempt > 1 else ""
                raise APIError(f"{self._where()}: {outcome.message}{tries}", outcome.status, attempt)
            delay = self._delay(attempt, outcome.retry_after)
            log.warning(
                "%s: %s; retry %d of %d in %.2fs", self._where(), outcome.message, attempt, self.max_retries, delay
            )
            if self._closed.wait(delay):  # a close ends the wait at once
                break
        raise APIError(f"{self._where()}: the client was closed; the request was not retried", None, attempt)

    def close(self) -> None:
        """Close the connections; requests still out fail and stop quietly (see the class docstring)."""
        self._closed.set()
        with self._sockets_lock:
            for sock in list(self._sockets):
                _shut_down(sock)
        self._http.close()

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- helpers --------------------------------------------------------------------------

    def _where(self) -> str:
        return f"{self.model} at {safe_url(self.base_url)}"

    def _redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return _BEARER.sub(r"\1***", text)

    def _brief(self, text: str) -> str:
        """One line, key-free (scrubbed before cutting, so no partial key survives), bounded."""
        text = self._redact(" ".join(text.split()))
        return text if len(text) <= MAX_ERROR_CHARS else text[:MAX_ERROR_CHARS] + "..."

    def _attempt(self, payload: dict[str, Any]) -> ChatReply | _Failure:
        """One request; the reply with its usage and latency, or a description of what went wrong.

        Exceptions are turned into text here and raised later, outside any ``except`` block, so an
        APIError never chains an httpx exception (whose request object holds the headers).
        """
        httpx = self._httpx
        sent = time.perf_counter()
        try:
            response = self._http.post(self._url, json=payload, extensions={"trace": self._trace})
        except httpx.TimeoutException as error:
            return _Failure(f"no reply within {self.timeout:g}s ({type(error).__name__})", None, True)
        except httpx.RequestError as error:
            return _Failure(f"request failed ({type(error).__name__}: {self._brief(str(error))})", None, True)
        latency = time.perf_counter() - sent
        status = response.status_code
        try:
            data = response.json()
        except ValueError:
            data = None
        if not 200 <= status < 300:
            detail = _error_text(data) if data is not None else response.text
            retry_after = _retry_after(response.headers.get("retry-after"))
            return _Failure(f"HTTP {status}: {self._brief(detail)}", status, _retryable_status(status), retry_after)
        if isinstance(data, dict) and "choices" not in data and "error" in data:  # an error sent with 200
            return _Failure(f"error in reply: {self._brief(_error_text(data))}", status, True)
        try:
            text = _completion_text(data)
        except ValueError as error:
            return _Failure(str(error), status, True)
        except (KeyError, IndexError, TypeError, AttributeError):
            return _Failure(f"malformed reply (not a chat completion): {self._brief(response.text)}", status, True)
        usage = data.get("usage")
        return ChatReply(text, _token_count(usage, "prompt_tokens"), _token_count(usage, "completion_tokens"), latency)

    def _trace(self, event: str, info: dict[str, Any]) -> None:
        """httpx's trace hook: remember each new connection's socket (plain, then TLS) for ``close``.
        One opened while ``close`` runs is shut down here, so no request outlives the close."""
        if event not in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            return
        sock = info["return_value"].get_extra_info("socket")
        if sock is None:
            return
        with self._sockets_lock:
            self._sockets.add(sock)
            if self._closed.is_set():
                _shut_down(sock)

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:  # the server's wait, spread a little so callers do not return together
            return min(self.max_backoff, retry_after * self._jitter.uniform(1.0, 1.1))
        ceiling = min(self.max_backoff, self.backoff * 2 ** (attempt - 1))
        return self._jitter.uniform(ceiling / 2, ceiling)
