"""train.twin.MergedTwin: a plain copy of a LoRA policy that samples as the policy does."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
peft = pytest.importorskip("peft")
transformers = pytest.importorskip("transformers")

from cudaperf.train.twin import MergedTwin  # noqa: E402


def _policy(tiny, dtype=torch.float32, **lora):
    base = transformers.AutoModelForCausalLM.from_pretrained(tiny, dtype=dtype)
    cfg = peft.LoraConfig(
        r=4, lora_alpha=8, target_modules="all-linear", task_type="CAUSAL_LM", **lora
    )
    model = peft.get_peft_model(base, cfg)
    _train_a_step(model, seed=1)  # lora_B starts at zero: give the adapter something to say
    return model


def _train_a_step(model, seed: int) -> None:
    """What an optimizer step does to the adapter: every LoRA factor changes in place."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_" in name:
                p.add_(0.05 * torch.randn(p.shape, generator=g, dtype=torch.float32).to(p.dtype))


def _logits(model, ids):
    with torch.no_grad():
        return model(input_ids=ids).logits.float()


IDS = torch.tensor([[1, 17, 42, 99, 7, 250, 3, 11]])


def test_the_twin_computes_the_policys_logits_and_follows_each_update(tiny):
    policy = _policy(tiny)
    policy.eval()
    twin = MergedTwin(policy)
    assert not isinstance(twin.model, peft.PeftModel) and not twin.model.training
    assert torch.allclose(_logits(twin.model, IDS), _logits(policy, IDS), atol=1e-5)
    base = {n: p.clone() for n, p in policy.named_parameters() if "base_layer" in n}
    ptrs = [p.data_ptr() for p in twin.model.parameters()]
    _train_a_step(policy, seed=2)
    stale = _logits(twin.model, IDS)
    assert not torch.allclose(stale, _logits(policy, IDS), atol=1e-4)  # the step changed it
    twin.refresh()
    assert torch.allclose(_logits(twin.model, IDS), _logits(policy, IDS), atol=1e-5)
    assert [p.data_ptr() for p in twin.model.parameters()] == ptrs  # in place: graphs stay valid
    for _ in range(5):
        twin.refresh()
    after = {n: p for n, p in policy.named_parameters() if "base_layer" in n}
    assert all(torch.equal(base[n], after[n]) for n in base)  # the policy's base never moves


def test_a_bfloat16_twin_rounds_once_and_does_not_drift(tiny):
    policy = _policy(tiny, dtype=torch.bfloat16)
    twin = MergedTwin(policy)
    first = [p.clone() for p in twin.model.parameters()]
    for _ in range(20):
        twin.refresh()
    assert all(torch.equal(a, b) for a, b in zip(first, twin.model.parameters(), strict=True))
    policy.eval()
    got, want = _logits(twin.model, IDS), _logits(policy, IDS)
    assert (got - want).abs().max() < 0.05 * want.abs().max()  # one bf16 rounding apart


def test_trained_non_lora_parameters_are_copied_at_each_refresh(tiny):
    policy = _policy(tiny, modules_to_save=["lm_head"])
    twin = MergedTwin(policy)
    with torch.no_grad():
        for n, p in policy.named_parameters():
            if "modules_to_save" in n:
                p.mul_(1.5)
    twin.refresh()
    policy.eval()
    assert torch.allclose(_logits(twin.model, IDS), _logits(policy, IDS), atol=1e-5)


@pytest.mark.parametrize("case", ["dora", "merged", "not_peft", "embedding", "zero3"])
def test_what_is_not_a_low_rank_sum_on_linears_is_refused_in_one_line(tiny, case, monkeypatch):
    if case == "zero3":
        import transformers.integrations as integrations

        monkeypatch.setattr(integrations, "is_deepspeed_zero3_enabled", lambda: True)
        model = _policy(tiny)
    elif case == "dora":
        model = _policy(tiny, use_dora=True)
    elif case == "merged":
        model = _policy(tiny)
        model.merge_adapter()
    elif case == "not_peft":
        model = transformers.AutoModelForCausalLM.from_pretrained(tiny)
    else:
        base = transformers.AutoModelForCausalLM.from_pretrained(tiny)
        cfg = peft.LoraConfig(r=4, target_modules=["embed_tokens", "q_proj"])
        model = peft.get_peft_model(base, cfg)
    with pytest.raises(ValueError) as e:
        MergedTwin(model)
    msg = str(e.value)
    assert "\n" not in msg and "--generation-weights adapter" in msg
