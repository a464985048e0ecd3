"""The training bench's outputs: JSON, a markdown note with the targets, a PNG chart (matplotlib, from the
`bench` extra; without it the chart is skipped).

    targets(results) -> list of {"target", "value", "limit", "met", "note"}   (at the largest stack)
    write(results, out_dir, stem) -> {"json", "markdown", "png" or None}
"""
from __future__ import annotations

import json
import os

ORDER = ("fused", "unfused", "torch", "torch.compile", "jax")


def _t(name, value, limit, below=True, note=""):
    met = None if value is None else (value <= limit if below else value >= limit)
    return {"target": name, "value": value, "limit": limit, "below": below, "met": met, "note": note}


def targets(results: dict) -> list[dict]:
    configs = [c for c in results["configs"] if not c["shape"]["vocab"]]
    if not configs:
        return []
    c = max(configs, key=lambda c: c["shape"]["layers"])
    r, f = c["ratios"], c["figures"]
    at = f"{c['shape']['layers']} layers"
    out = [_t(f"{at}: fwd+bwd outside MatMul fused/unfused", r.get("fwd+bwd outside MatMul fused/unfused"), 0.70),
           _t(f"{at}: fused optimizer, fraction of its bandwidth bound",
              f.get("fused", {}).get("optimizer_fraction_of_bound"), 0.70, below=False),
           _t(f"{at}: step fused/unfused", r.get("step fused/unfused"), 0.80)]
    peer = f.get("fastest_peer")
    out.append(_t(f"{at}: step fused/fastest peer ({peer})", r.get(f"fused/{peer} (fastest peer)"), 1.0))
    peer_outside = f.get("fastest_peer_outside_matmul_s")
    out.append(_t(f"{at}: outside MatMul fused/fastest peer ({peer})", r.get("outside MatMul fused/fastest peer"),
                  0.6, note="" if peer_outside is None or peer_outside > 0 else
                  f"the peer's whole step ({1e3 * f['step_s'][peer]:.0f} ms) is shorter than graphkernel's MatMuls "
                  f"alone ({1e3 * f['fused']['matmul_s']:.0f} ms)"))
    if "fused loaded/quiet" in r:
        out.append(_t(f"{at}: fused step beside {c['background']} / quiet", r["fused loaded/quiet"], 1.6))
        if "loaded fused/torch" in r:
            out.append(_t(f"{at}: fused/torch eager, both beside {c['background']}", r["loaded fused/torch"], 0.8))
    if "fused/torch" in r:
        out.append(_t(f"{at}: fused/torch eager, quiet", r["fused/torch"], 0.8))
    for cfg in results["configs"]:
        chk = cfg.get("loss_checks", {}).get("fused vs unfused")
        if chk and chk["steps"] >= 10:
            out.append(_t(f"{cfg['shape']['layers']} layers: fused vs unfused losses, max relative difference over "
                          f"{chk['steps']} steps", chk["max_rel"], 1e-5))
    return out


def _ms(x):
    return "–" if x is None else f"{1e3 * x:.1f}"


def _mb(x):
    return "–" if x is None else f"{x / 2**20:.0f}"


def markdown(results: dict) -> str:
    env = results["environment"]
    lines = [f"### `graphkernel bench --train` ({results['mode']}), {env['utc_start']}, commit "
             f"{(env.get('git_commit') or '?')[:7]}", "",
             f"{env['cpu_count']} cores, numba {env['numba']} ({env['threads']} threads of graphkernel's pool), "
             f"numpy {env['numpy']}, torch {env.get('torch')}, jax {env.get('jax')}; load average at start "
             f"{env['loadavg_start'][0]:.1f}, at end {results['loadavg_end'][0]:.1f}; numpy GEMM "
             f"[256,1024]x[1024,4096] {results['gemm_gflops']:.0f} GFLOPS. Every implementation in its own process, "
             "interleaved; medians per step. Peak MB: the worker's peak resident size (Linux VmHWM) before the "
             "step was built → at the end (getrusage's ru_maxrss in brackets: Linux carries it across exec, so it "
             "is at least the parent's).", ""]
    if any("background" in c for c in results["configs"]):
        lines += ["Beside a controlled load: every round timed quiet, then again beside the background "
                  "processes (--background); the load average while loaded: "
                  + "; ".join(f"{c['name']} " + ", ".join(f"{la[0]:.1f}" for la in c.get("loadavg_loaded", []))
                              for c in results["configs"]), "",
                  "| network | implementation | quiet step ms | loaded step ms | loaded/quiet |",
                  "|---|---|---|---|---|"]
        for c in results["configs"]:
            for impl in ORDER:
                d = c["impls"].get(impl, {})
                if "time_loaded" in d:
                    q, ld = d["time"]["median_s"], d["time_loaded"]["median_s"]
                    lines.append(f"| {c['name']} ({c['background']}) | {impl} | {_ms(q)} | {_ms(ld)} | {ld / q:.2f} |")
        lines.append("")
    lines += ["| network | implementation | step ms (q25–q75) | fwd+bwd ms | optimizer ms | outside MatMul ms | "
              "fwd+bwd outside MatMul ms | kernels fwd/bwd/opt | compile s | peak MB |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for c in results["configs"]:
        f = c["figures"]
        for impl in ORDER:
            d = c["impls"].get(impl)
            if d is None:
                continue
            if "skipped" in d:
                lines.append(f"| {c['name']} | {impl} | {d['skipped']} | | | | | | | |")
                continue
            t = d.get("time", {})
            ours, prof = f.get(impl, {}), d.get("profile", {})
            ph = d.get("phases", {})
            counts = "/".join(str(ph.get(p, 0)) for p in ("forward", "backward", "optimizer")) if ph else "–"
            outside = ours.get("outside_matmul_s")
            if impl == f.get("fastest_peer"):
                outside = f.get("fastest_peer_outside_matmul_s")
                if outside is not None and outside <= 0:   # its whole step beats our MatMuls alone
                    outside = None
            spread = f"({_ms(t.get('q25_s'))}–{_ms(t.get('q75_s'))})"
            lines.append(f"| {c['name']} | {impl} | {_ms(t.get('median_s'))} {spread} "
                         f"| {_ms(prof.get('fwd_bwd_s'))} | {_ms(prof.get('optimizer_s'))} | {_ms(outside)} "
                         f"| {_ms(ours.get('fwd_bwd_outside_matmul_s'))} | {counts} | {d.get('compile_s', 0):.1f} "
                         f"| {_mb(d.get('peak_before_bytes'))} → {_mb(d.get('peak_bytes'))} "
                         f"({_mb(d.get('maxrss_bytes'))}) |")
    lines += ["", "fwd+bwd and optimizer of graphkernel: sums of kernel times per phase (profiled steps); of torch "
              "eager: the two halves of a step timed apart. Outside MatMul: step minus the MatMul/BatchMatMul "
              "kernels' time; for the fastest peer, its step minus graphkernel's MatMul time (the same GEMMs on "
              "numpy's BLAS; none when the peer's whole step is shorter than those MatMuls). torch.compile's compile "
              "time includes its first step.", ""]
    lines.append("Losses (relative differences):")
    for c in results["configs"]:
        for k, v in c.get("loss_checks", {}).items():
            lines.append(f"- {c['name']}: {k}: {v['max_rel']:.2g} over {v['steps']} steps (within {v['rtol']:g}: "
                         f"{'yes' if v['ok'] else 'NO'})")
    if results.get("targets"):
        lines += ["", "Targets (ratios from this run):", ""]
        for t in results["targets"]:
            v = "–" if t["value"] is None else f"{t['value']:.3g}"
            met = {True: "met", False: "missed", None: "not measured"}[t["met"]]
            lines.append(f"- {t['target']}: {v} (target {'≤' if t['below'] else '≥'} {t['limit']:g}) — {met}"
                         + (f": {t['note']}" if t["note"] else ""))
    for c in results["configs"]:
        for impl in ("fused", "unfused"):
            prof = c["impls"].get(impl, {}).get("profile")
            if not prof:
                continue
            lines += ["", f"Top kernels of {c['name']}, {impl} (ms per step; phase):", ""]
            for k in prof["top"][:12]:
                lines.append(f"- {k['name']} [{'+'.join(k['op_types'])}] {1e3 * k['s']:.2f} ms ({k['phase']})")
            if prof.get("optimizer_copy_s"):
                lines.append(f"- optimizer: {1e3 * prof['optimizer_s']:.1f} ms for "
                             f"{prof['optimizer_bytes'] / 1e6:.0f} MB; "
                             f"a parallel copy of those bytes {1e3 * prof['optimizer_copy_s']:.1f} ms")
    return "\n".join(lines) + "\n"


def chart(results: dict, path: str) -> str | None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    configs = results["configs"]
    fig, axes = plt.subplots(1, len(configs), figsize=(5 * len(configs), 4), squeeze=False)
    for ax, c in zip(axes[0], configs):
        names = [n for n in ORDER if "time" in c["impls"].get(n, {})]
        steps = [1e3 * c["impls"][n]["time"]["median_s"] for n in names]
        matmul = [1e3 * c["figures"].get(n, {}).get("matmul_s", 0) for n in names]
        ax.bar(names, steps, color="#9ab")
        ax.bar(names, matmul, color="#456", label="MatMul (graphkernel's profile)")
        ax.set_title(c["name"], fontsize=9)
        ax.set_ylabel("ms per training step (median)")
        ax.tick_params(axis="x", labelrotation=30, labelsize=8)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write(results: dict, out_dir: str, stem: str) -> dict:
    os.makedirs(out_dir, exist_ok=True)
    base = os.path.join(out_dir, stem)
    with open(base + ".json", "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)
    with open(base + ".md", "w") as f:
        f.write(markdown(results))
    return {"json": base + ".json", "markdown": base + ".md", "png": chart(results, base + ".png")}
