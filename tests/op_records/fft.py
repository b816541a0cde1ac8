"""Records for jnp.fft (NumPy's numpy.fft as the reference, in single precision)."""

import numpy as np

import ember.numpy as jnp
from tests.op_records.base import OpRecord

F32 = (np.dtype("float32"),)
C64 = np.dtype("complex64")


def _c64(fn):
    return lambda *a: fn(*a).astype(C64)


def _f32(fn):
    return lambda *a: fn(*a).astype(np.float32)


RECORDS = [
    OpRecord("jnp.fft.fft", lambda x: jnp.fft.fft(x, 6), _c64(lambda x: np.fft.fft(x, 6)),
             F32, (((5,),), ((2, 4),)), differentiable=True, tol=1e-4),
    OpRecord("jnp.fft.ifft_ortho", lambda x: jnp.fft.ifft(x, norm="ortho"),
             _c64(lambda x: np.fft.ifft(x, norm="ortho")), F32, (((2, 4),),),
             differentiable=True, tol=1e-4),
    OpRecord("jnp.fft.rfft", lambda x: jnp.fft.rfft(x, axis=0),
             _c64(lambda x: np.fft.rfft(x, axis=0)), F32, (((5, 2),), ((4,),)),
             differentiable=True, tol=1e-4),
    OpRecord("jnp.fft.irfft", lambda x: jnp.fft.irfft(x, 7),
             _f32(lambda x: np.fft.irfft(x, 7)), F32, (((2, 4),),), differentiable=True,
             tol=1e-4),
    OpRecord("jnp.fft.rfftn", lambda x: jnp.fft.rfftn(x),
             _c64(lambda x: np.fft.rfftn(x)), F32, (((2, 3, 4),),), differentiable=True,
             tol=1e-4),
    OpRecord("jnp.fft.irfft2", lambda x: jnp.fft.irfft2(x, norm="forward"),
             _f32(lambda x: np.fft.irfft2(x, norm="forward")), F32, (((3, 4),),),
             differentiable=True, tol=1e-4),
]

RECORDS += [
    OpRecord("jnp.fft.ifft2", lambda x: jnp.fft.ifft2(x), _c64(lambda x: np.fft.ifft2(x)),
             F32, (((3, 4),),), differentiable=True, tol=1e-4),
    OpRecord("jnp.fft.ifftn", lambda x: jnp.fft.ifftn(x, axes=(0, 2)),
             _c64(lambda x: np.fft.ifftn(x, axes=(0, 2))), F32, (((2, 3, 4),),),
             differentiable=True, tol=1e-4),
    OpRecord("jnp.fft.irfftn", lambda x: jnp.fft.irfftn(x, s=(3, 6), axes=(0, 1)),
             _f32(lambda x: np.fft.irfftn(x, s=(3, 6), axes=(0, 1))), F32, (((3, 4),),),
             differentiable=True, tol=1e-4),
    OpRecord("jnp.fft.hfft", lambda x: jnp.fft.hfft(x, 6), _f32(lambda x: np.fft.hfft(x, 6)),
             F32, (((4,),), ((2, 4),)), differentiable=True, tol=1e-4),
    OpRecord("jnp.fft.ihfft", lambda x: jnp.fft.ihfft(x), _c64(lambda x: np.fft.ihfft(x)),
             F32, (((5,),), ((2, 4),)), differentiable=True, tol=1e-4),
    OpRecord("jnp.fft.fftshift", lambda x: jnp.fft.fftshift(x), np.fft.fftshift, F32,
             (((5,),), ((2, 4),)), differentiable=True),
    OpRecord("jnp.fft.ifftshift", lambda x: jnp.fft.ifftshift(x, axes=0),
             lambda x: np.fft.ifftshift(x, axes=0), F32, (((5,),), ((3, 4),)),
             differentiable=True),
]
