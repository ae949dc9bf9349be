"""PyTorch→CUDA families: a PyTorch `Model`, native CUDA implementations, and configs
(`torch_common` holds what they share). The package `cudaperf.datagen.families` imports
every module here (registration)."""
