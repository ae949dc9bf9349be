"""A merged twin of a LoRA policy, for sampling: the same policy in a plain model.

GRPO samples from the policy at every step. A PEFT model decodes through its LoRA layers: each
adapted linear runs its base matmul plus two small matmuls, a scale and an add, so a small model,
whose decoding is bound by kernel launches, runs about twice the kernels per token that its base
model does. Merging the adapter into the base weights for generation (`merge_adapter`) and out
again (`unmerge_adapter`) would round the frozen base weights twice per step in bfloat16, and
they would drift over a run. The twin is a separate plain model of the same architecture whose
weights `refresh()` sets, in place, to W + ΔW: W the PEFT model's base weights (never written),
ΔW each active adapter's `get_delta_weight` from the current LoRA factors, summed in float32 and
rounded once. Nothing accumulates from step to step, and the twin's tensors keep their addresses,
so a compiled decoding step (and its CUDA graphs) stays valid across refreshes.

Sampling from the twin is sampling from the policy up to that one rounding (the kind of
mismatch an inference engine such as vLLM has too); TRL recomputes the log-probabilities it
trains on with the policy itself. The twin costs one more copy of the model's weights on the
policy's device. Supported: LoRA on linear layers (any rank, scaling, `fan_in_fan_out`), several
active adapters, frozen or trained non-LoRA parameters (copied at each refresh). Refused, in
one line: variants that are not a low-rank sum (DoRA and the like), LoRA on embeddings or
convolutions, an adapter already merged, any other PEFT method, a policy sharded by DeepSpeed
ZeRO-3.
"""

from __future__ import annotations

import copy

__all__ = ["MergedTwin"]


class MergedTwin:
    """`MergedTwin(peft_model)`: `.model` is the plain twin (eval mode, no gradients);
    `refresh()` copies the policy's current weights into it (module doc)."""

    def __init__(self, peft_model) -> None:
        import torch
        import transformers
        from transformers.integrations import is_deepspeed_zero3_enabled

        if is_deepspeed_zero3_enabled():  # each process holds a shard: nothing whole to copy
            raise ValueError(
                "--generation-weights merged: the policy is sharded (DeepSpeed ZeRO-3); use "
                "--generation-weights adapter"
            )
        base = _lora_base(peft_model)
        self.source = peft_model
        param = next(base.parameters())
        with torch.device(param.device):
            twin = transformers.AutoModelForCausalLM.from_config(
                copy.deepcopy(base.config), dtype=param.dtype
            )
        twin.eval().requires_grad_(False)
        if getattr(base, "generation_config", None) is not None:
            twin.generation_config = copy.deepcopy(base.generation_config)
        self.model = twin
        self._plan = _plan(base, twin)
        self.refresh()

    def refresh(self) -> None:
        """Set the twin's weights to the policy's current ones (in place)."""
        import torch

        with torch.no_grad():
            for dest, make in self._plan:
                dest.copy_(make())


def _lora_base(peft_model):
    """The transformers model inside a LoRA `PeftModel`, or a ValueError naming the fix."""
    try:
        from peft import PeftModel
        from peft.tuners.lora import LoraModel
    except ImportError:  # pragma: no cover - peft is a dependency
        raise ValueError("--generation-weights merged needs peft") from None
    if not isinstance(peft_model, PeftModel) or not isinstance(peft_model.base_model, LoraModel):
        raise ValueError(
            f"--generation-weights merged: the policy is a {type(peft_model).__name__}, not a "
            "LoRA PeftModel; use --generation-weights adapter (full fine-tuning samples from "
            "the model itself)"
        )
    return peft_model.get_base_model()


def _plan(base, twin) -> list:
    """(twin tensor, function giving its current value) for every parameter and buffer of the
    twin. A LoRA linear's weight is its base weight plus the active adapters' deltas."""
    from peft.tuners.lora import Linear as LoraLinear
    from peft.tuners.lora import LoraLayer

    loras = {}
    for name, mod in base.named_modules():
        if isinstance(mod, LoraLayer):
            _check_lora(name, mod, LoraLinear)
            loras[name] = mod
    plan = []
    buffers = dict(twin.named_buffers())
    tensors = dict(twin.named_parameters())
    tensors |= {k: v for k, v in buffers.items() if k not in tensors}
    for name, dest in tensors.items():
        owner, _, leaf = name.rpartition(".")
        if owner in loras:
            plan.append((dest, _lora_value(loras[owner], leaf)))
            continue
        src = _source_tensor(base, name)
        if src is None:
            if name in buffers:  # a buffer the twin computes itself
                continue
            raise ValueError(
                f"--generation-weights merged: the policy has no tensor for the twin's {name}; "
                "use --generation-weights adapter"
            )
        plan.append((dest, lambda s=src: s))
    return plan


def _check_lora(name: str, mod, lora_linear) -> None:
    why = ""
    if not isinstance(mod, lora_linear):
        why = f"LoRA on a {type(mod).__name__} ({name}), not a linear layer"
    elif mod.merged:
        why = f"its adapter is merged into {name} already"
    elif any(a in getattr(mod, "lora_variant", {}) for a in mod.active_adapters):
        why = f"{name} uses a LoRA variant (e.g. DoRA) that is not a low-rank sum"
    if why:
        raise ValueError(f"--generation-weights merged: {why}; use --generation-weights adapter")


def _lora_value(mod, leaf: str):
    """The current value of a LoRA linear's `weight` (base + deltas) or `bias` (the base's)."""
    import torch

    base_t = getattr(mod.base_layer, leaf)
    if leaf != "weight":
        return lambda: base_t
    active = [a for a in mod.active_adapters if a in mod.lora_A]

    def merged():
        if mod.disable_adapters or not active:
            return base_t
        out = base_t.to(torch.float32)
        for a in active:
            out = out + mod.get_delta_weight(a).to(torch.float32)
        return out.to(base_t.dtype)

    return merged


def _source_tensor(base, name: str):
    """The policy's tensor of that name (through a `modules_to_save` wrapper, peft's attribute
    lookup gives the active copy's), or None."""
    owner, _, leaf = name.rpartition(".")
    try:
        mod = base.get_submodule(owner) if owner else base
    except AttributeError:
        return None
    return getattr(mod, leaf, None)
