"""GeLU's launch plan (kernels/gelu/plan.py) as a pure function: element count and dtype in, the launch out, on the
CPU, nothing launched. (tests/test_launch_pins.py pins every launch the wrapper makes from it.)"""
import torch

from kernels import gelu
from kernels.gelu import plan


def test_the_table_picks_the_tile_by_dtype():
    fp32, bf16 = (plan.forward(8192 * 8192, d, gelu.LAUNCH) for d in (torch.float32, torch.bfloat16))
    assert (fp32.meta["BLOCK_SIZE"], fp32.meta["num_warps"]) == gelu.LAUNCH[torch.float32]
    assert (bf16.meta["BLOCK_SIZE"], bf16.meta["num_warps"]) == gelu.LAUNCH[torch.bfloat16]
    assert fp32.grid == (8192 * 8192 // fp32.meta["BLOCK_SIZE"], ) and fp32.ints == (8192 * 8192, )


def test_a_partial_last_block_gets_its_own_program():
    launch = plan.forward(1793 * 1793, torch.float32, {torch.float32: (1024, 8)})
    assert launch.grid == (1793 * 1793 // 1024 + 1, )
    assert plan.forward(1, torch.float32, {torch.float32: (1024, 8)}).grid == (1, )


def test_overrides_win_over_the_table():
    launch = plan.forward(5000, torch.float16, gelu.LAUNCH, block_size=256, num_warps=2, precise=True)
    assert launch.meta == {"BLOCK_SIZE": 256, "PRECISE": True, "num_warps": 2} and launch.grid == (20, )
