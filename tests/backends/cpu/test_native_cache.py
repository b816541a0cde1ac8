"""The CPU backend's warm path: compiled programs stored as shared libraries with their run
plans, loaded by a later process without LLVM (llvmlite is not even imported) and without
running the HLO pipeline; damaged entries are detected and rebuilt, never loaded."""

import glob
import json
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

from ember.backends.cpu import llvm_support, native_lib, object_cache

pytestmark = pytest.mark.skipif(not native_lib.available() or native_lib.linker() is None,
                                reason="needs Linux memfd_create and a C compiler driver")

PROGRAM = """
import json, sys, numpy as np, ember, ember.numpy as jnp
from ember.backends import get_backend
x = np.linspace(-3, 3, 4096, dtype=np.float32)
m = np.linspace(-1, 1, 48, dtype=np.float32).reshape(6, 8)
f = ember.jit(lambda a: jnp.sum(jnp.tanh(a * 2.0 + 1.0)))
g = ember.jit(lambda a, b: (jnp.sort(a @ b.T, axis=1) * 2.0, jnp.exp(b).sum()))
out = f(x)
s, e = g(m, m)
get_backend("cpu").wait_for_background()  # the background links have stored their libraries
print(json.dumps({"value": float(out), "sorted": np.asarray(s).tolist(), "exp": float(e),
                  "text": g.lower(m, m).compile().as_text(),
                  "stats": get_backend("cpu").stats, "llvmlite": "llvmlite" in sys.modules,
                  "program": "ember.backends.cpu.program" in sys.modules}))
"""


def run_process(cache_dir, **env):
    full_env = dict(os.environ, EMBER_CACHE_DIR=str(cache_dir))
    full_env["EMBER_CPU_SHARED_LIBRARIES"] = "1"  # (the test session turns them off)
    full_env["EMBER_PRELOAD"] = "0"  # so "llvmlite" in sys.modules means the run needed it
    full_env.update(env)
    full_env.pop("EMBER_DUMP_TO", None)
    out = subprocess.run([sys.executable, "-c", PROGRAM], env=full_env, check=True,
                         capture_output=True, text=True, timeout=300)
    return json.loads(out.stdout.strip().splitlines()[-1])


def entries(cache_dir):
    return sorted(p for p in glob.glob(os.path.join(cache_dir, "*", "*.ember")))


def payload_of(path):
    key = os.path.basename(path)[:-len(object_cache.SUFFIX)]
    return object_cache.ObjectCache(os.path.dirname(os.path.dirname(path))).load(key)


def native_entries(cache_dir):
    """Entries holding a shared library (a pickled dict with a run plan and ``so``)."""
    found = []
    for path in entries(cache_dir):
        payload = payload_of(path)
        if payload is not None and payload.startswith(b"\x80"):
            entry = pickle.loads(payload)
            if isinstance(entry, dict) and "so" in entry:
                found.append(path)
    return found


def check_values(result):
    x = np.linspace(-3, 3, 4096, dtype=np.float32)
    m = np.linspace(-1, 1, 48, dtype=np.float32).reshape(6, 8)
    assert abs(result["value"] - float(np.sum(np.tanh(x.astype(np.float64) * 2 + 1)))) < 1e-3
    np.testing.assert_allclose(result["sorted"], np.sort(m @ m.T, axis=1) * 2, rtol=1e-5,
                               atol=1e-6)
    assert abs(result["exp"] - float(np.exp(m.astype(np.float64)).sum())) < 1e-3


def test_second_process_loads_libraries_without_llvm(tmp_path):
    cold = run_process(tmp_path)
    check_values(cold)
    assert cold["llvmlite"] and cold["stats"]["compiled"] == 2
    assert cold["stats"]["linked"] == 2
    assert len(native_entries(tmp_path)) == 2
    warm = run_process(tmp_path)
    assert not warm["llvmlite"], "a warm process must not import llvmlite"
    assert not warm["program"], "a warm process must not build programs"
    assert warm["stats"]["compiled"] == 0 and warm["stats"]["native_hits"] == 2
    check_values(warm)
    assert (warm["value"], warm["sorted"], warm["exp"]) == (cold["value"], cold["sorted"],
                                                            cold["exp"])
    # The optimized module a warm process reports is the one the cold process compiled.
    assert warm["text"] == cold["text"]


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty"])
def test_damaged_library_is_rebuilt_never_loaded(tmp_path, damage):
    run_process(tmp_path)
    for path in native_entries(tmp_path):
        data = open(path, "rb").read()
        if damage == "truncate":
            data = data[: len(data) * 2 // 3]
        elif damage == "flip":  # inside the library's bytes, near the end of the payload
            i = len(data) - 200
            data = data[:i] + bytes([data[i] ^ 0x5A]) + data[i + 1:]
        else:
            data = b""
        open(path, "wb").write(data)
    again = run_process(tmp_path)
    check_values(again)
    # The small program's object code entry is intact: MCJIT loads it. The tiered program
    # kept no object code (its one optimizing compile made the library), so it is compiled
    # again. Both libraries are linked again.
    assert again["stats"]["native_hits"] == 0 and again["stats"]["compiled"] == 1
    assert again["stats"]["disk_hits"] == 1 and again["stats"]["linked"] == 2
    third = run_process(tmp_path)
    assert third["stats"]["native_hits"] == 2 and not third["llvmlite"]
    check_values(third)


def test_unloadable_library_with_a_valid_checksum_is_discarded(tmp_path):
    """An entry whose checksum holds but whose library cannot be loaded (as if stored
    broken) is removed and replaced; the process still gets the right results."""
    run_process(tmp_path)
    for path in native_entries(tmp_path):
        key = os.path.basename(path)[:-len(object_cache.SUFFIX)]
        entry = pickle.loads(payload_of(path))
        entry["so"] = entry["so"][:64] + b"\0" * (len(entry["so"]) - 64)
        with open(path, "wb") as f:
            f.write(object_cache.encode_entry(key, pickle.dumps(entry)))
    again = run_process(tmp_path)
    check_values(again)
    assert again["stats"]["native_hits"] == 0 and again["stats"]["compiled"] == 1
    assert run_process(tmp_path)["stats"]["native_hits"] == 2


def test_switch_off_stores_and_loads_nothing(tmp_path):
    first = run_process(tmp_path, EMBER_ENABLE_COMPILATION_CACHE="0")
    second = run_process(tmp_path, EMBER_ENABLE_COMPILATION_CACHE="0")
    assert entries(tmp_path) == []
    for result in (first, second):
        assert result["stats"]["compiled"] == 2 and result["stats"]["linked"] == 0

def test_shared_libraries_switched_off_keep_the_object_cache(tmp_path):
    """``EMBER_CPU_SHARED_LIBRARIES=0``: nothing is linked, but object code is still stored
    and a second process loads it (through MCJIT) instead of compiling."""
    first = run_process(tmp_path, EMBER_CPU_SHARED_LIBRARIES="0")
    assert first["stats"]["compiled"] == 2 and first["stats"]["linked"] == 0
    assert native_entries(tmp_path) == [] and entries(tmp_path) != []
    second = run_process(tmp_path, EMBER_CPU_SHARED_LIBRARIES="0")
    assert second["stats"]["compiled"] == 0 and second["stats"]["disk_hits"] == 2
    assert second["stats"]["native_hits"] == 0 and second["llvmlite"]
    for result in (first, second):
        check_values(result)

        check_values(result)


def test_without_a_linker_object_code_loads_through_mcjit(tmp_path):
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    cache = tmp_path / "cache"
    first = run_process(cache, PATH=str(empty_bin))
    assert first["stats"]["linked"] == 0 and native_entries(cache) == []
    second = run_process(cache, PATH=str(empty_bin))
    assert second["stats"]["compiled"] == 0 and second["stats"]["disk_hits"] == 2
    assert second["llvmlite"]
    check_values(second)


# ---------------------------------------------------------------------------- native_lib

KERNEL_IR = """
@table = global [4 x i32] [i32 3, i32 1, i32 4, i32 1], align 16
define i32 @pick(i64 %i) {
  %p = getelementptr [4 x i32], [4 x i32]* @table, i64 0, i64 %i
  %v = load i32, i32* %p
  ret i32 %v
}
define float @half_round_trip(float %x) {
  %h = fptrunc float %x to half
  %y = fpext half %h to float
  ret float %y
}
"""


def test_link_and_load_a_library_from_memory():
    import ctypes
    so = native_lib.link_shared(llvm_support.compile_ir(KERNEL_IR, opt_level=0,
                                                        shared_library=True).object_code)
    assert so is not None and so[:4] == b"\x7fELF"
    lib = native_lib.NativeLibrary(so)
    pick = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int64)(lib.address("pick"))
    assert [pick(i) for i in range(4)] == [3, 1, 4, 1]
    table = (ctypes.c_int32 * 4).from_address(lib.global_address("table"))
    assert list(table) == [3, 1, 4, 1]
    # Half-precision conversions call libgcc routines, which the link resolves.
    rt = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_float)(lib.address("half_round_trip"))
    assert rt(1.0 / 3.0) == float(np.float32(np.float16(1.0 / 3.0)))
    with pytest.raises(ValueError, match="no function 'missing'"):
        lib.address("missing")
    with pytest.raises(ValueError, match="no global 'missing'"):
        lib.global_address("missing")


def _answer_library(value: int) -> bytes:
    ir_text = f"define i32 @answer() {{\n  ret i32 {value}\n}}\n"
    so = native_lib.link_shared(llvm_support.compile_ir(ir_text, opt_level=0,
                                                        shared_library=True).object_code)
    assert so is not None
    return so


def _answer(lib) -> int:
    import ctypes
    return ctypes.CFUNCTYPE(ctypes.c_int32)(lib.address("answer"))()


def test_libraries_load_from_memory_each_under_a_new_name(monkeypatch):
    import tempfile
    if not hasattr(os, "memfd_create"):
        pytest.skip("no memfd_create here")

    def no_files(*args, **kwargs):
        raise AssertionError("a library went through a file")
    monkeypatch.setattr(tempfile, "mkstemp", no_files)
    # Same-named symbols in every library: a library loaded under a name used before
    # (``dlopen`` would hand back the old one) answers with the wrong number.
    libs = [native_lib.NativeLibrary(_answer_library(v)) for v in (11, 22, 33, 44)]
    assert [_answer(lib) for lib in libs] == [11, 22, 33, 44]


def test_libraries_load_from_files_when_memory_files_fail(monkeypatch):
    # Names past the length limit: the in-memory way gives up.
    monkeypatch.setattr(native_lib, "_MAX_NAME", 0)
    assert native_lib._dlopen_in_memory(_answer_library(5)) is None
    assert _answer(native_lib.NativeLibrary(_answer_library(7))) == 7


def test_garbage_is_not_a_library():
    with pytest.raises(OSError):
        native_lib.NativeLibrary(b"\x7fELF" + b"\0" * 200)


def test_link_shared_rejects_bad_input():
    with pytest.raises(TypeError, match="link_shared: object_code must be bytes"):
        native_lib.link_shared("not bytes")
    assert native_lib.link_shared(b"not an object file") is None


def test_fingerprints_are_stable_and_describe_the_host():
    host = native_lib.host_fingerprint()
    assert host == native_lib.host_fingerprint()
    assert host.startswith(os.uname().machine)
    if os.path.exists("/proc/cpuinfo"):
        assert "flags=" in host or "features=" in host
    assert "libllvmlite" in native_lib.toolchain_fingerprint()


def test_stored_plans_unpickle_numpys_own_dtypes(tmp_path):
    """NumPy's pickling of a dtype unpickles a copy, and arrays of a copied dtype miss NumPy's
    fast paths (``np.add.at`` ran 40x slower), so plans store dtypes by their scalar type."""
    run_process(tmp_path)
    seen = []

    def check(dtype):
        seen.append(dtype)
        assert dtype is np.dtype(dtype.type), dtype

    for path in native_entries(tmp_path):
        plan = pickle.loads(payload_of(path))["plan"]
        for ref in plan.outputs:
            check(ref.dtype)
        for _, dtype in plan.output_shapes:
            check(dtype)
        for c in plan.constants:
            check(np.asarray(c).dtype)
        for step in plan.steps:
            refs = list(step.outputs) if hasattr(step, "outputs") else [step.output]
            for leaves in step.inputs:
                refs.extend(leaves if isinstance(leaves, tuple) else [leaves])
            for ref in refs:
                check(ref.dtype)
            inst = getattr(step, "inst", None)
            if inst is not None:
                for leaf in inst.shape.leaves():
                    check(leaf.dtype)
    assert len(seen) > 10


def test_a_retraced_jaxpr_loads_by_its_fingerprint_without_lowering(tmp_path, monkeypatch):
    """A warm compile finds the program by the jaxpr's lowering fingerprint; hoisted
    constants are not in it, so a function closing over other values of the same type
    reuses the program and computes with its own values."""
    import ember
    import ember.numpy as jnp
    from ember.backends import get_backend
    from ember.compiler.lower import INLINE_CONST_LIMIT
    from ember.runtime import dispatch

    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("EMBER_CPU_SHARED_LIBRARIES", "1")
    x = np.linspace(-1, 1, 4 * INLINE_CONST_LIMIT, dtype=np.float32)

    def make(c):
        return ember.jit(lambda a: jnp.tanh(a * 3.0) + c)

    np.testing.assert_allclose(make(np.cos(x))(x), np.tanh(x * 3) + np.cos(x), rtol=1e-6,
                               atol=1e-6)
    get_backend("cpu").wait_for_background()

    def no_lowering(*args, **kwargs):
        raise AssertionError("a fingerprint hit must not lower the jaxpr")

    monkeypatch.setattr(dispatch, "lower_closed_jaxpr", no_lowering)
    np.testing.assert_allclose(make(np.sin(x))(x), np.tanh(x * 3) + np.sin(x), rtol=1e-6,
                               atol=1e-6)
    # Another literal is another program: it is lowered (and compiled) as before.
    with pytest.raises(AssertionError, match="must not lower"):
        ember.jit(lambda a: jnp.tanh(a * 2.0) + x)(x)


def test_a_lowered_module_hit_files_the_fingerprint_too(tmp_path, monkeypatch):
    """A jaxpr whose fingerprint is new but whose lowered module was compiled before loads
    by the module's key, and records the fingerprint: the next such jaxpr is not lowered."""
    import ember
    import ember.numpy as jnp
    from ember.backends import get_backend
    from ember.runtime import dispatch

    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("EMBER_CPU_SHARED_LIBRARIES", "1")
    x = np.linspace(-1, 1, 5000, dtype=np.float32)
    f = lambda a: jnp.exp(a) * 2.0  # noqa: E731
    np.testing.assert_allclose(ember.jit(f)(x), np.exp(x) * 2, rtol=1e-6)
    get_backend("cpu").wait_for_background()
    fingerprint = dispatch.lowering_fingerprint
    monkeypatch.setattr(dispatch, "lowering_fingerprint",
                        lambda closed, name: fingerprint(closed, name) + "-salted")
    lowerings = []
    lower = dispatch.lower_closed_jaxpr
    monkeypatch.setattr(dispatch, "lower_closed_jaxpr",
                        lambda *a, **k: lowerings.append(1) or lower(*a, **k))
    compiled = get_backend("cpu").stats["compiled"]
    # (New ``jit`` objects: the in-memory cache of ``jit(f)`` would answer without compiling.)
    np.testing.assert_allclose(ember.jit(lambda a: f(a))(x), np.exp(x) * 2, rtol=1e-6)
    get_backend("cpu").wait_for_background()
    assert lowerings == [1] and get_backend("cpu").stats["compiled"] == compiled
    np.testing.assert_allclose(ember.jit(lambda a: f(a))(x), np.exp(x) * 2, rtol=1e-6)
    assert lowerings == [1]


AHEAD_OF_TIME = """
import json, numpy as np, ember, ember.numpy as jnp
from ember.backends import get_backend
m = np.linspace(-1, 1, 4096, dtype=np.float32).reshape(64, 64)
compiled = ember.jit(lambda a: jnp.tanh(a @ a.T) * 2.0).lower(m).compile()
if {run}:
    print(json.dumps({{"value": np.asarray(compiled(m)).tolist(),
                      "stats": get_backend("cpu").stats}}))
else:
    print(json.dumps({{"stats": get_backend("cpu").stats}}))
"""


def test_a_program_compiled_ahead_of_time_and_never_run_is_stored_at_exit(tmp_path):
    # (its optimizing compile waits for a first run that never comes: the exit starts it)
    env = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path), EMBER_CPU_SHARED_LIBRARIES="1",
               EMBER_PRELOAD="0")
    env.pop("EMBER_DUMP_TO", None)

    def run(program):
        out = subprocess.run([sys.executable, "-c", program], env=env, check=True,
                             capture_output=True, text=True, timeout=300)
        return json.loads(out.stdout.strip().splitlines()[-1])
    cold = run(AHEAD_OF_TIME.format(run=False))
    assert cold["stats"]["native_hits"] == 0
    warm = run(AHEAD_OF_TIME.format(run=True))
    assert warm["stats"]["compiled"] == 0 and warm["stats"]["native_hits"] == 1
    m = np.linspace(-1, 1, 4096, dtype=np.float32).reshape(64, 64)
    np.testing.assert_allclose(warm["value"], np.tanh(m @ m.T) * 2.0, rtol=1e-5, atol=1e-6)
