"""Everything else is in pyproject.toml. The one thing it cannot say: the Spark apps, a top-level folder of the
repository (standalone files spark-submit runs as they are), ship inside the package as `mirrorbook.spark_apps`."""

from setuptools import find_packages, setup

setup(packages=[*find_packages("include", include=["mirrorbook", "mirrorbook.*"]), "mirrorbook.spark_apps"],
      package_dir={"": "include", "mirrorbook.spark_apps": "spark_apps"})
