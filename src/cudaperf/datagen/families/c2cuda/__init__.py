"""C→CUDA families: a C function, its naive and optimised CUDA implementations, and configs.
The package `cudaperf.datagen.families` imports every module here (registration)."""
