"""Tests for the shared GRPO core (testbeds/grpo.py): trl parity, advantages, generation, determinism, errors."""

from collections import defaultdict
from types import SimpleNamespace

import pytest
import torch

from icml26.testbeds.grpo import (
    GRPOConfig,
    Rollout,
    generate_with_logprobs,
    group_advantages,
    grpo_loss,
    grpo_step,
    token_logprobs,
    zero_advantage_fraction,
)

V = 12


def _tiny_llama(seed=0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=V, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                      intermediate_size=32, max_position_embeddings=64, bos_token_id=None, eos_token_id=None,
                      pad_token_id=None)
    return LlamaForCausalLM(cfg)


def _prompts():
    ids = torch.tensor([[0, 0, 3, 4], [5, 6, 7, 8]])  # first prompt left-padded
    mask = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]])
    return ids, mask


# advantages

def test_group_advantages_zero_mean_per_group_and_unit_std():
    g = torch.Generator().manual_seed(0)
    r = torch.rand(6 * 5, generator=g)
    a = group_advantages(r, 5).view(6, 5)
    assert torch.allclose(a.mean(1), torch.zeros(6), atol=1e-6)
    assert torch.allclose(a.std(1), torch.ones(6), atol=1e-3)
    a0 = group_advantages(r, 5, scale=False).view(6, 5)
    assert torch.allclose(a0, r.view(6, 5) - r.view(6, 5).mean(1, keepdim=True))


def test_group_advantages_equal_rewards_give_zero():
    r = torch.tensor([1.0, 1.0, 1.0, 0.0, 1.0, 0.0])
    a = group_advantages(r, 3)
    assert torch.all(a[:3] == 0)
    assert zero_advantage_fraction(r, 3) == 0.5


@pytest.mark.parametrize("g", [1, 0, -2])
def test_group_size_below_two_raises(g):
    with pytest.raises(ValueError, match="group_size"):
        group_advantages(torch.zeros(4), g)
    with pytest.raises(ValueError, match="group_size"):
        GRPOConfig(group_size=g)


def test_group_advantages_bad_shapes():
    with pytest.raises(ValueError, match="multiple"):
        group_advantages(torch.zeros(5), 2)
    with pytest.raises(TypeError):
        group_advantages([1.0, 2.0], 2)


# parity with trl's GRPOTrainer._compute_loss (called directly on a stub trainer)

def _trl_loss(loss_type, logp, old, ref, adv, mask, beta, eps_lo, eps_hi):
    from trl.trainer.grpo_trainer import GRPOTrainer

    B, C = logp.shape

    class Acc:
        num_processes = 1
        sync_gradients = True

        def gather(self, x):
            return x

        gather_for_metrics = gather

        def reduce(self, x, reduction="sum"):
            return x

    stub = SimpleNamespace(
        _get_per_token_logps_and_entropies=lambda *a, **k: (logp, torch.zeros_like(logp), None),
        top_entropy_quantile=1.0, off_policy_mask_threshold=None, importance_sampling_level="token", beta=beta,
        args=SimpleNamespace(use_bias_correction_kl=False, delta=None, steps_per_generation=1),
        loss_type=loss_type, epsilon_low=eps_lo, epsilon_high=eps_hi, use_vllm=False, aux_loss_enabled=False,
        model=SimpleNamespace(training=True), current_gradient_accumulation_steps=1, max_completion_length=C,
        accelerator=Acc(), _entropy_bonus_enabled=False, _metrics={"train": defaultdict(list)})
    inputs = {"prompt_ids": torch.zeros(B, 2, dtype=torch.long), "prompt_mask": torch.ones(B, 2, dtype=torch.long),
              "completion_ids": torch.zeros(B, C, dtype=torch.long), "completion_mask": mask,
              "advantages": adv, "old_per_token_logps": old, "ref_per_token_logps": ref,
              "num_items_in_batch": mask.sum()}
    return GRPOTrainer._compute_loss(stub, None, inputs)


@pytest.mark.parametrize("loss_type", ["grpo", "bnpo", "dr_grpo", "dapo"])
@pytest.mark.parametrize("beta,eps_hi", [(0.0, None), (0.04, 0.28)])
def test_grpo_loss_matches_trl(loss_type, beta, eps_hi):
    g = torch.Generator().manual_seed(1)
    B, C = 6, 7
    old = -torch.rand(B, C, generator=g, dtype=torch.float64) * 2
    ref = old + 0.3 * torch.randn(B, C, generator=g, dtype=torch.float64)
    base = old + 0.4 * torch.randn(B, C, generator=g, dtype=torch.float64)  # ratios well outside the clip range
    adv = torch.randn(B, generator=g, dtype=torch.float64)
    mask = (torch.rand(B, C, generator=g) < 0.8).double()
    mask[:, 0] = 1
    lp_ours, lp_trl = base.clone().requires_grad_(), base.clone().requires_grad_()
    ours, m = grpo_loss(lp_ours, old, adv, mask, ref_logp=ref, clip_eps=0.2, clip_eps_high=eps_hi, beta=beta,
                        loss_type=loss_type, max_completion_length=C)
    theirs = _trl_loss(loss_type, lp_trl, old, ref, adv, mask, beta, 0.2, 0.2 if eps_hi is None else eps_hi)
    assert abs(ours.item() - theirs.item()) < 1e-6
    ours.backward()
    theirs.backward()
    assert torch.allclose(lp_ours.grad, lp_trl.grad, atol=1e-6)
    assert m["clip_fraction"] > 0  # the test exercises the clipped branch


def test_grpo_loss_errors():
    x = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="loss_type"):
        grpo_loss(x, x, torch.zeros(2), x, loss_type="ppo")
    with pytest.raises(ValueError, match="ref_logp"):
        grpo_loss(x, x, torch.zeros(2), x, beta=0.1)
    with pytest.raises(ValueError, match="shape"):
        grpo_loss(x, torch.zeros(2, 4), torch.zeros(2), x)


def test_on_policy_gradient_is_policy_gradient():
    """At rho = 1 (no clipping) d loss / d logp = -A * mask / len, per sequence ('grpo' aggregation)."""
    lp = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    adv = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1], [0, 1, 1, 1]], dtype=torch.float64)
    loss, _ = grpo_loss(lp, lp.detach(), adv, mask)
    loss.backward()
    expect = -adv[:, None] * mask / mask.sum(1, keepdim=True) / 3
    assert torch.allclose(lp.grad, expect)


# log-probs and generation

def test_token_logprobs_matches_manual_and_plain_modules():
    model = _tiny_llama()
    ids, mask = torch.tensor([[1, 2, 3, 4]]), torch.ones(1, 4, dtype=torch.long)
    lp = token_logprobs(model, ids, mask)
    logits = model(input_ids=ids).logits
    manual = torch.log_softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    assert torch.allclose(lp, manual, atol=1e-5)

    class Plain(torch.nn.Module):  # returns a logits tensor, no HF kwargs
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(V, V)

        def forward(self, input_ids):
            return self.emb(input_ids)

    p = Plain()
    assert token_logprobs(p, ids, mask).shape == (1, 3)
    roll = generate_with_logprobs(p, ids, mask, num_return_sequences=2, max_new_tokens=3,
                                  generator=torch.Generator().manual_seed(0))
    assert roll.sequences.shape == (2, 7)
    with pytest.raises(ValueError, match="T >= 2"):
        token_logprobs(model, ids[:, :1], mask[:, :1])


def test_generation_layout_masks_and_logprobs():
    model = _tiny_llama()
    ids, mask = _prompts()
    roll = generate_with_logprobs(model, ids, mask, num_return_sequences=3, max_new_tokens=5, eos_token_id=1,
                                  generator=torch.Generator().manual_seed(3))
    assert isinstance(roll, Rollout) and len(roll) == 6 and roll.prompt_len == 4
    assert torch.equal(roll.sequences[:3, :4], ids[:1].expand(3, 4))  # group-contiguous
    assert torch.equal(roll.sequences[3:, :4], ids[1:].expand(3, 4))
    assert roll.completion_mask[:, :3].sum() == 0
    cm = roll.completion_token_mask
    for b in range(6):  # mask is 1 up to and including the first EOS, 0 after
        toks = roll.completion_ids[b].tolist()
        n = toks.index(1) + 1 if 1 in toks else len(toks)
        assert cm[b].tolist() == [1.0] * n + [0.0] * (len(toks) - n)
    full = token_logprobs(model, roll.sequences, roll.attention_mask)
    assert torch.allclose(full, roll.old_logp)


def test_kv_cache_generation_equals_recompute():
    """Greedy decoding with the KV cache equals greedy decoding by full recomputation (left padding included)."""
    model = _tiny_llama(2)
    ids, mask = _prompts()
    roll = generate_with_logprobs(model, ids, mask, num_return_sequences=1, max_new_tokens=6, temperature=0.0)
    seq, m = ids, mask
    for _ in range(6):
        logits = model(input_ids=seq, attention_mask=m, position_ids=(m.cumsum(-1) - 1).clamp(min=0)).logits
        seq = torch.cat([seq, logits[:, -1].argmax(-1, keepdim=True)], 1)
        m = torch.cat([m, torch.ones(2, 1, dtype=torch.long)], 1)
    assert torch.equal(roll.sequences, seq)


def test_generation_deterministic_given_generator():
    model = _tiny_llama()
    ids, mask = _prompts()
    kw = dict(num_return_sequences=4, max_new_tokens=6, temperature=1.0, top_k=5)
    a = generate_with_logprobs(model, ids, mask, generator=torch.Generator().manual_seed(7), **kw)
    b = generate_with_logprobs(model, ids, mask, generator=torch.Generator().manual_seed(7), **kw)
    c = generate_with_logprobs(model, ids, mask, generator=torch.Generator().manual_seed(8), **kw)
    assert torch.equal(a.sequences, b.sequences) and torch.equal(a.old_logp, b.old_logp)
    assert not torch.equal(a.sequences, c.sequences)


def test_generation_bad_inputs():
    model = _tiny_llama()
    ids, mask = _prompts()
    with pytest.raises(ValueError, match="num_return_sequences"):
        generate_with_logprobs(model, ids, mask, num_return_sequences=0, max_new_tokens=2)
    with pytest.raises(ValueError, match="prompt_mask"):
        generate_with_logprobs(model, ids, mask[:, :2], num_return_sequences=2, max_new_tokens=2)


def test_grpo_step_raises_reward_of_favoured_token():
    """A few GRPO steps rewarding token 5 make it more likely (end-to-end sanity of the step)."""
    model = _tiny_llama(1)
    cfg = GRPOConfig(group_size=8, lr=3e-2, max_new_tokens=2, beta=0.01)
    ref = _tiny_llama(1)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    ids, mask = _prompts()
    g = torch.Generator().manual_seed(0)

    def p5():
        with torch.no_grad():
            return torch.softmax(model(input_ids=ids[1:]).logits[0, -1], -1)[5].item()

    before = p5()
    for _ in range(8):
        roll = generate_with_logprobs(model, ids, mask, num_return_sequences=cfg.group_size,
                                      max_new_tokens=cfg.max_new_tokens, generator=g)
        r = (roll.completion_ids == 5).float().sum(1)
        m = grpo_step(model, opt, roll, group_advantages(r, cfg.group_size), cfg, ref_model=ref)
    assert set(m) >= {"loss", "clip_fraction", "kl", "grad_norm"}
    assert p5() > before + 0.1
    with pytest.raises(ValueError, match="ref_model"):
        grpo_step(model, opt, roll, torch.zeros(len(roll)), cfg)
