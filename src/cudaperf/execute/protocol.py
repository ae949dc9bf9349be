"""The messages between the evaluator and its GPU worker process, typed.

The evaluator (`Evaluator.request`) builds a `RunRequest` (C→CUDA) or a `TorchRequest`
(PyTorch→CUDA); `WorkerHandle` sends it as one JSON line (`wire()`), the worker parses it back
with `parse_request` and answers with a `JobReply` (or a `HelloReply` to a `HelloRequest`),
which `Evaluator.finish` reads with `parse_reply`. `ChildJob` is the one JSON-shaped message
`torch_trusted` sends its candidate process (the others carry tensors). Every model is frozen
and forbids unknown keys, so a field misspelt on either side fails at once instead of reading
as absent. Guaranteed: `parse_request` and `parse_reply` raise only `MalformedMessage`, whose
text is one line naming the first bad field; a reply that does not parse is the evaluator's
fault, never the candidate's, and the evaluator reports it as `INFRA_ERROR`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from cudaperf.execute.types import ConfigResult, Status
from cudaperf.tasks.model import Task

__all__ = [
    "BaselinesRequest",
    "CBaselinesRequest",
    "ChildJob",
    "HelloReply",
    "HelloRequest",
    "JobReply",
    "MalformedMessage",
    "Ready",
    "Request",
    "RunRequest",
    "TorchRequest",
    "VisibleOutput",
    "parse_reply",
    "parse_request",
]


class MalformedMessage(ValueError):
    """A request or reply that is not what the protocol says (one-line message)."""


class _Message(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    def wire(self) -> dict[str, Any]:
        """The JSON-ready dict that goes on the pipe."""
        return self.model_dump(mode="json")


class HelloRequest(_Message):
    """Asks a worker to say it is alive (tests, start-up checks)."""

    op: Literal["hello"] = "hello"


class _JobRequest(_Message):
    """What every job request carries."""

    task: Task  # the task (its configs, held-out ones included, and tolerance)
    workdir: str  # the job's own temp dir: the worker's cwd; output.log is written there
    salt: int = Field(repr=False)  # secret input-seed salt (never shown to the candidate)
    trials: int  # timed trials per config
    warmup: int  # untimed calls before timing each config
    budget_s: float  # max seconds of timed trials per config (>= 5 trials); ms only in C
    max_bandwidth_gbs: float  # roofline: a time implying more input bytes/s is rejected
    cpu_limit_s: int  # RLIMIT_CPU seconds for the job
    # RLIMIT_FSIZE of the candidate's process, MiB (what its code writes: files, stdout,
    # stderr); never applied to the worker, whose call segments are files of any size
    output_limit_mb: int


class RunRequest(_JobRequest):
    """A C→CUDA job: the candidate library linked with the harness, and the C reference."""

    op: Literal["run"] = "run"
    lib: str  # candidate + harness shared library
    ref_lib: str  # the C reference's shared library (gcc -O2)
    cpu_trials: int  # timed runs of the C reference per config (CPU baseline)
    cpu_budget_s: float  # max seconds of CPU-baseline runs per config
    check_after: bool  # re-check outputs on fresh inputs after timing
    # JSONL file of cached CPU baselines (`c.baselines`): the parent's handle replaces it with
    # the task's records (`cpu_baselines`) and the worker never sees it
    cpu_baseline_cache: str | None = None
    # config name -> Timing of the serial C reference, timed in a `c_baselines` request that
    # ran no candidate; when given, the job times no CPU baseline itself (a config missing
    # here has none). None: the job times it (tests, callers without a cache)
    cpu_baselines: dict[str, dict[str, Any]] | None = None
    # the CUPTI shim (`c.trace`): a job whose configs all passed traces one more checked call
    # on its largest visible config; None: no trace (no CUPTI here, tests)
    trace_lib: str | None = None
    min_device_share: float = 0.05  # `EvalConfig.min_device_share`


class CBaselinesRequest(_JobRequest):
    """A C→CUDA task's reference only, no candidate (`c.baselines`): phase `draw` runs the
    reference on the task's input sets (kept in the worker for its jobs); phase `time` times
    the serial reference per config, replying records keyed `key_prefix` + config name."""

    op: Literal["c_baselines"] = "c_baselines"
    ref_lib: str
    cpu_trials: int
    cpu_budget_s: float
    check_after: bool
    phase: Literal["draw", "time"]
    key_prefix: str


class TorchRequest(_JobRequest):
    """A PyTorch→CUDA job, run by `torch_trusted` with the candidate in a process of its own."""

    op: Literal["torch"] = "torch"
    code: str  # the candidate module (defines ModelNew)
    ext_dir: str = ""  # TORCH_EXTENSIONS_DIR of a prebuilt load_inline candidate
    correctness_trials: int = 3  # checked forwards per config (at least 2 are run)
    normwise_rtol: float  # relative tolerance of the norm-wise comparison
    min_kernel_share: float  # least share of GPU time the candidate's own kernels must carry
    torch_compile: bool = True  # also time the torch.compile baseline
    baseline_cache: str | None = None  # JSONL file of cached eager/compile baseline timings
    device: Literal["cuda", "cpu"] = "cuda"  # "cpu" only in tests
    # the task's cached baseline records, given by the parent (`baseline_job`): when present
    # the worker reads no file; a candidate's job gets time_baselines=False and times none
    baselines: dict[str, dict[str, Any]] | None = None
    time_baselines: bool = True


class BaselinesRequest(_JobRequest):
    """A PyTorch→CUDA task's reference only, no candidate (`baseline_job`): times the eager
    (and torch.compile) baselines missing from `baselines` and replies them as new records."""

    op: Literal["baselines"] = "baselines"
    torch_compile: bool = True
    device: Literal["cuda", "cpu"] = "cuda"
    baselines: dict[str, dict[str, Any]] = {}  # records already known (not timed again)
    time_baselines: Literal[True] = True
    baseline_cache: None = None  # never a file: records come and go over the pipes


class ChildJob(_Message):
    """`torch_trusted` -> the candidate's process (`torch_child`), first message of a job: only
    what loading the candidate needs. Never the task, the reference, the salt or a seed."""

    code: str  # the candidate module
    ext_dir: str = ""  # TORCH_EXTENSIONS_DIR of a prebuilt load_inline candidate
    workdir: str  # the job's folder: cwd and output.log of the candidate's process
    cpu_limit_s: int  # RLIMIT_CPU seconds
    output_limit_mb: int  # RLIMIT_FSIZE, MiB (`_JobRequest.output_limit_mb`)
    device: Literal["cuda", "cpu"] = "cuda"
    kernel_names: list[str] = []  # the candidate's own __global__ names (for the profiler)


AnyRequest = HelloRequest | RunRequest | TorchRequest | BaselinesRequest | CBaselinesRequest
Request = Annotated[AnyRequest, Field(discriminator="op")]
_REQUEST: TypeAdapter[AnyRequest] = TypeAdapter(Request)


class Ready(_Message):
    """The worker's first line: it is up, and which resource limits it could apply."""

    ready: Literal[True] = True
    limits: dict[str, Any]  # worker.apply_limits' account (values: int, bool or None)


class VisibleOutput(_Message):
    """A line the worker sends ahead of its reply, once a job's held-out configs are about to
    run: the candidate's output so far (`held_out.visible_output`). The reply repeats it; a job
    that times out or kills the worker gets it from here (`WorkerHandle`)."""

    visible_output: str


class HelloReply(_Message):
    """The answer to a `HelloRequest`."""

    ok: Literal[True] = True
    pid: int  # the worker's process id (changes when the worker is replaced)


class JobReply(_Message):
    """The outcome of one job, from the worker (or from `WorkerHandle` after a timeout or a
    crash of the worker, which it reports in the same shape)."""

    status: Status  # the job's one outcome (OK only when every config passed and was timed)
    configs: list[ConfigResult] = []  # per config run, in task order (held-out: sizes redacted)
    message: str = ""  # the first failure's message, or the harness/worker error
    launched: list[str] | None = None  # kernels seen running (profiler or trace); None: not seen
    # C→CUDA: share of the traced call in which the GPU ran the candidate's work (`c.trace`)
    device_share: float | None = None
    # C→CUDA: None when no trace was tried, "" when the call was traced, else why it was not
    trace_note: str | None = None
    restart: bool = False  # the worker must not be reused (CUDA error, worker fault)
    crashed: bool = False  # set by WorkerHandle: the worker died during the job
    sandbox: str | None = None  # set by WorkerHandle: the kernel protections it ran under
    protections: dict[str, Any] | None = None  # set by WorkerHandle: confine.Protections
    device_id: str | None = None  # a baselines reply: GPU name and torch version
    new_baselines: list[dict[str, Any]] | None = None  # a baselines reply: the new records
    # the end of what the candidate printed before its first held-out call (`held_out`); None
    # when no held-out config ran (then all of output.log was written without one's sizes)
    output: str | None = None
    phases: dict[str, float] = {}  # seconds of the job in the worker per phase (`types.PHASES`)


def _one_line(kind: str, e: ValidationError) -> MalformedMessage:
    err = e.errors()[0]
    where = ".".join(str(x) for x in err["loc"]) or "(top level)"
    more = f" (and {e.error_count() - 1} more)" if e.error_count() > 1 else ""
    return MalformedMessage(f"malformed worker {kind}: {where}: {err['msg']}{more}")


def parse_request(raw: object) -> AnyRequest:
    """The typed request of a decoded JSON line; raises MalformedMessage."""
    try:
        return _REQUEST.validate_python(raw)
    except ValidationError as e:
        raise _one_line("request", e) from None


def parse_reply(raw: object) -> JobReply:
    """The typed job reply of a decoded JSON line (or an already typed one); raises
    MalformedMessage."""
    if isinstance(raw, JobReply):
        return raw
    try:
        return JobReply.model_validate(raw)
    except ValidationError as e:
        raise _one_line("reply", e) from None
