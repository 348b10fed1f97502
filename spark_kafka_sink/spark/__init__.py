"""The Spark layer: the only package that imports pyspark (see docs/ARCHITECTURE.md).

Importing it checks the PySpark version first (:mod:`.compat`: 3.4 or newer), so an older one
fails with that, not with a missing name further on."""

from .compat import require_supported

require_supported()
