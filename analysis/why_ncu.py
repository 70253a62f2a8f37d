"""What differs inside the kernels, from Nsight Compute (experiments/why_ncu.py's rows, one per GPU kernel of one
call): the sentences the findings quote for the equal-bytes gaps (softmax, row-sum, the norms: the builtin moves
about our bytes and is slower), the matrix product's precisions and attention against cuDNN, and the two tables
they cite. Every number comes from the rows; without rows each sentence says "not measured on this run". Pure
functions of frames: tests run them on synthetic rows.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.latex import DTYPE_SHORT, count_phrase, fmt, long_table, table_latex, tex_escape
from analysis.why_timed import timed_note
from analysis.why_tables import NOT_MEASURED
from rooflab.gpus import spec_for

SUM = ("duration_us", "dram_bytes", "tensor_inst", "ffma_thread_inst", "ldg_inst", "stg_inst", "ldgsts_inst",
       "tma_inst")
WEIGHTED = ("dram_pct", "sm_pct", "achieved_occupancy_pct")  # over a call's kernels, weighted by their duration
MAIN = ("short_name", "theoretical_occupancy_pct", "achieved_occupancy_pct", "occupancy_limiter",
        "registers_per_thread", "shared_mem_bytes", "grid_size", "block_size", "waves_per_sm", "stall_top", "timestamp")
CALL = ["kernel", "dtype", "size", "pass", "impl"]
CALL_COLUMNS = CALL + ["kernels", *SUM, *WEIGHTED] + [f"main_{c}" for c in MAIN]
WHO = {
    "builtin": "the builtin",
    "triton": "ours",
    "sdpa_cudnn": "SDPA's cuDNN backend",
    "compile": "torch.compile",
    "naive": "naive PyTorch",
    "cuda": "our CUDA"
}
STALL_WORDS = {
    "long_scoreboard": "long scoreboard (waiting on global memory)",
    "short_scoreboard": "short scoreboard (waiting on shared memory or special functions)",
    "barrier": "barrier (waiting for the block's other warps)",
    "wait": "fixed-latency wait",
    "math_pipe_throttle": "math pipe throttle",
    "mio_throttle": "MIO throttle (shared-memory queue)",
    "lg_throttle": "LG throttle (global-memory queue)",
    "not_selected": "not selected (another warp "
    "issued)",
    "dispatch_stall": "dispatch stall",
    "no_instruction": "no instruction"
}
GAP_KERNELS = {"WhyNcuSoftmax": ("softmax", ), "WhyNcuRowsum": ("rowsum", ), "WhyNcuNorms": ("layernorm", "rmsnorm")}
PRECISION_LABEL = {"float32": "float32 (IEEE products)", "tf32": "TF32", "bfloat16": "bfloat16", "float16": "float16"}


def calls(why: pd.DataFrame | None) -> pd.DataFrame:
    """One row per profiled call (kernel, dtype, size, pass, impl): its kernels, the sums of SUM, the duration-
    weighted means of WEIGHTED, and the facts of its longest kernel (main_*). Calls that failed or launched nothing
    profiled are left out."""
    if why is None or why.empty or "duration_us" not in why:
        return pd.DataFrame(columns=CALL_COLUMNS)
    w = why[why["duration_us"].notna()]
    if "error" in w:
        w = w[w["error"].fillna("").astype(str) == ""]
    rows = []
    for key, g in w.groupby(CALL, sort=False):
        weight = g["duration_us"].astype(float)
        row = dict(zip(CALL, key), kernels=len(g))
        for c in SUM:
            v = g[c].astype(float) if c in g else pd.Series(np.nan, index=g.index)
            row[c] = float(v.sum()) if v.notna().any() else np.nan
        for c in WEIGHTED:
            v = g[c].astype(float) if c in g else pd.Series(np.nan, index=g.index)
            ok = v.notna()
            row[c] = float((v[ok] * weight[ok]).sum() / weight[ok].sum()) if ok.any() and weight[ok].sum() else np.nan
        main = g.loc[weight.idxmax()]
        row.update({f"main_{c}": main.get(c, np.nan) for c in MAIN})
        rows.append(row)
    return pd.DataFrame(rows, columns=CALL_COLUMNS)


def _pct(v) -> str:
    return f"{fmt(float(v), 2)}\\,\\%" if pd.notna(v) else "n/a"


def _count(v) -> str:
    """An instruction count in words: '4.19 million', '0'."""
    if not pd.notna(v):
        return "n/a"
    for scale, word in ((1e9, "billion"), (1e6, "million"), (1e3, "thousand")):
        if abs(v) >= scale:
            return f"{fmt(v / scale)} {word}"
    return fmt(float(v))


def _name(r) -> str:
    return f"\\texttt{{{tex_escape(str(r['main_short_name']))}}}".replace("\\_", "\\_\\allowbreak{}")


def stall_phrase(stall_top) -> str:
    """'long scoreboard (waiting on global memory), 12.4 cycles per issued instruction' from rooflab/ncu's
    stall_top ('long_scoreboard 12.4; ...'); '' without one."""
    if not isinstance(stall_top, str) or not stall_top.strip():
        return ""
    reason, value = stall_top.split(";")[0].strip().rsplit(" ", 1)
    return (f"{tex_escape(STALL_WORDS.get(reason, reason.replace('_', ' ')))}, {fmt(float(value))} cycles an "
            "issued instruction")


def _limited(r) -> str:
    lim = r["main_occupancy_limiter"]
    return f", limited by {tex_escape(lim)}" if isinstance(lim, str) and lim else ""


def _head(who: str, r) -> str:
    """'the builtin (\\texttt{x}, 1,460 µs)' / 'ours (3 kernels, 900 µs; the longest \\texttt{y})': a singular
    subject whatever the count."""
    t = f"{fmt(r['duration_us'])}~\\textmu s"
    if int(r["kernels"]) == 1:
        return f"{who} ({_name(r)}, {t})"
    return f"{who} ({count_phrase(int(r['kernels']), 'kernel')}, {t}; the longest {_name(r)})"


def _stall(r) -> str:
    stall = stall_phrase(r["main_stall_top"])
    return f"; top stall: {stall}" if stall else ""


def memory_side(who: str, r) -> str:
    """One implementation of an equal-bytes gap: DRAM throughput against peak, occupancy achieved and theoretical
    and its limiter, grid, block and waves, and the stall that holds its warps most."""
    return (f"{_head(who, r)} reaches {_pct(r['dram_pct'])} of DRAM peak at {_pct(r['main_achieved_occupancy_pct'])} "
            f"achieved occupancy ({_pct(r['main_theoretical_occupancy_pct'])} theoretical{_limited(r)}; "
            f"{fmt(r['main_grid_size'])} blocks of {fmt(r['main_block_size'])} threads, "
            f"{fmt(r['main_waves_per_sm'])} waves{_stall(r)})")


def loads_phrase(r) -> str:
    """How the call's kernels bring operands in: TMA, LDGSTS (cp.async) or plain LDG, with counts."""
    said = [
        f"{_count(r[c])} {w}" for c, w in (("tma_inst", "TMA loads"), ("ldgsts_inst", "LDGSTS"), ("ldg_inst", "LDG"))
        if pd.notna(r[c]) and r[c] > 0
    ]
    return ", ".join(said) if said else "no global load counted"


def compute_side(who: str, r) -> str:
    """One implementation of a compute-bound call: the instruction mix (tensor-core against FFMA), how operands
    arrive, SM throughput, registers, shared memory, occupancy and its limiter, and the top stall."""
    smem = r["main_shared_mem_bytes"]
    tensor, ffma = r["tensor_inst"], r["ffma_thread_inst"]
    warp_ffma = ffma / 32 if pd.notna(ffma) else np.nan  # FFMA counted per thread, tensor-core per warp
    if pd.notna(tensor) and pd.notna(warp_ffma) and tensor < 1e-3 * (tensor + warp_ffma):
        stray = ("no tensor-core instruction" if tensor == 0 else
                 f"its {_count(tensor)} tensor-core warp instructions are under 0.1\\,\\% of its math instructions")
        mix = f"runs its math on the FMA units ({_count(ffma)} FFMA thread instructions; {stray})"
    else:
        mix = (f"issues {_count(tensor)} tensor-core (HMMA/HGMMA) warp instructions and {_count(ffma)} FFMA thread "
               f"instructions")
    return (f"{_head(who, r)} {mix}, loads with {loads_phrase(r)}, and reaches "
            f"{_pct(r['sm_pct'])} of the SM's peak throughput ({fmt(r['main_registers_per_thread'])} registers a "
            f"thread, {fmt(smem / 1024) if pd.notna(smem) else 'n/a'}~KiB of shared memory a block; "
            f"{_pct(r['main_achieved_occupancy_pct'])} occupancy, {_pct(r['main_theoretical_occupancy_pct'])} "
            f"theoretical{_limited(r)}{_stall(r)})")


def _cell(c: pd.DataFrame, kernel: str, dtype: str | None = None, pass_: str | None = None) -> pd.DataFrame:
    out = c[c["kernel"] == kernel]
    if dtype is not None:
        out = out[out["dtype"] == dtype]
    if pass_ is not None:
        out = out[out["pass"] == pass_]
    if out.empty:
        return out
    first = out.iloc[0]
    return out[(out["dtype"] == first["dtype"]) & (out["size"] == first["size"]) & (out["pass"] == first["pass"])]


def _where(r) -> str:
    p = "" if r["pass"] == "fwd" else f", {tex_escape(str(r['pass']))}"
    at = f"sequence length {int(r['size'])}" if r["kernel"] == "attention" else f"$N={int(r['size'])}$"
    return f"{tex_escape(str(r['dtype']))} at {at}{p}"


ISSUE_STALLS = {"not_selected", "math_pipe_throttle", "dispatch_stall"}  # warps ready: the issue is the limit
MEMORY_STALLS = {"long_scoreboard", "lg_throttle", "drain"}  # warps waiting on global memory


def _stall_kind(r) -> str:
    top = r.get("main_stall_top")
    reason = top.split(";")[0].strip().rsplit(" ", 1)[0] if isinstance(top, str) and top.strip() else ""
    return "issue" if reason in ISSUE_STALLS else "memory" if reason in MEMORY_STALLS else ""


def gap_finding(b, t) -> str:
    """The finding of one gap, first: what differs between the builtin's kernel (b) and ours (t), from the profile's
    top stalls, DRAM throughput and occupancy."""
    dram = f"{_pct(t['dram_pct'])} of DRAM peak against the builtin's {_pct(b['dram_pct'])}"
    if _stall_kind(b) == "issue" and _stall_kind(t) == "memory":
        return (f"what differs is that the builtin's kernel is held by issuing instructions (its warps wait their "
                f"turn, not on memory), while ours waits on memory as a kernel at the memory wall does, and reaches "
                f"{dram}.")
    occ = t["main_achieved_occupancy_pct"] / b["main_achieved_occupancy_pct"]
    more = (f", at {fmt(occ, 2)}$\\times$ its achieved occupancy" if pd.notna(occ) and not 0.77 < occ < 1.3 else "")
    if _stall_kind(b) == _stall_kind(t) == "memory":
        return f"both kernels wait on memory most, and ours reaches {dram}{more}."
    return f"ours reaches {dram}{more}."


def gap_sentence(c: pd.DataFrame, kernels) -> str:
    """The equal-bytes gaps of ``kernels``, the builtin beside ours (Nsight Compute, one call each); the kernels
    without both rows named together as not measured."""
    said, missing = [], []
    for kernel in kernels:
        g = _cell(c, kernel).set_index("impl")
        if not {"builtin", "triton"} <= set(g.index):
            missing.append(f"{tex_escape(kernel)}'s")
            continue
        b, t = g.loc["builtin"], g.loc["triton"]
        slower, more = b["duration_us"] / t["duration_us"], b["dram_bytes"] / t["dram_bytes"]
        said.append(f"In {tex_escape(kernel)} ({_where(t)}; Nsight Compute, one call each), {gap_finding(b, t)} "
                    f"In detail, "
                    f"{memory_side('the builtin', b)}; {memory_side('ours', t)}. The builtin's time is "
                    f"{fmt(slower)}$\\times$ ours under the profiler, for {fmt(more)}$\\times$ our DRAM bytes" +
                    (f": not equal bytes, which alone could explain up to {fmt(more)}$\\times$ of the "
                     f"{fmt(slower)}$\\times$." if more >= 1.2 else "."))
    if missing:
        said.append(f"What differs inside {' and '.join(missing)} kernels (occupancy, DRAM throughput, grid, "
                    f"stalls) is {NOT_MEASURED}.")
    return " ".join(said)


def matmul_sentence(c: pd.DataFrame, timed: pd.DataFrame | None = None) -> str:
    """The matrix product in each precision profiled: cuBLAS (the builtin) beside ours, and the sweep's ratio where
    it differs from the profile's (timed_note)."""
    said = []
    for dtype in ("float32", "tf32", "bfloat16", "float16"):
        g = _cell(c, "matmul", dtype).set_index("impl")
        if not {"builtin", "triton"} <= set(g.index):
            continue
        b, t = g.loc["builtin"], g.loc["triton"]
        said.append(f"In {PRECISION_LABEL[dtype]} at $N={int(t['size'])}$ (Nsight Compute, one call each), "
                    f"{compute_side('cuBLAS', b)}; "
                    f"{compute_side('ours', t)}; ours takes {fmt(t['duration_us'] / b['duration_us'])}$\\times$ "
                    "cuBLAS's time under the profiler." + timed_note(timed, dtype, b, t))
    if not said:
        return (f"What differs inside the matrix product's kernels (the instruction mix, registers, shared memory, "
                f"occupancy) is {NOT_MEASURED}.")
    return " ".join(said)


def instruction_ratios(ours, other, name: str) -> str:
    """', issuing Nx NAME's FFMA and Mx its tensor-core instructions' where both sides counted them (else '')."""
    said = [
        f"{fmt(ours[col] / other[col])}$\\times$ {what}" for col, what in (("ffma_thread_inst", f"{name}'s FFMA"),
                                                                           ("tensor_inst",
                                                                            "its tensor-core instructions"))
        if pd.notna(ours.get(col)) and pd.notna(other.get(col)) and other[col] > 0
    ]
    return f", issuing {' and '.join(said)}" if said else ""


def attention_sentence(c: pd.DataFrame) -> str:
    """Attention, forward and forward+backward: ours beside SDPA's cuDNN backend (forced; else the builtin)."""
    said = []
    for pass_ in ("fwd", "fwd+bwd"):
        g = _cell(c, "attention", pass_=pass_).set_index("impl")
        other = next((i for i in ("sdpa_cudnn", "builtin") if i in g.index), None)
        if other is None or "triton" not in g.index:
            continue
        o, t = g.loc[other], g.loc["triton"]
        name = "cuDNN" if other == "sdpa_cudnn" else "the builtin"
        said.append(f"{'Forward' if pass_ == 'fwd' else 'Forward and backward'} ({_where(t)}; Nsight Compute, "
                    "one call each): "
                    f"{compute_side(WHO[other], o)}; {compute_side('ours', t)}; ours takes "
                    f"{fmt(t['duration_us'] / o['duration_us'])}$\\times$ {name}'s time under the profiler"
                    f"{instruction_ratios(t, o, name)}.")
    if not said:
        return f"What differs inside attention's kernels against cuDNN's is {NOT_MEASURED}."
    return " ".join(said)


def measured_kernels(why: pd.DataFrame | None) -> set[str]:
    """The kernels whose builtin and ours were both profiled (the kernel sections point to the findings for them)."""
    c = calls(why)
    return {k for k, g in c.groupby("kernel") if {"builtin", "triton"} <= set(g["impl"])}


def card_of(why: dict[str, pd.DataFrame] | None, gpu: str) -> str | None:
    """The GPU whose Nsight Compute rows the paper reads: the headline GPU's where it has profiled calls, else the
    first other GPU (in key order) that has (the SM and its kernels' instruction mix, occupancy and stalls are the
    same on an H100 and an H200; DRAM bytes are the same, DRAM time is not), else None."""
    have = [g for g in sorted(why or {}) if not calls(why[g]).empty]
    return gpu if gpu in have else (have[0] if have else None)


def card_name(card: str | None) -> str:
    """'the NVIDIA H100 SXM' for a known key (rooflab.gpus.SPECS), 'the <KEY>' otherwise."""
    spec = spec_for(card) if card else None
    return f"the {tex_escape(spec.name if spec else str(card).upper())}"


def why_ncu_macros(m, why: pd.DataFrame | None, card: str | None = None, headline: str | None = None,
                   timed: pd.DataFrame | None = None) -> None:
    """The findings' sentences (WhyNcuSoftmax, WhyNcuRowsum, WhyNcuNorms, WhyNcuMatmul, WhyNcuAttention);
    WhyNcuOn, ' on <the card they were measured on>' (empty without rows: the sentences say "not measured"); and
    WhyNcuOtherCard, the threat it is where that card is not the ``headline`` GPU the timings come from."""
    c = calls(why)
    measured = card is not None and not c.empty
    m.add("WhyNcuOn", f" on {card_name(card)}" if measured else "",
          "the GPU whose Nsight Compute rows the 'inside the kernels' sentences and tables read")
    other = measured and headline is not None and card != headline
    text = (f"The Nsight Compute rows (Appendix~\\ref{{sec:why-detail}}) come from {card_name(card)}, not from "
            f"{card_name(headline)} that gave the timings: the two have the same SM, so a kernel's instruction mix, "
            "occupancy and stalls carry over; its DRAM time and share of peak do not.")
    m.add("WhyNcuOtherCard", text if other else "",
          "where the Nsight Compute rows come from another card than the timings")
    for name, kernels in GAP_KERNELS.items():
        m.add(name, gap_sentence(c, kernels),
              "Nsight Compute: what differs inside the kernels of an equal-bytes gap (experiments/why_ncu.py)")
    timed = timed[timed["gpu"] == card] if timed is not None and card is not None else None
    m.add("WhyNcuMatmul", matmul_sentence(c, timed), "Nsight Compute: the matrix product's instruction mix, ours and "
          "cuBLAS")
    m.add("WhyNcuAttention", attention_sentence(c), "Nsight Compute: attention, ours and cuDNN")


def _mib(v) -> float:
    return v / 1e6 if pd.notna(v) else np.nan


def _short_limiter(text: str) -> str:
    """'registers and shared memory' -> 'regs, smem': the table's narrow column."""
    for long, short in (("registers", "regs"), ("shared memory", "smem"), ("block size", "block"), (" and ", ", ")):
        text = text.replace(long, short)
    return text


def why_ncu_tables(why: pd.DataFrame | None) -> str:
    """Two floats: per call, the traffic and occupancy side (kernels, time, DRAM bytes and % of peak, SM %,
    occupancy achieved and theoretical, limiter, grid, block, waves), and inside its longest kernel (registers,
    shared memory, instruction mix, top stalls)."""
    c = calls(why)
    if c.empty:
        return (f"\\begin{{center}}What differs inside the kernels under Nsight Compute is {NOT_MEASURED} "
                "(\\texttt{experiments/why\\_ncu.py}).\\end{center}\n")
    short = {"builtin": "builtin", "triton": "ours", "sdpa_cudnn": "cuDNN"}
    head = pd.DataFrame({
        "cell": [
            f"{k} {DTYPE_SHORT.get(d, d)} {int(n)}" + ("" if p == "fwd" else f" {p}")
            for k, d, n, p in zip(c["kernel"], c["dtype"], c["size"], c["pass"])
        ],
        "impl":
        c["impl"].map(lambda i: short.get(i, i))
    })
    side = head.assign(
        **{
            "kernels": c["kernels"].astype(int),
            "time [us]": c["duration_us"],
            "DRAM [MB]": c["dram_bytes"].map(_mib),
            "DRAM %": c["dram_pct"],
            "SM %": c["sm_pct"],
            "occ. %": c["main_achieved_occupancy_pct"],
            "theor. %": c["main_theoretical_occupancy_pct"],
            "limited by": c["main_occupancy_limiter"].fillna("").map(_short_limiter),
            "grid": c["main_grid_size"],
            "block": c["main_block_size"],
            "waves": c["main_waves_per_sm"]
        })
    inside = head.assign(
        **{
            "longest kernel": c["main_short_name"].astype(str).str.replace(r"(?<=[a-z])(?=[A-Z])", "\u200b",
                                                                           regex=True),
            "regs": c["main_registers_per_thread"],
            "smem KiB": c["main_shared_mem_bytes"] / 1024,
            "tensor": c["tensor_inst"] / 1e6,
            "FFMA": c["ffma_thread_inst"] / 1e6,
            "LDG": c["ldg_inst"] / 1e6,
            "LDGSTS": c["ldgsts_inst"] / 1e6,
            "TMA": c["tma_inst"] / 1e6,
            "top stalls": c["main_stall_top"].fillna("").map(lambda t: "; ".join(t.split("; ")[:2]).replace("_", " "))
        })
    nums = {
        k: fmt
        for k in ("time [us]", "DRAM [MB]", "DRAM %", "SM %", "occ. %", "theor. %", "grid", "block", "waves", "regs",
                  "smem KiB", "tensor", "FFMA", "LDG", "LDGSTS", "TMA")
    }
    wrap = ">{\\raggedright\\arraybackslash}p{%s}"
    first = table_latex(side, nums, wrap % "2.1cm" + "lrrrrrrr" + wrap % "1.4cm" + "rrr").replace(
        "[us]", "[\\si{\\micro\\second}]")
    second = table_latex(inside, nums, wrap % "2cm" + "l" + wrap % "2.9cm" + "rrrrrrr" + wrap % "2.2cm").replace(
        "\\_", "\\_\\allowbreak{}").replace("\u200b", "\\allowbreak{}")  # names break after _ and inside CamelCase
    return (
        "\\begin{table}[htbp]\n\\centering\\scriptsize\\setlength{\\tabcolsep}{2pt}\n"
        "\\caption{What one call's kernels do, under Nsight Compute\\WhyNcuOn{} (its own clocks, caches "
        "flushed before each kernel): kernels launched, their time, DRAM bytes, DRAM and SM throughput as a "
        "share of peak (weighted by duration), and for the longest kernel its achieved and theoretical occupancy, "
        "what limits it (regs: registers, smem: shared memory, block: block size), and its grid, block and "
        "waves.}\n\\label{tab:why-ncu}\n" + first + "\\end{table}\n" + long_table(
            second, "Inside the same calls: the longest kernel's registers a thread, shared memory a block and top "
            "two warp stalls (cycles per issued instruction), and the call's instruction mix in millions: tensor-core "
            "(HMMA/HGMMA), LDG, LDGSTS and TMA-load instructions per warp, FFMA per thread.", "tab:why-ncu-inside",
            "2pt"))  # a library kernel's name runs over several lines: the table outgrows a page
