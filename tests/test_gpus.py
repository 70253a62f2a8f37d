"""The GPU spec table and detection: one source of truth for datasheet figures."""
import pytest

from rooflab.gpus import SPECS, key_for_name, unknown_gpu_message


@pytest.mark.parametrize("name,key", [("NVIDIA H200", "h200"), ("NVIDIA H100 80GB HBM3", "h100"),
                                      ("NVIDIA A100-SXM4-80GB", "a100"), ("NVIDIA B200", "b200"),
                                      ("NVIDIA L4", "nvidia-l4"), ("Tesla V100-SXM2-16GB", "tesla-v100-sxm2-16gb"), ])
def test_detection_maps_names_to_keys(name, key):
    assert key_for_name(name) == key


def test_unknown_gpu_message_is_actionable():
    msg = unknown_gpu_message("nvidia-l4", "NVIDIA L4")
    assert "NVIDIA L4" in msg and "measured ceilings" in msg and "rooflab/gpus.py" in msg


def test_sxm_figures_not_pcie():
    # The classic mistakes: A100 80GB PCIe 1.935 TB/s, H100 PCIe 2.0 TB/s.
    assert SPECS["a100"].mem_bandwidth == pytest.approx(2.039e12)
    assert SPECS["h100"].mem_bandwidth == pytest.approx(3.35e12)
    assert SPECS["h200"].mem_bandwidth == pytest.approx(4.8e12)
    assert SPECS["b200"].bf16_flops == pytest.approx(2250e12)


def test_ridge_points():
    # H200: 989.5 TFLOP/s bf16 over 4.8 TB/s ~ 206 FLOP/byte; H100 ~ 295.
    assert SPECS["h200"].ridge_point == pytest.approx(206.1, abs=0.1)
    assert SPECS["h100"].ridge_point == pytest.approx(295.4, abs=0.1)


def test_every_spec_has_a_source():
    for spec in SPECS.values():
        assert spec.source and spec.sms > 0 and spec.peak_flops("fp32") < spec.peak_flops("bf16")
