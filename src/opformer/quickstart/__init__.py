"""The built-in demo jobs of ``opformer quickstart``: ``burgers`` (the default, ``make demo``) and ``dpot``."""
