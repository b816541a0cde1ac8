"""ember.profiler: trace files (layout, spans, nesting, steps), errors, memory profiles."""

import glob
import gzip
import json
import os
import socket
import threading
import time
import urllib.request

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import profiler


def _load_trace(log_dir, name=None):
    host = socket.gethostname()
    paths = glob.glob(os.path.join(str(log_dir), "plugins", "profile", "*",
                                   name or f"{host}.trace.json.gz"))
    assert len(paths) == 1, paths
    with gzip.open(paths[0]) as f:
        return json.load(f), os.path.dirname(paths[0])


def _spans(trace, name):
    return [e for e in trace["traceEvents"] if e.get("ph") == "X" and e["name"] == name]


def _inside(inner, outer):
    return (outer["tid"] == inner["tid"] and outer["ts"] <= inner["ts"]
            and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"] + 1e-3)


def test_trace_of_a_jitted_loop(tmp_path):
    @ember.jit
    def profiled_step(x):  # (a body no other test compiles: no cache hit skips its phases)
        return jnp.sin(x) * 2.5 + 0.125

    @profiler.annotate_function
    def load(i):
        return jnp.full((7, 13), float(i))

    x = None
    with profiler.trace(tmp_path, create_perfetto_trace=True):
        for i in range(3):
            with profiler.StepTraceAnnotation("train", step_num=i):
                with profiler.TraceAnnotation("inner", tag="t"):
                    x = profiled_step(load(i)).block_until_ready()
    np.testing.assert_allclose(np.asarray(x), np.sin(2.0) * 2.5 + 0.125, rtol=1e-6)

    trace, folder = _load_trace(tmp_path)
    assert trace["displayTimeUnit"] == "ns" and "metadata" in trace
    steps = _spans(trace, "train")
    assert [s["args"] for s in steps] == [{"step_num": str(i)} for i in range(3)]
    inners = _spans(trace, "inner")
    assert len(inners) == 3 and all(s["args"] == {"tag": "t"} for s in inners)
    for step, inner in zip(steps, inners):
        assert _inside(inner, step)
    loads = _spans(trace, load.__qualname__)
    assert len(loads) == 3 and all(any(_inside(ld, s) for s in inners) for ld in loads)
    # Each step ran the program once, waited for inside the step's span (on some thread).
    runs = _spans(trace, "jit_profiled_step")
    assert len(runs) == 3
    for run, step in zip(runs, steps):
        assert step["ts"] <= run["ts"] and run["ts"] + run["dur"] <= step["ts"] + step["dur"]
    # The first step compiled, phase by phase, in order, inside its step.
    phases = [_spans(trace, p) for p in ("trace_jaxpr", "lower", "optimize",
                                         "backend_compile")]
    firsts = []
    for spans in phases:
        mine = [s for s in spans if s["args"]["fun_name"] == "profiled_step"]
        assert len(mine) == 1
        assert _inside(mine[0], inners[0])
        firsts.append(mine[0]["ts"])
    assert firsts == sorted(firsts)
    # Every thread that has spans is named; the process is named.
    tids = {e["tid"] for e in trace["traceEvents"] if e.get("ph") == "X"}
    named = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e.get("name") == "thread_name"}
    assert tids <= set(named) and threading.current_thread().name in named.values()
    # The Perfetto copy: the same events without the metadata.
    with gzip.open(os.path.join(folder, "perfetto_trace.json.gz")) as f:
        perfetto = json.load(f)
    assert "metadata" not in perfetto and perfetto["traceEvents"] == trace["traceEvents"]


def test_start_stop_errors_and_context_cleanup(tmp_path):
    with pytest.raises(RuntimeError, match="No profile started"):
        profiler.stop_trace()
    profiler.start_trace(tmp_path / "a")
    try:
        with pytest.raises(RuntimeError, match="already been started"):
            profiler.start_trace(tmp_path / "b")
        with pytest.raises(RuntimeError, match="already been started"):
            with profiler.trace(tmp_path / "c"):
                pass
    finally:
        profiler.stop_trace()
    with pytest.raises(KeyError):
        with profiler.trace(tmp_path / "d"):
            with profiler.TraceAnnotation("failing"):
                raise KeyError("inside the trace")
    assert [s["name"] for s in _load_trace(tmp_path / "d")[0]["traceEvents"]
            if s.get("ph") == "X"] == ["failing"]
    profiler.start_trace(tmp_path / "e")  # (the failed block's trace was stopped)
    profiler.stop_trace()
    with pytest.raises(TypeError, match="log_dir"):
        profiler.start_trace(3)
    with pytest.raises(TypeError, match="name"):
        profiler.TraceAnnotation(3)


def test_options_level_and_session_id(tmp_path):
    options = profiler.ProfileOptions()
    options.host_tracer_level = 1
    options.session_id = "run7"
    f = ember.jit(lambda x: x * 3.0 - 1.0)
    with profiler.trace(tmp_path, profiler_options=options):
        with profiler.TraceAnnotation("only"):
            f(jnp.ones(3)).block_until_ready()
    trace, folder = _load_trace(tmp_path)
    assert os.path.basename(folder) == "run7"
    assert [e["name"] for e in trace["traceEvents"] if e.get("ph") == "X"] == ["only"]


def test_annotations_without_a_trace_are_cheap_and_unrecorded(tmp_path):
    def annotated():
        with profiler.TraceAnnotation("x"):
            pass

    n = 20000
    best = min(_timeit(annotated, n) for _ in range(5)) / n
    assert best < 1e-6, f"{best * 1e9:.0f} ns per annotation without a trace"
    # An annotation entered before the trace started is not recorded.
    outer = profiler.TraceAnnotation("before")
    outer.__enter__()
    with profiler.trace(tmp_path):
        with profiler.TraceAnnotation("during"):
            pass
        outer.__exit__(None, None, None)
    names = [e["name"] for e in _load_trace(tmp_path)[0]["traceEvents"] if e.get("ph") == "X"]
    assert names == ["during"]


def _timeit(fn, n):
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return time.perf_counter() - t0


def test_perfetto_link_serves_the_file_once(tmp_path):
    path = tmp_path / "perfetto_trace.json.gz"
    path.write_bytes(gzip.compress(b'{"traceEvents": []}'))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    got = {}

    def fetch():
        for _ in range(200):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/{path.name}",
                                            timeout=5) as r:
                    got["body"] = r.read()
                    got["cors"] = r.headers["Access-Control-Allow-Origin"]
                    return
            except OSError:
                time.sleep(0.02)

    client = threading.Thread(target=fetch)
    client.start()
    profiler._serve_perfetto_file(str(path), port=port)  # returns once fetched
    client.join(10)
    assert got == {"body": path.read_bytes(), "cors": "*"}


# --------------------------------------------------------------------------- memory profiles

def _read_varint(data, i):
    value = shift = 0
    while True:
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value, i


def _decode(data):
    """A protobuf message as {field number: [values]} (varints as ints, the rest as bytes)."""
    fields, i = {}, 0
    while i < len(data):
        key, i = _read_varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _read_varint(data, i)
        elif wire == 2:
            length, i = _read_varint(data, i)
            value, i = data[i:i + length], i + length
        else:
            raise AssertionError(f"unexpected wire type {wire}")
        fields.setdefault(number, []).append(value)
    return fields


def _packed_varints(data):
    out, i = [], 0
    while i < len(data):
        v, i = _read_varint(data, i)
        out.append(v)
    return out


def _profile_by_function(raw):
    profile = _decode(gzip.decompress(raw))
    strings = [s.decode() for s in profile[6]]
    assert strings[0] == ""
    types = [tuple(strings[v] for v in (_decode(t)[1][0], _decode(t)[2][0]))
             for t in profile[1]]
    assert types == [("allocations", "count"), ("space", "bytes")]
    assert strings[profile[14][0]] == "space"
    functions = {_decode(f)[1][0]: strings[_decode(f)[2][0]] for f in profile[5]}
    locations = {_decode(loc)[1][0]: _decode(_decode(loc)[4][0])[1][0]
                 for loc in profile[4]}
    result = {}
    for sample in profile[2]:
        fields = _decode(sample)
        (location,) = _packed_varints(fields[1][0])
        labels = {strings[_decode(lb)[1][0]]: strings[_decode(lb)[2][0]] for lb in fields[3]}
        assert labels == {"kind": "buffer", "device": "cpu:0"}
        result[functions[locations[location]]] = _packed_varints(fields[2][0])
    return result


def test_device_memory_profile_counts_live_arrays(tmp_path):
    a = [jnp.ones((37, 3)), jnp.zeros((37, 3))]
    b = jnp.arange(11, dtype=jnp.int16)
    by_shape = _profile_by_function(profiler.device_memory_profile())
    count, nbytes = by_shape["f32[37,3]"]
    assert count >= 2 and nbytes == count * 37 * 3 * 4
    count, nbytes = by_shape["i16[11]"]
    assert count >= 1 and nbytes == count * 11 * 2
    expected = {a.aval.str_short() for a in ember.live_arrays() if not a.is_deleted()}
    assert set(by_shape) == expected
    path = tmp_path / "memory.prof"
    profiler.save_device_memory_profile(path)
    assert _profile_by_function(path.read_bytes())["f32[37,3]"][1] >= 2 * 37 * 3 * 4
    del a, b
    with pytest.raises(RuntimeError, match="unknown backend"):
        profiler.device_memory_profile("tpu")


def test_servers_are_not_available():
    with pytest.raises(RuntimeError, match="no profiler server"):
        profiler.start_server(9999)
    with pytest.raises(ValueError, match="No active profiler server"):
        profiler.stop_server()
    with pytest.raises(RuntimeError, match="no profiler servers"):
        profiler.register_subprocess(1, 9999)
