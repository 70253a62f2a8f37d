import os

import pytest

os.environ["TRITON_INTERPRET"] = "1"  # before anything imports triton: CPU tensors through the interpreter


def pytest_configure(config):
    """A fill that pandas 4 will refuse (Pandas4Warning, pandas 3) fails the test that reaches it: analysis reads its
    optional columns through analysis/columns.py."""
    import pandas.errors

    if hasattr(pandas.errors, "Pandas4Warning"):
        config.addinivalue_line("filterwarnings", "error::pandas.errors.Pandas4Warning")


@pytest.fixture
def spy_launches(monkeypatch):
    """spy(module, *names): the list each later launch of those kernels of the module appends (name, keyword
    arguments) to; the launches still run, so a test checks both which kernel ran and its result."""

    def spy(module, *names):
        seen = []

        class Spy:

            def __init__(self, name, kernel):
                self.name, self.kernel = name, kernel

            def __getitem__(self, grid):

                def launch(*args, **kw):
                    seen.append((self.name, kw))
                    return self.kernel[grid](*args, **kw)

                return launch

        for name in names:
            monkeypatch.setattr(module, name, Spy(name, getattr(module, name)))
        return seen

    return spy
