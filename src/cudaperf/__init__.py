"""cudaperf: teach language models to write fast, correct CUDA."""

__version__ = "0.1.0"
