"""A language model behind any OpenAI-compatible chat endpoint as a player (``openai:MODEL``,
``gemini:MODEL``, ``PROVIDER:MODEL@URL``...), on the client of ``spiral_arena.llm``."""

from __future__ import annotations

import itertools
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from spiral_arena.agents.base import BaseAgent
from spiral_arena.agents.specs import parse_spec
from spiral_arena.llm import PROVIDERS, ChatClient, ChatReply, request_seed, resolve_endpoint, safe_url
from spiral_arena.models.prompting import chat_messages


def _plain(value: Any) -> Any:
    """JSON fallback for numpy scalars and other non-JSON values found in env infos."""
    item = getattr(value, "item", None)
    return item() if callable(item) else str(value)


class APIAgent(BaseAgent):
    """A model behind an OpenAI-compatible endpoint, as a player.

    Built from a spec (``"gemini:gemini-2.5-flash-lite"``, ``"openai:MODEL@http://127.0.0.1:8000/v1"``)
    or from ``provider`` and ``model``. The key comes from ``api_key``, else from ``key_env`` (the
    variable a spec names with ``#key_env=VAR``, sent to this agent's URL whatever its host), else from
    the provider's variable, which only goes where ``spiral_arena.llm.check_key_host`` allows; a
    loopback base URL may go without one. ``act`` returns the raw completion (the env extracts
    the boxed move) and raises ``APIError`` when the endpoint fails for good. ``act_batch`` runs up
    to ``concurrency`` requests at once. ``send_info=True`` adds the env's ``info`` to each request
    as ``spiral_info``, which ``spiral-arena serve`` passes to the agent it serves (real providers
    reject unknown fields, so it is off by default).

    Seeds: ``reset(seed)`` (each game's own copy is reset with the game's seed for its seat) makes every
    request of that game carry OpenAI's ``seed`` field, ``request_seed(seed, n)`` for its n-th decision,
    where the endpoint takes it (``Provider.seeded``, any custom URL) and ``extra_body`` sets none; so a
    seeded server (``spiral-arena serve`` with a scripted agent) answers a game the same whatever the
    concurrency.

    ``answer`` and ``answer_batch`` are ``act`` and ``act_batch`` with what each move cost: a
    ``ChatReply`` per decision (the provider's token counts, None where it sent no ``usage``, and
    the latency of the request that succeeded), in input order, so a caller playing several games at
    once can charge every move to its own game. The agent itself keeps no record of its requests.
    """

    def __init__(
        self,
        spec: str | None = None,
        *,
        provider: str | None = None,
        model: str | None = None,
        base_url: str | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        max_tokens: int | None = None,
        timeout: float = 60.0,
        max_retries: int = 4,
        backoff: float = 1.0,
        max_backoff: float = 30.0,
        concurrency: int = 8,
        system_prompt: str | None = None,
        api_key: str | None = None,
        key_env: str | None = None,
        send_info: bool = False,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        if spec is not None:
            if provider is not None or model is not None or base_url is not None:
                raise ValueError("give APIAgent either a spec or provider/model/base_url, not both")
            parsed = parse_spec(spec)
            provider, model, base_url = parsed.kind, parsed.target, parsed.base_url
        if provider not in PROVIDERS:
            raise ValueError(f"unknown API provider {provider!r}; valid: {', '.join(PROVIDERS)}")
        if not model:
            raise ValueError(f"APIAgent for {provider} needs a model id")
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        preset = PROVIDERS[provider]
        url, key = resolve_endpoint(provider, base_url, api_key, f"{provider}:{model}", "api_key", key_env)
        self.provider = provider
        self.model = model
        # What to store in results: the spec, naming the endpoint whenever it is not the preset's.
        self.spec = f"{provider}:{model}" + ("" if url == preset.base_url else f"@{safe_url(url)}")
        self.temperature = temperature
        self.top_p = top_p
        self.max_tokens = max_tokens
        self.concurrency = concurrency
        self.system_prompt = system_prompt
        self.send_info = send_info
        self.extra_body = dict(extra_body or {})
        self.seeded = preset.seeded or url != preset.base_url
        self.game_seed: int | None = None  # set by reset: the game this copy plays
        self._turns = itertools.count()
        self.client = ChatClient(
            model,
            url,
            api_key=key,
            timeout=timeout,
            max_retries=max_retries,
            backoff=backoff,
            max_backoff=max_backoff,
            max_connections=max(concurrency, 1),
        )

    def __repr__(self) -> str:
        return f"APIAgent({self.spec!r})"

    def reset(self, seed: int | None = None) -> None:
        """Start a game: with a seed, its requests carry ``request_seed(seed, n)`` (see the class docstring)."""
        self.game_seed = seed
        self._turns = itertools.count()

    def act(self, observation: str, info: dict[str, Any]) -> str:
        return self.answer(observation, info).text

    def answer(self, observation: str, info: dict[str, Any]) -> ChatReply:
        """The raw completion of one decision, with its token counts and latency."""
        extra = dict(self.extra_body)
        if self.send_info:
            extra["spiral_info"] = json.loads(json.dumps(info, default=_plain))
        turn = next(self._turns)
        if self.game_seed is not None and self.seeded and "seed" not in extra:
            extra["seed"] = request_seed(self.game_seed, turn)
        return self.client.complete(
            chat_messages(observation, self.system_prompt),
            temperature=self.temperature,
            top_p=self.top_p,
            max_tokens=self.max_tokens,
            extra_body=extra or None,
        )

    def act_batch(self, observations: list[str], infos: list[dict[str, Any]]) -> list[str]:
        """Answers in input order; the first failure cancels what has not started and is raised."""
        return [reply.text for reply in self.answer_batch(observations, infos)]

    def answer_batch(self, observations: list[str], infos: list[dict[str, Any]]) -> list[ChatReply]:
        """``answer`` for each decision, up to ``concurrency`` requests at once; in input order, each with
        its own request's usage. The first failure cancels what has not started and is raised."""
        if len(observations) != len(infos):
            raise ValueError(f"{len(observations)} observations but {len(infos)} infos")
        if len(observations) <= 1 or self.concurrency == 1:
            return [self.answer(o, i) for o, i in zip(observations, infos, strict=True)]
        workers = min(self.concurrency, len(observations))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="api-agent") as pool:
            futures = [pool.submit(self.answer, o, i) for o, i in zip(observations, infos, strict=True)]
            try:
                return [future.result() for future in futures]
            except BaseException:
                for future in futures:
                    future.cancel()
                raise

    def close(self) -> None:
        self.client.close()
