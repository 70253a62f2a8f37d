"""The paper's headline GPU (analysis/selection.headline_gpu): the GPU with timed cells of the most kernels, so a
partial reference of another card (a few kernels) never becomes the headline; the CPU never is."""
import pandas as pd

from analysis.selection import headline_gpu


def _rows(gpu, kernels, status="ok"):
    return pd.DataFrame({"gpu": gpu, "kernel": kernels, "status": status})


def test_the_gpu_with_the_most_kernels_leads_whatever_its_order():
    partial = _rows("h100", ["vecadd", "saxpy"])
    full = _rows("h200", ["vecadd", "saxpy", "softmax", "matmul"])
    assert headline_gpu(pd.concat([partial, full])) == "h200"
    assert headline_gpu(pd.concat([full, partial])) == "h200"


def test_a_tie_keeps_the_tables_order_and_failed_or_cpu_cells_do_not_count():
    a, b = _rows("h100", ["vecadd", "gelu"]), _rows("h200", ["vecadd", "gelu"])
    assert headline_gpu(pd.concat([a, b])) == "h100"
    failed = _rows("b200", ["vecadd", "gelu", "softmax"], status="failed")
    cpu = _rows("cpu", ["vecadd", "gelu", "softmax", "matmul"])
    assert headline_gpu(pd.concat([cpu, failed, b])) == "h200"
    assert headline_gpu(pd.concat([cpu, failed])) == ""


def test_the_glance_sentence_names_a_cause_for_every_win_and_agrees_in_number():
    from analysis.results import glance_sentence

    rows = pd.DataFrame({
        "gpu_verdict": ["faster"] * 4 + ["tie"] * 2,
        "cause_kind": ["traffic", "traffic", "launches", "below", "wall", "memory"]
    })
    text = glance_sentence(rows)
    assert "Of the 4 rows where ours is faster" in text and "more DRAM bytes than ours in 2" in text
    assert "launches more kernels in 1; in the other 1 neither was measured larger" in text
    assert "Of the 2 ties, 1 is memory-bound" in text


def test_the_graph_sentence_names_the_kernels_a_replay_leaves_slower():
    from analysis.paper_inputs import host_graph_sentence

    rows = pd.DataFrame({"kernel": ["attention", "gelu"], "graph_builtin": [71.5, 1.3], "graph_triton": [99.7, 1.4]})
    assert host_graph_sentence(rows) == ("Replayed from a CUDA graph, ours is within 10\\,\\% of the builtin or faster "
                                         "for 1 of 2 kernels; slower: attention (99.7 against 71.5~\\textmu s).")
    assert host_graph_sentence(rows.iloc[1:]).endswith("or faster for the one kernel.")
    assert host_graph_sentence(rows.iloc[:1]) == ("Replayed from a CUDA graph, ours stays more than 10\\,\\% slower "
                                                  "than the builtin: attention (99.7 against 71.5~\\textmu s).")
    assert host_graph_sentence(rows.drop(columns="graph_triton")) == ""
    looped = rows.assign(loop_builtin=[80.0, 9.3],
                         loop_triton=[120.0, 19.4])  # ours adds 20.3 and 18.0, the builtin 8.5 and 8.0
    said = host_graph_sentence(looped)
    assert said.startswith("A call from Python takes a median 19.1~\\textmu s longer than its graph replay for ours "
                           "and 8.25~\\textmu s for the builtin") and "over 2 kernels" in said
    assert said.endswith("slower: attention (99.7 against 71.5~\\textmu s).")


def test_the_alignment_finding_gives_each_sides_rate_and_share(monkeypatch):
    from analysis import why_tables

    t = pd.DataFrame({
        "dtype": ["bfloat16", "bfloat16", "bfloat16", "float32", "float32"],
        "impl": ["builtin", "compile", "triton", "builtin", "triton"],
        "odd": [97.4, 96.5, 205.0, 35.8, 27.0],
        "even": [517.0, 510.0, 590.0, 48.4, 39.3]
    })
    monkeypatch.setattr(why_tables, "alignment", lambda *a, **k: t.assign(ratio=t["odd"] / t["even"]))
    text = why_tables.alignment_sentence(None, "h200")
    assert "bfloat16: builtin 97.4 (0.19), compile 96.5 (0.19), Triton 205 (0.35)" in text
    assert "float32: builtin 35.8 (0.74), Triton 27 (0.69)" in text and "zero-pads" in text
    assert ("ours is faster than cuBLAS (the builtin) in 1 of the 2 data types, and than torch.compile in the one "
            "data type") in text


def test_the_plateau_finding_leaves_the_naive_expression_out_and_spans_the_rest(monkeypatch):
    from analysis import why_tables

    t = pd.DataFrame({
        "impl": ["naive", "builtin", "triton"],
        "small": 256,
        "fixed_us": [22.0, 5.3, 4.3],
        "loop_us": [75.0, 7.9, 10.2],
        "crossover": [1793.0, 4096.0, 2048.0]
    })
    monkeypatch.setattr(why_tables, "plateau", lambda *a, **k: t)
    text = why_tables.plateau_sentence(None, "h200")
    assert "costs 4.3--5.3~\\textmu s of GPU time" in text and "from $N=2048$--$4096$ on does" in text
    assert "7.9~\\textmu s (builtin), 10~\\textmu s (Triton)" in text and "22" not in text  # fmt: 2 significant digits


def test_the_waves_finding_counts_the_small_cells_and_names_the_lowest(monkeypatch):
    from analysis import why_tables

    t = pd.DataFrame({
        "dtype": ["bfloat16", "bfloat16", "float32", "float32"],
        "size": [512, 4096, 512, 1793],
        "tile": ["64x64", "128x256", "64x32", "64x32"],
        "tiles": [64, 512, 128, 1653],
        "sms": [132] * 4,
        "efficiency": [0.485, 0.97, 0.1, 0.783],
        "efficiency_128": [0.121, 0.97, 0.121, 0.852]
    })
    monkeypatch.setattr(why_tables, "waves", lambda *a, **k: t)
    text = why_tables.waves_sentence(None, None, "h200")
    assert text.startswith("Where a 128x128 tile would fill under half of one wave (N up to 512)")
    assert "fills more in 1 of the 2 cells" in text and "at least 0.78, lowest in float32 at $N=1793$" in text
    assert "(64x32 tiles, 1653 of them on 132 SMs)" in text
    monkeypatch.setattr(why_tables, "waves", lambda *a, **k: t.iloc[:0])
    assert why_tables.waves_sentence(None, None, "h200") == ""


def test_a_second_card_is_named_in_the_threats_and_kept_out_of_the_abstract(tmp_path):
    """With an H100 beside the H200, the threats no longer say one card was timed, and the abstract's word on
    verdicts timed apart is the headline card's alone (the H100's goes to the threats only)."""
    from analysis.macros import cards_sentence
    from analysis.verdict_tables import main

    metrics = pd.concat([_rows("h200", ["vecadd", "gelu", "softmax"]), _rows("h100", ["vecadd"])])
    assert cards_sentence(["h200"], "h200").startswith("One card was timed")
    two = cards_sentence(["h200", "h100"], "h200")
    assert "One card" not in two and "the H200 (the H100 appears" in two
    rates = pd.DataFrame({
        "method": "unpaired",
        "source": "repeatability",
        "frame": "gpu",
        "size_class": "middle",
        "pairs": [10],
        "tie": [8],
        "false_positive": [2],
        "not_comparable": [0],
        "tie_rate": [0.8],
        "false_positive_rate": [0.2]
    })
    for gpu in ("h100", "h200"):
        rates.to_csv(tmp_path / f"aa_{gpu}.csv", index=False)
    metrics.assign(impl="triton").to_parquet(tmp_path / "metrics.parquet")
    main([
        "--aa",
        str(tmp_path / "aa_h100.csv"),
        str(tmp_path / "aa_h200.csv"), "--metrics",
        str(tmp_path / "metrics.parquet"), "--outdir",
        str(tmp_path)
    ])
    text = (tmp_path / "macros_verdicts.tex").read_text()
    abstract = next(line for line in text.splitlines() if "\\AAAbstractCaveat}" in line)
    threat = next(line for line in text.splitlines() if "\\AAThreat}" in line)
    assert "H200's verdicts" in abstract and "H100" not in abstract
    assert "H100's verdicts" in threat and "H200's verdicts" in threat
