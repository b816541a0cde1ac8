"""``gaussian_kde``: kernel density estimation with Gaussian kernels (JAX's pytree version of
``scipy.stats.gaussian_kde``)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ember import numpy as jnp
from ember import random
from ember._pytree import register_pytree_node_class
from ember.nn.functions import logsumexp
from ember.numpy._util import check_arraylike, promote_dtypes_inexact
from ember.scipy import linalg, special
from ember.scipy.stats._common import Array, ArrayLike

__all__ = ["gaussian_kde"]

_FIELDS = ("neff", "dataset", "weights", "covariance", "inv_cov")


@register_pytree_node_class
class gaussian_kde:  # noqa: N801  (SciPy's and JAX's name)
    """A Gaussian kernel density estimate of ``d``-dimensional data.

    A pytree (its arrays are the leaves), so it passes through ``jit``, ``vmap`` and
    ``grad``; the instance is immutable.

    Args:
        dataset: the data, shape ``(d, n)`` (a 1-D array is ``n`` one-dimensional points).
        bw_method: ``'scott'`` (default), ``'silverman'``, a scalar bandwidth factor, or a
            callable taking the ``gaussian_kde`` and returning the factor.
        weights: optional weights of the ``n`` points (normalized to sum to 1).

    Example:
        >>> kde = ember.scipy.stats.gaussian_kde(jnp.array([0., 1., 2., 4.]))
        >>> kde.evaluate(jnp.array([1.]))  # the estimated density at 1
    """

    __slots__ = _FIELDS

    def __init__(self, dataset: ArrayLike, bw_method: Any = None,
                 weights: ArrayLike | None = None):
        check_arraylike("gaussian_kde", dataset)
        dataset = jnp.atleast_2d(dataset)
        if jnp.issubdtype(dataset.dtype, np.complexfloating):
            raise NotImplementedError("gaussian_kde does not support complex data")
        if not dataset.size > 1:
            raise ValueError("gaussian_kde: `dataset` input should have multiple elements.")
        d, n = dataset.shape
        if weights is not None:
            check_arraylike("gaussian_kde", weights)
            dataset, weights = promote_dtypes_inexact(dataset, weights)
            weights = jnp.atleast_1d(weights)
            weights = weights / jnp.sum(weights)
            if weights.ndim != 1:
                raise ValueError("gaussian_kde: `weights` input should be one-dimensional.")
            if len(weights) != n:
                raise ValueError("gaussian_kde: `weights` input should be of length n")
        else:
            dataset, = promote_dtypes_inexact(dataset)
            weights = jnp.full(n, 1.0 / n, dtype=dataset.dtype)
        self._set("dataset", dataset)
        self._set("weights", weights)
        neff = self._set("neff", 1 / jnp.sum(weights ** 2))
        if bw_method is None or (isinstance(bw_method, str) and bw_method == "scott"):
            factor = jnp.power(neff, -1.0 / (d + 4))
        elif isinstance(bw_method, str) and bw_method == "silverman":
            factor = jnp.power(neff * (d + 2) / 4.0, -1.0 / (d + 4))
        elif not isinstance(bw_method, str) and jnp.isscalar(bw_method):
            factor = bw_method
        elif callable(bw_method):
            factor = bw_method(self)
        else:
            raise ValueError("`bw_method` should be 'scott', 'silverman', a scalar, or a "
                             "callable.")
        data_cov = jnp.atleast_2d(jnp.cov(dataset, rowvar=1, bias=False, aweights=weights))
        self._set("covariance", data_cov * factor ** 2)
        self._set("inv_cov", jnp.linalg.inv(data_cov) / factor ** 2)

    def _set(self, name: str, value: Any) -> Any:
        object.__setattr__(self, name, value)
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot assign to field {name!r} of a gaussian_kde")

    def tree_flatten(self) -> tuple[tuple, None]:
        return tuple(getattr(self, f) for f in _FIELDS), None

    @classmethod
    def tree_unflatten(cls, aux_data: Any, children: Any) -> gaussian_kde:
        del aux_data
        kde = cls.__new__(cls)
        for f, v in zip(_FIELDS, children):
            kde._set(f, v)
        return kde

    @property
    def d(self) -> int:
        """The dimension of the data."""
        return self.dataset.shape[0]

    @property
    def n(self) -> int:
        """The number of data points."""
        return self.dataset.shape[1]

    def _points(self, points: ArrayLike) -> Array:
        if jnp.issubdtype(jnp.result_type(points), np.complexfloating):
            raise NotImplementedError("gaussian_kde does not support complex coordinates")
        points = jnp.atleast_2d(points)
        d, m = points.shape
        if d != self.d:
            if d == 1 and m == self.d:
                return jnp.reshape(points, (self.d, 1))
            raise ValueError(f"points have dimension {d}, dataset has dimension {self.d}")
        return points

    def _log_kernels(self, points: Array) -> tuple[Array, Array]:
        """log of each kernel (rows: query points, columns: data points) and the weights."""
        data, w, xi, prec = promote_dtypes_inexact(self.dataset.T, self.weights, points.T,
                                                   self.inv_cov)
        # With prec = W W^T, the Mahalanobis distance is the Euclidean one after @ W.
        whiten = jnp.linalg.cholesky(prec)
        data, xi = data @ whiten, xi @ whiten
        log_norm = (jnp.sum(jnp.log(jnp.diag(whiten)))
                    - 0.5 * self.d * math.log(2 * math.pi))
        sq = jnp.sum(jnp.square(xi[:, None, :] - data[None, :, :]), axis=-1)
        return log_norm - 0.5 * sq, w

    def evaluate(self, points: ArrayLike) -> Array:
        """The density estimate at ``points`` (shape ``(d, m)``; returns ``(m,)``).

        Example:
            >>> kde.evaluate(jnp.array([[0., 1.]]))
        """
        check_arraylike("evaluate", points)
        arg, w = self._log_kernels(self._points(points))
        return jnp.sum(w * jnp.exp(arg), axis=1)

    def __call__(self, points: ArrayLike) -> Array:
        """Same as :meth:`evaluate`."""
        return self.evaluate(points)

    def pdf(self, x: ArrayLike) -> Array:
        """Same as :meth:`evaluate`."""
        return self.evaluate(x)

    def logpdf(self, x: ArrayLike) -> Array:
        """Log of the density estimate at ``x``, computed with logsumexp.

        Example:
            >>> kde.logpdf(jnp.array([[0., 1.]]))
        """
        check_arraylike("logpdf", x)
        arg, w = self._log_kernels(self._points(x))
        return logsumexp(jnp.log(w) + arg, axis=1)

    def _convolve(self, chol: Any, norm: Array, target: Array, weights: Array,
                  means: Array) -> Array:
        """``norm * sum_j w_j exp(-(t_j - m)^T C^-1 (t_j - m) / 2)`` for each column m."""
        diff = target[:, None, :] - means[:, :, None]  # (d, means, targets)
        flat = diff.reshape(self.d, -1)
        alpha = linalg.cho_solve(chol, flat).reshape(diff.shape)
        arg = 0.5 * jnp.sum(diff * alpha, axis=0)
        return norm * jnp.sum(jnp.exp(-arg) * weights, axis=-1)

    def _chol(self, cov: Array) -> tuple[Any, Array]:
        chol = linalg.cho_factor(self.covariance + cov)
        norm = 1.0 / (jnp.sqrt(2 * np.pi) ** self.d * jnp.prod(jnp.diag(chol[0])))
        return chol, norm

    def integrate_gaussian(self, mean: ArrayLike, cov: ArrayLike) -> Array:
        """The integral of the estimate times a Gaussian with ``mean`` and ``cov``.

        Example:
            >>> kde.integrate_gaussian(jnp.array([0.]), jnp.array([[1.]]))
        """
        mean = jnp.atleast_1d(jnp.squeeze(mean))
        cov = jnp.atleast_2d(cov)
        if mean.shape != (self.d,):
            raise ValueError(f"mean does not have dimension {self.d}")
        if cov.shape != (self.d, self.d):
            raise ValueError(f"covariance does not have dimension {self.d}")
        chol, norm = self._chol(cov)
        return self._convolve(chol, norm, self.dataset, self.weights, mean[:, None])[0]

    def integrate_box_1d(self, low: ArrayLike, high: ArrayLike) -> Array:
        """The estimate's probability of ``[low, high]`` (one-dimensional data only).

        Example:
            >>> kde.integrate_box_1d(-1., 1.)
        """
        if self.d != 1:
            raise ValueError("integrate_box_1d() only handles 1D pdfs")
        if np.ndim(low) != 0 or np.ndim(high) != 0:
            raise ValueError("the limits of integration in integrate_box_1d must be scalars")
        sigma = jnp.squeeze(jnp.sqrt(self.covariance))
        lo = jnp.squeeze((low - self.dataset) / sigma)
        hi = jnp.squeeze((high - self.dataset) / sigma)
        return jnp.sum(self.weights * (special.ndtr(hi) - special.ndtr(lo)))

    def integrate_kde(self, other: gaussian_kde) -> Array:
        """The integral of the product of this estimate and ``other``.

        Example:
            >>> kde.integrate_kde(kde)
        """
        if other.d != self.d:
            raise ValueError("KDEs are not the same dimensionality")
        chol, norm = self._chol(other.covariance)
        small, large = (self, other) if self.n < other.n else (other, self)
        per_point = self._convolve(chol, norm, large.dataset, large.weights, small.dataset)
        return jnp.sum(per_point * small.weights)

    def resample(self, key: Array, shape: tuple[int, ...] = ()) -> Array:
        """Draws from the estimate: a data point chosen by weight plus kernel noise.

        Returns:
            Samples of shape ``(d, *shape)``.

        Example:
            >>> kde.resample(ember.random.key(0), (5,))
        """
        ind_key, eps_key = random.split(key)
        ind = random.choice(ind_key, self.n, shape=shape, p=self.weights)
        eps = random.multivariate_normal(eps_key, jnp.zeros(self.d, self.covariance.dtype),
                                         self.covariance, shape=shape,
                                         dtype=self.dataset.dtype).T
        return self.dataset[:, ind] + eps

    def integrate_box(self, low_bounds: Any, high_bounds: Any, maxpts: Any = None) -> Array:
        """Not supported: only one-dimensional boxes (:meth:`integrate_box_1d`)."""
        del low_bounds, high_bounds, maxpts
        raise NotImplementedError(
            "only 1D box integrations are supported; use `integrate_box_1d`")

    def set_bandwidth(self, bw_method: str | Callable | None = None) -> None:
        """Not supported: the estimate is immutable."""
        del bw_method
        raise NotImplementedError(
            "dynamically changing the bandwidth method is not supported")
