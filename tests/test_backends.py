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
        for variant, ms in (("ours", ours_ms), ("flash", 2 * ours_ms), ("cudnn", ours_ms / 2),
                            ("efficient", 4 * ours_ms)):
            status = "unsupported" if (variant == "efficient" and pass_ == "fwd+bwd") else "ok"
            out.append({"variant": variant, "label": variant, "batch": 4, "heads": 16, "seq": 4096, "head_dim": 128,
                        "causal": True, "dtype": "bfloat16", "pass": pass_, "status": status, "median_ms": ms,
                        "loop_ms": ms * 1.1, "tflops": 100 / ms, "tflops_loop": 100 / (ms * 1.1)})
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
