"""scripts/tune.py's intercept summary (a GPU benchmark; its arithmetic is checked here on synthetic timings)."""
import importlib.util
from pathlib import Path

import pandas as pd
import pytest

spec = importlib.util.spec_from_file_location("tune", Path(__file__).parent.parent / "scripts" / "tune.py")
tune = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tune)


def rows(name, fixed_us, rate, extra_small_us=3.0):
    out = []
    for r in tune.WAVE_ROWS + tune.INTERCEPT_ROWS:
        b = r * 8192 * 2 * 2
        t = fixed_us + b / rate * 1e6 + (extra_small_us if r < tune.INTERCEPT_ROWS[0] else 0.0)
        out.append({"kernel": "intercept", "n": r, "dtype": "bfloat16", "variant": name, "bytes": b, "median_us": t})
    return out


def test_the_fit_uses_the_large_inputs_and_the_wave_rows_are_listed_apart():
    text = tune.intercept_summary(pd.DataFrame(rows("copy_", 2.6, 4.26e12) + rows("rowsum triton", 5.1, 4.67e12)))
    fit_part, wave_part = text.split("at most one wave")
    fits = {line.split()[0]: line.split() for line in fit_part.splitlines() if line.startswith(("copy_ ", "rowsum"))}
    assert float(fits["copy_"][2]) == pytest.approx(2.6, abs=0.01)  # the wave rows' extra 3 us is not in the fit
    assert float(fits["copy_"][3]) == pytest.approx(4.26, abs=0.001)
    assert float(fits["rowsum"][3]) == pytest.approx(5.1, abs=0.01)  # "rowsum triton": name has two words
    assert str(tune.WAVE_ROWS[0]) in wave_part and "6.62" in wave_part  # copy_ at 132 rows: 2.6 + bytes/rate + 3


def test_a_call_with_one_timed_size_is_not_fitted():
    one = [r for r in rows("gelu triton", 3.0, 4.3e12) if r["n"] == 8192]
    text = tune.intercept_summary(pd.DataFrame(one))
    assert "fewer than two timed sizes" in text
