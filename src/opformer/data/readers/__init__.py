"""Readers of published data-set layouts (``opformer convert``): one module per family, the registry in
:mod:`opformer.data.readers.registry`, the writing in :mod:`opformer.data.convert`."""
