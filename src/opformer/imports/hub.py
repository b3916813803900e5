"""``hf://`` sources of ``opformer import``: files of a Hugging Face Hub model repository, through
``huggingface_hub`` (an optional dependency: ``pip install 'opformer[hub]'``, imported only here and only when an
``hf://`` source is given).

A source is ``hf://OWNER/NAME[@REVISION][/PATH]`` (the Hub's own URL form; ``PATH``: a file in the repository,
absent for a whole opformer model repository), or the revision comes from ``--revision``. Files go through
huggingface_hub's cache (``HF_HUB_CACHE``, resumable downloads; ``HF_HUB_OFFLINE=1``: the cache only), and every
file of one import is taken at one commit: the revision the first file resolved to (:attr:`HubSource.commit`,
recorded in the run beside the file's SHA-256). A repository, revision or file the Hub (or, offline, the cache)
does not have is a one-line :class:`~opformer.errors.CheckpointError` naming it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType

from opformer.errors import CheckpointError, ConfigError
from opformer.extras import require

PREFIX = "hf://"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclass(frozen=True)
class HubSource:
    """A parsed ``hf://`` source: repository ``OWNER/NAME``, revision (branch, tag or commit; ``main`` if not
    given), the file's path in the repository (``""``: the repository itself) and, once a file is fetched,
    the commit the revision resolved to."""

    repo: str
    revision: str = "main"
    path: str = ""
    commit: str = ""

    def __str__(self) -> str:
        return f"{PREFIX}{self.repo}@{self.commit or self.revision}" + (f"/{self.path}" if self.path else "")


def is_hub(source: object) -> bool:
    """Whether ``source`` names a file or repository on the Hub (``hf://...``)."""
    return isinstance(source, str) and source.startswith(PREFIX)


def parse(source: str, revision: str | None = None) -> HubSource:
    """``hf://OWNER/NAME[@REV][/PATH]`` and ``--revision`` as a :class:`HubSource`; a malformed one, or two
    different revisions, is a one-line ``ConfigError``."""
    rest = source[len(PREFIX):] if is_hub(source) else source
    parts = rest.split("/", 2)
    if len(parts) < 2 or not parts[0] or not parts[1]:
        raise ConfigError(f"{source}: expected hf://OWNER/NAME[@REVISION][/PATH]")
    owner, name, path = parts[0], parts[1], parts[2] if len(parts) > 2 else ""
    name, _, pinned = name.partition("@")
    for part, what in ((owner, "owner"), (name, "repository name")):
        if not _NAME.fullmatch(part) or ".." in part:
            raise ConfigError(f"{source}: {what} {part!r} is not a Hub name (letters, digits, '-', '_', '.')")
    if pinned and revision and pinned != revision:
        raise ConfigError(f"--revision {revision}: {source} already names revision {pinned}")
    if path and any(p in ("", ".", "..") for p in path.split("/")):
        raise ConfigError(f"{source}: {path!r} is not a file path in the repository")
    return HubSource(f"{owner}/{name}", pinned or revision or "main", path)


def source_of(source: str | os.PathLike, revision: str | None = None) -> HubSource | None:
    """``source`` as a :class:`HubSource` at ``revision`` if it is ``hf://...`` (:func:`parse`); None for a local
    path, where ``--revision`` is a one-line ``ConfigError``."""
    if is_hub(source):
        return parse(str(source), revision)
    if revision is not None:
        raise ConfigError("--revision: only used with hf:// sources")
    return None


def _hub() -> ModuleType:
    return require("huggingface_hub", "hub", "hf:// sources")


def download(source: HubSource, filename: str | None = None) -> tuple[Path, HubSource]:
    """The local path of ``filename`` (default: ``source.path``) of the repository in huggingface_hub's cache,
    fetched if needed (offline: the cache only), and ``source`` with the commit it was taken at; every later
    file of the same import should be fetched with the returned source (same commit)."""
    hub = _hub()
    from huggingface_hub import constants, errors

    filename = filename or source.path
    revision = source.commit or source.revision
    offline = constants.HF_HUB_OFFLINE
    where = f"{PREFIX}{source.repo}"
    try:
        local = Path(hub.hf_hub_download(source.repo, filename, revision=revision, local_files_only=offline))
    except errors.GatedRepoError:
        raise CheckpointError(f"{where}: a gated repository: accept its terms on the Hub and log in "
                              "(hf auth login)") from None
    except errors.RepositoryNotFoundError:
        raise CheckpointError(f"{where}: no such repository on the Hub (or a private one: log in with "
                              "hf auth login)") from None
    except errors.RevisionNotFoundError:
        raise CheckpointError(f"{where}: no revision {revision!r} (a branch, tag or commit)") from None
    except errors.RemoteEntryNotFoundError:
        raise CheckpointError(f"{where}@{revision}: no file {filename!r} in the repository") from None
    except errors.LocalEntryNotFoundError:
        raise CheckpointError(_cache_miss(source.repo, revision, filename, offline)) from None
    except errors.HFValidationError as exc:
        raise ConfigError(f"{where}: {str(exc).splitlines()[0]}") from None
    except (errors.HfHubHTTPError, OSError) as exc:  # the network or the cache's disk
        raise CheckpointError(f"{where}: {filename} could not be fetched ({exc.__class__.__name__}: "
                              f"{(str(exc).strip().splitlines() or [''])[0][:160]})") from None
    # the cache keeps each file as snapshots/<commit>/<filename>
    commit = local.parents[len(Path(filename).parts) - 1].name
    return local, replace(source, commit=commit)


def _cache_miss(repo: str, revision: str, filename: str, offline: bool) -> str:
    """The one line for a file not in the cache: which of repository, revision and file the cache lacks."""
    from huggingface_hub import constants
    from huggingface_hub.file_download import repo_folder_name

    why = "offline (HF_HUB_OFFLINE=1)" if offline else "the Hub cannot be reached"
    storage = Path(constants.HF_HUB_CACHE) / repo_folder_name(repo_id=repo, repo_type="model")
    if not storage.is_dir():
        missing = f"no copy of {PREFIX}{repo} in the cache {constants.HF_HUB_CACHE}"
    elif not ((storage / "refs" / revision).is_file() or (storage / "snapshots" / revision).is_dir()):
        missing = f"revision {revision!r} of {PREFIX}{repo} is not in the cache"
    else:
        missing = f"{PREFIX}{repo}@{revision}/{filename} is not in the cache"
    return f"{missing}, and {why}: download it once online"
