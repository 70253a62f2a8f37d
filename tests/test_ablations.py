"""experiments/ablations.py's variants compute the product they claim to, under the interpreter (the timing and the
TMA kernel need the GPU): every pointer-kernel tile and tile order, the autotuned call, and the padding fix."""
import pytest
import torch

from experiments.ablations import PAD_TO, padded, variants


def operands(n):
    g = torch.Generator().manual_seed(0)
    return torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)


def test_every_tile_and_order_computes_relu_of_the_product():
    a, b = operands(48)
    want = torch.relu(a @ b)
    vs = variants("tiles", 48, a, b)
    assert {v["group_m"] for v in vs if v["method"] == "pointer"} == {1, 8}
    assert any(v["method"] == "tma" for v in vs)
    for v in vs:
        if v["method"] == "tma":  # Hopper only
            continue
        torch.testing.assert_close(v["fn"](), want, rtol=1e-4, atol=1e-4, msg=v["variant"])


@pytest.mark.parametrize("n", [40, 64])
def test_the_padding_fix_gives_the_unpadded_answer(n):
    a, b = operands(n)
    vs = variants("alignment", n, a, b)
    fixes = [v for v in vs if v["padded"] != n]
    assert len(fixes) == (2 if n % PAD_TO else 0) and all(v["padded"] == padded(n) == 64 for v in fixes)
    for v in fixes:
        got = v["fn"]()
        got = got[:n, :n] if got.shape[0] != n else got  # the product alone is the padded product
        torch.testing.assert_close(got, torch.relu(a @ b), rtol=1e-4, atol=1e-4, msg=v["variant"])
