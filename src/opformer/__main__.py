"""``python -m opformer``, as under ``torchrun -m opformer train ...``: the ``opformer`` command."""

from opformer.cli import run

run()
