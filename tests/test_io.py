"""Atomic writes: the target is replaced whole or not at all, and no temporary file is left behind."""

import os

import pytest

from opformer.io import atomic_replace, write_atomic


def test_write_atomic_replaces_the_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "a.json"
    path.write_text("old")
    write_atomic(path, "new")
    assert path.read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


def test_a_failed_write_keeps_the_old_file_and_removes_the_temporary(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("old")
    with pytest.raises(RuntimeError, match="killed"):
        with atomic_replace(path) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def test_the_temporary_is_a_hidden_sibling_with_the_given_suffix(tmp_path):
    with atomic_replace(tmp_path / "movie.gif", suffix=".gif") as tmp:
        assert tmp.parent == tmp_path and tmp.name.startswith(".movie.gif.") and tmp.suffix == ".gif"
        tmp.write_bytes(b"GIF89a")
    assert (tmp_path / "movie.gif").read_bytes() == b"GIF89a"


def test_temporaries_of_killed_writers_are_removed_by_the_next_write(tmp_path):
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    path = tmp_path / "data.h5"
    stale = [tmp_path / f".data.h5.{dead}.abcd1234.tmp", tmp_path / ".data.h5.q1w2e3r4.tmp"]  # and an old name
    alive = tmp_path / f".data.h5.{os.getppid()}.zxcv5678.tmp"  # a writer that is still running
    other = tmp_path / f".other.h5.{dead}.abcd1234.tmp"
    parts = tmp_path / ".data.h5.parts"
    parts.mkdir()
    for p in (*stale, alive, other):
        p.write_text("partial")
    write_atomic(path, "whole")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([".data.h5.parts", alive.name, other.name,
                                                                 "data.h5"])


def test_a_write_the_disk_has_no_room_for_is_refused_before_it_starts(tmp_path, monkeypatch):
    import shutil
    from collections import namedtuple

    from opformer.errors import StorageError
    from opformer.io import check_free_space

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda folder: usage(10 * 2**20, 9 * 2**20, 2**20))
    with pytest.raises(StorageError, match=r"a\.h5: needs about 14 MiB but .* has 1 MiB free"):
        check_free_space(tmp_path / "a.h5", 10 * 2**20)
    with pytest.raises(StorageError, match="needs about"):
        with atomic_replace(tmp_path / "a.h5", size=2**20):
            raise AssertionError("never reached")
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_during_the_write_is_one_line_and_keeps_the_old_file(tmp_path):
    import errno

    from opformer.errors import StorageError

    path = tmp_path / "a.txt"
    path.write_text("old")
    with pytest.raises(StorageError, match=r"a\.txt: could not be written \(No space left on device\); nothing"):
        with atomic_replace(path) as tmp:
            tmp.write_text("half")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def test_a_file_size_limit_during_an_hdf5_write_is_one_line_and_keeps_the_old_file(tmp_path):
    # h5py's OSError on EFBIG (ulimit -f, or a FAT32 disk's 4 GiB) escaped as a traceback; its text is several lines
    import errno

    from opformer.errors import StorageError

    path = tmp_path / "a.h5"
    path.write_text("old")
    message = ("Unable to extend file properly, errno = 27, error message = 'file too large' (file write failed: "
               "time = Wed Nov 25 09:32:55 2026\n, filename = 'x', errno = 27)")
    with pytest.raises(StorageError) as info:
        with atomic_replace(path) as tmp:
            tmp.write_text("half")
            raise OSError(errno.EFBIG, message)
    assert str(info.value) == f"{path}: could not be written (File too large); nothing was replaced"
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["a.h5"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs RLIMIT_FSIZE")
def test_a_write_larger_than_the_file_size_limit_is_refused_before_it_starts(tmp_path, monkeypatch):
    # under `ulimit -f` HDF5's failed write crashed the process at exit (rc 139) after the error line
    import resource

    from opformer.errors import StorageError
    from opformer.io import check_free_space

    monkeypatch.setattr(resource, "getrlimit", lambda which: (2**20, resource.RLIM_INFINITY))
    with pytest.raises(StorageError, match=r"a\.h5: needs about 14 MiB but files are limited to 1\.0 MiB here "
                                           r"\(ulimit -f\)"):
        check_free_space(tmp_path / "a.h5", 10 * 2**20)
    monkeypatch.setattr(resource, "getrlimit", lambda which: (64 * 2**20, resource.RLIM_INFINITY))
    check_free_space(tmp_path / "a.h5", 10 * 2**20)  # fits
