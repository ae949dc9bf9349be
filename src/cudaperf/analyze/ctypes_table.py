"""Sizes of the C/CUDA element types that kernels index (scalars and vector types)."""

from __future__ import annotations

__all__ = ["type_size"]

# Bytes per element of the types a kernel commonly indexes.
_SIZES = {
    "char": 1,
    "signed char": 1,
    "unsigned char": 1,
    "int8_t": 1,
    "uint8_t": 1,
    "bool": 1,
    "short": 2,
    "unsigned short": 2,
    "int16_t": 2,
    "uint16_t": 2,
    "half": 2,
    "__half": 2,
    "__nv_bfloat16": 2,
    "nv_bfloat16": 2,
    "int": 4,
    "unsigned": 4,
    "unsigned int": 4,
    "int32_t": 4,
    "uint32_t": 4,
    "float": 4,
    "__half2": 4,
    "half2": 4,
    "__nv_bfloat162": 4,
    "long": 8,
    "long long": 8,
    "unsigned long": 8,
    "unsigned long long": 8,
    "int64_t": 8,
    "uint64_t": 8,
    "size_t": 8,
    "double": 8,
    "float2": 8,
    "int2": 8,
    "uint2": 8,
    "float3": 12,
    "int3": 12,
    "float4": 16,
    "int4": 16,
    "uint4": 16,
    "double2": 16,
    "double4": 32,
    "longlong2": 16,
    "char4": 4,
    "uchar4": 4,
    "short2": 4,
}


def type_size(type_text: str) -> int | None:
    """Bytes of a scalar or vector type given as source text; None when unknown (templates)."""
    words = [w for w in type_text.replace("*", " ").split() if w not in _QUALIFIERS]
    return _SIZES.get(" ".join(words).removeprefix("std::"))


_QUALIFIERS = {"const", "volatile", "__restrict__", "restrict", "__restrict", "struct"}
