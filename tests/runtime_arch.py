"""The arch the test suite runs on: ``GRADSIM_TEST_ARCH`` (``cpu`` by default, or
``cuda``). Tests import :data:`TEST_ARCH` instead of writing ``arch="cpu"``, and tests
that only make sense on one arch say so with :data:`cpu_only`."""

import os

import pytest

TEST_ARCH = os.environ.get("GRADSIM_TEST_ARCH", "cpu")
if TEST_ARCH not in ("cpu", "cuda"):
    raise ValueError(f"GRADSIM_TEST_ARCH={TEST_ARCH!r}; expected 'cpu' or 'cuda'")

# The serial/parallel policy and Taichi's CPU thread count exist only on the CPU: on CUDA
# every loop is parallel (runtime.serial() is False), so these tests have nothing to check.
cpu_only = pytest.mark.skipif(TEST_ARCH != "cpu",
                              reason="checks the CPU serial/parallel policy or CPU threads")
