"""Roofline-model projections onto the datasheet GPUs, calibrated by the GPU we measured, with the model's error on
that GPU beside them.

A datasheet peak is not reached: the measured copy and the best measured GEMM of each math mode sit below it. The
projection therefore scales every datasheet GPU's peaks by the measured GPU's own ratio, per resource:

    ratio_bandwidth = measured copy / datasheet bandwidth
    ratio_<unit>    = measured gemm_<unit> / datasheet peak of <unit>          (unit: fp32, tf32, bf16, fp16)
    model_ms(g)     = max(FLOPs / (peak_<unit>(g) ratio_<unit>), bytes / (bandwidth(g) ratio_bandwidth)) * 1e3

It is a model: it assumes every GPU reaches the same fraction of its datasheet as the one measured. How far it is
from a measurement is measured on the calibrating GPU itself: measured / model of the fastest cells (per kernel,
precision and pass at the largest size), median and range, by bound (memory, compute).

The measured peaks are those each cell was rated against (metrics' peak_bandwidth_measured_gbps and
peak_tflops_measured: its own run's ceilings), their median over the GPU's claimable cells.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.claims import tied_best
from analysis.metrics import model_time_s
from rooflab.gpus import SPECS

UNITS = ("fp32", "tf32", "bf16", "fp16")


def ratios(metrics: pd.DataFrame, gpu: str) -> dict[str, float]:
    """{'bandwidth': measured / datasheet, 'fp32': ..., 'tf32': ..., 'bf16': ..., 'fp16': ...} of one GPU; NaN
    where that GPU has no datasheet entry or the resource was not measured."""
    spec = SPECS.get(gpu)
    out = {"bandwidth": np.nan, **{u: np.nan for u in UNITS}}
    ok = metrics["claimable"] if "claimable" in metrics else metrics["status"] == "ok"
    d = metrics[ok & (metrics["gpu"] == gpu)]
    if spec is None or d.empty:
        return out
    bw = d["peak_bandwidth_measured_gbps"].dropna()
    if len(bw):
        out["bandwidth"] = float(bw.median()) * 1e9 / spec.mem_bandwidth
    for unit in UNITS:
        peak = d.loc[d["compute_unit"] == unit, "peak_tflops_measured"].dropna()
        if len(peak):
            out[unit] = float(peak.median()) * 1e12 / spec.peak_flops(unit)
    return out


def model_ms(rows: pd.DataFrame, key: str, r: dict[str, float]) -> np.ndarray:
    """The calibrated roofline-model time (ms) of each row on datasheet GPU `key`."""
    spec = SPECS[key]
    peak = np.array(
        [spec.peak_flops(u) * r.get(u, np.nan) if isinstance(u, str) else np.nan for u in rows["compute_unit"]],
        dtype=float)
    return model_time_s(rows["flops"], rows["bytes"], peak, spec.mem_bandwidth * r["bandwidth"]) * 1e3


def fastest_cells(metrics: pd.DataFrame, gpu: str) -> pd.DataFrame:
    """Per kernel and precision, forward pass at the largest size: the fastest claimable row (GPU time), with
    `fastest`, the implementations tied with it (analysis/claims.tied_best)."""
    ok = metrics["claimable"] if "claimable" in metrics else metrics["status"] == "ok"
    d = metrics[ok & (metrics["gpu"] == gpu) & (metrics["pass"] == "fwd")]
    d = d[d["size"] == d.groupby(["kernel", "dtype"])["size"].transform("max")]
    rows = []
    for _, g in d.groupby(["kernel", "dtype"], sort=True):
        best = tied_best(g)
        if len(best):
            rows.append(best.iloc[[0]].assign(fastest=[list(best["impl"])]))
    return pd.concat(rows, ignore_index=True) if rows else d.iloc[:0].assign(fastest=None)


def projections(metrics: pd.DataFrame, gpu: str) -> tuple[pd.DataFrame, dict[str, float]]:
    """(table, ratios): the fastest cells of `gpu` with model_ms_<key> on every datasheet GPU (calibrated by `gpu`'s
    ratios) and measured_over_model on `gpu` itself (NaN where `gpu` has no datasheet entry)."""
    r = ratios(metrics, gpu)
    t = fastest_cells(metrics, gpu)
    for key in SPECS:
        t[f"model_ms_{key}"] = model_ms(t, key, r) if len(t) else []
    here = t[f"model_ms_{gpu}"] if gpu in SPECS else pd.Series(np.nan, index=t.index)
    t["measured_over_model"] = t["median_ms"].astype(float) / here.astype(float)
    return t, r


def error(t: pd.DataFrame) -> pd.DataFrame:
    """Calibration error on the measured GPU, by bound: cells, median, min and max of measured / model."""
    rows = []
    for bound in ("memory", "compute"):
        v = t.loc[t["bound"] == bound, "measured_over_model"].dropna().astype(float) if len(t) else pd.Series()
        rows.append({
            "bound": bound,
            "cells": int(len(v)),
            "median": v.median() if len(v) else np.nan,
            "min": v.min() if len(v) else np.nan,
            "max": v.max() if len(v) else np.nan
        })
    return pd.DataFrame(rows)
