"""The real-model path's silent defects, each proven on CPU: bf16 updates, device placement,
LoRA resume, safe checkpoint loading. (Engine-side fixes: test_hf_engine.py, test_vllm_engine.py;
memory: test_logprobs.py.)"""

from __future__ import annotations

import json
import pickle
import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from spiral_arena.rollout import Turn  # noqa: E402
from trainers import checkpoint  # noqa: E402
from trainers.config import TrainConfig  # noqa: E402
from trainers.distributed import Distributed, collective_device, select_device  # noqa: E402
from trainers.learner import update  # noqa: E402
from trainers.loop import train  # noqa: E402
from trainers.rae import RAE  # noqa: E402


def make_turns(vocab: int, n: int = 8, seed: int = 0) -> list[Turn]:
    rng = np.random.default_rng(seed)
    turns = []
    for i in range(n):
        prompt = rng.integers(3, vocab, size=6 + i % 3).tolist()
        response = rng.integers(3, vocab, size=4).tolist()
        turn = Turn("g", i % 2, "", prompt, response, [], "", True)  # no engine log-probs: not sampled
        turn.advantage = 1.0 if i % 2 else -1.0
        turns.append(turn)
    return turns


def learner_step(model, optimizer, turns: list[Turn], config: TrainConfig) -> dict[str, float]:
    """One call of the trainer's ``update`` on ``turns``, single process on CPU, no reference model."""
    cpu = torch.device("cpu")
    return update(model, None, optimizer, turns, config, np.random.default_rng(0), cpu, Distributed(cpu))


def step_once(model, lr: float, bf16: bool) -> tuple[float, list[torch.dtype]]:
    """One learner step (REINFORCE) at ``lr``; the share of non-embedding weights it changed, and
    the dtypes the output layer computed in."""
    config = TrainConfig.build({"lr": lr, "bf16": bf16, "loss": "reinforce", "epochs": 1, "micro_batch": 4})
    turns = make_turns(model.config.vocab_size)
    before = {k: v.detach().clone() for k, v in model.named_parameters() if "embed_tokens" not in k}
    seen: list[torch.dtype] = []
    hook = model.get_output_embeddings().register_forward_hook(lambda m, i, out: seen.append(out.dtype))
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95))
    learner_step(model, optimizer, turns, config)
    hook.remove()
    after = dict(model.named_parameters())
    changed = sum(int((after[k] != v).sum()) for k, v in before.items())
    return changed / sum(v.numel() for v in before.values()), seen


def tiny_model(dtype=torch.float32):
    from trainers.tiny import build_model

    torch.manual_seed(0)
    model = build_model(vocab_size=64, hidden_size=32, seed=0)
    with torch.no_grad():  # weights drawn as in a real checkpoint, N(0, 0.02)
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0.0, 0.02)
    model.config.pad_token_id = 0
    return model.to(dtype)


def test_bf16_run_updates_fp32_master_weights_at_lr_1e6():
    """bf16 on: forwards compute in bf16, yet an lr-1e-6 step moves nearly every trained weight."""
    model = tiny_model()
    share, dtypes = step_once(model, lr=1e-6, bf16=True)
    assert set(dtypes) == {torch.bfloat16}  # the forward really ran in bf16
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert share > 0.9, share


def test_bf16_weights_would_lose_the_update():
    """Why: stepping bf16 weights directly at lr 1e-6 leaves most of them unchanged."""
    share, _ = step_once(tiny_model(torch.bfloat16), lr=1e-6, bf16=False)
    assert share < 0.2, share


def test_trainer_loads_fp32_weights_when_bf16_is_on(tmp_path):
    from trainers.start import load_policy_model
    from trainers.tiny import create_tiny

    create_tiny(tmp_path / "tiny_init", ["TicTacToe-v0"])
    config = TrainConfig.build({"bf16": True})
    model, _, _ = load_policy_model(config, tmp_path, None, torch.device("cpu"))
    assert {p.dtype for p in model.parameters()} == {torch.float32}


class FakeCuda:
    """A machine with ``count`` GPUs, as torch.cuda would report it; records set_device."""

    def __init__(self, monkeypatch, count: int) -> None:
        self.current = None
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
        monkeypatch.setattr(torch.cuda, "set_device", self.set_device)

    def set_device(self, device) -> None:
        self.current = torch.device(device)


@pytest.mark.parametrize("requested", ["auto", "cuda"])
def test_each_rank_drives_its_local_gpu(monkeypatch, requested):
    cuda = FakeCuda(monkeypatch, count=8)
    monkeypatch.setenv("LOCAL_RANK", "3")
    device = select_device(requested)
    assert device == torch.device("cuda", 3) and cuda.current == device


def test_device_errors(monkeypatch):
    with pytest.raises(ValueError, match="device must be"):
        select_device("bogus")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="no CUDA GPU"):
        select_device("cuda")
    FakeCuda(monkeypatch, count=2)
    with pytest.raises(ValueError, match="torch sees 2 GPU"):
        select_device("cuda:5")
    assert select_device("cpu") == torch.device("cpu")


def test_collectives_use_the_backends_device(monkeypatch):
    assert collective_device("nccl", torch.device("cuda", 2)) == torch.device("cuda", 2)
    assert collective_device("gloo", torch.device("cuda", 2)) == torch.device("cpu")
    # the gloo path for real: metrics reduce through a one-rank gloo group on CPU tensors
    import torch.distributed as dist

    seen = []
    monkeypatch.setattr(dist, "all_reduce", lambda t, op=None: seen.append((t.device, t.dtype, op)))
    ddp = Distributed(torch.device("cpu"))
    ddp.world = 2  # as if under torchrun; all_reduce is recorded instead of sent
    assert ddp.sum([1.0, 2.0]) == [1.0, 2.0] and ddp.max([3.0]) == [3.0]
    assert [s[0] for s in seen] == [torch.device("cpu")] * 2
    assert seen[0][2] == dist.ReduceOp.SUM and seen[1][2] == dist.ReduceOp.MAX


SMALL = {
    "steps": 4,
    "sft_steps": 4,
    "sft_batch": 16,
    "samples_per_step": 24,
    "games_in_flight": 8,
    "eval_every": 100,
    "eval_games": 2,
    "eval_env_ids": "KuhnPoker-v0:rounds=1",
    "eval_opponents": "random",
    "time_limit_s": 0,
    "save_every": 2,
    "micro_batch": 8,
    "plots": False,
    "lora_rank": 4,
    "lora_alpha": 8,
    "kl_coef": 0.1,
    "eval_tactics": False,  # tested in test_ttt_tactics.py
}


def adapter(path):
    from safetensors.torch import load_file

    return load_file(str(path / "adapter_model.safetensors"))


def test_lora_resume_continues_with_the_same_adapter(tmp_path):
    pytest.importorskip("peft")
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    train(TrainConfig.build({**SMALL, "output_dir": str(straight)}), progress=False)
    train(TrainConfig.build({**SMALL, "output_dir": str(resumed)}), progress=False)
    shutil.rmtree(resumed / "checkpoints" / "step_000004")  # died during steps 3-4
    train(TrainConfig.build({**SMALL, "output_dir": str(resumed), "resume": True}), progress=False)
    a, b = adapter(straight / "checkpoints" / "step_000004"), adapter(resumed / "checkpoints" / "step_000004")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    # and training really moved the adapter between the two checkpoints
    c = adapter(straight / "checkpoints" / "step_000002")
    assert any(not torch.equal(a[k], c[k]) for k in a)
    # a LoRA checkpoint plays as hf:PATH: its base with the adapter merged in
    from spiral_arena.agents import make_agent
    from spiral_arena.agents.hf import HFAgent

    agent = make_agent(f"hf:{straight / 'checkpoints' / 'step_000004'}", max_new_tokens=8, temperature=1.0)
    assert isinstance(agent, HFAgent)
    # the merged agent plays the policy the trainer evaluated at step 4 with the adapter on (at temperature 1)
    last = json.loads((straight / "metrics.jsonl").read_text().splitlines()[-1])
    assert last["step"] == 4
    trained = {k.removeprefix("eval/kuhn_p_bet/"): v for k, v in last.items() if k.startswith("eval/kuhn_p_bet/")}
    played = agent.kuhn_policy()
    assert len(trained) == 12 and played == pytest.approx(trained, rel=1e-4, abs=1e-5)
    with pytest.raises(ValueError, match="holds a LoRA adapter, but lora_rank is 0"):
        train(TrainConfig.build({**SMALL, "output_dir": str(resumed), "resume": True, "lora_rank": 0}))


class Boom:
    def __reduce__(self):
        return (print, ("pickled code ran",))


def test_checkpoint_state_is_loaded_without_running_pickled_code(tmp_path, capsys):
    bad = tmp_path / "step_000001"
    bad.mkdir()
    with open(bad / checkpoint.STATE_FILE, "wb") as f:
        pickle.dump({"step": 1, "payload": Boom()}, f)
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.AdamW(model.parameters())
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0)
    with pytest.raises(pickle.UnpicklingError):
        checkpoint.load_state(bad, optimizer.load_state_dict, scheduler, RAE(), {}, np.random.default_rng(0))
    assert "pickled code ran" not in capsys.readouterr().out


def test_entropy_bonus_raises_the_policy_entropy():
    """With every advantage 0 the policy gradient is 0: the entropy bonus alone moves the weights,
    towards a flatter next-token distribution; without it nothing moves and no entropy is logged."""
    from spiral_arena.models.logprobs import pack, response_logprobs

    def mean_entropy(model, turns) -> float:
        batch = pack([t.prompt_ids for t in turns], [t.response_ids for t in turns], 0, "cpu")
        with torch.no_grad():
            _, mask, entropy = response_logprobs(model, *batch, entropy=True)
        return float((entropy * mask).sum() / mask.sum())

    results = {}
    for coef in (0.0, 0.5):
        model = tiny_model()
        with torch.no_grad():  # a peaked policy to start from, so entropy has room to grow
            model.get_output_embeddings().weight.mul_(20.0)
        turns = make_turns(model.config.vocab_size)
        for t in turns:
            t.advantage = 0.0
        config = TrainConfig.build(  # turns of advantage 0 kept (SPIRAL's filter would leave none to train)
            {
                "lr": 1e-2,
                "loss": "reinforce",
                "epochs": 1,
                "micro_batch": 4,
                "entropy_coef": coef,
                "filter_zero_adv": False,
            }
        )
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.95), weight_decay=0.0)
        before = mean_entropy(model, turns)
        for _ in range(3):
            stats = learner_step(model, optimizer, turns, config)
        results[coef] = (before, mean_entropy(model, turns), stats)
    before, after, stats = results[0.0]
    assert after == pytest.approx(before, abs=1e-6) and "entropy" not in stats
    before, after, stats = results[0.5]
    assert after > before + 0.3, (before, after)
    assert stats["entropy"] > 0
