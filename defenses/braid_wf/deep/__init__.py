"""Deep-learning website-fingerprinting attacks as published: Deep
Fingerprinting (DF), Tik-Tok and Robust Fingerprinting (RF), in JAX.

Why JAX: its PyPI wheels are CPU-only by default (jax + jaxlib + optax are
about 90 MB), where PyTorch's Linux wheel pulls several GB of CUDA
libraries; XLA compiles each network once into fused CPU code, which is what
makes training them on a 2-core machine practical; and the same code runs on
a GPU when the ``jax[cuda]`` wheel is installed instead.

They are an optional extra (``pip install -r defenses/requirements-deep.txt``,
or the ``wf-deep`` extra of braid's distribution). ``inputs`` needs only
numpy; ``models`` and ``train`` need JAX and say how to get it when it is
missing.
"""

from __future__ import annotations

INSTALL_HINT = ("the deep WF attacks need JAX: pip install -r defenses/requirements-deep.txt "
                "(or pip install 'braid[wf-deep]')")


def require_jax() -> None:
    """Raise ImportError with the install command when JAX is missing."""
    try:
        import jax  # noqa: F401
        import optax  # noqa: F401
    except ImportError as err:
        raise ImportError(INSTALL_HINT) from err
