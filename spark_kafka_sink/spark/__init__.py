"""The Spark layer: the only package that imports pyspark (DESIGN.md §3, §5)."""
