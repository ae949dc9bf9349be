"""Layer normalisation over the last dimension of a (batch_size, dim) matrix."""

import torch
import torch.nn as nn

batch_size = 4096
dim = 8192


class Model(nn.Module):
    """nn.LayerNorm(dim) with eps 1e-5 and a non-trivial affine weight and bias."""

    def __init__(self, dim: int):
        super().__init__()
        self.ln = nn.LayerNorm(dim)
        nn.init.uniform_(self.ln.weight, 0.5, 1.5)
        nn.init.uniform_(self.ln.bias, -0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


def get_inputs():
    return [torch.randn(batch_size, dim) * 2.0 + 1.0]


def get_init_inputs():
    return [dim]
