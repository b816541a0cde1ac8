"""``jax.scipy.stats``: probability distributions and array statistics.

Each distribution is a module (``ember.scipy.stats.norm.logpdf(x, loc, scale)``) of
functions written on ``ember.numpy`` and ``ember.scipy.special``, so they trace, jit, vmap
and differentiate; values, dtypes, weak types and edge cases (``-inf`` log-density outside
the support, NaN for invalid parameters) follow JAX.
"""

from ember.scipy.stats import bernoulli as bernoulli
from ember.scipy.stats import beta as beta
from ember.scipy.stats import betabinom as betabinom
from ember.scipy.stats import binom as binom
from ember.scipy.stats import cauchy as cauchy
from ember.scipy.stats import chi2 as chi2
from ember.scipy.stats import dirichlet as dirichlet
from ember.scipy.stats import expon as expon
from ember.scipy.stats import gamma as gamma
from ember.scipy.stats import gennorm as gennorm
from ember.scipy.stats import geom as geom
from ember.scipy.stats import gumbel_l as gumbel_l
from ember.scipy.stats import gumbel_r as gumbel_r
from ember.scipy.stats import laplace as laplace
from ember.scipy.stats import logistic as logistic
from ember.scipy.stats import multinomial as multinomial
from ember.scipy.stats import multivariate_normal as multivariate_normal
from ember.scipy.stats import nbinom as nbinom
from ember.scipy.stats import norm as norm
from ember.scipy.stats import pareto as pareto
from ember.scipy.stats import poisson as poisson
from ember.scipy.stats import t as t
from ember.scipy.stats import truncnorm as truncnorm
from ember.scipy.stats import uniform as uniform
from ember.scipy.stats import vonmises as vonmises
from ember.scipy.stats import wrapcauchy as wrapcauchy
from ember.scipy.stats._core import ModeResult as ModeResult
from ember.scipy.stats._core import mode as mode
from ember.scipy.stats._core import rankdata as rankdata
from ember.scipy.stats._core import sem as sem
from ember.scipy.stats.kde import gaussian_kde as gaussian_kde
