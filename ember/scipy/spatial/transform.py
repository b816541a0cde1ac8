"""3-D rotations stored as unit quaternions ``(x, y, z, w)`` (scalar last), with JAX's
``jax.scipy.spatial.transform`` interface. Batched rotations are quaternions of shape
``(..., 4)``; the conversions work on the trailing axis so they vectorize directly."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

import ember.numpy as jnp


def _norm(v):
    return jnp.sqrt(jnp.sum(v * v, axis=-1))


def _normalize(q):
    return q / _norm(q)[..., None]


def _compose(p, q):
    """The quaternion product p q (apply q, then p)."""
    pv, qv = p[..., :3], q[..., :3]
    pw, qw = p[..., 3:], q[..., 3:]
    vec = pw * qv + qw * pv + jnp.cross(pv, qv)
    return jnp.concatenate([vec, pw * qw - jnp.sum(pv * qv, axis=-1, keepdims=True)], -1)


def _as_matrix(q):
    x, y, z, w = (q[..., i] for i in range(4))
    rows = [[x * x - y * y - z * z + w * w, 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), -x * x + y * y - z * z + w * w, 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), -x * x - y * y + z * z + w * w]]
    return jnp.stack([jnp.stack(r, -1) for r in rows], -2)


def _from_matrix(m):
    m = jnp.asarray(m)
    tr = m[..., 0, 0] + m[..., 1, 1] + m[..., 2, 2]
    e = lambda i, j: m[..., i, j]
    # four algebraically equal formulas; the one with the largest leading term is stable
    rows = [[1 - tr + 2 * e(0, 0), e(1, 0) + e(0, 1), e(2, 0) + e(0, 2), e(2, 1) - e(1, 2)],
            [e(0, 1) + e(1, 0), 1 - tr + 2 * e(1, 1), e(2, 1) + e(1, 2), e(0, 2) - e(2, 0)],
            [e(0, 2) + e(2, 0), e(1, 2) + e(2, 1), 1 - tr + 2 * e(2, 2), e(1, 0) - e(0, 1)],
            [e(2, 1) - e(1, 2), e(0, 2) - e(2, 0), e(1, 0) - e(0, 1), 1 + tr]]
    cands = jnp.stack([jnp.stack(r, -1) for r in rows], -2)
    choice = jnp.argmax(jnp.stack([e(0, 0), e(1, 1), e(2, 2), tr], -1), axis=-1)
    q = jnp.take_along_axis(cands, choice[..., None, None], axis=-2)[..., 0, :]
    return _normalize(q)


def _as_rotvec(q, degrees):
    q = jnp.where(q[..., 3:] < 0, -q, q)  # w >= 0: the angle lies in [0, pi]
    angle = 2 * jnp.arctan2(_norm(q[..., :3]), q[..., 3])
    a2 = angle * angle
    small = 2 + a2 / 12 + 7 * a2 * a2 / 2880  # angle / sin(angle / 2) near 0
    scale = jnp.where(angle <= 1e-3, small, angle / jnp.sin(angle / 2))
    if degrees:
        scale = jnp.rad2deg(scale)
    return scale[..., None] * q[..., :3]


def _from_rotvec(v, degrees):
    v = jnp.asarray(v)
    if degrees:
        v = jnp.deg2rad(v)
    angle = _norm(v)
    a2 = angle * angle
    small = 0.5 - a2 / 48 + a2 * a2 / 3840  # sin(angle / 2) / angle near 0
    safe = jnp.where(angle <= 1e-3, 1.0, angle)
    scale = jnp.where(angle <= 1e-3, small, jnp.sin(safe / 2) / safe)
    return jnp.concatenate([scale[..., None] * v, jnp.cos(angle / 2)[..., None]], -1)


def _elementary(axis: int, angle):
    cols = [jnp.zeros_like(angle)] * 3 + [jnp.cos(angle / 2)]
    cols[axis] = jnp.sin(angle / 2)
    return jnp.stack(cols, -1)


def _parse_seq(seq: str, fn: str, exact3: bool) -> tuple[list[int], bool]:
    if not isinstance(seq, str):
        raise TypeError(f"{fn}: seq must be a string, got {seq!r}")
    if exact3 and len(seq) != 3:
        raise ValueError(f"Expected 3 axes, got {seq}.")
    if not 1 <= len(seq) <= 3:
        raise ValueError("Expected axis specification to be a non-empty string of upto 3 "
                         f"characters, got {seq}")
    intrinsic = re.match(r"^[XYZ]{1,3}$", seq) is not None
    if not intrinsic and re.match(r"^[xyz]{1,3}$", seq) is None:
        raise ValueError("Expected axes from `seq` to be from ['x', 'y', 'z'] or "
                         f"['X', 'Y', 'Z'], got {seq}")
    if any(a == b for a, b in zip(seq, seq[1:])):
        raise ValueError(f"Expected consecutive axes to be different, got {seq}")
    return ["xyz".index(c) for c in seq.lower()], intrinsic


def _as_euler(q, axes: list[int], intrinsic: bool, degrees: bool):
    # Bernardes & Viollet (2022): Euler angles of any sequence straight from the quaternion.
    if intrinsic:
        axes = axes[::-1]
    i, j, k = axes
    symmetric = i == k
    if symmetric:
        k = 3 - i - j
    sign = (i - j) * (j - k) * (k - i) // 2
    qi, qj, qk, qw = q[..., i], q[..., j], q[..., k], q[..., 3]
    if symmetric:
        a, b, c, d = qw, qi, qj, qk * sign
    else:
        a, b, c, d = qw - qj, qi + qk * sign, qj + qw, qk * sign - qi
    middle = 2 * jnp.arctan2(jnp.hypot(c, d), jnp.hypot(a, b))
    half_sum, half_diff = jnp.arctan2(b, a), jnp.arctan2(d, c)
    eps = 1e-7
    gimbal_zero = jnp.abs(middle) <= eps
    regular = ~gimbal_zero & (jnp.abs(middle - np.pi) > eps)
    # gimbal lock: the whole rotation goes to the first angle, the third is 0
    locked = jnp.where(gimbal_zero, 2 * half_sum, 2 * half_diff * (1 if intrinsic else -1))
    first, third = half_sum - half_diff, half_sum + half_diff
    if intrinsic:
        first, third = third, first
    ang0 = jnp.where(regular, first, locked)
    ang2 = jnp.where(regular, third, 0.0)
    if not symmetric:
        if intrinsic:
            ang0 = ang0 * sign
        else:
            ang2 = ang2 * sign
        middle = middle - np.pi / 2
    angles = jnp.stack([ang0, middle, ang2], -1)
    angles = (angles + np.pi) % (2 * np.pi) - np.pi
    return jnp.rad2deg(angles) if degrees else angles


class Rotation(NamedTuple):
    """Rotation(s) in 3 dimensions, held as unit quaternions (a pytree).

    Example:
        >>> r = Rotation.from_euler("z", 90, degrees=True)
        >>> r.apply(jnp.array([1.0, 0.0, 0.0])).round(5)
        Array([0., 1., 0.], dtype=float32)
    """

    quat: Any

    @classmethod
    def concatenate(cls, rotations: Sequence[Rotation]) -> Rotation:
        """The rotations of a sequence of (batched) ``Rotation`` objects, in one."""
        return cls(jnp.concatenate([r.quat for r in rotations]))

    @classmethod
    def from_euler(cls, seq: str, angles, degrees: bool = False) -> Rotation:
        """From Euler angles about the axes of ``seq`` (``"xyz"`` extrinsic, ``"XYZ"``
        intrinsic); ``angles`` has shape ``(..., len(seq))`` (or is a scalar for one axis)."""
        axes, intrinsic = _parse_seq(seq, "from_euler", exact3=False)
        angles = jnp.atleast_1d(jnp.asarray(angles))
        if not jnp.issubdtype(angles.dtype, jnp.inexact):
            angles = angles.astype(float)
        if len(axes) == 1 and angles.shape[-1] != 1:
            angles = angles[..., None]
        if angles.shape[-1] != len(axes):
            raise ValueError(f"from_euler: expected angles with last dimension {len(axes)} "
                             f"for seq {seq!r}, got shape {angles.shape}")
        if degrees:
            angles = jnp.deg2rad(angles)
        q = _elementary(axes[0], angles[..., 0])
        for n, axis in enumerate(axes[1:], 1):
            e = _elementary(axis, angles[..., n])
            q = _compose(q, e) if intrinsic else _compose(e, q)
        return cls(q)

    @classmethod
    def from_matrix(cls, matrix) -> Rotation:
        """From rotation matrices, shape ``(..., 3, 3)``."""
        return cls(_from_matrix(matrix))

    @classmethod
    def from_mrp(cls, mrp) -> Rotation:
        """From Modified Rodrigues Parameters, shape ``(..., 3)``."""
        mrp = jnp.asarray(mrp)
        s = jnp.sum(mrp * mrp, axis=-1, keepdims=True) + 1
        return cls(jnp.concatenate([2 * mrp, 2 - s], -1) / s)

    @classmethod
    def from_quat(cls, quat) -> Rotation:
        """From quaternions ``(x, y, z, w)``, shape ``(..., 4)`` (normalized here)."""
        return cls(_normalize(jnp.asarray(quat)))

    @classmethod
    def from_rotvec(cls, rotvec, degrees: bool = False) -> Rotation:
        """From rotation vectors (axis times angle), shape ``(..., 3)``."""
        return cls(_from_rotvec(rotvec, degrees))

    @classmethod
    def identity(cls, num: int | None = None, dtype=float) -> Rotation:
        """The identity rotation (``num`` of them when given)."""
        q = jnp.array([0.0, 0.0, 0.0, 1.0], dtype=dtype)
        return cls(q if num is None else jnp.tile(q, (num, 1)))

    @classmethod
    def random(cls, random_key, num: int | None = None) -> Rotation:
        """Uniformly distributed rotations (normalized Gaussian quaternions) from a PRNG key.
        (JAX 0.10.2 raises NotImplementedError here.)"""
        from ember import random
        shape = (4,) if num is None else (num, 4)
        return cls.from_quat(random.normal(random_key, shape))

    def __getitem__(self, indexer) -> Rotation:
        if self.single:
            raise TypeError("Single rotation is not subscriptable.")
        return Rotation(self.quat[indexer])

    def __len__(self) -> int:
        if self.single:
            raise TypeError("Single rotation has no len().")
        return self.quat.shape[0]

    def __mul__(self, other: Rotation) -> Rotation:
        """The composition: ``(p * q).apply(v) == p.apply(q.apply(v))``."""
        if not isinstance(other, Rotation):
            return NotImplemented
        return Rotation.from_quat(_compose(self.quat, other.quat))

    def apply(self, vectors, inverse: bool = False):
        """Rotates ``vectors`` (shape ``(..., 3)``), or applies the inverse rotation."""
        m = self.as_matrix()
        if inverse:
            m = jnp.swapaxes(m, -1, -2)
        return jnp.einsum("...ij,...j->...i", m, jnp.asarray(vectors))

    def as_euler(self, seq: str, degrees: bool = False):
        """Euler angles about the three axes of ``seq``, shape ``(..., 3)``."""
        axes, intrinsic = _parse_seq(seq, "as_euler", exact3=True)
        return _as_euler(self.quat, axes, intrinsic, degrees)

    def as_matrix(self):
        """Rotation matrices, shape ``(..., 3, 3)``."""
        return _as_matrix(self.quat)

    def as_mrp(self):
        """Modified Rodrigues Parameters (the shorter rotation), shape ``(..., 3)``."""
        q = self.quat
        sign = jnp.where(q[..., 3:] < 0, -1.0, 1.0)
        return sign * q[..., :3] / (1 + sign * q[..., 3:])

    def as_rotvec(self, degrees: bool = False):
        """Rotation vectors, angle in [0, pi], shape ``(..., 3)``."""
        return _as_rotvec(self.quat, degrees)

    def as_quat(self, canonical: bool = False, scalar_first: bool = False):
        """Quaternions ``(x, y, z, w)`` (``(w, x, y, z)`` with ``scalar_first``); with
        ``canonical`` the one of q, -q whose first non-zero of (w, x, y, z) is positive."""
        q = self.quat
        if canonical:
            neg, undecided = q[..., 3] < 0, q[..., 3] == 0
            for c in range(3):
                neg = neg | (undecided & (q[..., c] < 0))
                undecided = undecided & (q[..., c] == 0)
            q = jnp.where(neg[..., None], -q, q)
        return jnp.roll(q, 1, axis=-1) if scalar_first else q

    def inv(self) -> Rotation:
        """The inverse rotation(s)."""
        return Rotation(self.quat * jnp.array([-1, -1, -1, 1], dtype=self.quat.dtype))

    def magnitude(self):
        """The rotation angle(s) in radians, in [0, pi]."""
        q = self.quat
        return 2 * jnp.arctan2(_norm(q[..., :3]), jnp.abs(q[..., 3]))

    def mean(self, weights=None) -> Rotation:
        """The (weighted) mean rotation: the dominant eigenvector of sum w q q^T."""
        q = self.quat
        w = (jnp.ones(q.shape[0], q.dtype) if weights is None
             else jnp.asarray(weights, dtype=q.dtype))
        if w.ndim != 1:
            raise ValueError(f"Expected `weights` to be 1 dimensional, got shape {w.shape}.")
        if w.shape[0] != len(self):
            raise ValueError("Expected `weights` to have number of values equal to number of "
                             f"rotations, got {w.shape[0]} values and {len(self)} rotations.")
        _, v = jnp.linalg.eigh(jnp.dot(w[None, :] * q.T, q))
        return Rotation(v[:, -1])

    @property
    def single(self) -> bool:
        """Whether this holds one rotation (not a batch)."""
        return self.quat.ndim == 1


class Slerp(NamedTuple):
    """Spherical linear interpolation between key rotations at increasing times.

    Example:
        >>> keys = Rotation.from_euler("z", jnp.array([0.0, 90.0]), degrees=True)
        >>> Slerp.init(jnp.array([0.0, 1.0]), keys)(0.5).magnitude().round(4)
        Array(0.7854, dtype=float32)
    """

    times: Any
    timedelta: Any
    rotations: Rotation
    rotvecs: Any

    @classmethod
    def init(cls, times, rotations: Rotation) -> Slerp:
        """Key ``rotations`` (at least 2) at ``times`` (1-D, increasing)."""
        if not isinstance(rotations, Rotation):
            raise TypeError("`rotations` must be a `Rotation` instance.")
        if rotations.single or len(rotations) == 1:
            raise ValueError("`rotations` must be a sequence of at least 2 rotations.")
        times = jnp.asarray(times, dtype=rotations.quat.dtype)
        if times.ndim != 1:
            raise ValueError("Expected times to be specified in a 1 dimensional array, got "
                             f"{times.ndim} dimensions.")
        if times.shape[0] != len(rotations):
            raise ValueError("Expected number of rotations to be equal to number of "
                             f"timestamps given, got {len(rotations)} rotations and "
                             f"{times.shape[0]} timestamps.")
        start = Rotation(rotations.quat[:-1])
        steps = (start.inv() * Rotation(rotations.quat[1:])).as_rotvec()
        return cls(times, jnp.diff(times), start, steps)

    def __call__(self, times) -> Rotation:
        """The interpolated rotation(s) at ``times`` (a scalar or 1-D)."""
        t = jnp.asarray(times, dtype=self.times.dtype)
        if t.ndim > 1:
            raise ValueError("`times` must be at most 1-dimensional.")
        single = t.ndim == 0
        t = jnp.atleast_1d(t)
        seg = jnp.maximum(jnp.searchsorted(self.times, t) - 1, 0)
        frac = (t - self.times[seg]) / self.timedelta[seg]
        out = self.rotations[seg] * Rotation.from_rotvec(self.rotvecs[seg] * frac[:, None])
        return out[0] if single else out
