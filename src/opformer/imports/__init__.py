"""``opformer import``: weights trained by another code base, or a model repository that ``opformer export``
wrote, as an opformer run directory. The formats are in :mod:`opformer.imports.formats` (light: the CLI's parser
reads it), the conversion and the run directory in :mod:`opformer.imports.convert`, one module per format."""
