"""How the demo and the tests launch the jobs' scripts: :func:`spark_submit_command` builds a
``spark-submit`` command line with Spark set up for a laptop (the venv's Python for workers and
driver, loopback only, ``conf/spark-defaults.conf`` and the quiet ``conf/log4j2.properties``
added to the driver's Java options that file already sets).
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Mapping, Sequence

from ..errors import JobError
from ..properties import load_properties


@dataclass(frozen=True)
class SparkSubmit:
    """A ``spark-submit`` command line and the environment variables to add for it."""

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)

    def environ(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: this process's environment) with :attr:`env` on top."""
        return {**(os.environ if base is None else base), **self.env}


def spark_submit_command(script: str | Path, args: Sequence[str], *, conf_dir: str | Path,
                         python: str | None = None, master: str | None = None,
                         conf: Mapping[str, str] | None = None, java_options: str = "") -> SparkSubmit:
    """How to run ``script`` with ``spark-submit`` as docs/ARCHITECTURE.md says ("Spark in tests and
    local runs"): workers and driver on
    ``python`` (default: this interpreter, which has pyarrow and this package), loopback only,
    ``conf_dir/spark-defaults.conf``, and ``conf_dir/log4j2.properties`` added to the driver
    Java options that file sets (``--driver-java-options`` replaces them, so both go in).
    ``master`` (e.g. a standalone cluster's ``spark://127.0.0.1:7077``) replaces that file's
    ``local[2]``; ``conf`` adds ``--conf key=value`` settings; ``java_options`` go after the
    driver's."""
    python = python or sys.executable
    settings = [part for key, value in (conf or {}).items() for part in ("--conf", f"{key}={value}")]
    conf_path = Path(conf_dir).resolve()
    submit = Path(python).parent / "spark-submit"
    found = str(submit) if submit.is_file() else shutil.which("spark-submit")
    if not found:
        raise JobError(f"spark-submit is neither next to {python} nor on PATH; install pyspark")
    defaults = conf_path / "spark-defaults.conf"
    driver_options = load_properties(defaults).get("spark.driver.extraJavaOptions", "")
    log4j = f"-Dlog4j2.configurationFile={(conf_path / 'log4j2.properties').as_uri()}"
    driver_options = " ".join(part for part in (driver_options, log4j, java_options.strip()) if part)
    argv = (found, "--properties-file", str(defaults), *(("--master", master) if master else ()),
            *settings, "--driver-java-options", driver_options, str(script), *args)
    env = {"PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python, "SPARK_LOCAL_IP": "127.0.0.1"}
    return SparkSubmit(argv, MappingProxyType(env))
