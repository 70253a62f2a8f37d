"""Optional columns of a results frame, read without pandas' fill warnings.

A column that some writers of a parquet set and others never did is NaN in their rows; where no row set it, it is
float64, and pandas 4 will refuse to fill a float64 column with False or '' (Pandas4Warning today). These read such
a column as booleans or text, missing where the column or a value is missing."""
from __future__ import annotations

import pandas as pd


def flags(df: pd.DataFrame, column: str) -> pd.Series:
    """df[column] as booleans: False where the column or a value is missing."""
    if column not in df:
        return pd.Series(False, index=df.index, dtype=bool)
    values = df[column]
    return values.astype(object).where(values.notna(), False).astype(bool)


def texts(df: pd.DataFrame, column: str, missing: str = "") -> pd.Series:
    """df[column] as text: ``missing`` where the column or a value is missing."""
    if column not in df:
        return pd.Series(missing, index=df.index, dtype=object)
    values = df[column]
    return values.astype(object).where(values.notna(), missing).astype(str)
