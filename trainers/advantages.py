"""Step 2 of ``train``: each turn's advantage, by the run's method. Two-player self-play: each trained seat's
return minus its (game, role) baseline, read before it is updated (RAE, ``trainers.rae``), optionally refined
per position (``state_baseline``); MARSHAL's turn rewards (``trainers.marshal``); or, for a single player,
each game against the other games of its group (StarPO, delta-belief: ``trainers.groups``)."""

from __future__ import annotations

from trainers.groups import group_advantages
from trainers.learner import autocast
from trainers.marshal import assign_marshal
from trainers.rae import state_advantages
from trainers.sources import Played
from trainers.start import Run


def assign_advantages(run: Run, played: Played) -> dict[str, float]:
    """Set ``turn.advantage`` on every turn of the step's games (every rank's: the baselines see them all, in
    shard order); the numbers the method reports."""
    config, results = run.config, played.results
    if run.grouped:
        keys = [(s, game.game, game.record.seed) for s in sorted(played.by_shard) for game in played.by_shard[s]]
        with autocast(config, run.device):
            return group_advantages(results, keys, config, run.model, run.policy)
    if config.advantage == "marshal":  # each turn's reward through the released pipeline
        assign_marshal(results, config.turn_reward, config.draw_reward)
        return {}
    for game in results:
        baseline_actor = game.shard if config.rae_scope == "shard" else None
        for seat in game.policy_seats:
            ret = game.shaped[seat]
            adv = run.rae.advantage(game.game, seat, ret, baseline_actor) if config.rae else ret
            for turn in game.turns:
                if turn.role == seat:
                    turn.advantage = adv
    if not config.state_baseline:
        return {}
    # positions seen often this step: return minus their mean return
    mine = [(t, g.shaped[t.role]) for g in results for t in g.turns if t.role in g.policy_seats]
    keys = [(t.game, t.role, t.prompt) for t, _ in mine]
    by_state = state_advantages(keys, [r for _, r in mine], config.state_baseline)
    for (turn, _), adv in zip(mine, by_state, strict=True):
        if adv is not None:
            turn.advantage = adv
    return {"state_baseline/share": sum(a is not None for a in by_state) / max(1, len(by_state))}
