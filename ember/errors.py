"""Errors raised when traced values are used where concrete ones are needed, and when a
program fails while it runs (JAX's classes)."""

from __future__ import annotations

from typing import Any


class EmberTypeError(TypeError):
    """Base of the tracer errors; a TypeError, as in JAX."""


_FIX_CONTROL_FLOW = (
    "If this value comes from a function argument, you can mark that argument static "
    "(static_argnums / static_argnames of jit) so it is a concrete Python value at trace "
    "time; for value-dependent control flow use lax.cond, lax.switch, lax.while_loop or "
    "lax.fori_loop, or jnp.where for elementwise choices."
)


def _describe(tracer) -> str:
    aval = getattr(tracer, "aval", None)
    what = aval.str_short() if aval is not None else type(tracer).__name__
    origin = getattr(tracer, "_debug_origin", None)
    text = f"an abstract tracer value of type {what}"
    if origin:
        text += f" ({origin})"
    return text


class ConcretizationTypeError(EmberTypeError):
    """A concrete value was required but a tracer was found (e.g. a traced shape)."""

    def __init__(self, tracer, context: str = ""):
        self.tracer = tracer
        msg = ("Abstract tracer value encountered where concrete value is expected: "
               f"{_describe(tracer)}.")
        if context:
            msg += f"\n{context}"
        msg += "\n" + _FIX_CONTROL_FLOW
        super().__init__(msg)


class TracerBoolConversionError(ConcretizationTypeError):
    """``bool(x)`` on a traced value, usually an ``if`` or ``while`` on array data."""

    def __init__(self, tracer):
        EmberTypeError.__init__(
            self,
            f"Attempted boolean conversion of traced array with shape {tracer.aval.str_short()}: "
            f"{_describe(tracer)}. The truth value of a traced array is unknown while tracing, "
            "so Python `if`, `while`, `and`, `or` and `not` cannot branch on it.\n"
            + _FIX_CONTROL_FLOW)
        self.tracer = tracer


class TracerIntegerConversionError(EmberTypeError):
    """``int(x)``, ``x.__index__()`` or use as a Python index on a traced value."""

    def __init__(self, tracer):
        super().__init__(
            f"The __index__() / __int__() method was called on a traced array with shape "
            f"{tracer.aval.str_short()}: {_describe(tracer)}. A traced value cannot be used as a "
            "Python integer (for example as a list index, a range bound or a shape).\n"
            + _FIX_CONTROL_FLOW)
        self.tracer = tracer


class TracerArrayConversionError(EmberTypeError):
    """``np.asarray(x)`` on a traced value."""

    def __init__(self, tracer):
        super().__init__(
            f"The numpy.ndarray conversion method __array__() was called on a traced array "
            f"with shape {tracer.aval.str_short()}: {_describe(tracer)}. NumPy functions cannot "
            "operate on traced values: use ember.numpy (jnp) functions instead of numpy (np) "
            "inside transformed functions.")
        self.tracer = tracer


class UnexpectedTracerError(EmberTypeError):
    """A tracer escaped the transformation that created it (stored in a global, say)."""

    def __init__(self, tracer, detail: str = ""):
        msg = (f"Encountered an unexpected tracer: {_describe(tracer)}. A function transformed "
               "by ember (jit, grad, vmap, make_jaxpr, ...) leaked one of its intermediate "
               "values, for example by storing it in a global or a closure that outlived the "
               "transformation. Return the value from the transformed function instead.")
        if detail:
            msg += f"\n{detail}"
        super().__init__(msg)
        self.tracer = tracer


class NonConcreteBooleanIndexError(IndexError):
    """A boolean mask index was a tracer: its number of True entries is not known statically."""

    def __init__(self, tracer: Any):
        aval = getattr(tracer, "aval", None)
        what = aval.str_short() if aval is not None else type(tracer).__name__
        super().__init__(
            f"Array boolean indices must be concrete; got a traced boolean array of type {what}. "
            "A boolean mask selects a data-dependent number of elements, which cannot be "
            "traced. Use jnp.where(mask, x, fill) to keep the shape, or jnp.nonzero(mask, "
            "size=...) / jnp.where(mask, size=...) to get a static number of indices.")
        self.tracer = tracer



class JaxRuntimeError(RuntimeError):
    """A failure while a program ran, such as a host callback that raised (its exception is
    the ``__cause__``); JAX's name."""


class JAXTypeError(TypeError):
    """Base of ember's own TypeErrors about misuse of the API (JAX's class name)."""


class JAXIndexError(IndexError):
    """Base of ember's own IndexErrors (JAX's class name)."""


class KeyReuseError(JAXTypeError):
    """A PRNG key was used twice while ``jax_debug_key_reuse`` checks are on."""


class InconclusiveDimensionOperation(Exception):
    """A comparison or arithmetic on symbolic dimensions whose result is not determined."""


def __getattr__(name: str) -> Any:
    if name == "JaxprTypeError":  # (defined by ember.jaxpr, which imports this module's users)
        from ember.jaxpr import JaxprTypeError
        return JaxprTypeError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
