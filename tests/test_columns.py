"""analysis/columns.py: optional columns read as booleans or text, with no fill pandas 4 refuses."""
import numpy as np
import pandas as pd

from analysis.columns import flags, texts


def test_a_column_no_row_set_reads_as_missing():
    df = pd.DataFrame({"x": [1, 2, 3], "never": [np.nan] * 3})  # float64: what a parquet gives such a column
    assert flags(df, "never").tolist() == [False, False, False]
    assert texts(df, "never").tolist() == ["", "", ""]
    assert texts(df, "never", "ok").tolist() == ["ok", "ok", "ok"]


def test_values_survive_and_gaps_take_the_missing_value():
    df = pd.DataFrame({"f": [True, None, False], "t": ["a", None, "b"]})
    assert flags(df, "f").tolist() == [True, False, False]
    assert texts(df, "t", "-").tolist() == ["a", "-", "b"]
    assert flags(df, "f").dtype == bool


def test_an_absent_column_reads_as_missing_on_the_frame_index():
    df = pd.DataFrame({"x": [1, 2]}, index=[5, 7])
    assert flags(df, "absent").index.tolist() == [5, 7] and not flags(df, "absent").any()
    assert texts(df, "absent", "ok").tolist() == ["ok", "ok"]
