"""Precision (CANN's precision_mode, modify_mixlist, customize_dtypes): precision modes, the
black/white/gray lists and the user's files that edit them (modify_mixlist) or override single ops
(customize_dtypes).

    modes.py             precision_mode / precision_mode_v2 and what each does
    lists.py             default lists + CANN alias table, from the op table (ir/ops)
    mixlist.py           modify_mixlist JSON -> list overrides
    customize_dtypes.py  customize_dtypes file -> per-name / per-type dtype rules
The pass that inserts the Casts is graphkernel/passes/precision.py.
"""
from graphkernel.settings.config_file import PrecisionConfigError
from graphkernel.precision.customize_dtypes import CustomizeDtypes, DtypeRule, read_customize_dtypes
from graphkernel.precision.lists import BLACK, GRAY, WHITE, default_list, lacks_fp32, render_table, resolve
from graphkernel.precision.mixlist import Mixlist, read_mixlist
from graphkernel.precision.modes import (ALLOW_FP32_TO_BF16, ALLOW_FP32_TO_FP16, ALLOW_MIX, ALLOW_MIX_BF16,
                                         ALLOW_MIX_FP16, FORCE_FP16, MODES, MUST_KEEP, V2_MODES, effective_mode,
                                         low_dtype, pass_runs, rules_of, warn_unused_files)

__all__ = ["PrecisionConfigError", "CustomizeDtypes", "DtypeRule", "read_customize_dtypes", "BLACK", "GRAY",
           "WHITE", "default_list", "lacks_fp32", "render_table", "resolve", "Mixlist", "read_mixlist",
           "ALLOW_FP32_TO_BF16", "ALLOW_FP32_TO_FP16", "ALLOW_MIX", "ALLOW_MIX_BF16", "ALLOW_MIX_FP16",
           "FORCE_FP16", "MODES", "MUST_KEEP", "V2_MODES", "effective_mode", "low_dtype", "pass_runs", "rules_of",
           "warn_unused_files"]
