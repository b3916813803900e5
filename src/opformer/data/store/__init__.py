"""The opformer HDF5 data-set format: its schema (:mod:`.schema`), writing (:mod:`.write`, atomic through
:mod:`opformer.io`), checked reading (:mod:`.read`) and integrity (:mod:`.integrity`).

An *operator* data set holds input/target pairs on one grid (see docs/data-format.md)::

    /input   (sample, *spatial, in_channels)   float32, one sample per chunk (see :func:`chunk_shape`)
    /target  (sample, *spatial, out_channels)  float32, one sample per chunk (absent in a file of inputs
                                               awaiting prediction)
    attrs: format, format_version, kind, pde (JSON), solver (JSON), domain (JSON), seed,
           opformer_version, created, input_channels (JSON), target_channels (JSON), attrs_sha256

A *trajectory* data set holds solutions of a time-dependent PDE, frame by frame::

    /fields  (sample, time, *spatial, channels)  float32, one frame per chunk (see :func:`chunk_shape`)
    /times   (time,)                             float64, strictly increasing
    attrs: as above, with channels (JSON) in place of input_channels/target_channels

Integrity. Files are written with HDF5's ``fletcher32`` filter on every dataset (each chunk carries a checksum
HDF5 checks whenever it reads the chunk) and in the file format of HDF5 1.10 (``libver`` :data:`LIBVER`), whose
superblock, object headers (they hold the attributes) and chunk indexes carry checksums too. Attributes are
fixed-length strings (a variable-length string lives in HDF5's global heap, which has no checksum) and
``attrs_sha256`` holds a digest of all the others (HDF5 stores an attribute above about 4 KiB outside its
checked metadata). Every byte a read depends on is therefore checked as it is read, at no extra pass; the
whole-file SHA-256 in the user block is checked by :func:`verify_file` (``opformer verify``, and after every
write).

A *mesh* data set (:mod:`.mesh`) holds samples on meshes or point clouds of varying point counts: the rows of
every sample one after another (``/points``, ``/weights``, ``/point_input``, ``/point_target`` or
``/point_fields``, ``/cells``) and ``/offsets`` where each sample's begin (docs/data-format.md). Files written before (no ``fletcher32``) are hashed whole on their first open in a process, as before.
"""

from opformer.data.store.integrity import CHECKSUM_MAGIC, USERBLOCK, verify_checksum, verify_file
from opformer.data.store.integrity import file_digest as _file_digest
from opformer.data.store.read import DataFile, open_dataset_file, read_arrays, read_block, read_fields, read_info
from opformer.data.store.schema import (ATTRS_DIGEST, COMMON_ATTRS, FORMAT_NAME, FORMAT_VERSION, JSON_ATTRS, KINDS,
                                        LIBVER, MAX_CHUNK_BYTES, REQUIRED_ATTRS, SAMPLE_DATASETS, TRAJECTORY_ATTRS,
                                        DatasetInfo, chunk_shape)
from opformer.data.store.write import WRITE_BYTES, Fill, Streamed, write_operator_dataset, write_trajectory_dataset
from opformer.data.store.mesh import MeshFile, read_mesh_samples, write_mesh_dataset

#: :data:`MAX_CHUNK_BYTES` under the name this module has always exported.
CHUNK_BYTES = MAX_CHUNK_BYTES

__all__ = ["ATTRS_DIGEST", "CHECKSUM_MAGIC", "CHUNK_BYTES", "COMMON_ATTRS", "FORMAT_NAME", "FORMAT_VERSION",
           "JSON_ATTRS", "KINDS", "LIBVER", "MAX_CHUNK_BYTES", "REQUIRED_ATTRS", "SAMPLE_DATASETS", "TRAJECTORY_ATTRS",
           "USERBLOCK", "WRITE_BYTES", "DataFile", "MeshFile", "read_mesh_samples", "write_mesh_dataset", "DatasetInfo", "Fill", "Streamed", "chunk_shape", "open_dataset_file", "read_arrays",
           "read_block", "read_fields", "read_info", "verify_checksum", "verify_file", "write_operator_dataset",
           "write_trajectory_dataset", "_file_digest"]
