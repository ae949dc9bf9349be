"""KernelBench importer: `levelN/<id>_<Name>.py` problem files → PyTorch→CUDA tasks.

Reads the user's own checkout (the repo root, its `KernelBench/` problem folder, or one level
folder). Each problem file keeps its `Model`, `get_inputs` and `get_init_inputs` verbatim as the
task source. Its module-level numeric constants are the `default` config. Two more configs are
derived by scaling the *size* constants (integers >= 16; small integers such as kernel sizes,
strides, axes and group counts are left alone; multiples of 8 stay multiples of 8):
`small` (about 1/8 of each size) and `heldout` (about 3/4, never shown in prompts). A derived
config is kept only if the module stays valid with it: `small` must run `Model.forward` on the
CPU, `heldout` must run it on the `meta` device (shapes only, no memory). Level 4 needs
pretrained models from a hub and is skipped offline with that reason.

Guaranteed: every problem file found is either imported or listed in the report's skips with
a reason. Not guaranteed: that derived configs exercise the same code paths as the default.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from cudaperf.tasks.importers.common import ImportReport
from cudaperf.tasks.model import InputConfig, Task, Tolerance
from cudaperf.tasks.pymodule import exec_with_sizes, module_constants

__all__ = ["derive_configs", "import_kernelbench"]

log = logging.getLogger(__name__)

_FILE = re.compile(r"^(\d+)_(.+)\.py$")
SMALL_FACTORS = (1 / 8, 1 / 4, 1 / 2)
HELDOUT_FACTORS = (3 / 4, 5 / 8, 7 / 8)
LICENSE = "MIT (KernelBench)"


def _scale(value: int, factor: float) -> int:
    if value % 8 == 0:
        return max(8, int(round(value * factor / 8)) * 8)
    return max(1, int(round(value * factor)))


def scaled_sizes(consts: dict[str, int | float], factor: float) -> dict[str, int | float]:
    """The constants with every size (int >= 16) scaled by `factor`."""
    return {
        k: (_scale(v, factor) if isinstance(v, int) and v >= 16 else v) for k, v in consts.items()
    }


def check_config(src: str, sizes: dict[str, Any], device: str) -> str:
    """'' when Model(*get_init_inputs())(*get_inputs()) runs on `device`, else the error."""
    import torch

    try:
        mod = exec_with_sizes(src, sizes, "cudaperf_kb_check")
        with torch.device(device), torch.no_grad():
            torch.manual_seed(0)
            model = mod.Model(*mod.get_init_inputs())
            inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in mod.get_inputs()]
            model(*inputs)
    except Exception as e:  # noqa: BLE001 - any failure means this config is not valid
        return f"{type(e).__name__}: {e}"[:200]
    return ""


def derive_configs(src: str, validate: bool = True) -> list[InputConfig]:
    """`default` plus the derived `small` and `heldout` configs that keep the module valid."""
    consts = module_constants(src)
    configs = [InputConfig(name="default", sizes=consts)]
    if not any(isinstance(v, int) and v >= 16 for v in consts.values()):
        return configs
    for name, factors, device, held in (
        ("small", SMALL_FACTORS, "cpu", False),
        ("heldout", HELDOUT_FACTORS, "meta", True),
    ):
        for f in factors:
            sizes = scaled_sizes(consts, f)
            if sizes == consts or any(sizes == c.sizes for c in configs):
                continue
            err = check_config(src, sizes, device) if validate else ""
            if not err:
                configs.append(
                    InputConfig(name=name, sizes=sizes, held_out=held, seed=len(configs))
                )
                break
            log.debug("%s config x%.3f invalid: %s", name, f, err)
    return configs


def _level_dirs(path: Path) -> list[tuple[int, Path]]:
    for base in (path, path / "KernelBench"):
        found = sorted(
            (int(d.name[5:]), d) for d in base.glob("level*") if d.is_dir() and d.name[5:].isdigit()
        )
        if found:
            return found
    m = re.fullmatch(r"level(\d+)", path.name)
    return [(int(m.group(1)), path)] if m and path.is_dir() else []


def import_kernelbench(
    path: str | Path, levels: tuple[int, ...] = (1, 2, 3), validate: bool = True
) -> ImportReport:
    """Import KernelBench problems of the given levels from a checkout at `path`."""
    report = ImportReport("kernelbench")
    dirs = _level_dirs(Path(path))
    if not dirs:
        raise FileNotFoundError(
            f"{path}: no KernelBench levelN folders found; pass the KernelBench repo root or "
            "its KernelBench/ problem folder"
        )
    for level, folder in dirs:
        files = sorted(folder.glob("*.py"), key=lambda p: (len(p.name), p.name))
        for f in files:
            item = f"level{level}/{f.name}"
            if level not in levels:
                continue
            if level == 4:
                report.skip(item, "level 4 needs pretrained models from a hub (offline)")
                continue
            report_one(report, level, f, item, validate)
    return report


def report_one(report: ImportReport, level: int, f: Path, item: str, validate: bool) -> None:
    m = _FILE.match(f.name)
    if not m:
        report.skip(item, "file name is not <id>_<Name>.py")
        return
    src = f.read_text(encoding="utf-8")
    if not all(s in src for s in ("class Model", "def get_inputs", "def get_init_inputs")):
        report.skip(item, "missing Model, get_inputs or get_init_inputs")
        return
    try:
        configs = derive_configs(src, validate)
    except SyntaxError as e:
        report.skip(item, f"not valid Python ({e.msg})")
        return
    report.tasks.append(
        Task(
            id=f"kernelbench/level{level}/{f.stem}",
            kind="torch2cuda",
            family=f"kernelbench_l{level}_{m.group(2).lower()}",
            source=src,
            entry="Model",
            configs=configs,
            tolerance=Tolerance(atol=1e-4, rtol=1e-4),  # KernelBench's fp32 tolerance
            provenance={"source": f"KernelBench {item}", "license": LICENSE},
            description=f"KernelBench level {level} problem {m.group(1)}: {m.group(2)}",
        )
    )
