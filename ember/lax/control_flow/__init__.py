"""Structured control flow with JAX's names and rules: ``cond``/``switch``
(``conditionals``), ``while_loop`` (``while_loop``), ``scan``/``map``/``fori_loop``
(``scan``). Each primitive holds its functions as closed jaxprs traced at the call
(``common``); ``ember.lax`` re-exports the public functions."""
