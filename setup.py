"""The one thing pyproject.toml cannot say: hive._clone3 is built where it can be, and only there.

``optional=True``: a machine without a C compiler or Python's headers installs hive all the
same, and spawns the slower way (hive/_spawn.py says so once in the log).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("hive._clone3", ["hive/_clone3.c"], optional=True)])
