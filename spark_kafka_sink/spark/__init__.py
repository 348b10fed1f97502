"""The Spark layer: the only package that imports pyspark (see docs/ARCHITECTURE.md)."""
