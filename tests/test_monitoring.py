"""ember.monitoring (listeners, ember's compile and cache events), ember.distributed,
ember.version and ember.experimental.compilation_cache."""

import os
import time

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import monitoring
from ember.backends import get_backend
from ember.backends.cpu import native_lib, object_cache
from ember.experimental.compilation_cache import compilation_cache as cc


@pytest.fixture
def recorded():
    """Every event, duration, time span and scalar recorded during the test."""
    log = {"events": [], "durations": [], "spans": [], "scalars": []}
    listeners = [
        (monitoring.register_event_listener, monitoring.unregister_event_listener,
         lambda event, **kw: log["events"].append((event, kw))),
        (monitoring.register_event_duration_secs_listener,
         monitoring.unregister_event_duration_listener,
         lambda event, secs, **kw: log["durations"].append((event, secs, kw))),
        (monitoring.register_event_time_span_listener,
         monitoring.unregister_event_time_span_listener,
         lambda event, t0, t1, **kw: log["spans"].append((event, t0, t1, kw))),
        (monitoring.register_scalar_listener, monitoring.unregister_scalar_listener,
         lambda event, value, **kw: log["scalars"].append((event, value, kw))),
    ]
    for register, _, callback in listeners:
        register(callback)
    yield log
    for _, unregister, callback in listeners:
        unregister(callback)


@pytest.fixture
def cache_config():
    """Restores the compilation-cache config after the test."""
    saved = {k: ember.config.read(k) for k in ("jax_compilation_cache_dir",
                                               "jax_enable_compilation_cache")}
    yield
    for k, v in saved.items():
        ember.config.update(k, v)
    cc.reset_cache()


_PHASES = [monitoring.JAXPR_TRACE_EVENT, monitoring.JAXPR_TO_MODULE_EVENT,
           monitoring.HLO_OPTIMIZE_EVENT, monitoring.BACKEND_COMPILE_EVENT]


def test_listeners_get_compile_phases(recorded):
    def monitored_fn(x):  # (a body no other test compiles: no cache hit skips its phases)
        return jnp.tanh(x) * 0.375 - 4.0

    f = ember.jit(monitored_fn)
    t0 = time.time()
    out = f(jnp.ones(5))
    t1 = time.time()
    np.testing.assert_allclose(np.asarray(out), np.tanh(1.0) * 0.375 - 4.0, rtol=1e-6)
    mine = [d for d in recorded["durations"] if d[2] == {"fun_name": "monitored_fn"}]
    assert [d[0] for d in mine] == _PHASES
    assert all(0 < secs < t1 - t0 for _, secs, _ in mine)
    # Scalars: each phase's start time; spans: its start and end, as the duration says.
    starts = [(e, v) for e, v, kw in recorded["scalars"] if kw == {"fun_name": "monitored_fn"}]
    assert [e for e, _ in starts] == _PHASES
    assert all(t0 <= v <= t1 for _, v in starts)
    spans = [s for s in recorded["spans"] if s[3] == {"fun_name": "monitored_fn"}]
    assert [s[0] for s in spans] == _PHASES
    for (_, start, end, _), (_, secs, _), (_, value) in zip(spans, mine, starts):
        assert start == value and end - start == pytest.approx(secs, abs=1e-6)
    assert [s[1] for s in spans] == sorted(s[1] for s in spans)
    # A cached call compiles nothing.
    before = len(recorded["durations"])
    f(jnp.ones(5))
    assert len(recorded["durations"]) == before


@pytest.mark.skipif(not (native_lib.available() and native_lib.linker()),
                    reason="the disk cache of whole compilations needs a C linker")
def test_cache_events_with_a_warm_disk_cache(tmp_path, recorded, cache_config, monkeypatch):
    monkeypatch.setenv("EMBER_CPU_SHARED_LIBRARIES", "1")
    cc.set_cache_dir(tmp_path)

    def cached_fn(x):
        return jnp.cos(x) * 1.625 + 0.25

    x = jnp.arange(6.0)
    np.testing.assert_allclose(np.asarray(ember.jit(cached_fn)(x)),
                               np.cos(np.arange(6.0)) * 1.625 + 0.25, rtol=1e-6)
    get_backend("cpu").wait_for_background()  # (the entries are written in the background)
    assert [e for e, _ in recorded["events"]] == [monitoring.CACHE_REQUEST_EVENT,
                                                  monitoring.CACHE_MISS_EVENT]
    assert any(p.suffix == ".ember" for p in tmp_path.rglob("*"))
    recorded["events"].clear()
    recorded["durations"].clear()
    ember.clear_caches()
    out = ember.jit(cached_fn)(x)
    np.testing.assert_allclose(np.asarray(out), np.cos(np.arange(6.0)) * 1.625 + 0.25,
                               rtol=1e-6)
    assert [e for e, _ in recorded["events"]] == [monitoring.CACHE_REQUEST_EVENT,
                                                  monitoring.CACHE_HIT_EVENT]
    names = [d[0] for d in recorded["durations"]]
    assert names == [monitoring.JAXPR_TRACE_EVENT, monitoring.CACHE_RETRIEVAL_EVENT]
    assert recorded["durations"][1][1] > 0


def test_record_register_unregister_clear():
    got = []
    on_event = lambda event, **kw: got.append(("event", event, kw))  # noqa: E731
    on_duration = lambda event, secs, **kw: got.append(("duration", event, secs, kw))  # noqa
    on_scalar = lambda event, value, **kw: got.append(("scalar", event, value, kw))  # noqa
    on_span = lambda event, t0, t1, **kw: got.append(("span", event, t0, t1, kw))  # noqa
    monitoring.register_event_listener(on_event)
    monitoring.register_event_duration_secs_listener(on_duration)
    monitoring.register_scalar_listener(on_scalar)
    monitoring.register_event_time_span_listener(on_span)
    try:
        assert on_event in monitoring.get_event_listeners()
        assert on_duration in monitoring.get_event_duration_listeners()
        assert on_scalar in monitoring.get_scalar_listeners()
        assert on_span in monitoring.get_event_time_span_listeners()
        monitoring.record_event("/test/e", step=3)
        monitoring.record_event_duration_secs("/test/d", 0.5, phase="a")
        monitoring.record_scalar("/test/s", 7)
        monitoring.record_event_time_span("/test/t", 1.0, 2.5)
        assert got == [("event", "/test/e", {"step": 3}), ("duration", "/test/d", 0.5,
                                                           {"phase": "a"}),
                       ("scalar", "/test/s", 7, {}), ("span", "/test/t", 1.0, 2.5, {})]
        monitoring.unregister_event_listener(on_event)
        monitoring.record_event("/test/e")
        assert len(got) == 4
        with pytest.raises(AssertionError, match="not a registered listener"):
            monitoring.unregister_event_listener(on_event)
    finally:
        saved = [monitoring.get_event_listeners(), monitoring.get_event_duration_listeners(),
                 monitoring.get_scalar_listeners(), monitoring.get_event_time_span_listeners()]
        monitoring.clear_event_listeners()
        assert not any([monitoring.get_event_listeners(),
                        monitoring.get_event_duration_listeners(),
                        monitoring.get_scalar_listeners(),
                        monitoring.get_event_time_span_listeners()])
        for register, listeners in zip(
                [monitoring.register_event_listener,
                 monitoring.register_event_duration_secs_listener,
                 monitoring.register_scalar_listener,
                 monitoring.register_event_time_span_listener], saved):
            for listener in listeners:
                if listener not in (on_event, on_duration, on_scalar, on_span):
                    register(listener)


def test_names_match_jax(jax):
    import jax.monitoring
    import jax.profiler
    ours = {n for n in dir(monitoring) if not n.startswith("_")}
    assert {n for n in dir(jax.monitoring) if not n.startswith("_")} - ours == set()
    theirs = {n for n in dir(jax.profiler) if not n.startswith("_")}
    missing = theirs - set(dir(ember.profiler))
    assert missing == {"ProfileData", "ProfileEvent", "ProfilePlane"}


# --------------------------------------------------------------------------- distributed

def test_distributed_single_process():
    from ember import distributed
    assert not distributed.is_initialized()
    distributed.shutdown()  # (nothing running: does nothing)
    distributed.initialize()
    try:
        assert distributed.is_initialized()
        assert distributed.global_state.num_processes == 1
        assert distributed.global_state.process_id == 0
        assert ember.process_count() == 1 and ember.process_index() == 0
        with pytest.raises(RuntimeError, match="only be called once"):
            distributed.initialize()
    finally:
        distributed.shutdown()
    assert not distributed.is_initialized()
    distributed.initialize("localhost:1234", num_processes=1, process_id=0,
                           local_device_ids=0)
    assert distributed.global_state.coordinator_address == "localhost:1234"
    assert distributed.global_state.local_device_ids == [0]
    distributed.shutdown()


def test_distributed_errors(monkeypatch):
    from ember import distributed
    with pytest.raises(RuntimeError, match="one process"):
        distributed.initialize("10.0.0.1:1234", num_processes=2, process_id=1)
    with pytest.raises(ValueError, match="process_id < num_processes"):
        distributed.initialize(num_processes=1, process_id=1)
    with pytest.raises(TypeError, match="process_id must be a nonnegative int"):
        distributed.initialize(process_id="0")
    with pytest.raises(TypeError, match="num_processes must be a positive int"):
        distributed.initialize(num_processes=1.0)
    with pytest.raises(ValueError, match="local_device_ids"):
        distributed.initialize(local_device_ids=[0, 1])
    with pytest.raises(RuntimeError, match="cluster"):
        distributed.initialize(cluster_detection_method="slurm")
    monkeypatch.setenv("JAX_NUM_PROCESSES", "4")
    monkeypatch.setenv("JAX_PROCESS_ID", "2")
    with pytest.raises(RuntimeError, match="num_processes=4"):
        distributed.initialize()
    assert not distributed.is_initialized()


# --------------------------------------------------------------------------- version

def test_version(jax):
    import jax.version

    from ember import version
    assert version.__version__ == version._version == ember.__version__
    assert version.__version_info__ == tuple(int(p) for p in ember.__version__.split("."))
    assert version._version_as_tuple("0.4.16.dev20230906") == (0, 4, 16)
    assert {n for n in dir(jax.version) if n.startswith("__version")} <= set(dir(version))


# --------------------------------------------------------------------------- compilation cache

def test_compilation_cache_dir_is_used(tmp_path, cache_config):
    assert ember.experimental.compilation_cache.compilation_cache is cc
    cc.set_cache_dir(tmp_path / "cc")
    assert ember.config.read("jax_compilation_cache_dir") == str(tmp_path / "cc")
    assert cc.is_initialized()
    cache = object_cache.get_object_cache()
    assert cache.directory == str(tmp_path / "cc")

    f = ember.jit(lambda x: jnp.exp(x) * 0.8125 + 3.0)
    f(jnp.ones(4)).block_until_ready()
    get_backend("cpu").wait_for_background()
    entries = [p for p in (tmp_path / "cc").rglob("*.ember")]
    assert entries

    cc.reset_cache()
    assert object_cache._caches == {}
    assert object_cache.get_object_cache().directory == str(tmp_path / "cc")
    cc.initialize_cache(os.fspath(tmp_path / "other"))
    assert object_cache.get_object_cache().directory == str(tmp_path / "other")
    ember.config.update("jax_enable_compilation_cache", False)
    assert not cc.is_initialized()
    with pytest.raises(TypeError, match="set_cache_dir"):
        cc.set_cache_dir(3)
