"""Exceptions that the CLI turns into one-line messages (no traceback)."""


class OpformerError(Exception):
    """Base class of every error opformer reports to a user."""


class ConfigError(OpformerError):
    """A config, key, value or command-line argument is invalid."""


class DataError(OpformerError):
    """A data file is missing, corrupt or does not match what was expected."""


class CheckpointError(OpformerError):
    """A checkpoint or run directory is missing, corrupt or of another model."""


class StorageError(OpformerError):
    """A file could not be written: no space left, a read-only or missing folder."""


class TrainingDiverged(OpformerError):
    """The loss became NaN or Inf."""


def given(option: str, value: object) -> str:
    """How the call that was made names a value, for the start of an error message: a command-line flag
    (``"--coverage"`` -> ``--coverage 90``) or a Python keyword (``"coverage="`` -> ``coverage=90``, strings
    quoted: ``score='sharpest'``)."""
    if option.endswith("="):
        return f"{option}{value!r}"
    return f"{option} {value}"
