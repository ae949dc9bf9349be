"""Reading candidate source: the CUDA code inside a PyTorch→CUDA candidate.

A PyTorch→CUDA candidate is a Python file whose kernels live in string literals, passed to
`torch.utils.cpp_extension.load_inline(cuda_sources=...)` or to cudaperf's native
`load_cuda(CUDA_SRC)`. Both the analyzer and the evaluator need those strings, so the one
extractor lives here, below both of them.
"""

from __future__ import annotations

import ast

__all__ = ["cuda_sources_in_python"]

_CUDA_MARKERS = ("__global__", "__device__", "<<<", "cuda_runtime", 'extern "C"')


def cuda_sources_in_python(src: str) -> list[str]:
    """Every string constant in a Python source that looks like CUDA/C++ code, in order.

    Guaranteed: strings built by simple concatenation or f-strings without placeholders are
    found; a string assembled at run time (e.g. read from a file) is not.
    """
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return []
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            if any(m in text for m in _CUDA_MARKERS):
                found.append(text)
    return found
