"""`generation.generate_ids`: every mode gives one completion per prompt, in prompt order, cut
after the first EOS, never longer than max_new_tokens; greedy decoding agrees across modes."""

from __future__ import annotations

import functools

import pytest

transformers = pytest.importorskip("transformers")

from cudaperf.generation import MODES, generate_ids, mode_config  # noqa: E402
from tests.train.helpers import make_tiny_model  # noqa: E402


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    path = make_tiny_model(tmp_path_factory.mktemp("gen"))
    tok = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModelForCausalLM.from_pretrained(path).eval()
    texts = ["int main(){ return 0; }", "x", "__global__ void k(float* a) {", "for (int i"]
    return model, tok, [tok(t)["input_ids"] for t in texts]


def _greedy(n: int = 10):
    return transformers.GenerationConfig(max_new_tokens=n, do_sample=False)


def _one_by_one(model, tok, prompts, n=10):
    return [generate_ids(model, [p], _greedy(n), "dynamic", tok.pad_token_id)[0] for p in prompts]


@pytest.mark.parametrize("mode", ["dynamic", "static", "compile"])
def test_batched_modes_keep_prompt_order_and_agree_with_one_at_a_time(lm, mode):
    model, tok, prompts = lm
    got = generate_ids(model, prompts, _greedy(), mode, tok.pad_token_id, batch=3)
    assert got == _one_by_one(model, tok, prompts)
    assert len({tuple(g) for g in got}) > 1  # the prompts' completions differ: order is tested


def test_continuous_batching_keeps_prompt_order(lm, monkeypatch):
    """...and on the CPU sizes its paged cache to the work: left to transformers it takes 90%
    of the machine's free RAM (this test's process peaked at 14.9 GB)."""
    model, tok, prompts = lm
    seen, real = [], model.generate_batch

    @functools.wraps(real)  # keeps the signature generate_ids reads
    def spy(*a, **kw):
        seen.append(kw.get("continuous_batching_config"))
        return real(*a, **kw)

    monkeypatch.setattr(model, "generate_batch", spy)
    got = generate_ids(model, prompts, _greedy(), "continuous", tok.pad_token_id)
    assert got == _one_by_one(model, tok, prompts)
    (cache,) = seen
    assert cache is not None and cache.num_blocks <= 4 * len(prompts)  # 4 prompts, 10 tokens
    assert cache.max_batch_tokens <= 8192


def test_completion_is_cut_after_the_first_eos_and_capped(lm):
    model, tok, prompts = lm
    full = _one_by_one(model, tok, prompts, n=8)
    stop = full[0][3]
    got = generate_ids(model, prompts, _greedy(8), "static", tok.pad_token_id, eos_ids=[stop])
    for g, f in zip(got, full, strict=True):
        assert len(g) <= 8
        cut = f.index(stop) + 1 if stop in f else len(f)
        assert g == f[:cut]
    assert got[0][-1] == stop and len(got[0]) == 4


def test_mode_config_sets_the_cache_and_compilation():
    base = transformers.GenerationConfig(max_new_tokens=5, do_sample=True, num_return_sequences=3)
    assert mode_config(base, "compile").cache_implementation == "static"
    assert mode_config(base, "compile").disable_compile is False
    assert mode_config(base, "static").disable_compile is True
    assert mode_config(base, "dynamic").cache_implementation is None
    assert mode_config(base, "static").num_return_sequences == 1
    assert base.num_return_sequences == 3  # the caller's config is not changed
    assert set(MODES) == {"auto", "dynamic", "static", "compile", "continuous"}


def test_unknown_mode_is_one_clear_error():
    with pytest.raises(ValueError, match="--generation 'fast'.*dynamic, static"):
        mode_config(transformers.GenerationConfig(), "fast")


def test_static_modes_pad_prompts_to_a_few_widths(lm, monkeypatch):
    """So a compiled decoding step meets a few cache shapes, not one per prompt length."""
    from cudaperf import generation

    model, tok, prompts = lm
    widths, real = [], model.generate
    seen = lambda **k: widths.append(k["input_ids"].shape[1]) or real(**k)  # noqa: E731
    monkeypatch.setattr(model, "generate", seen)
    for mode in ("static", "compile", "dynamic"):
        generate_ids(model, prompts, _greedy(2), mode, tok.pad_token_id)
    assert widths[0] == widths[1] == generation.PAD_MULTIPLE
    assert widths[2] == max(map(len, prompts))  # the dynamic mode pads to the longest only


def test_sampling_config_keeps_the_models_eos_ids_and_leaves_the_model_alone(lm):
    model, _, _ = lm
    model.generation_config.eos_token_id = [2, 7]  # e.g. a chat model with two end tokens
    try:
        cfg = generation_sampling(model)
        assert cfg.eos_token_id == [2, 7] and cfg.do_sample and cfg.temperature == 0.5
        assert cfg.max_new_tokens == 9 and model.generation_config.max_new_tokens != 9
    finally:
        model.generation_config.eos_token_id = 2


def generation_sampling(model):
    from cudaperf.generation import sampling_config

    return sampling_config(model, 0.5, 9)


def test_compiled_decoding_compiles_once_across_prompt_lengths(lm, monkeypatch):
    """The static cache's length is a power of two, so calls whose prompts pad to different
    widths (a GRPO run's turn 1, then its longer turn 2) within one power of two meet one cache
    shape and one compiled graph, and a shorter call after a longer one reuses it. Counted with
    a backend that records each compilation (the criterion is the CPU's here, so compilation is
    forced on all devices)."""
    from cudaperf import generation

    model, tok, _ = lm
    graphs = []

    def backend(gm, inputs):
        graphs.append(len(inputs))
        return gm.forward

    monkeypatch.setattr(generation, "PAD_MULTIPLE", 16)  # small widths: a fast test
    cfg = _greedy(20)  # widths 16 and 32 + 20 new tokens: both fit in a cache of 64
    cfg.compile_config = transformers.CompileConfig(backend=backend, mode=None, fullgraph=False)
    cfg.compile_config._compile_all_devices = True
    short, long = [5] * 10, [5] * 26  # pad to 16, then to 32
    for prompt in (short, long, short):
        generate_ids(model, [prompt, prompt[:-2]], cfg, "compile", tok.pad_token_id)
    assert graphs  # the decoding step was compiled
    assert len(graphs) == 1, f"{len(graphs)} compilations for one batch size"


def test_auto_is_compile_on_cuda_and_dynamic_elsewhere(lm, monkeypatch):
    from cudaperf import generation

    assert generation.resolve_mode("auto", "cuda") == "compile"
    assert generation.resolve_mode("auto", "cpu") == "dynamic"
    assert generation.resolve_mode("static", "cuda") == "static"  # a named mode is kept
    with pytest.raises(ValueError, match="resolve"):
        mode_config(transformers.GenerationConfig(), "auto")
    model, tok, prompts = lm  # on this CPU, auto generates as dynamic does
    want = _one_by_one(model, tok, prompts)
    seen, real = [], generation.mode_config
    monkeypatch.setattr(generation, "mode_config", lambda c, m: seen.append(m) or real(c, m))
    assert generate_ids(model, prompts, _greedy(), "auto", tok.pad_token_id) == want
    assert seen == ["dynamic"]
