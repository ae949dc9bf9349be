"""A reply: taking the candidate out (fences, the last complete block, format errors) and the
one form cudaperf writes replies in."""

from __future__ import annotations

from cudaperf.tasks.model import TaskKind
from cudaperf.tasks.reply import completion_text, extract_candidate, fenced

C, T = TaskKind.C2CUDA, TaskKind.TORCH2CUDA


def test_last_complete_cuda_block_wins():
    reply = "Plan:\n```cuda\nold();\n```\nBetter:\n```cpp\nnew();\n```\n```cuda\nunfinished("
    ex = extract_candidate(reply, C)
    assert ex.code == "new();\n" and ex.language == "cpp" and not ex.error


def test_python_block_for_torch_tasks_and_untagged_fallback():
    reply = "```cuda\n__global__ void k(){}\n```\n```python\nclass ModelNew: pass\n```"
    assert extract_candidate(reply, T).code == "class ModelNew: pass\n"
    assert extract_candidate("```\nint x;\n```", C).code == "int x;\n"


def test_format_errors_say_what_to_do():
    none = extract_candidate("I think you should use shared memory.", C)
    assert none.code is None and "no code block" in none.error and "```cuda" in none.error
    open_ = extract_candidate("```cuda\n__global__ void k() {", C)
    assert "never closed" in open_.error
    wrong = extract_candidate("```python\nprint(1)\n```", C)
    assert "python" in wrong.error and "```cuda" in wrong.error


def test_chat_messages_are_read_like_text():
    msgs = [{"role": "assistant", "content": "```cuda\nk();\n```"}]
    assert completion_text(msgs) == "```cuda\nk();\n```"
    assert extract_candidate(msgs, C).code == "k();\n"
    assert completion_text({"content": "hi"}) == "hi"


def test_a_fenced_reply_reads_back_as_its_code_for_each_kind():
    for kind in (C, T):
        code = "int x;\n\n" if kind is C else "import torch\n"
        got = extract_candidate("Plan: tile.\n" + fenced(kind, code), kind)
        assert got.code == code.rstrip() + "\n" and got.language == (
            "cuda" if kind is C else "python"
        )
