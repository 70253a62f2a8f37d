import os

os.environ["TRITON_INTERPRET"] = "1"  # before anything imports triton: CPU tensors through the interpreter



def pytest_configure(config):
    """A fill that pandas 4 will refuse (Pandas4Warning, pandas 3) fails the test that reaches it: analysis reads its
    optional columns through analysis/columns.py."""
    import pandas.errors

    if hasattr(pandas.errors, "Pandas4Warning"):
        config.addinivalue_line("filterwarnings", "error::pandas.errors.Pandas4Warning")
