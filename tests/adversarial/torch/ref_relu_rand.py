# Reference task for the adversarial corpus: ReLU over non-negative inputs (torch.rand, as
# KernelBench's ReLU draws them), where a copy is right on every input the task draws.
import torch
import torch.nn as nn

N = 1 << 20


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.rand(N)]


def get_init_inputs():
    return []
