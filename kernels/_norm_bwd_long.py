"""The norms' backward on rows too long to hold (kernels/_norm_bwd.py holds the rest): two ways to read them twice.

A row's dx needs its statistics, which need the whole row: a row longer than a program holds is read twice.
- Row loop (one launch): each program walks its rows one at a time, each in BLOCK_N tiles twice, the statistics
  then dx and its partial dweight, dbias. The grid is sized so its programs' rows fit the L2 at once: the second read
  comes from the L2, and DRAM sees x and dy once. For many rows whose programs' rows fit.
- Column tiles (two launches): each tile of each row its statistics, then each tile combines its row's and writes
  dx; x and dy come from DRAM twice. For few rows (a loop over them would leave SMs idle) or rows past the L2.
LayerNorm combines tiles about their own means (Chan's formula): a large mean does not cancel the variance away.
"""
from __future__ import annotations

import triton
import triton.language as tl

# The row loop's grid: at most LOOP_PER_SM programs a SM, and no more than keep their rows' x, dy and partial sums
# within LOOP_L2_SHARE of the L2 at once (fewer than one a SM: the column tiles take the rows instead)
LOOP_PER_SM, LOOP_L2_SHARE = 2, 0.5
LOOP_TILE, LOOP_WARPS = 4096, 8  # columns a step of the row loop, and its warps


@triton.jit
def _norm_bwd_loop_kernel(x_ptr, w_ptr, dy_ptr, dx_ptr, part_ptr, n_rows, n_cols, eps,
                          BLOCK_N: tl.constexpr, CENTRE: tl.constexpr, HAS_BIAS: tl.constexpr,
                          ALIGN: tl.constexpr = 1):
    # Program pid takes rows pid, pid + programs, ...; part[0, pid] (part[1, pid]) sums its rows' dweight (dbias)
    # terms: its first row stores them, later rows add theirs (the part row stays in the L2 between them).
    n_cols = n_cols // ALIGN * ALIGN
    pid = tl.program_id(axis=0)
    programs = tl.num_programs(axis=0)
    cols = tl.arange(0, BLOCK_N)
    dw_ptr = part_ptr + pid.to(tl.int64) * n_cols
    db_ptr = part_ptr + (programs + pid).to(tl.int64) * n_cols
    for step in range(0, tl.cdiv(n_rows - pid, programs)):
        row = pid.to(tl.int64) + step * programs
        offset = row * n_cols  # int64: row * n_cols passes 2^31
        n, mean, m2, sgx, sg = 0.0, 0.0, 0.0, 0.0, 0.0
        xx = tl.zeros((BLOCK_N,), dtype=tl.float32)
        gx = tl.zeros((BLOCK_N,), dtype=tl.float32)
        for start in range(0, n_cols, BLOCK_N):  # first read: the row's statistics
            c = start + cols
            mask = c < n_cols
            x = tl.load(x_ptr + offset + c, mask=mask, other=0.0).to(tl.float32)
            g = tl.load(w_ptr + c, mask=mask, other=0.0).to(tl.float32) * \
                tl.load(dy_ptr + offset + c, mask=mask, other=0.0).to(tl.float32)
            if CENTRE:  # fold the tile's sums about its own mean into the row's (Chan)
                count = tl.minimum(n_cols - start, BLOCK_N).to(tl.float32)
                t_mean = tl.sum(x, axis=0) / count
                xc = tl.where(mask, x - t_mean, 0.0)
                t_sg = tl.sum(g, axis=0)
                total = n + count
                new_mean = mean + (t_mean - mean) * (count / total)
                m2 += tl.sum(xc * xc, axis=0) + (t_mean - mean) * (t_mean - mean) * (n * count / total)
                sgx += (mean - new_mean) * sg + tl.sum(g * xc, axis=0) + (t_mean - new_mean) * t_sg
                sg += t_sg
                mean, n = new_mean, total
            else:  # RMSNorm: plain sums, reduced once after the loop
                xx += x * x
                gx += g * x
        if not CENTRE:
            m2, sgx = tl.sum(xx, axis=0), tl.sum(gx, axis=0)
        rstd = 1.0 / tl.sqrt(m2 / n_cols + eps)
        c1 = sgx * rstd / n_cols  # mean(g * x_hat)
        c2 = sg / n_cols  # mean(g); 0 for RMSNorm
        later = step > 0  # not the program's first row: its partial sums add to those stored
        for start in range(0, n_cols, BLOCK_N):  # second read, from the L2: dx, dweight and dbias terms
            c = start + cols
            mask = c < n_cols
            x = tl.load(x_ptr + offset + c, mask=mask, other=0.0).to(tl.float32)
            dy = tl.load(dy_ptr + offset + c, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + c, mask=mask, other=0.0).to(tl.float32)
            x_hat = tl.where(mask, x - mean, 0.0) * rstd
            tl.store(dx_ptr + offset + c, ((w * dy - x_hat * c1 - c2) * rstd).to(dx_ptr.dtype.element_ty), mask=mask)
            tl.store(dw_ptr + c, tl.load(dw_ptr + c, mask=mask & later, other=0.0) + dy * x_hat, mask=mask)
            if HAS_BIAS:
                tl.store(db_ptr + c, tl.load(db_ptr + c, mask=mask & later, other=0.0) + dy, mask=mask)


@triton.jit
def _norm_bwd_tile_stats_kernel(x_ptr, w_ptr, dy_ptr, stats_ptr, n_cols, n_tiles, BLOCK_N: tl.constexpr,
                                CENTRE: tl.constexpr, ALIGN: tl.constexpr = 1):
    # Column tiles, launch 1: one column tile of one row a program; its (mean, squared deviations, sum of
    # g * (x - mean), sum of g) over its own columns into stats[row, tile, 0:4] (RMSNorm: mean 0).
    n_cols = n_cols // ALIGN * ALIGN
    pid = tl.program_id(axis=0)
    row, tile = pid // n_tiles, pid % n_tiles
    cols = tile * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    offset = row.to(tl.int64) * n_cols
    x = tl.load(x_ptr + offset + cols, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32) * \
        tl.load(dy_ptr + offset + cols, mask=mask, other=0.0).to(tl.float32)
    if CENTRE:
        mean = tl.sum(x, axis=0) / tl.minimum(n_cols - tile * BLOCK_N, BLOCK_N)
        x = tl.where(mask, x - mean, 0.0)
    else:
        mean = 0.0
    out = stats_ptr + pid.to(tl.int64) * 4
    tl.store(out, mean)
    tl.store(out + 1, tl.sum(x * x, axis=0))
    tl.store(out + 2, tl.sum(g * x, axis=0))
    tl.store(out + 3, tl.sum(g, axis=0))


@triton.jit
def _norm_bwd_tile_apply_kernel(x_ptr, w_ptr, dy_ptr, dx_ptr, stats_ptr, part_ptr, n_rows,
                                n_cols, n_tiles, eps, ROWS_PER_PROGRAM: tl.constexpr, BLOCK_N: tl.constexpr,
                                BLOCK_T: tl.constexpr, CENTRE: tl.constexpr, HAS_BIAS: tl.constexpr,
                                ALIGN: tl.constexpr = 1):
    # Column tiles, launch 2: one column tile of ROWS_PER_PROGRAM rows a program; each row's statistics from its
    # tiles' (in tile order), then dx of the tile and the rows' partial dweight, dbias into part[row block, cols].
    n_cols = n_cols // ALIGN * ALIGN
    pid = tl.program_id(axis=0)
    block, tile = pid // n_tiles, pid % n_tiles
    cols = tile * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    tiles = tl.arange(0, BLOCK_T)
    t_mask = tiles < n_tiles
    counts = tl.minimum(n_cols - tiles * BLOCK_N, BLOCK_N).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.zeros((BLOCK_N,), dtype=tl.float32)
    db = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for i in range(ROWS_PER_PROGRAM):
        row = block * ROWS_PER_PROGRAM + i
        if row < n_rows:
            stats = stats_ptr + (row.to(tl.int64) * n_tiles + tiles) * 4
            t_mean = tl.load(stats, mask=t_mask, other=0.0)
            t_sg = tl.load(stats + 3, mask=t_mask, other=0.0)
            mean = tl.sum(tl.where(t_mask, counts * t_mean, 0.0), axis=0) / n_cols
            d = t_mean - mean  # Chan: the row's sums from its tiles' about their own means
            m2 = tl.sum(tl.load(stats + 1, mask=t_mask, other=0.0) + tl.where(t_mask, counts * d * d, 0.0), axis=0)
            sgx = tl.sum(tl.load(stats + 2, mask=t_mask, other=0.0) + d * t_sg, axis=0)
            rstd = 1.0 / tl.sqrt(m2 / n_cols + eps)
            offset = row.to(tl.int64) * n_cols
            x = tl.load(x_ptr + offset + cols, mask=mask, other=0.0).to(tl.float32)
            dy = tl.load(dy_ptr + offset + cols, mask=mask, other=0.0).to(tl.float32)
            x_hat = tl.where(mask, x - mean, 0.0) * rstd
            dx = w * dy - x_hat * (sgx * rstd / n_cols)
            if CENTRE:
                dx = dx - tl.sum(t_sg, axis=0) / n_cols
            tl.store(dx_ptr + offset + cols, (dx * rstd).to(dx_ptr.dtype.element_ty), mask=mask)
            dw += dy * x_hat
            if HAS_BIAS:
                db += dy
    tl.store(part_ptr + block.to(tl.int64) * n_cols + cols, dw, mask=mask)
    if HAS_BIAS:
        db_row = (tl.num_programs(axis=0) // n_tiles + block).to(tl.int64)
        tl.store(part_ptr + db_row * n_cols + cols, db, mask=mask)


def loop_programs(n_rows: int, n_cols: int, element_size: int, has_bias: bool, sms: int, l2_bytes: float) -> int:
    """The row loop's programs for these rows, or 0 where it should not take them: fewer rows than SMs, or rows
    whose x, dy and fp32 partial sums (dweight, dbias) would not fit LOOP_L2_SHARE of the L2 at one program a SM."""
    per_program = n_cols * (2 * element_size + 4 * (1 + has_bias))
    fit = int(LOOP_L2_SHARE * l2_bytes) // per_program
    if n_rows < sms or fit < sms:
        return 0
    return min(n_rows, sms * LOOP_PER_SM, fit)
