# Reference task whose outputs are tiny (|y| ~ 1e-6): zeros would pass a plain atol check.
import torch
import torch.nn as nn

N = 1 << 16


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * 1e-6


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
