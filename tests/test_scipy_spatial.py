"""ember.scipy.spatial.transform (Rotation, Slerp) against JAX's, and round trips."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.scipy.spatial.transform import Rotation, Slerp


@pytest.fixture(scope="module")
def jtr(jax):
    import jax.scipy.spatial.transform as t

    return t


def _quats(n, seed=0):
    q = np.random.default_rng(seed).normal(size=(n, 4)).astype(np.float32)
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def test_conversions_match_jax(jtr):
    q = _quats(6)
    ours, theirs = Rotation.from_quat(q), jtr.Rotation.from_quat(q)
    close = lambda a, b: np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-5)
    close(ours.as_matrix(), theirs.as_matrix())
    close(ours.as_rotvec(), theirs.as_rotvec())
    close(ours.as_rotvec(degrees=True), theirs.as_rotvec(degrees=True))
    close(ours.as_mrp(), theirs.as_mrp())
    close(ours.magnitude(), theirs.magnitude())
    close(ours.inv().quat, theirs.inv().quat)
    close(ours.as_quat(canonical=True, scalar_first=True),
          theirs.as_quat(canonical=True, scalar_first=True))
    close((ours * ours[::-1]).quat, (theirs * theirs[::-1]).quat)
    v = np.random.default_rng(1).normal(size=(6, 3)).astype(np.float32)
    close(ours.apply(v), theirs.apply(v))
    close(ours.apply(v, inverse=True), theirs.apply(v, inverse=True))
    m = np.asarray(theirs.as_matrix())
    close(Rotation.from_matrix(m).quat, jtr.Rotation.from_matrix(m).quat)
    rv = np.asarray(theirs.as_rotvec())
    close(Rotation.from_rotvec(rv).quat, jtr.Rotation.from_rotvec(rv).quat)
    close(Rotation.from_mrp(ours.as_mrp()).quat, jtr.Rotation.from_mrp(theirs.as_mrp()).quat)
    close(ours.mean().as_matrix(), theirs.mean().as_matrix())
    w = np.arange(1.0, 7.0, dtype=np.float32)
    close(ours.mean(w).as_matrix(), theirs.mean(w).as_matrix())


@pytest.mark.parametrize("seq", ["xyz", "ZXY", "zxz", "xz"])
def test_euler_matches_jax(jtr, seq):
    ang = np.random.default_rng(2).uniform(-3, 3, size=(5, len(seq))).astype(np.float32)
    ours = Rotation.from_euler(seq, ang)
    theirs = jtr.Rotation.from_euler(seq, ang)
    np.testing.assert_allclose(ours.quat, theirs.quat, rtol=1e-5, atol=1e-6)
    if len(seq) == 3:
        np.testing.assert_allclose(ours.as_euler(seq, degrees=True),
                                   theirs.as_euler(seq, degrees=True), rtol=1e-4, atol=1e-3)
        # gimbal lock (middle angle 0 or 90 degrees): the whole rotation in the first angle
        middle = 0.0 if seq[0] == seq[2] else np.pi / 2
        lock = Rotation.from_euler(seq, np.array([0.3, middle, 0.2], np.float32))
        jlock = jtr.Rotation.from_quat(np.asarray(lock.quat))
        np.testing.assert_allclose(lock.as_euler(seq), jlock.as_euler(seq), atol=1e-4)


def test_round_trips_and_identities():
    q = _quats(5, seed=3)
    r = Rotation.from_quat(q)
    same = lambda a, b: np.testing.assert_allclose(
        Rotation.from_quat(a).as_matrix(), Rotation.from_quat(b).as_matrix(), atol=2e-5)
    same(Rotation.from_matrix(r.as_matrix()).quat, q)
    same(Rotation.from_rotvec(r.as_rotvec()).quat, q)
    same(Rotation.from_mrp(r.as_mrp()).quat, q)
    same(Rotation.from_euler("XYZ", r.as_euler("XYZ")).quat, q)
    m = np.asarray(r.as_matrix())
    np.testing.assert_allclose(m @ np.swapaxes(m, -1, -2), np.broadcast_to(np.eye(3), m.shape),
                               atol=1e-5)
    np.testing.assert_allclose((r * r.inv()).magnitude(), 0, atol=1e-3)
    v = np.array([1.0, 2.0, 3.0], np.float32)
    np.testing.assert_allclose((r[0] * r[1]).apply(v), r[0].apply(r[1].apply(v)), atol=1e-5)
    z90 = Rotation.from_euler("z", 90, degrees=True)
    np.testing.assert_allclose(z90.apply(np.array([1.0, 0, 0])), [0, 1, 0], atol=1e-6)
    np.testing.assert_allclose(Rotation.identity().as_matrix(), np.eye(3))
    assert Rotation.identity(3).quat.shape == (3, 4) and len(r) == 5
    assert len(Rotation.concatenate([r, r[:2]])) == 7
    rr = Rotation.random(ember.random.PRNGKey(0), 4)
    np.testing.assert_allclose(np.linalg.norm(rr.quat, axis=-1), 1, rtol=1e-6)


def test_slerp_matches_jax_and_jit(jtr):
    ang = np.array([[90, 0, 0], [0, 45, 0], [0, 0, -30]], np.float32)
    times, t = np.array([0.0, 1.0, 2.0]), np.array([0.0, 0.25, 0.5, 1.0, 1.5, 2.0])
    ours = Slerp.init(times, Rotation.from_euler("zxy", ang, degrees=True))
    theirs = jtr.Slerp.init(times, jtr.Rotation.from_euler("zxy", ang, degrees=True))
    np.testing.assert_allclose(ours(t).as_matrix(), theirs(t).as_matrix(), atol=1e-5)
    np.testing.assert_allclose(ember.jit(lambda s, t: s(t).quat)(ours, t), theirs(t).quat,
                               atol=1e-5)
    assert ours(0.5).single
    # the rotation angle grows linearly along a segment about a fixed axis
    z = Slerp.init([0.0, 1.0], Rotation.from_euler("z", jnp.array([0.0, 1.2])))
    np.testing.assert_allclose(z(jnp.array([0.25, 0.5])).magnitude(), [0.3, 0.6], rtol=1e-5)


def test_grad_and_vmap():
    f = lambda a: Rotation.from_euler("x", a).apply(jnp.array([0.0, 1.0, 0.0]))[2]
    np.testing.assert_allclose(ember.grad(f)(0.4), np.cos(0.4), rtol=1e-5)
    q = _quats(3, seed=4)
    np.testing.assert_allclose(ember.vmap(lambda q: Rotation.from_quat(q).as_matrix())(q),
                               Rotation.from_quat(q).as_matrix(), atol=1e-6)


def test_bad_input():
    r = Rotation.identity()
    with pytest.raises(ValueError, match="Expected 3 axes"):
        r.as_euler("xy")
    with pytest.raises(ValueError, match="from"):
        Rotation.from_euler("xYz", [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="consecutive"):
        Rotation.from_euler("xxz", [1.0, 2.0, 3.0])
    with pytest.raises(TypeError, match="not subscriptable"):
        r[0]
    with pytest.raises(TypeError, match="no len"):
        len(r)
    with pytest.raises(ValueError, match="at least 2"):
        Slerp.init([0.0], Rotation.identity(1))
    with pytest.raises(TypeError, match="Rotation"):
        Slerp.init([0.0, 1.0], np.zeros((2, 4)))
