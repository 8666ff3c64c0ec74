"""Everything else is in pyproject.toml. The one thing it cannot say: the Spark apps, a top-level folder of the
repository (standalone files spark-submit runs as they are), ship inside the package as `mirrorbook.spark_apps`."""

from setuptools import find_namespace_packages, setup

# Namespace packages too: folders of package data (the API's templates) are packages to setuptools.
setup(packages=[*find_namespace_packages("include", include=["mirrorbook", "mirrorbook.*"], exclude=["*.__pycache__"]),
                "mirrorbook.spark_apps"],
      package_dir={"": "include", "mirrorbook.spark_apps": "spark_apps"})
