"""fusion_switch_file (CANN's format): `{"Switch": {"GraphFusion": {...}, "UBFusion": {...}}}`.

Each group maps a pass name to "on" or "off"; `"ALL": "off"` turns a whole group off. Our passes are
listed per group in PASS_GROUPS (and in docs/fusion.md). A CANN pass name we do not have (CANN's
`RequantFusionPass`, ...) warns; broken JSON, an unknown group or a value other than on/off is an error
naming the file and the key.
"""
from __future__ import annotations

import difflib
import warnings

from graphkernel.settings.config_file import ConfigFileError, load_json, parsed_once, read_text

# Our pass names per CANN group: GraphFusion = graph-level rewrites, UBFusion = fusion inside the UB.
# The precision pass is no fusion pass: precision_mode alone decides whether it runs.
PASS_GROUPS = {
    "GraphFusion": ("expand", "constant_fold", "arith_simplify", "cse", "dce", "basic_fusion",
                    "composite_fusion", "recompute", "sibling_fusion", "parallel_fusion"),
    "UBFusion": ("reduce_fusion", "broadcast_fusion", "stitch_fusion", "conv_epilogue"),
}


class FusionSwitchError(ConfigFileError):
    """A fusion_switch_file that cannot be read or has a bad key or value."""


@parsed_once
def read_fusion_switch(path: str) -> frozenset[str]:
    """The set of pass names the file turns off (parsed, and warned about, once per file version)."""
    text = read_text(path, "fusion_switch_file", FusionSwitchError)
    doc = load_json(text, path, "fusion_switch_file", FusionSwitchError)
    expected = '{"Switch": {"GraphFusion": {...}, "UBFusion": {...}}}'
    if not isinstance(doc, dict):
        raise FusionSwitchError(f"fusion_switch_file {path!r}: expected {expected}")
    if set(doc) != {"Switch"}:
        unknown = ", ".join(repr(k) for k in sorted(set(doc) - {"Switch"}))
        what = f"unknown key {unknown}" if unknown else 'no "Switch" key'
        raise FusionSwitchError(f"fusion_switch_file {path!r}: {what}; expected {expected}")
    if not isinstance(doc["Switch"], dict):
        raise FusionSwitchError(f"fusion_switch_file {path!r}: Switch must be an object; expected {expected}")
    off: set[str] = set()
    for group, passes in doc["Switch"].items():
        if group not in PASS_GROUPS:
            raise FusionSwitchError(f"fusion_switch_file {path!r}: unknown group {group!r}; accepted: "
                                    f"{', '.join(PASS_GROUPS)}")
        if not isinstance(passes, dict):
            raise FusionSwitchError(f"fusion_switch_file {path!r}: Switch.{group} must be an object")
        for name, state in passes.items():
            if state not in ("on", "off"):
                raise FusionSwitchError(f"fusion_switch_file {path!r}: Switch.{group}.{name} is {state!r}; "
                                        "accepted: \"on\" or \"off\"")
            if name == "ALL":
                if state == "off":
                    off.update(PASS_GROUPS[group])
            elif name in PASS_GROUPS[group]:
                if state == "off":
                    off.add(name)
            else:
                near = difflib.get_close_matches(name, PASS_GROUPS[group], n=1)
                hint = f"; did you mean {group}.{near[0]}?" if near else ""
                warnings.warn(f"fusion_switch_file {path!r}: {group}.{name} is not a graphkernel pass "
                              f"(ignored{hint})", UserWarning, stacklevel=2)
    return frozenset(off)
