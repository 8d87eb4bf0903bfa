"""The recipes: each a set of field values that ``TrainConfig.build`` puts under the user's overrides
(``--recipe``, or "auto": tiny for the embedded model, spiral otherwise), and each algorithm's own settings."""

from __future__ import annotations

from typing import Any

# The tiny CPU recipe: short "last message" prompts, one-line answers, ~1,400 turns per step with
# Kuhn twice as often as TicTacToe, a cosine-decayed learning rate and a KL anchor to the warm start
# so the ~170k-parameter model does not collapse; a warm start on position-dependent random play, so it
# does not start card-blind. TicTacToe is written in the ``lines`` layout (each empty cell with every line
# through it, seen from the player to act): the 2-layer model does not learn to read lines off the grid.
# The anchor is the k2 estimator, whose gradient is the reverse KL's, so the policy can drop an answer that
# always loses (k3's, the forward KL's, kept each dominated Kuhn answer at about 0.3 x its warm-start
# probability / its loss, and exploitability at ~0.20); Kuhn is anchored at 0.3 and TicTacToe at 0.1 (with
# TicTacToe at 0.3 its win-or-draw ended at 0.83-0.87, at 0.1 at 0.93-0.98; Kuhn at 0.1-0.15 went card-blind
# early on the seeds tried). Kuhn is played for chips (``reward=chips``), the payoff its exploitability is
# measured in: for +1/-1 to the hand's winner, calling a bet with the Jack loses no more than folding and
# calling with the Queen is always right, and the policy settled on them (exploitability ~0.20). A fixed 200
# steps (at 160 one seed's last policy lost 5% of its TicTacToe games against the expert to invalid answers) and
# no time limit (a user's choice: a slower machine takes longer, it does not end half-trained); 200 evaluation
# games per seat and opponent on the training games at steps 0, 100 and 200, a checkpoint at each (the
# evaluations draw on none of training's random streams, so their schedule does not change the run);
# micro-batches of 128 rows (a fifth faster than 512 on 2 cores); a 400-step warm start (its loss is flat from
# step ~250 on). These three kept the main job under 10 minutes.
# SPIRAL's third game, SimpleNegotiation, trains beside them (weights 4:2:2: a negotiation is ten turns, a TicTacToe
# game five to nine and a Kuhn hand two or three, so the turns split about 21/34/45; with one negotiation in six games,
# one seed of four never learned which offers to accept). TicTacToe has two games in eight, not one in seven: with one,
# the policy drifted late in the run toward one favourite reply as second player and kept naming it when the opponent
# had just taken that cell (57% of the time after an opening in the centre on one seed), so 0.9-3.8% of its games ended
# with an invalid answer; with two, 0.1-0.2% on four seeds. The negotiation's action line is written short
# (``brief=true``: the long grammar was most of the latest message). Two things let the tiny model learn to trade: a
# warm start that picks a kind of move before a move (``kinds=true``: random play accepts a pending offer a quarter of
# the time, not once in 21 moves, so accepted deals and their results are met), and a KL anchor of 0.3 on its turns: at
# 0.1 (or 0) both seats stopped trading within 60-90 steps (nobody accepts, so nobody offers a deal worth taking, so
# nobody learns which deals to take) and the policy no longer beat random; anchored, deals keep being offered and taken.
# docs/results/learning.md has what was measured.
TINY_GAMES = "KuhnPoker-v0:rounds=1;reward=chips,TicTacToe-v0:board=lines,SimpleNegotiation-v0:brief=true"
RECIPES: dict[str, dict[str, Any]] = {
    "spiral": {},  # the field defaults, and ALGO_RECIPES["rae/spiral"]
    "tiny": {
        "games": TINY_GAMES,
        "game_weights": "4,2,2",
        "prompt_template": "bare",
        "obs_format": "last",
        "samples_per_step": 768,
        "games_in_flight": 256,
        "max_new_tokens": 12,
        "steps": 200,
        "loss": "reinforce",
        "epochs": 1,
        "micro_batch": 128,
        "aggregation": "token_mean",
        "lr": 1e-3,
        "lr_min": 1e-4,
        "lr_schedule": "cosine",
        "kl_coef": 0.3,
        "kl_estimator": "k2",
        "game_kl_coefs": "0.3,0.1,0.3",
        "sft_steps": 400,
        "sft_agent": "random#per_state=true#kinds=true",
        "eval_every": 100,
        "eval_games": 200,
        "eval_out_of_domain": False,
        "eval_tactics": True,
        "eval_temperature": 0.6,
        "save_every": 100,
        "bf16": False,
        "vllm_max_model_len": 1024,
        "vllm_kv_cache_gib": 1.0,
        "vllm_enforce_eager": True,
    },
}


# delta-belief-rl's 4B run (trainer.md section 4): its SFT questioner, prompted as it was trained (its own system
# prompt and instructions, one chat turn per question, bare questions), LoRA r 64 on every linear layer,
# 240 secrets x 16 games per step for 60 steps (15 epochs of 1,000 words), thinking off, a Qwen3-14B
# judge behind an OpenAI-compatible endpoint ($OPENAI_BASE_URL, e.g. `vllm serve Qwen/Qwen3-14B`), and
# evaluation on the held-out nouns with 8 samples each at the judge's sampling, at 20 and 50 questions.
_JUDGE = "oracle=openai:Qwen/Qwen3-14B"
RECIPES["delta-belief-4b"] = {
    "algo": "delta-belief", "model": "Klingspor/Qwen3-4B-SFT", "backend": "vllm", "thinking": False,
    "prompt_template": "questioner",
    "games": f"TwentyQuestions-v0:{_JUDGE};words=coca_plus_train",
    "eval_env_ids": f"TwentyQuestions-v0:{_JUDGE};words=coca_plus_test",
    "group_size": 16, "groups_per_step": 240, "steps": 60, "games_in_flight": 3840,
    "max_new_tokens": 50, "max_game_actions": 20, "temperature": 1.0, "top_p": 1.0, "obs_format": "full",
    "lora_rank": 64, "lora_alpha": 64, "lr": 3e-5, "adam_beta1": 0.9, "adam_beta2": 0.95,
    "weight_decay": 0.01, "grad_clip": 1.0, "micro_batch": 80, "bf16": True, "seed": 42,
    "eval_every": 4, "eval_samples_per_secret": 8, "eval_long_questions": 50, "eval_temperature": 0.7,
    "eval_opponents": "", "save_every": 4, "vllm_max_model_len": 4096,
}  # fmt: skip

# The 20 Questions recipe: the update bethgelab/delta-belief-rl makes (verl's PPO actor): a wider upper clip and
# dual clip, one epoch of 3 optimiser steps (mini-batches of 80 of its 240 groups; the 2nd and 3rd off-policy),
# no KL, turns of advantage 0 kept in the means, the end-of-turn token out of the loss; StarPO takes each game's
# token mean, then the mean over games (its row is a whole game), delta-belief each group's token mean, then the
# mean over groups (its micro-batch is one group). "ALGO/tiny" adds the CPU settings of the embedded model.
_GROUP_PPO = {
    "loss": "ppo", "clip_high": 0.28, "dual_clip": 3.0, "epochs": 1, "mini_batches": 3, "kl_coef": 0.0,
    "filter_zero_adv": False, "train_stop_token": False,
}  # fmt: skip
# The CPU setting: a closed world of 32 table nouns and 7 questions (the splitting expert finds every
# secret, the weak questioner of the warm start about one in five), evaluated on every secret of that world;
# the recap observation (the questions so far in a few lines) keeps prompts short, and the list of nouns that
# still fit makes naming one a copy (the tiny model does not learn the table's attributes from a warm start:
# docs/results/twenty-questions.md). The copy is learned when the warm start also trains, at every turn, the
# noun a naming question would pick (sft_naming) for long enough (1,500 steps; 400 leave it at chance). A
# question names one noun at most (one_guess): with any number, StarPO learned to list a dozen nouns per
# question. The belief is read off the form the warm start names nouns in. A KL anchor to the warm start (0.1;
# upstream has none) keeps the answers readable: without it both methods drifted, within 100 steps, to replies
# that run to the token limit with fragments the table cannot read (docs/results/twenty-questions.md). Its 4
# groups a step make 2 mini-batches of 2 (upstream: 3 of 80).
CLOSED_WORLD = "TwentyQuestions-v0:recap=true;world=32;max_questions=7;candidates=true;one_guess=true"
_GROUP_TINY = {
    "games": CLOSED_WORLD, "eval_env_ids": CLOSED_WORLD, "game_weights": "",
    "group_size": 8, "groups_per_step": 4, "max_new_tokens": 24, "max_game_actions": 7, "obs_format": "last",
    "steps": 100, "eval_every": 25, "mini_batches": 2, "sft_steps": 1500, "sft_agent": "expert#guess_prob=0.3",
    "sft_naming": 1.0,
    "lr": 1e-3, "lr_schedule": "constant", "belief_probe": "named", "kl_coef": 0.1, "kl_estimator": "k3",
    "game_kl_coefs": "",
}  # fmt: skip
ALGO_RECIPES: dict[str, dict[str, Any]] = {
    # SPIRAL's 8 actors as 8 rollout shards of 16 turns, each with its own RAE baselines (spiral-rl/spiral's
    # train_spiral.py keeps one EMA per player in each actor process)
    "rae/spiral": {"rollout_shards": 8, "rae_scope": "shard"},
    "starpo": {**_GROUP_PPO, "aggregation": "game_mean_token_mean"},
    "delta-belief": {**_GROUP_PPO, "aggregation": "group_mean_token_mean"},
    # MARSHAL's released rewards (thu-nics/MARSHAL 2db0222, tictactoe/env.py and env_manager.py): a valid turn
    # 0.05, a draw 0.1, an invalid answer the game lost and 10 more (-11) with 0 to the other player
    "marshal": {"turn_reward": 0.05, "draw_reward": 0.1, "invalid_penalty": -11.0, "invalid_opponent_reward": 0.0},
    "starpo/tiny": _GROUP_TINY,
    "delta-belief/tiny": _GROUP_TINY,
}
