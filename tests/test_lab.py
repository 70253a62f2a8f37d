"""The lab (python -m lab, GPU probes): its command line, the intercept summary's arithmetic on synthetic timings,
and the probes' helpers and variants on the CPU interpreter at tiny sizes."""
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from lab import attention, cli, common, elementwise, floor, rows

REPO = Path(__file__).resolve().parent.parent


def timings(name, fixed_us, rate, extra_small_us=3.0):
    out = []
    for r in floor.WAVE_ROWS + floor.INTERCEPT_ROWS:
        b = r * 8192 * 2 * 2
        t = fixed_us + b / rate * 1e6 + (extra_small_us if r < floor.INTERCEPT_ROWS[0] else 0.0)
        out.append({"kernel": "intercept", "n": r, "dtype": "bfloat16", "variant": name, "bytes": b, "median_us": t})
    return out


def test_the_fit_uses_the_large_inputs_and_the_wave_rows_are_listed_apart():
    df = pd.DataFrame(timings("copy_", 2.6, 4.26e12) + timings("rowsum triton", 5.1, 4.67e12))
    text = floor.intercept_summary(df)
    fit_part, wave_part = text.split("at most one wave")
    fits = {line.split()[0]: line.split() for line in fit_part.splitlines() if line.startswith(("copy_ ", "rowsum"))}
    assert float(fits["copy_"][2]) == pytest.approx(2.6, abs=0.01)  # the wave rows' extra 3 us is not in the fit
    assert float(fits["copy_"][3]) == pytest.approx(4.26, abs=0.001)
    assert float(fits["rowsum"][3]) == pytest.approx(5.1, abs=0.01)  # "rowsum triton": name has two words
    assert str(floor.WAVE_ROWS[0]) in wave_part and "6.62" in wave_part  # copy_ at 132 rows: 2.6 + bytes/rate + 3


def test_a_call_with_one_timed_size_is_not_fitted():
    one = [r for r in timings("gelu triton", 3.0, 4.3e12) if r["n"] == 8192]
    text = floor.intercept_summary(pd.DataFrame(one))
    assert "fewer than two timed sizes" in text


class _Tables:
    LIMIT = 1


def test_swapped_sets_the_tables_for_the_call_and_restores_them_even_on_error():
    seen = []
    tables = _Tables()
    call = common.swapped(tables, lambda: seen.append(tables.LIMIT) or tables.LIMIT, LIMIT=7)
    assert call() == 7 and seen == [7] and tables.LIMIT == 1

    def fail():
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        common.swapped(tables, fail, LIMIT=9)()
    assert tables.LIMIT == 1


def test_readings_interleave_the_kinds_and_check_them_against_the_first(capsys):
    import torch

    kinds = {
        "default": lambda: torch.ones(4),
        "close": lambda: torch.ones(4) * (1 + 1e-7),
        "wrong": lambda: torch.ones(4) * 2
    }
    out = common.readings(kinds, times=2)
    assert list(out) == ["default", "close", "wrong", "default (2)", "close (2)", "wrong (2)"]
    err = capsys.readouterr().err
    assert "default: relative error against the default 0" in err and "close: relative error" in err
    assert "wrong variant wrong" in err
    assert torch.equal(out["close (2)"](), kinds["close"]())
    with pytest.raises(RuntimeError):  # a wrong kind is not timed: its time is NaN
        out["wrong (2)"]()


def test_swapped_refuses_a_table_the_module_does_not_have():
    with pytest.raises(AttributeError, match="NO_SUCH_TABLE"):
        common.swapped(_Tables(), lambda: None, NO_SUCH_TABLE=1)


def test_checked_keeps_a_right_variant_and_turns_a_wrong_or_failing_one_into_an_error():
    import torch

    ref = torch.ones(8)
    right = common.checked(lambda: torch.ones(8), ref, torch.float32, "probe")
    assert torch.equal(right(), ref)
    for bad in (lambda: torch.zeros(8), lambda: 1 / 0):
        with pytest.raises(RuntimeError):
            common.checked(bad, ref, torch.float32, "probe")()


def test_onerow_times_both_tilings_beside_the_builtin_and_compile_and_each_is_right(capsys):
    """The round-33 probe on the CPU (interpreter, tiny n): every kind of both kernels runs and agrees with the first;
    a kind that raised or disagreed would be reported as failed or wrong on stderr and timed as NaN."""
    out = elementwise.onerow_variants(24, "float32", device="cpu")
    assert [k for k, _, _ in out] == ["vecadd", "saxpy"]
    for _, moved, variants in out:
        assert moved == 3 * 24 * 24 * 4 and len(variants) == 12
        assert {"triton (default)", "triton 2-D split (before) (3)", "builtin (2)", "compile (3)"} <= set(variants)
        for fn in variants.values():
            fn()
    err = capsys.readouterr().err
    assert "failed" not in err and "wrong" not in err


@pytest.mark.parametrize("name, shape", [("rmsnorm", (6, 40)), ("softmax", (5, 33))])
def test_compileframes_times_both_frames_of_torch_compile_and_each_is_right(capsys, name, shape):
    """Section compileframes on the CPU: torch.compile's fwd+bwd as one joint graph and as the sweep's cell runs it
    (a training step), beside ours and the builtin, each checked against the builtin's gradients."""
    from lab.inductor import frame_variants

    variants = frame_variants(name, shape, pytest.importorskip("torch").float32, device="cpu")
    assert list(variants) == [
        "builtin", "ours", "compile, joint graph", "compile, as a training step (AOTAutograd; the sweep's)"
    ]
    for fn in variants.values():
        fn()
    err = capsys.readouterr().err
    assert "failed" not in err and "wrong" not in err


def test_lnfull_times_the_default_against_every_row_and_no_row_unmasked(capsys):
    import torch

    [(kernel, moved, variants)] = rows.lnfull_variants(64, torch.float32, device="cpu")
    assert kernel == "layernorm" and len(variants) == 9
    assert list(variants)[:3] == ["triton (default)", "every full row unmasked", "masked (before round 33)"]
    torch.testing.assert_close(variants["every full row unmasked (3)"](), variants["masked (before round 33)"](),
                               atol=0, rtol=0)
    assert "failed" not in capsys.readouterr().err


def test_rmsfull_times_both_row_forms_with_and_without_the_mask_beside_compile(capsys):
    import torch

    [(kernel, moved, variants)] = rows.rmsfull_variants(64, torch.float32, device="cpu")
    assert kernel == "rmsnorm" and moved == (2 * 64 * 64 + 64) * 4 and len(variants) == 18
    assert list(variants)[:6] == [
        "triton (default)", "held, masked", "held, unmasked", "read again, 16 warps, masked",
        "read again, 16 warps, unmasked", "compile"
    ]
    torch.testing.assert_close(variants["held, unmasked (2)"](), variants["held, masked"](), atol=0, rtol=0)
    assert "failed" not in capsys.readouterr().err


def test_unmasked_runs_every_kind_but_the_asm_loads_on_the_cpu(capsys):
    """The interpreter runs no inline PTX: the asm row-sum is reported failed (and would be timed as NaN); every other
    kind runs and agrees with its kernel's default."""
    import torch

    out = rows.unmasked_variants(64, torch.float32, device="cpu")
    assert [k for k, _, _ in out] == ["rowsum", "softmax", "layernorm", "rmsnorm"]
    kinds = {k: [v for v in variants if not v.endswith(("(2)", "(3)"))] for k, _, variants in out}
    assert kinds == {
        "rowsum": ["triton (default)", "masked", "unmasked", "asm ld.global"],
        "softmax": ["triton (default)", "masked", "unmasked", "compile"],
        "layernorm": ["triton (default)", "every full row unmasked"],
        "rmsnorm": ["triton (default)", "before round 34", "compile"]
    }
    err = capsys.readouterr().err
    assert err.count("failed") == 1 and "asm ld.global variant failed" in err and "wrong" not in err


@pytest.mark.parametrize("split", [2, 4])
def test_split_rowsum_adds_its_parts_and_leaves_the_counts_at_zero(split):
    """One launch of `split` programs a row: the row's last program adds the parts; the counts are zero again after
    the call, so a second call (on other values) is right too."""
    import torch

    fn = floor.split_rowsum(split, 4)
    for seed in (0, 1):
        x = torch.randn(16, 64, generator=torch.Generator().manual_seed(seed))
        torch.testing.assert_close(fn(x), x.sum(dim=1), atol=1e-5, rtol=1e-5)
        assert not fn.counts().any()


def test_chunk_sums_sum_each_chunk_and_refuse_a_partial_one():
    import torch

    x = torch.randn(8, 64)
    torch.testing.assert_close(floor.chunk_sums(x, 256, 4), x.reshape(-1, 64).sum(dim=1), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(floor.chunk_sums(x, 128, 4), x.reshape(-1, 32).sum(dim=1), atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="whole number of chunks"):
        floor.chunk_sums(x[:, :40].contiguous(), 512, 4)  # 320 elements, chunks of 128
    with pytest.raises(ValueError, match="not contiguous"):
        floor.copy_chunks(x[:, :32], torch.empty(8, 32), 128, 4)  # a whole number of chunks, but strided


def test_readfloor_checks_the_row_sums_and_times_the_floors_beside_them(capsys):
    import torch

    [(kernel, moved, variants)] = floor.readfloor_variants(64, torch.float32, device="cpu")
    assert kernel == "rowsum" and moved == (64 * 64 + 64) * 4
    firsts = [v for v in variants if not v.endswith(("(2)", "(3)"))]
    assert firsts[:3] == ["triton (default)", "builtin", "cuBLAS x @ ones"] and len(firsts) == 7 + 4 + 8
    assert len(variants) == 3 * len(firsts)
    torch.testing.assert_close(variants["one launch, 4 programs a row, 8 warps (3)"](), variants["builtin"](),
                               atol=1e-4, rtol=1e-4)
    half = variants["copy_ of half the rows (same bytes)"]().clone()
    assert half.shape == (32, 64)
    torch.testing.assert_close(variants["Triton copy of half the rows, 4 KiB a program, 4 warps"](), half, atol=0,
                               rtol=0)
    y = torch.zeros(16, 64)
    x = torch.randn(16, 64)
    assert floor.copy_chunks(x, y, 512, 4) is y and torch.equal(y, x)  # its own output, not the driver's copy's
    assert variants["chunk sums, 4 KiB a program, 4 warps"]().shape == (4, )  # 64 x 64 fp32 = 16 KiB
    assert "failed" not in capsys.readouterr().err


def test_smallrows_times_every_launch_shape_beside_builtin_and_compile(capsys):
    import torch

    [(kernel, moved, variants)] = rows.smallrows_variants(32, torch.float32, device="cpu")
    firsts = [v for v in variants if not v.endswith(("(2)", "(3)"))]
    assert kernel == "rowsum" and firsts[:3] == ["triton (default)", "builtin", "compile"] and len(firsts) == 12
    torch.testing.assert_close(variants["triton BM=4 w=2 (3)"](), variants["builtin"](), atol=1e-5, rtol=1e-5)
    assert "failed" not in capsys.readouterr().err


@pytest.mark.parametrize("section", ["attntiles", "attnws"])
def test_attention_tiles_are_each_checked_and_the_sdpa_backends_refused_on_the_cpu(capsys, section):
    variants = attention.attention_variants((1, 2, 128, 32), True, torch.float16, section, device="cpu")
    assert len(variants) == 12 and all(" ws" in v for v in variants) == (section == "attnws")  # BLOCK_N 32 only
    assert variants["tma 64x32 w4 s2" + (" ws" if section == "attnws" else "")]().shape == (1, 2, 128, 32)
    err = capsys.readouterr().err
    assert "failed" not in err and "wrong" not in err
    default = attention.attention_variants((1, 2, 128, 32), False, torch.float16, device="cpu")
    assert {"builtin cuDNN", "triton (default)", "tma 128x128 w8 s3 in order", "tma 64x64 w4 s3"} <= set(default)
    assert "variant failed" in capsys.readouterr().err  # SDPA's CUDA backends on CPU tensors: no result, no crash
    with pytest.raises(RuntimeError):
        default["builtin cuDNN"]()


def test_attention_backward_tiles_each_match_the_default_gradients(capsys, monkeypatch):
    monkeypatch.setitem(attention.BWD_SPACE, "dkdv", attention.BWD_SPACE["dkdv"][:2])
    monkeypatch.setitem(attention.BWD_SPACE, "dq", attention.BWD_SPACE["dq"][-2:])
    variants = attention.backward_variants((1, 2, 128, 32), True, torch.float16, device="cpu")
    assert list(variants) == [
        "triton backward (default)", "dkdv 32x128 w4 s3", "dkdv 32x128 w4 s4", "dq 64x64 w8 s4", "dq 64x64 w8 s5"
    ]
    assert [g.shape for g in variants["dq 64x64 w8 s5"]()] == [(1, 2, 128, 32)] * 3
    err = capsys.readouterr().err
    assert "failed" not in err and "wrong" not in err


def test_every_section_is_listed_with_what_it_times_in_the_order_a_call_runs_them():
    listed = [line.split()[0] for line in cli.listing().splitlines() if not line.startswith(" ")]
    assert sorted(listed) == sorted(cli.KNOWN_SECTIONS) == sorted(cli.HELP)
    assert listed[:2] == ["floor", "flush"] and listed[-1] == "timeline"
    r = subprocess.run([sys.executable, "-m", "lab", "--list"], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("floor ") and "readfloor" in r.stdout


def test_sections_are_positional_or_given_with_the_old_option_and_an_unknown_one_is_refused(capsys):
    assert cli.parse([]).sections == cli.DEFAULT_SECTIONS
    args = cli.parse(["rows", "smallrows", "--n", "1024", "2048", "--dtypes", "float32", "--instances", "8"])
    assert args.sections == ["rows", "smallrows"] and args.n == [1024, 2048] and args.instances == 8
    assert cli.parse(["--sections", "floor", "readfloor", "--n", "8192"]).sections == ["floor", "readfloor"]
    for dropped in ("tma", "persist", "lnchain", "l2hint", "hints"):  # git history keeps them (scripts/tune.py)
        with pytest.raises(SystemExit):
            cli.parse([dropped])
        assert f"unknown section(s) ['{dropped}']" in capsys.readouterr().err


def test_a_probe_times_one_start_without_the_loop_unless_it_asks():
    cfg = common.sweep_timing()
    assert cfg.instances == 1 and cfg.loop_ms == 0
    assert common.sweep_timing(instances=4, warm_translations=True).instances == 4


def test_a_recorded_variant_carries_its_rate_and_its_fraction_of_the_calls_copy():
    run = common.Run(args=None, timer=None, cfg=None, copy_gbps=4000.0)
    run.record("gelu", 8192, "bfloat16", "triton (default)", 0.064, moved=2 * 8192 * 8192 * 2)
    run.record("matmul", 1024, "bfloat16", "cuBLAS mm alone", 0.01, flops=2.0 * 1024**3)
    gelu, mm = run.rows
    assert gelu["median_us"] == pytest.approx(64.0) and gelu["gbps"] == pytest.approx(4194.3, abs=0.1)
    assert gelu["of_copy"] == pytest.approx(gelu["gbps"] / 4000.0)
    assert mm["tflops"] == pytest.approx(214.7, abs=0.1) and "gbps" not in mm


def test_lnconfirm_swaps_layernorms_tables_for_the_earlier_launch_and_restores_them(capsys):
    import torch

    import kernels.layernorm as ln

    before = {k: getattr(ln, k) for k in ("HELD_MIN_WARPS", "WB_EARLY_COLS", "REGISTER_CAP", "PREFETCH_PROGRAMS")}
    [(kernel, moved, variants)] = rows.lnconfirm_variants(64, torch.float32, device="cpu")
    assert kernel == "layernorm" and len(variants) == 9
    assert list(variants)[:3] == ["triton (default)", "before round 31", "default without the register cap"]
    torch.testing.assert_close(variants["before round 31 (2)"](), variants["triton (default)"](), atol=0, rtol=0)
    assert {k: getattr(ln, k) for k in before} == before and "failed" not in capsys.readouterr().err
