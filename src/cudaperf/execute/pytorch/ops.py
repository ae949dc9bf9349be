"""The PyTorch compute-op list of the static checks, derived from torch's own namespaces.

`derive_compute_ops()` reads the installed torch: the public native functions of `torch`,
the functions of `torch.nn.functional` and the methods of `torch.Tensor`, in-place twins
folded (`relu_` -> `relu`), minus what is not compute (allocation, views and reshapes,
metadata, conversions, copies, autograd and storage plumbing). The result is committed with
the torch version in `torch_ops.json`, so the checks neither import torch nor depend on the
evaluator's torch; `COMPUTE_OPS` / `COMPUTE_OPS_TORCH` are read from that file.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["COMPUTE_OPS", "COMPUTE_OPS_TORCH", "derive_compute_ops", "write_compute_ops"]

# Calling one of these in a candidate does the task's work in PyTorch instead of in a custom
# kernel. Regenerate after a torch upgrade (the test compares the file with the installed torch):
#   python -c "from cudaperf.execute.pytorch.ops import write_compute_ops; write_compute_ops()"
_OPS_FILE = Path(__file__).with_name("ops.json")

# What is not compute, among torch's public ops: allocation, views and reshapes, metadata,
# conversions and copies into preallocated outputs, autograd and storage plumbing, RNG state.
_NOT_COMPUTE = frozenset(
    """empty empty_strided empty_permuted zeros ones full tensor as_tensor asarray from_numpy
    from_file frombuffer arange range linspace logspace eye scalar_tensor empty_like zeros_like
    ones_like full_like rand_like randn_like randint_like rand randn randint randperm normal
    bernoulli multinomial poisson manual_seed seed initial_seed get_rng_state set_rng_state
    uniform exponential geometric cauchy log_normal
    view view_as reshape reshape_as permute transpose t swapaxes swapdims movedim moveaxis
    squeeze unsqueeze flatten unflatten expand expand_as broadcast_to narrow select slice
    split split_with_sizes tensor_split chunk unbind as_strided contiguous detach alias
    view_as_real view_as_complex real imag resolve_conj resolve_neg conj numel size dim stride
    shape ndim ndimension nelement element_size itemsize nbytes data_ptr const_data_ptr
    storage_offset get_device device dtype layout item tolist numpy to cuda cpu float double
    half bfloat16 int long short char byte bool cfloat cdouble chalf type type_as copy_ clone
    fill_ zero_ fill requires_grad_ retain_grad backward register_hook record_stream
    pin_memory share_memory_ set_ resize_ resize_as_ untyped_storage storage new new_empty
    new_empty_strided new_full new_ones new_tensor new_zeros result_type can_cast
    promote_types numel set_default_dtype get_default_dtype set_grad_enabled no_grad
    is_grad_enabled inference_mode is_inference_mode_enabled set_printoptions compile
    data grad grad_fn name names output_nr H T mT mH apply_ map_ map2_ ccol_indices
    col_indices crow_indices row_indices indices values coalesce dense_dim sparse_dim
    sparse_mask to_dense xpu ipu mtia sum_to_size dsplit hsplit vsplit atleast_1d atleast_2d
    atleast_3d broadcast_tensors broadcast_shapes unsafe_split unsafe_chunk
    unsafe_split_with_sizes squeeze_copy unsqueeze_copy view_copy permute_copy t_copy
    transpose_copy expand_copy as_strided_copy detach_copy alias_copy select_copy slice_copy
    split_copy unbind_copy narrow_copy diagonal_copy view_as_real_copy view_as_complex_copy
    indices_copy values_copy ccol_indices_copy col_indices_copy crow_indices_copy
    row_indices_copy unfold_copy unflatten_dense_tensors flatten_dense_tensors
    cat concat concatenate stack hstack vstack dstack column_stack row_stack pad
    constant_pad_nd repeat repeat_interleave flip fliplr flipud roll rot90 ravel meshgrid
    diagonal copy set resize resize_as resize_as_sparse apply map map2 random requires_grad
    retains_grad grad_dtype qscheme assert_int_or_pair boolean_dispatch handle_torch_function
    as_subclass""".split()
)
_NOT_COMPUTE_PREFIXES = (
    "is_",
    "new_",
    "to_",
    "sparse_",
    "q_",
    "fbgemm_",
    "quantize",
    "mkldnn",
    "miopen",
    "cudnn_is",
    "has_torch_function",
)


def derive_compute_ops() -> list[str]:
    """The compute-op names of the installed torch: public callables of `torch` (its native
    functions), `torch.nn.functional` and `torch.Tensor`, in-place twins folded (`relu_` ->
    `relu`), minus `_NOT_COMPUTE` and the metadata/format prefixes. Needs torch."""
    import inspect

    import torch
    import torch.nn.functional as F

    names = set(dir(torch._C._VariableFunctions)) | set(dir(torch._C.TensorBase))
    names |= {n for n in dir(F) if inspect.isroutine(getattr(F, n))}
    names |= {"__matmul__", "clamp_min", "clamp_max"}  # operators are caught separately
    out = {n.rstrip("_") for n in names if not n.startswith("_")}
    keep = (n for n in out if n not in _NOT_COMPUTE)
    out = {n for n in keep if n and not n.startswith(_NOT_COMPUTE_PREFIXES)}
    return sorted(out)


def write_compute_ops(path: Path = _OPS_FILE) -> Path:
    """Write `derive_compute_ops()` with the torch version to `path` (the committed list)."""
    import torch

    doc = {"torch": torch.__version__, "compute_ops": derive_compute_ops()}
    path.write_text(json.dumps(doc, indent=0) + "\n")
    return path


def _load_compute_ops() -> tuple[frozenset[str], str]:
    doc = json.loads(_OPS_FILE.read_text())
    return frozenset(doc["compute_ops"]), doc["torch"]


COMPUTE_OPS, COMPUTE_OPS_TORCH = _load_compute_ops()
