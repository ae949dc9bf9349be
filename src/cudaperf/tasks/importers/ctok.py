"""A small C tokenizer and the few C analyses the C→CUDA importers share.

Not a C parser: it understands tokens, balanced brackets, top-level function definitions,
parameter declarations and which pointer parameters a body reads or writes. That is enough
for the suites' short, regular kernels. Guaranteed: `format_c(tokenize(src))` keeps the token
sequence (so the code means the same); not guaranteed: macros, typedefs or K&R declarations.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "CFunction",
    "CParam",
    "access_modes",
    "find_close",
    "format_c",
    "functions",
    "loop_work",
    "parse_param",
    "split_top",
    "tokenize",
]

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+|//[^\n]*|/\*.*?\*/)
  | (?P<pp>\#[^\n]*(?:\\\n[^\n]*)*)
  | (?P<str>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*')
  | (?P<num>(?:0[xX][0-9a-fA-F]+|\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)[uUlLfF]*)
  | (?P<id>[A-Za-z_]\w*)
  | (?P<op><<<|>>>|<<=|>>=|->|\+\+|--|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^]=|::|\S)
    """,
    re.S | re.X,
)
ASSIGN_OPS = {"=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>="}
_CLOSE = {"(": ")", "[": "]", "{": "}"}
_QUALIFIERS = {"const", "restrict", "__restrict__", "__restrict", "volatile", "register"}
_TYPE_ALIASES = {
    "long int": "long",
    "long long int": "long long",
    "unsigned long long int": "unsigned long long",
    "unsigned long int": "uint64_t",
    "unsigned long": "uint64_t",
    "signed int": "int",
    "signed": "int",
    "unsigned short": "uint16_t",
    "unsigned short int": "uint16_t",
    "short int": "short",
    "signed char": "int8_t",
    "uint": "unsigned int",
}


def tokenize(src: str) -> list[str]:
    """The tokens of C/CUDA source; comments and whitespace dropped, `#` lines kept whole."""
    out = []
    for m in _TOKEN.finditer(src):
        if m.lastgroup != "ws":
            out.append(m.group().strip() if m.lastgroup == "pp" else m.group())
    return out


def find_close(toks: list[str], i: int) -> int:
    """Index of the bracket closing the one at `i` (or len(toks) if unbalanced)."""
    want, depth = _CLOSE[toks[i]], 0
    for j in range(i, len(toks)):
        if toks[j] == toks[i]:
            depth += 1
        elif toks[j] == want:
            depth -= 1
            if depth == 0:
                return j
    return len(toks)


def split_top(toks: list[str], sep: str = ",") -> list[list[str]]:
    """Split a token list at `sep` outside any brackets."""
    parts: list[list[str]] = [[]]
    depth = 0
    for t in toks:
        if t in _CLOSE:
            depth += 1
        elif t in (")", "]", "}"):
            depth -= 1
        if t == sep and depth == 0:
            parts.append([])
        else:
            parts[-1].append(t)
    return [p for p in parts if p]


def _glue(prev: str, t: str) -> bool:
    """True when no space belongs between tokens `prev` and `t`."""
    if t in ("<<<", ">>>") or prev == "<<<" or (prev == ">>>" and t == "("):
        return True
    if t in (",", ";", ")", "]", ".", "->", "++", "--") or prev in ("(", "[", ".", "->", "!", "~"):
        return t not in ("++", "--") or prev[-1:].isalnum() or prev in (")", "]")
    if t in ("(", "["):
        return prev[-1:].isalnum() or prev in (")", "]", "_")
    return False


def format_c(toks: list[str], indent: str = "    ") -> str:
    """Source text for tokens: one statement per line, braces indented."""
    lines: list[str] = []
    cur, depth, paren = "", 0, 0
    prev = ""

    def flush() -> None:
        nonlocal cur
        if cur.strip():
            lines.append(indent * depth + cur.strip())
        cur = ""

    for t in toks:
        if t.startswith("#"):
            flush()
            lines.append(t)
            prev = ""
            continue
        if t == "}" and paren == 0:
            flush()
            depth = max(0, depth - 1)
            lines.append(indent * depth + "}")
            prev = "}"
            continue
        if t == "}" and lines and prev == ";":
            flush()
        cur += t if (not cur or _glue(prev, t)) else " " + t
        paren += t == "("
        paren -= t == ")"
        if t == "{" and paren == 0:
            flush()
            depth += 1
        elif t == ";" and paren == 0:
            flush()
        prev = t
    flush()
    return "\n".join(_join_else(lines)) + "\n"


def _join_else(lines: list[str]) -> list[str]:
    out: list[str] = []
    for ln in lines:
        if out and out[-1].strip() == "}" and ln.strip().startswith(("else", "while")):
            out[-1] = out[-1] + " " + ln.strip()
        else:
            out.append(ln)
    return out


@dataclass(frozen=True)
class CParam:
    """One parsed parameter declaration."""

    name: str  # identifier
    ctype: str  # element type, qualifiers and pointers removed, aliases normalised
    pointers: int  # number of `*` (an array declarator `x[]` counts as one)


@dataclass(frozen=True)
class CFunction:
    """A function definition found at the top level of a token list."""

    name: str
    ret: list[str]  # return type tokens (qualifiers such as __global__ included)
    params: list[list[str]]  # one token list per parameter
    body: tuple[int, int]  # token indices of the opening and closing brace
    start: int  # index of the first return-type token


def parse_param(toks: list[str]) -> CParam:
    """Name, element type and pointer depth of one declaration such as `const float * x`."""
    dims = 0
    if "[" in toks:
        dims = toks.count("[")
        toks = toks[: toks.index("[")]
    words = [t for t in toks if t not in _QUALIFIERS and t not in ("*", "&")]
    if len(words) < 2 or not re.fullmatch(r"[A-Za-z_]\w*", words[-1]):
        raise ValueError(f"cannot read parameter {' '.join(toks)!r}")
    ctype = " ".join(words[:-1])
    ctype = _TYPE_ALIASES.get(ctype, ctype)
    if "&" in toks:
        raise ValueError(f"parameter {' '.join(toks)!r} is a C++ reference, not C")
    return CParam(words[-1], ctype, toks.count("*") + dims)


def functions(toks: list[str]) -> list[CFunction]:
    """Top-level function definitions `ret name ( params ) { body }`, in order."""
    found, i, depth = [], 0, 0
    while i < len(toks):
        t = toks[i]
        if t == "{":
            depth += 1
        elif t == "}":
            depth -= 1
        elif depth == 0 and t == "(" and i > 0 and re.fullmatch(r"[A-Za-z_]\w*", toks[i - 1]):
            close = find_close(toks, i)
            j = close + 1
            while j < len(toks) and toks[j] in _QUALIFIERS:
                j += 1
            if j < len(toks) and toks[j] == "{":
                start = i - 1
                while (
                    start > 0
                    and toks[start - 1] not in (";", "}")
                    and not (toks[start - 1].startswith("#"))
                ):
                    start -= 1
                end = find_close(toks, j)
                params = split_top(toks[i + 1 : close])
                if params == [["void"]]:
                    params = []
                found.append(CFunction(toks[i - 1], toks[start : i - 1], params, (j, end), start))
                i = end + 1
                continue
        i += 1
    return found


def _is_write(toks: list[str], end: int, start: int) -> tuple[bool, bool]:
    """(read, written) for the lvalue spanning toks[start:end+1]."""
    after = toks[end + 1] if end + 1 < len(toks) else ""
    before = toks[start - 1] if start > 0 else ""
    if after in ("++", "--") or before in ("++", "--"):
        return True, True
    if after == "=":
        return False, True
    if after in ASSIGN_OPS:
        return True, True
    return True, False


def access_modes(body: list[str], names: list[str]) -> dict[str, tuple[bool, bool, bool]]:
    """For each pointer name: (read, written, every write under a condition).

    Follows local aliases (`T * q = p + k ;`). A use that is neither a subscript, a
    dereference nor an alias (e.g. passed to a function) counts as read and written.
    """
    alias = {n: n for n in names}
    modes = {n: [False, False, True] for n in names}
    cond_depth = _condition_depths(body)
    for i, t in enumerate(body):
        if t not in alias or (i > 0 and body[i - 1] in (".", "->")):
            continue
        root = alias[t]
        nxt = body[i + 1] if i + 1 < len(body) else ""
        prev = body[i - 1] if i > 0 else ""
        if nxt == "[":
            end = find_close(body, i + 1)
            while body[end + 1 : end + 2] == ["["]:  # a[i][j]
                end = find_close(body, end + 1)
            read, write = _is_write(body, end, i)
        elif prev == "*" and (i < 2 or body[i - 2] in ("(", ";", "{", "}", "=", ",")):
            read, write = _is_write(body, i, i - 1)
        elif prev == "=" and i >= 3 and body[i - 3] == "*" and re.fullmatch(r"\w+", body[i - 2]):
            alias[body[i - 2]] = root  # T * q = p ...
            continue
        elif prev in ("(", "*") and body[i - 2 : i] == ["*", "("]:
            close = find_close(body, i - 1)
            read, write = _is_write(body, close, i - 2)
        else:
            read, write = True, True
        m = modes[root]
        m[0] |= read
        if write:
            m[1] = True
            m[2] &= cond_depth[i] > 0
    return {n: (m[0], m[1], m[2] and m[1]) for n, m in modes.items()}


def _condition_depths(body: list[str]) -> list[int]:
    """Per token: how many enclosing `if`/`else`/`?:`/`while`/`switch` scopes it is under."""
    depth = [0] * len(body)
    stack: list[bool] = []  # per open brace: is it a conditional block
    pending = 0  # conditional statements without braces
    i = 0
    while i < len(body):
        t = body[i]
        if t in ("if", "while", "switch") and i + 1 < len(body) and body[i + 1] == "(":
            close = find_close(body, i + 1)
            for k in range(i, close + 1):
                depth[k] = sum(stack) + pending
            i = close + 1
            if i < len(body) and body[i] == "{":
                stack.append(True)
                depth[i] = sum(stack) + pending
                i += 1
            else:
                pending += 1
            continue
        if t == "else":
            if i + 1 < len(body) and body[i + 1] == "{":
                stack.append(True)
                i += 1
            elif not (i + 1 < len(body) and body[i + 1] == "if"):
                pending += 1
        elif t == "{":
            stack.append(False)
        elif t == "}" and stack:
            stack.pop()
        depth[i] = sum(stack) + pending + (1 if t == "?" else 0)
        if t == ";" and pending:
            pending = 0
        i += 1
    return depth


def _statement_end(toks: list[str], j: int) -> int:
    """Index of the last token of the statement starting at `j`."""
    if j >= len(toks):
        return len(toks) - 1
    if toks[j] == "{":
        return find_close(toks, j)
    if toks[j] in ("for", "while", "if", "switch") and toks[j + 1 : j + 2] == ["("]:
        end = _statement_end(toks, find_close(toks, j + 1) + 1)
        if toks[j] == "if" and toks[end + 1 : end + 2] == ["else"]:
            end = _statement_end(toks, end + 2)
        return end
    depth = 0
    for k in range(j, len(toks)):
        depth += toks[k] in ("(", "[", "{")
        depth -= toks[k] in (")", "]", "}")
        if toks[k] == ";" and depth <= 0:
            return k
    return len(toks) - 1


def _trip_count(head: list[str], value: Callable[[str], int | None]) -> int:
    """Iterations of `for ( head )`: the bound its condition compares the variable with."""
    parts = split_top(head, ";")
    cond = parts[1] if len(parts) == 3 else head
    for op in ("<", "<=", ">", ">=", "!="):
        if op in cond:
            k = cond.index(op)
            lhs, rhs = cond[:k], cond[k + 1 :]
            var = parts[0][-3:-2] if len(parts) == 3 and "=" in parts[0] else lhs[-1:]
            bound = rhs if lhs[-1:] == var or len(lhs) == 1 else lhs
            got = value(" ".join(bound))
            return max(1, got + (op == "<=")) if got is not None else 1
    return 1


def loop_work(body: list[str], value: Callable[[str], int | None]) -> int:
    """Rough count of innermost loop iterations of a C body: Σ over loops of trip × inner.

    `value` evaluates a bound's text (None when it cannot). A loop whose bound cannot be
    evaluated counts once; `while` loops count once. An estimate of the CPU cost, no more.
    """
    total, i = 0, 0
    while i < len(body):
        if body[i] in ("for", "while") and body[i + 1 : i + 2] == ["("]:
            close = find_close(body, i + 1)
            trip = _trip_count(body[i + 2 : close], value) if body[i] == "for" else 1
            end = _statement_end(body, close + 1)
            total += trip * max(1, loop_work(body[close + 1 : end + 1], value))
            i = end + 1
            continue
        i += 1
    return total
