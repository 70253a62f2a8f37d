"""experiments/backends.py (ours beside each SDPA backend forced in turn) on the CPU: the check it makes on the first
(batch, head) is the whole call's there, a wrong answer fails it, a backend the device lacks is told apart from a
failure, the CPU is refused; and analysis/attention.py's ratios, table and sentences from rows."""
import numpy as np
import pandas as pd
import pytest
import torch

from analysis import attention as an
from experiments import backends as eb
from kernels import attention as at
from rooflab.kernel import DEFAULT_TOLERANCE, differentiable


@pytest.mark.parametrize("pass_", ["fwd", "fwd+bwd"])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_ours_passes_the_first_head_check_and_a_wrong_answer_does_not(pass_, causal):
    inputs = at.make_inputs((2, 3, 40, 16), torch.float32, "cpu", seed=3)
    ref = at.reference(eb.first_head(inputs), pass_, causal)
    out = differentiable(eb.attention_fn("ours", causal))(inputs, pass_)()
    assert eb.rel_err(out, ref) <= DEFAULT_TOLERANCE["float32"]
    wrong = out * 1.01 if torch.is_tensor(out) else tuple(g * 1.01 for g in out)
    assert eb.rel_err(wrong, ref) > DEFAULT_TOLERANCE["float32"]


def test_the_first_heads_gradients_are_the_whole_calls_there():
    """Heads are independent: dQ, dK, dV of the full call restricted to (0, 0) are those of the sliced call."""
    inputs = at.make_inputs((2, 2, 24, 16), torch.float32, "cpu", seed=5)
    whole = differentiable(eb.attention_fn("ours", True))(inputs, "fwd+bwd")()
    ref = at.reference(eb.first_head(inputs), "fwd+bwd", True)
    assert eb.rel_err(whole, ref) <= DEFAULT_TOLERANCE["float32"]
    other = at.reference(tuple(t[1:, 1:] for t in inputs), "fwd+bwd", True)  # another head's: not the same
    assert eb.rel_err(whole, other) > 0.1


def test_a_backend_the_device_lacks_is_unsupported_not_failed():
    q, k, v, _ = at.make_inputs((1, 2, 32, 16), torch.float32, "cpu")
    with pytest.raises(RuntimeError) as err:
        eb.attention_fn("cudnn", True)(q, k, v)  # no cuDNN attention on a CPU tensor
    assert eb.unsupported(err.value)
    assert not eb.unsupported(RuntimeError("CUDA out of memory")) and not eb.unsupported(ValueError("x"))


def test_the_cpu_is_refused_with_a_reason(tmp_path, capsys):
    out = tmp_path / "b.parquet"
    assert eb.main(["--gpu", "cpu", "--out", str(out)]) == 2
    assert "need an NVIDIA GPU" in capsys.readouterr().err and not out.exists()
    with pytest.raises(SystemExit):
        eb.main(["--gpu", "cpu", "--out", str(out), "--shapes", "4x16x4096"])  # three dims: refused by argparse


def rows():
    """Synthetic rows: one shape, causal, fwd and fwd+bwd; cuDNN twice ours' speed, flash half, efficient absent
    (unsupported) in fwd+bwd."""
    out = []
    for pass_, ours_ms in (("fwd", 1.0), ("fwd+bwd", 3.0)):
        for variant, ms in (("ours", ours_ms), ("flash", 2 * ours_ms), ("cudnn", ours_ms / 2), ("efficient",
                                                                                                4 * ours_ms)):
            status = "unsupported" if (variant == "efficient" and pass_ == "fwd+bwd") else "ok"
            out.append({
                "variant": variant,
                "label": variant,
                "batch": 4,
                "heads": 16,
                "seq": 4096,
                "head_dim": 128,
                "causal": True,
                "dtype": "bfloat16",
                "pass": pass_,
                "status": status,
                "median_ms": ms,
                "loop_ms": ms * 1.1,
                "tflops": 100 / ms,
                "tflops_loop": 100 / (ms * 1.1)
            })
    return pd.DataFrame(out)


def test_ratios_are_each_backends_time_over_ours():
    r = an.ratios(rows()).set_index("pass")
    assert r.at["fwd", "vs_flash"] == pytest.approx(2.0) and r.at["fwd", "vs_cudnn"] == pytest.approx(0.5)
    assert r.at["fwd", "vs_efficient_loop"] == pytest.approx(4.0) and r.at["fwd", "ours_tflops"] == 100
    assert np.isnan(r.at["fwd+bwd", "vs_efficient"])  # unsupported: no ratio
    printed = an.printed_table(rows())
    assert "4x16x4096x128" in printed and "0.500" in printed and "nan" in printed


def test_the_section_states_every_pass_against_every_backend_and_says_when_unmeasured():
    ceilings = pd.DataFrame({"gpu": ["h200"], "ceiling": ["gemm_bf16"], "value": [800e12]})
    empty = pd.DataFrame(columns=["gpu", "kernel", "impl", "pass", "dtype", "size", "status"])
    text = an.attention_section(empty, ceilings, "h200", None, rows())
    forward, both = text.split("our forward runs at")[1].split("our forward and backward runs at")
    assert "0.5$\\times$ the cuDNN backend's speed" in forward and "2$\\times$ the flash backend's" in forward
    # forward and backward against cuDNN too, where ours loses: no pass or backend left out
    assert "0.5$\\times$ the cuDNN backend's speed" in both and "2$\\times$ the flash backend's" in both
    assert "sequence 4096; causal mask; head dim 128" in text and "goal" not in text and "tab:backends" in text
    assert "(0.125)" in text  # ours 100 TFLOP/s of an 800 roof
    assert an.NOT_RUN in an.attention_section(empty, ceilings, "h200", None, None)


def test_cells_read_four_or_six_dims_and_the_llm_presets_model_cells():
    from rooflab.shapes import ATTENTION_CELLS

    cells = eb.cells_of(["4x16x4096x128", "1x32x8x1x8192x128"], ["llm"])
    assert cells[:2] == [(4, 16, 16, 4096, 4096, 128), (1, 32, 8, 1, 8192, 128)]
    assert len(cells) == len(set(cells)) == 2 + len(ATTENTION_CELLS["llm"]) - 1  # the second is Llama-3 8B's too
    kinds = {eb.cell_kind(c) for c in cells}
    assert {"mha", "grouped", "cross", "decode"} <= kinds
    assert all(c[1] % c[2] == 0 and c[5] in (64, 80, 96, 128, 192, 256) for c in cells)
    assert eb.cell_passes((1, 32, 8, 1, 8192, 128)) == ("fwd", )  # decode: no backward
    for bad in (["1x32x5x1x64x128"], ["4x16x4096"], ["4x16xa"]):
        with pytest.raises(ValueError):
            eb.cells_of(bad, [])
    with pytest.raises(ValueError, match="unknown preset"):
        eb.cells_of([], ["nope"])


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_the_first_groups_outputs_and_gradients_are_the_whole_calls_there(causal):
    """Grouped heads, seq_q != seq_k: the first K/V head's group alone gives the whole call's O, dQ of its query
    heads and dK, dV of its K/V head (summed over the group); another group's do not."""
    inputs = eb.make_inputs((2, 4, 2, 5, 9, 16), torch.float32, "cpu", seed=1)
    for pass_ in ("fwd", "fwd+bwd"):
        whole = eb.reference(inputs, pass_, causal)
        assert eb.rel_err(whole, eb.reference(eb.first_head(inputs), pass_, causal)) < 1e-12
        other = eb.reference(tuple(t[1:, -2:] if i != 1 and i != 2 else t[1:, 1:] for i, t in enumerate(inputs)), pass_,
                             causal)
        assert eb.rel_err(whole, other) > 0.1


def test_ours_runs_a_decode_cell_through_the_split_kernel_and_sdpa_agrees():
    """seq_q 3 against 80 keys, 4 heads on 2: ours (the decode kernel) and SDPA's math on the CPU (enable_gqa, the
    causal mask bottom-right) both match the float64 expression."""
    inputs = eb.make_inputs((1, 4, 2, 3, 80, 64), torch.float32, "cpu", seed=2)
    ref = eb.reference(eb.first_head(inputs), "fwd", True)
    for fn in (lambda q, k, v: eb.ours(q, k, v, True), lambda q, k, v: eb.sdpa(q, k, v, True)):
        assert eb.rel_err(fn(*inputs[:3]), ref) <= DEFAULT_TOLERANCE["float32"]
    top_left = torch.nn.functional.scaled_dot_product_attention(*inputs[:3], is_causal=True, enable_gqa=True)
    assert eb.rel_err(top_left, ref) > 0.1  # is_causal alone would be aligned top-left


def test_the_flop_and_byte_counts_of_a_cell():
    cell = (2, 8, 2, 3, 10, 64)
    assert eb.flops(cell, "fwd", False) == 4 * 2 * 8 * 3 * 10 * 64
    assert eb.flops(cell, "fwd", True) == 4 * 2 * 8 * (8 + 9 + 10) * 64  # rows see 8, 9, 10 keys
    square = (2, 8, 8, 128, 128, 64)
    assert eb.flops(square, "fwd+bwd", True) == at.flops((2, 8, 128, 64), "fwd+bwd", True)
    assert eb.bytes_moved(square, "bfloat16", "fwd+bwd") == at.bytes_moved((2, 8, 128, 64), "bfloat16", "fwd+bwd")
    assert eb.bytes_moved(cell, "bfloat16",
                          "fwd") == 2 * (2 * 2 * 8 * 3 * 64) + 2 * (2 * 2 * 2 * 10 * 64) + 2 * 8 * 3 * 4
    assert eb.unsupported(ValueError("head dims"), "ours") and not eb.unsupported(ValueError("x"), "flash")


def test_grouped_and_decode_rows_get_their_own_ratios_and_labels():
    """Two cells that share batch, heads, seq_k and head_dim but not K/V heads or seq_q stay apart."""
    base = rows()
    fwd = base[base["pass"] == "fwd"]
    grouped = fwd.assign(kv_heads=4, seq_q=1, seq_k=4096, median_ms=fwd["median_ms"] * 3)
    grouped.loc[grouped["variant"] == "ours", "median_ms"] = 1.0
    both = pd.concat([base, grouped], ignore_index=True)
    r = an.ratios(both)
    assert len(r) == 3 and sorted(r["kv_heads"].tolist()) == [4, 16, 16]
    g = r[r["kv_heads"] == 4].iloc[0]
    assert g["vs_flash"] == pytest.approx(6.0) and an.cell_label(g) == "4x16:4x1:4096x128"
    assert "4x16:4x1:4096x128" in an.printed_table(both)
    assert "decode (4096 keys) ours runs at 6" in an.decode_sentence(both)
    assert an.range_sentence(both) == an.range_sentence(base)  # prefill's ranges: the decode cell is not in them


def test_the_abstracts_ranges_are_prefill_only():
    """The abstract's AttnFwdVs* ranges speak of our FlashAttention-2: a decode cell (the split-KV kernel, 6x flash
    here) stays out of them, as it does of the section's prefill ranges."""
    from analysis.latex import Macros
    from analysis.results import attention_range_macros

    base = rows()
    fwd = base[base["pass"] == "fwd"]
    decode = fwd.assign(kv_heads=4, seq_q=1, seq_k=4096, median_ms=fwd["median_ms"] * 3)
    decode.loc[decode["variant"] == "ours", "median_ms"] = 1.0

    def ranges(frame):
        m = Macros()
        attention_range_macros(m, frame)
        return [line for line in m.lines if "AttnFwd" in line]

    assert ranges(pd.concat([base, decode], ignore_index=True)) == ranges(base)
    assert any("AttnFwdVsFlash}{2--2}" in line for line in ranges(base))


def test_tables_of_dozens_of_rows_break_across_pages():
    """The backends table and the backends' losses are longtables (a float of 70 rows ran off its page), their head
    repeated on each page; with no loss, the losses table is its caption alone (the text refers to it)."""
    from analysis.losses import backend_losses_table

    ceilings = pd.DataFrame({"gpu": ["h200"], "ceiling": ["gemm_bf16"], "value": [800e12]})
    empty = pd.DataFrame(columns=["gpu", "kernel", "impl", "pass", "dtype", "size", "status"])
    text = an.attention_section(empty, ceilings, "h200", None, rows())
    assert "\\ref{tab:backends}" in text and "longtable" not in text  # the section refers to the appendix's table
    table = an.backends_long_table(rows())
    assert table.startswith("{") and "\\begin{longtable}" in table
    assert "\\label{tab:backends}" in table and "\\endfirsthead" in table and "\\endhead" in table
    assert table.count("\\toprule") == 2 and "\\end{longtable}" in table and "\\begin{table}" not in table
    assert an.backends_long_table(None) == ""
    lost = pd.DataFrame([{
        "mask": "causal",
        "head_dim": 128,
        "pass": "fwd",
        "backend": "cuDNN",
        "frame": "gpu",
        "shapes": "1x32x4096x128",
        "lost": 1,
        "compared": 3,
        "worst": 0.9
    }])
    assert "\\begin{longtable}" in backend_losses_table(lost) and "tab:backend-losses" in backend_losses_table(lost)
    assert "tab:backend-losses" in backend_losses_table(lost.iloc[:0]) and "(none)" in backend_losses_table(
        lost.iloc[:0])


def test_grouped_refusals_count_runs_not_rows():
    """A backend that refused one grouped cell in both passes and ran another is said to refuse 2 of 4 runs (a cell
    in one pass), in a sentence of its own (grouped cells of any query length, not only those against a cache)."""
    base = rows()
    refused = base.assign(kv_heads=4, seq_q=1, seq_k=4096)  # two passes of one grouped cell
    refused.loc[refused["variant"] == "flash", "status"] = "unsupported"
    ran = base.assign(kv_heads=4, seq_q=4096, seq_k=4096)
    text = an.decode_sentence(pd.concat([base, refused, ran, ran], ignore_index=True))  # a row twice: still one run
    assert "Of the grouped K/V runs" in text and "the flash backend refused 2 of the 4 runs given it" in text
    assert "the memory-efficient backend refused 2 of the 4 runs given it" in text  # its fwd+bwd (rows())
    everywhere = pd.concat([base, refused, ran.assign(status="unsupported")], ignore_index=True)
    assert "the flash backend refused every one given it" in an.decode_sentence(everywhere)
