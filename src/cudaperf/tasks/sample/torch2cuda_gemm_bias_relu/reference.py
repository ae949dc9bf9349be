"""Linear layer (GEMM plus bias) followed by ReLU."""

import torch
import torch.nn as nn

batch_size = 1024
in_features = 2048
out_features = 2048


class Model(nn.Module):
    """relu(x @ W^T + b) with W, b from nn.Linear(in_features, out_features)."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
