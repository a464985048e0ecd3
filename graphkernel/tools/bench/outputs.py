"""The benchmark's outputs: the results as JSON, a markdown table to quote in the docs, a PNG chart.

    write(results, out_dir) -> {"json": path, "markdown": path, "png": path or None}

The chart needs matplotlib, which graphkernel does not depend on (the `bench` extra installs it): without
it the chart is skipped and the run says so. Ratios are within one run: fused time / other time, so a
value under 1 means fused is faster.
"""
from __future__ import annotations

import json
import os

import numpy as np

from graphkernel.tools.bench.harness import BOUND_MIN_ELEMENTS

PEERS = ("unfused", "numpy", "jax", "onnxruntime")
ROW_FAMILIES = ("W4", "W5", "ONNX masked Softmax", "ONNX residual+LayerNorm")   # the rows target's workloads
SHORT = {"onnxruntime": "ORT"}


def _ms(entry: dict, impl: str) -> float | None:
    t = entry["impls"].get(impl, {}).get("time")
    return t["median_s"] * 1e3 if t else None


def _fmt(x: float | None, spec: str = ".3g") -> str:
    return "–" if x is None else format(x, spec)


def _verified(e: dict) -> str:
    text = "yes" if e["verified"] else "NO"
    off = [SHORT.get(n, n) for n in e.get("peers_off_tolerance", ())]
    return text + (f" ({', '.join(off)} off)" if off else "")


def targets(results: dict) -> list[str]:
    """Issue 6's targets, each with what this run reached."""
    out = []
    for e in results["workloads"]:
        r = e["ratios"]
        if "opaque" in e and "outside_opaque fused/unfused" in r:
            out.append(f"{e['name']}: outside MatMul fused/unfused {r['outside_opaque fused/unfused']:.2f} "
                       f"(target ≤ 0.5); total fused/unfused {r['fused/unfused']:.2f} (MindSpore 0.74)"
                       + (f"; fused/ORT {r['fused/onnxruntime']:.2f} (target ≤ 1.1)" if "fused/onnxruntime" in r
                          else ""))
        if "optimizer" in e:
            o = e["optimizer"]
            out.append(f"{e['name']}: optimizer {o['unfused_kernels']}→{o['kernels']} kernels (target ≤ 4), "
                       f"{o['seconds'] * 1e3:.3g} ms for {o['bytes'] / 1e6:.4g} MB, "
                       f"{100 * o['fraction_of_bound']:.0f}% of the copy bound (target ≥ 70%)")
    rows = [e for e in results["workloads"] if e["family"] in ROW_FAMILIES and "fused/onnxruntime" in e["ratios"]]
    if rows:
        beaten = [e["name"] for e in rows if e["ratios"]["fused/onnxruntime"] <= 1.0]
        worst = max(rows, key=lambda e: e["ratios"]["fused/onnxruntime"])
        out.append(f"LayerNorm and Softmax rows (W4, W5, the ONNX models), fused/ORT <= 1.0: {len(beaten)} of "
                   f"{len(rows)} (worst {worst['name']} {worst['ratios']['fused/onnxruntime']:.2f})")
    big = [e for e in results["workloads"] if e["family"].startswith("W") and "fused/jax" in e["ratios"]
           and int(e["name"].rsplit(" ", 1)[1].split("x")[0]) >= 4096]
    if big:
        faster = [e["name"] for e in big if e["ratios"]["fused/jax"] < 1]
        out.append(f"W1–W6 at 4096x1024 and above, fused faster than jax.jit: {len(faster)} of {len(big)}")
    return out


def _compile_text(figures: dict, kind: str) -> str:
    if kind == "cold":
        return f"{figures['cold_s']:.1f} (cached {figures['cached_s']:.2f})"
    return f"{figures['first_s']:.2f}"


def markdown(results: dict) -> str:
    env = results["environment"]
    commit = f", commit {env['git_commit'][:7]}" if env.get("git_commit") else ""
    lines = [f"### `graphkernel bench` ({results['mode']}), {env['utc_start']}{commit}",
             "",
             f"{env['cpu_count']} cores, numba {env['numba']} ({env['threads']} threads of "
             f"graphkernel's pool), numpy {env['numpy']}, jax {env['jax']}, onnxruntime "
             f"{env['onnxruntime']}; load average at start {env['loadavg_start'][0]:.1f}, at end "
             f"{results.get('loadavg_end', [float('nan')])[0]:.1f}; OPENBLAS_CORETYPE/L2_SIZE "
             f"{'SET' if env['openblas_vars_set'] else 'unset'}"
             + (f"; threading {env['threading_env']}" if env.get("threading_env") else "")
             + ". Medians of interleaved calls; "
             "ratio = fused time / other time (< 1: fused is faster).",
             "",
             "| workload | kernels unfused→fused | fused ms | unfused ms | fused/unfused | numpy ms | fused/numpy "
             "| jax ms | fused/jax | ORT ms | fused/ORT | fused % of bound | verified |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for e in results["workloads"]:
        r = e["ratios"]
        bound = e.get("bound", {}).get("fraction", {}).get("fused")
        if e.get("bound", {}).get("minimal_bytes", 0) < 4 * BOUND_MIN_ELEMENTS:  # float32 bytes of the threshold
            bound = None
        lines.append(
            f"| {e['name']} | {e['impls']['unfused']['kernels']}→{e['impls']['fused']['kernels']} "
            f"| {_fmt(_ms(e, 'fused'))} | {_fmt(_ms(e, 'unfused'))} | {_fmt(r.get('fused/unfused'), '.2f')} "
            f"| {_fmt(_ms(e, 'numpy'))} | {_fmt(r.get('fused/numpy'), '.2f')} "
            f"| {_fmt(_ms(e, 'jax'))} | {_fmt(r.get('fused/jax'), '.2f')} "
            f"| {_fmt(_ms(e, 'onnxruntime'))} | {_fmt(r.get('fused/onnxruntime'), '.2f')} "
            f"| {_fmt(None if bound is None else 100 * bound, '.0f')} | {_verified(e)} |")
    lines += ["", "\"ORT off\": that peer's result is outside the float32 tolerance of the reference "
              "(reported, not fatal). Bound: minimal bytes / the bandwidth of a parallel copy of the same "
              "size timed in the same interleaved rounds (median).", ""]
    lines += [f"- {t}" for t in targets(results)]
    bert = [e for e in results["workloads"] if "opaque" in e]
    if bert:
        lines += ["", "Graphs with MatMuls: step time and the time in kernels outside MatMul/BatchMatMul "
                  "(per-kernel profile), ms.", "",
                  "| workload | step fused | step unfused | fused/unfused | outside MatMul fused | outside "
                  "unfused | outside fused/unfused | MatMul fused | MatMul unfused | fused/ORT |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for e in bert:
            f, u = e["opaque"].get("fused", {}), e["opaque"].get("unfused", {})
            lines.append(
                f"| {e['name']} | {_fmt(_ms(e, 'fused'))} | {_fmt(_ms(e, 'unfused'))} "
                f"| {_fmt(e['ratios'].get('fused/unfused'), '.2f')} "
                f"| {_fmt(f.get('outside_opaque_s', 0) * 1e3)} | {_fmt(u.get('outside_opaque_s', 0) * 1e3)} "
                f"| {_fmt(e['ratios'].get('outside_opaque fused/unfused'), '.2f')} "
                f"| {_fmt(f.get('opaque_s', 0) * 1e3)} | {_fmt(u.get('opaque_s', 0) * 1e3)} "
                f"| {_fmt(e['ratios'].get('fused/onnxruntime'), '.2f')} |")
        top = bert[0]["impls"]["fused"].get("profile", {}).get("top", [])
        if top:
            lines += ["", f"Top kernels of {bert[0]['name']}, fused (ms per step, share of kernel time):", ""]
            lines += [f"- {k['name']} [{'+'.join(k['op_types'])}] {k['s'] * 1e3:.2f} ms ({k['share']:.0%})"
                      for k in top[:8]]
    lines += ["", "| workload | compile unfused s | compile fused s | kind | peak MB unfused → fused |",
              "|---|---|---|---|---|"]
    for e in results["workloads"]:
        u, f = e["impls"]["unfused"]["compile"], e["impls"]["fused"]["compile"]
        kind = "cold" if "cold_s" in u else "first"
        cu, cf = (_compile_text(c, kind) for c in (u, f))
        peak_u, peak_f = (e["impls"][n]["peak_bytes"] / 1e6 for n in ("unfused", "fused"))
        lines.append(f"| {e['name']} | {cu} | {cf} | {kind} | {peak_u:.1f} → {peak_f:.1f} |")
    return "\n".join(lines) + "\n"


def chart(results: dict, path: str) -> str | None:
    """A PNG: per workload, how much faster fused is than each other implementation (log scale); and the
    MatMul graphs' step split into MatMul time and the rest. None when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    entries = results["workloads"]
    bert = [e for e in entries if "opaque" in e]
    fig, axes = plt.subplots(1, 2 if bert else 1, figsize=(15 if bert else 9, 0.32 * len(entries) + 2),
                             gridspec_kw={"width_ratios": [2, 1]} if bert else None, squeeze=False)
    ax = axes[0][0]
    height = 0.8 / len(PEERS)
    for k, peer in enumerate(PEERS):
        ys, xs = [], []
        for i, e in enumerate(entries):
            r = e["ratios"].get(f"fused/{peer}")
            if r:
                ys.append(i + (k - len(PEERS) / 2 + 0.5) * height)
                xs.append(1 / r)
        ax.barh(ys, xs, height=height, label=f"vs {SHORT.get(peer, peer)}")
    ax.set_yticks(range(len(entries)), [e["name"] for e in entries], fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xlabel("speed-up of fused (other time / fused time), log scale")
    ax.legend(fontsize=7, loc="lower right")
    threads = results["settings"].get("threads")
    ax.set_title(f"graphkernel bench ({results['mode']}{f', {threads} thread(s)' if threads else ''}): "
                 "fused against the others", fontsize=9)
    if bert:
        ax = axes[0][1]
        labels, parts = [], []      # parts: (MatMul kernels, other kernels, outside kernels) ms
        for e in bert:
            for n in ("unfused", "fused"):
                o = e["opaque"].get(n)
                if o:
                    labels.append(f"{e['family']}\n{n}")
                    parts.append((o["opaque_s"] * 1e3, o["outside_opaque_s"] * 1e3, o["outside_kernels_s"] * 1e3))
        left = np.zeros(len(labels))
        for k, label in enumerate(("MatMul/BatchMatMul kernels", "other kernels", "step − kernels")):
            widths = np.array([p[k] for p in parts])
            ax.barh(range(len(labels)), widths, left=left, label=label)
            left += widths
        peers = [(SHORT.get(n, n), _ms(bert[0], n)) for n in ("onnxruntime", "jax", "numpy") if _ms(bert[0], n)]
        ax.barh(range(len(labels), len(labels) + len(peers)), [ms for _, ms in peers], color="grey",
                label=f"whole step ({bert[0]['family']})")
        labels += [name for name, _ in peers]
        ax.set_yticks(range(len(labels)), labels, fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("ms per step")
        ax.legend(fontsize=7)
        ax.set_title("BERT-large layer, forward", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write(results: dict, out_dir: str, stem: str | None = None, readme_table: bool = False) -> dict:
    os.makedirs(out_dir, exist_ok=True)
    stem = os.path.join(out_dir, stem or f"bench_{results['mode']}")
    with open(stem + ".json", "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)
    table = markdown(results)
    with open(stem + ".md", "w") as f:
        f.write(table)
    paths = {"json": stem + ".json", "markdown": stem + ".md", "png": chart(results, stem + ".png")}
    if readme_table:
        with open(os.path.join(out_dir, "README_TABLE.md"), "w") as f:
            f.write(table)
        paths["readme_table"] = os.path.join(out_dir, "README_TABLE.md")
    return paths
