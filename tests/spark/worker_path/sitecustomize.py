"""Run at start-up by the Python processes of the tests' Spark sessions (this folder is on their ``PYTHONPATH``):
see pyspark_site.py. The SIGKILL and cluster tests' own ``sitecustomize`` modules import it too."""

import pyspark_site  # noqa: F401
