"""Which kernels of a candidate earn structure and ranker credit: the ones that really run.

A policy can raise a static score by adding a well-structured kernel that never runs, or by
porting the task serially into one thread (`<<<1, 1>>>`). `credited_kernels` keeps a kernel
when it ran (its name is among `ExecResult.launched`, when the run observed launches) or, when
launches were not observed, when host code launches it (`name<<<...>>>`, or its name passed to
`cudaLaunchKernel`-style calls); in both cases a kernel whose every launch in the source is
`<<<1, 1>>>` (literal single block of a single thread) is not credited. `credited_source`
blanks the definitions of the other kernels (lines kept), so the analyzer and the ranker see
exactly the credited code; a candidate whose kernels are all credited comes back unchanged.

Not guaranteed: launches through function pointers or templates the parser cannot fold are
missed when launches were not observed (those kernels get no credit), and a serial launch
whose extents are variables that equal 1 at run time is not recognised.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cudaperf.analyze.parse import (
    dim_values,
    extract_cuda,
    find_kernels,
    launch_calls,
    parse,
    read_constants,
)

__all__ = [
    "KernelLaunches",
    "base_name",
    "credited_kernels",
    "credited_source",
    "kernel_launches",
]

_BY_NAME = re.compile(r"\b(?:cudaLaunch\w*|cuLaunch\w*)\s*\(([^;]*)")


@dataclass(frozen=True)
class KernelLaunches:
    """What the source says about launching one kernel."""

    name: str  # the kernel's source name
    sites: int  # `<<<...>>>` launches plus launch-API calls naming it
    serial_sites: int  # `<<<1, 1>>>` launches among them
    text: str  # the kernel's definition as it stands in the CUDA text (template included)

    @property
    def serial_only(self) -> bool:
        return self.sites > 0 and self.serial_sites == self.sites


def _is_one(vals) -> bool:
    return bool(vals) and all(v.is_Integer and int(v) == 1 for v in vals)


def kernel_launches(source: str) -> dict[str, KernelLaunches]:
    """Per `__global__` kernel with a body: how often and how the source launches it."""
    code = extract_cuda(source).code
    root = parse(code).root_node
    consts = read_constants(root)
    kernels = find_kernels(root, consts)
    sites = {k.name: 0 for k in kernels}
    serial = dict.fromkeys(sites, 0)
    for n, args, scope, body in launch_calls(root, consts):
        name = n.child_by_field_name("function").text.decode().split("<")[0].split("::")[-1]
        if name not in sites:
            continue
        sites[name] += 1
        if len(args) >= 2 and all(_is_one(dim_values(a, scope, body)) for a in args[:2]):
            serial[name] += 1
    for m in _BY_NAME.finditer(_code_only(code)):
        for name in sites:
            if re.search(rf"\b{re.escape(name)}\b", m.group(1)):
                sites[name] += 1
    raw, out = code.encode(), {}
    for k in kernels:  # text from the original bytes (parse() rewrites #pragma lines)
        node = k.node.parent if k.node.parent.type == "template_declaration" else k.node
        text = raw[node.start_byte : node.end_byte].decode()
        out[k.name] = KernelLaunches(k.name, sites[k.name], serial[k.name], text)
    return out


def _code_only(code: str) -> str:
    """`code` with comments removed and string literals emptied (for the launch-API scan)."""
    rx = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"', re.S)
    return rx.sub(lambda m: '""' if m.group(0).startswith('"') else " ", code)


def base_name(name: str) -> str:
    """Source name of a kernel name as a profiler reports it (demangled or mangled)."""
    m = re.match(r"_Z(?:N\w*?)?(\d+)", name)
    if m and not name.startswith("_ZN"):
        return name[m.end() : m.end() + int(m.group(1))]
    if name.startswith("_ZN"):  # nested: the last component before E
        parts, rest = [], name[3:]
        while (m := re.match(r"(\d+)", rest)) is not None:
            n = int(m.group(1))
            parts.append(rest[m.end() : m.end() + n])
            rest = rest[m.end() + n :]
        return parts[-1] if parts else name
    head = name.split("(")[0].strip()
    head = re.sub(r"<.*>$", "", head)  # template arguments
    return head.split("::")[-1].split()[-1] if head else name


def credited_kernels(
    source: str, launched: list[str] | None, info: dict[str, KernelLaunches] | None = None
) -> set[str]:
    """Names of the kernels that earn structure and ranker credit (see the module docstring)."""
    info = kernel_launches(source) if info is None else info
    ran = None if launched is None else {base_name(n) for n in launched}
    out = set()
    for name, k in info.items():
        runs = name in ran if ran is not None else k.sites > 0
        if runs and not k.serial_only:
            out.add(name)
    return out


def credited_source(source: str, launched: list[str] | None) -> str:
    """`source` with the definitions of uncredited kernels replaced by blank lines.

    A definition that does not appear verbatim in `source` (a Python string with escapes) is
    left in place. Returns `source` itself when every kernel is credited.
    """
    try:
        info = kernel_launches(source)
    except Exception:  # noqa: BLE001 - unparsable code: nothing to credit or blank
        return source
    keep = credited_kernels(source, launched, info)
    out = source
    for name, k in info.items():
        if name not in keep and k.text in out:
            out = out.replace(k.text, "\n" * k.text.count("\n"), 1)
    return out
