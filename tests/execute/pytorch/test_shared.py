import pytest

torch = pytest.importorskip("torch")

from cudaperf.execute.pytorch.shared import SharedBuffers, mutated, same_bits  # noqa: E402


def test_outputs_are_poisoned_before_every_call_and_inputs_refilled_in_place():
    x0 = [torch.rand(5), torch.arange(3), 7]
    bufs = SharedBuffers(x0, [torch.zeros(5), torch.zeros(2, dtype=torch.int32)], "cpu")
    ptr = bufs.inputs[0].data_ptr()
    bufs.outs[0].fill_(1.0)
    bufs.write_inputs(x0)
    assert bufs.inputs[0].data_ptr() == ptr and torch.equal(bufs.inputs[0], x0[0])
    assert bufs.inputs[2] == 7
    assert torch.isnan(bufs.outs[0]).all() and (bufs.outs[1] == -1).all()
    assert bufs.inputs[0].is_shared()


def test_meta_mismatches_are_named():
    bufs = SharedBuffers([torch.rand(4)], [torch.zeros(4)], "cpu")
    assert bufs.meta_message([[[4], "torch.float32"]]) == ""
    assert "shape (5,)" in bufs.meta_message([[[5], "torch.float32"]])
    assert "dtype torch.float64" in bufs.meta_message([[[4], "torch.float64"]])
    assert "returned 2 tensors" in bufs.meta_message([[[4], "torch.float32"]] * 2)
    assert "expected a tensor" in bufs.meta_message("forward returned int, expected a tensor")
    assert "malformed" in bufs.meta_message({"x": 1})


def test_flipping_inputs_changes_every_byte():
    x = torch.rand(6)
    bufs = SharedBuffers([x], [torch.zeros(6)], "cpu")
    bufs.write_inputs([x])
    view = bufs.inputs[0][2:]  # an output that aliases part of an input
    before = view.clone()
    bufs.flip_inputs()
    assert not same_bits(before, view)


def test_bitwise_comparison():
    a = torch.tensor([1.0, float("nan"), -0.0])
    assert same_bits(a, a.clone())
    assert not same_bits(a, torch.tensor([1.0, float("nan"), 0.0]))
    assert not same_bits(a, a.double())
    assert not mutated([a, 3], [a.clone(), 3])
    b = a.clone()
    b[0] = 2.0
    assert mutated([a], [b])
