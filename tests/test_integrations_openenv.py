"""``spiral-arena env-server`` played by OpenEnv's own client (``GenericEnvClient``, the WebSocket
client every OpenEnv consumer builds on), and what it sends checked against OpenEnv's own wire models.

openenv 0.10.0 cannot be installed beside verifiers 0.4.0 (mcp 1.x against 2.0), so this runs in a
venv of its own (scripts/test.sh makes it); elsewhere it skips, naming the extra."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from spiral_arena.agents import make_agent
from spiral_arena.integrations.text_env import make_text_env

EXTRA = (
    "needs the integrations-openenv extra in a venv of its own (it conflicts with integrations-verifiers): "
    "python3 -m venv .venv-openenv && .venv-openenv/bin/pip install -e '.[integrations-openenv]' pytest"
)
pytest.importorskip("openenv", reason=EXTRA)
from openenv.core import GenericEnvClient  # noqa: E402
from openenv.core.env_server import types  # noqa: E402
from test_integrations_env_server import AUTH, TOKEN, EnvServer, ask, httpx  # noqa: E402

GAME = "TicTacToe-v0"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EnvServer]:
    server = EnvServer(tmp_path_factory.mktemp("env-server"), "--env", GAME, "--api-key", TOKEN)
    yield server
    server.stop()


def test_openenvs_client_plays_whole_games_as_make_text_env_plays_them(server):
    with GenericEnvClient(base_url=server.url, headers=AUTH).sync() as client:
        for seed in range(5):
            for seat in (0, 1):
                learner = make_agent("random")
                learner.reset(seed=seed)
                local = make_text_env(GAME, seat=seat, opponent="random")
                text, info = local.reset(seed=seed)
                result = client.reset(seed=seed, seat=seat)
                total = 0.0
                while True:
                    assert (result.observation["text"], result.observation["info"]) == (text, info)
                    if result.done:
                        break
                    move = learner.act(text, info)
                    result = client.step({"message": move})
                    text, reward, terminated, _, info = local.step(move)
                    assert (result.reward, result.done) == (reward, terminated)
                    total += result.reward
                state = client.state()
                assert total == local.env.returns[seat] == state["returns"][seat]
                assert state["seat"] == seat and state["seed"] == seed and state["done"]


def test_openenvs_client_raises_the_servers_sentence_and_carries_on(server):
    with GenericEnvClient(base_url=server.url, headers=AUTH).sync() as client:
        no_game = r"step: no game in progress; send reset first \(code: EXECUTION_ERROR\)"
        with pytest.raises(RuntimeError, match=no_game):
            client.step({"message": "[4]"})
        with pytest.raises(RuntimeError, match=r"reset: 'seed': input should be greater than or equal to 0"):
            client.reset(seed=-1)
        assert client.reset(seed=0).done is False


def test_what_the_server_sends_is_valid_by_openenvs_own_models(server):
    with server.connect() as ws:
        reset = ask(ws, {"type": "reset", "data": {"seed": 2}})
        types.ResetResponse.model_validate(types.WSObservationResponse.model_validate(reset).data)
        legal = reset["data"]["observation"]["info"]["legal_actions"]
        step = ask(ws, json.dumps({"type": "step", "data": {"message": legal[0]}}))
        types.StepResponse.model_validate(types.WSObservationResponse.model_validate(step).data)
        state = types.WSStateResponse.model_validate(ask(ws, {"type": "state"})).data
        assert types.State.model_validate(state).step_count == 1
        error = types.WSErrorResponse.model_validate(ask(ws, {"type": "jump"})).data
        assert error["code"] == types.WSErrorCode.UNKNOWN_TYPE
    get = {path: httpx.get(f"{server.url}{path}", headers=AUTH).json() for path in ("/health", "/metadata", "/schema")}
    assert types.HealthResponse.model_validate(get["/health"]).status == types.HealthStatus.HEALTHY
    assert types.EnvironmentMetadata.model_validate(get["/metadata"]).name == f"spiral-arena {GAME}"
    schemas = types.SchemaResponse.model_validate(get["/schema"])
    assert schemas.action["required"] == ["message"]
    first = httpx.post(f"{server.url}/reset", json={"seed": 2}, headers=AUTH).json()
    types.ResetResponse.model_validate(first)
    assert first == reset["data"]
