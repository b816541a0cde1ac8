"""Denormal floats flushed to zero while native code runs, as XLA runs its CPU code: a
switch, ``EMBER_CPU_FLUSH_DENORMALS=1`` (off by default).

XLA executes with the CPU's flush-to-zero and denormals-are-zero modes on (on x86-64 the
FTZ and DAZ bits of MXCSR): an arithmetic result that would be denormal is ±0, and a
denormal operand counts as ±0 (in comparisons too). So JAX computes ``1e-40 * 2`` as 0 in
float32, and the softmax of logits spread over more than ~87 gives 0 where IEEE arithmetic
gives denormal probabilities. Those modes are also the fast ones: without them each vector
instruction meeting a denormal takes a microcode assist of ~150 cycles (that softmax ran
12x slower, a matrix-vector loop decaying towards zero 4x, ``exp`` of denormals 28x:
``benchmarks/denormals.py``).

ember keeps IEEE denormals by default, as NumPy does: its eager operations compute through
NumPy, the compiled eager paths must give NumPy's bits, and the vector math is accurate for
denormal arguments and results. With the switch on, compiled code flushes as XLA's does,
without touching the Python thread's mode between calls (NumPy keeps IEEE arithmetic):
``flush_denormals(ir_text)`` gives every function of a module that other code may call
(external linkage) a wrapper under its own name that sets FTZ and DAZ, calls the function's
body (renamed ``<name>.body``, never inlined into the wrapper, so no floating-point
instruction moves across the mode switches) and restores the caller's MXCSR. Calls between
the module's own functions, and function pointers it hands to the parallel runtime, go to
the bodies directly: a loop's tiny kernels still inline into it, and the runtime's workers
take the caller's MXCSR with each job. The switch is read when code is compiled and is part
of every compiled code's cache key (``mode``); set it before the first ``jit`` call. Only
x86-64 has the transform (elsewhere code keeps IEEE denormals).

Moves, selects and bit operations keep a denormal's bits (a ``nextafter`` result, a copied
array): like XLA, only arithmetic flushes.
"""

from __future__ import annotations

import functools
import os
import platform
import re

SWITCH = "EMBER_CPU_FLUSH_DENORMALS"

# MXCSR: flush-to-zero (bit 15) and denormals-are-zero (bit 6).
FLUSH_BITS = 0x8040

_DEFINE = re.compile(r'^define ([^@\n]*)@("[^"\n]+"|[\w.$-]+)\((.*)\)([^()\n]*?)(\s*\{)?$', re.M)
# Linkages whose functions no other code calls by name: they need no wrapper.
_LOCAL_LINKAGES = frozenset({"internal", "private", "linkonce", "linkonce_odr", "weak",
                             "weak_odr", "available_externally", "appending", "common"})
# Attributes that may stand before a return type or after a parameter's type.
_RETURN_ATTRIBUTES = frozenset({"noalias", "nonnull", "noundef", "signext", "zeroext",
                                "dso_local", "dso_preemptable", "fastcc", "ccc",
                                "local_unnamed_addr", "unnamed_addr"})
# A reference to a global: ``@"quoted name"`` or ``@plain.name``.
_GLOBAL_REFERENCE = re.compile(r'@("[^"\n]+"|[\w.$-]+)')
_INTRINSICS = (("stmxcsr", "declare void @llvm.x86.sse.stmxcsr(i8*)"),
               ("ldmxcsr", "declare void @llvm.x86.sse.ldmxcsr(i8*)"))


@functools.cache
def applies() -> bool:
    """Whether this host's code can flush denormals (x86-64)."""
    return platform.machine().lower() in ("x86_64", "amd64")


def enabled() -> bool:
    """Whether code compiled now flushes denormals (the switch is on and the host can)."""
    return os.environ.get(SWITCH, "0") == "1" and applies()


def mode() -> str:
    """The floating-point mode of code compiled now, for cache keys."""
    return "denormals=flushed" if enabled() else "denormals=ieee"


def flush_denormals(ir_text: str) -> str:
    """``ir_text`` with each external function wrapped to run with FTZ and DAZ set (see the
    module's docstring), whether or not the switch is on; unchanged off x86-64 or without
    such functions."""
    if not applies():
        return ir_text
    wrapped = []
    for match in _DEFINE.finditer(ir_text):
        prefix, name, params = match.group(1).split(), match.group(2), match.group(3)
        if any(word in _LOCAL_LINKAGES for word in prefix) or "..." in params:
            continue
        ret = " ".join(w for w in prefix if w not in _RETURN_ATTRIBUTES)
        wrapped.append((name, ret, [_parameter_type(p) for p in _split_top_level(params)]))
    if not wrapped:
        return ir_text
    ir_text = _rename(ir_text, {name for name, _, _ in wrapped})
    lines = [ir_text.rstrip("\n"), ""]
    lines += [decl for intrinsic, decl in _INTRINSICS
              if f"@llvm.x86.sse.{intrinsic}(" not in ir_text
              and f'@"llvm.x86.sse.{intrinsic}"(' not in ir_text]
    for name, ret, types in wrapped:
        lines.append(_wrapper(name, ret, types))
    return "\n".join(lines) + "\n"


def emit_mxcsr(builder, module, intrinsic: str, word) -> None:
    """Emits, at ``builder``'s position, ``llvm.x86.sse.<intrinsic>`` (``stmxcsr``: store
    MXCSR into the i32 ``word``; ``ldmxcsr``: load it from there)."""
    from llvmlite import ir
    i8p = ir.IntType(8).as_pointer()
    name = f"llvm.x86.sse.{intrinsic}"
    fn = module.globals.get(name) or ir.Function(
        module, ir.FunctionType(ir.VoidType(), [i8p]), name)
    builder.call(fn, [builder.bitcast(word, i8p)])


def _body_name(name: str) -> str:
    return f'"{name.strip(chr(34))}.body"'


def _rename(text: str, names: set[str]) -> str:
    """Every reference to the globals ``@name`` of ``names`` (definitions, calls,
    pointers) as ``@<name>.body``, in one pass over the text."""
    def body(match: re.Match) -> str:
        name = match.group(1)
        return "@" + _body_name(name) if name in names else match.group(0)
    return _GLOBAL_REFERENCE.sub(body, text)


def _split_top_level(params: str) -> list[str]:
    """The comma-separated items of a parameter list (commas inside a function, vector,
    struct or array type, or an attribute's parentheses, do not split)."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(params):
        if ch in "(<{[":
            depth += 1
        elif ch in ")>}]":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(params[start:i])
            start = i + 1
    if params.strip():
        items.append(params[start:])
    return [item.strip() for item in items]


def _parameter_type(param: str) -> str:
    """The type that a parameter's text (type, attributes, name) starts with."""
    i = _balanced_end(param, 0) if param[0] in "<{[" else _word_end(param, 0)
    while True:
        j = i
        while j < len(param) and param[j] == " ":
            j += 1
        if j < len(param) and param[j] == "(":  # a function type: ``void (i8*, i64)*``
            i = _balanced_end(param, j)
        elif param.startswith("*", i):
            i += 1
        else:
            return param[:i]


def _word_end(text: str, i: int) -> int:
    while i < len(text) and text[i] not in " ,()*":
        i += 1
    return i


def _balanced_end(text: str, i: int) -> int:
    depth = 0
    for k in range(i, len(text)):
        if text[k] in "(<{[":
            depth += 1
        elif text[k] in ")>}]":
            depth -= 1
            if depth == 0:
                return k + 1
    raise ValueError(f"flush_denormals: unbalanced type in parameter {text!r}")


def _wrapper(name: str, ret: str, types: list[str]) -> str:
    args = [f"{ty} %a{k}" for k, ty in enumerate(types)]
    call = f'call {ret} @{_body_name(name)}({", ".join(args)}) noinline'
    lines = [f"define {ret} @{name}({', '.join(args)}) {{",
             "entry:",
             "  %saved = alloca i32, align 4",
             "  %flushed = alloca i32, align 4",
             "  %saved.p = bitcast i32* %saved to i8*",
             "  %flushed.p = bitcast i32* %flushed to i8*",
             "  call void @llvm.x86.sse.stmxcsr(i8* %saved.p)",
             "  %mode = load i32, i32* %saved, align 4",
             f"  %flush = or i32 %mode, {FLUSH_BITS}",
             "  store i32 %flush, i32* %flushed, align 4",
             "  call void @llvm.x86.sse.ldmxcsr(i8* %flushed.p)"]
    if ret == "void":
        lines += [f"  {call}", "  call void @llvm.x86.sse.ldmxcsr(i8* %saved.p)", "  ret void"]
    else:
        lines += [f"  %result = {call}", "  call void @llvm.x86.sse.ldmxcsr(i8* %saved.p)",
                  f"  ret {ret} %result"]
    return "\n".join(lines + ["}", ""])
