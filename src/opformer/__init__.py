"""opformer: transformer neural operators with built-in PDE data generators."""

__version__ = "0.1.0"
