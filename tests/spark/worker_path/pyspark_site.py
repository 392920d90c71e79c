"""Test-only: Spark's Python processes import the installed pyspark, not its ``pyspark.zip``. Never imported by
lakefmt.

Spark puts ``pyspark.zip`` and py4j's zip first on the path of every Python process it starts: the executors'
daemon and workers, and the driver-side processes that look up, create and plan a Python data source, run a
streaming source and commit a write. Python caches no bytecode for what it imports from a zip, so every one of
those processes compiled the pyspark modules it imports, about 1.2 s of CPU each on a 2-core test machine, and a
streaming query starts several. With pip's pyspark both zips sit inside the installed packages, which hold the
same files; this module, imported at start-up by the ``sitecustomize`` beside it (the tests put this folder on
``PYTHONPATH``, and Spark passes it on), takes the zips off ``sys.path`` when those installed packages are there,
so the processes import the installed copies with their cached bytecode. Nothing else changes; a Spark
installation of another kind (``SPARK_HOME/python/lib``) is left as it is.
"""

from __future__ import annotations

import os
import sys


def _installed_zip(entry: str) -> bool:
    """``entry`` is ``<site>/pyspark/python/lib/{pyspark,py4j-*}.zip``, with ``<site>`` on the path and both
    packages installed there."""
    name = os.path.basename(entry)
    if not (name == "pyspark.zip" or (name.startswith("py4j-") and name.endswith(".zip"))):
        return False
    lib = os.path.dirname(entry)
    package = os.path.dirname(os.path.dirname(lib))
    site = os.path.dirname(package)
    return (
        os.path.basename(package) == "pyspark"
        and os.path.basename(os.path.dirname(lib)) == "python"
        and site in sys.path
        and os.path.isfile(os.path.join(package, "__init__.py"))
        and os.path.isfile(os.path.join(site, "py4j", "__init__.py"))
    )


sys.path[:] = [entry for entry in sys.path if not _installed_zip(entry)]
