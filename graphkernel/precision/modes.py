"""precision_mode and precision_mode_v2 (CANN's session options): what each mode makes the precision pass do.

    | precision_mode          | precision_mode_v2 | float32 ops of the graph                                  |
    |-------------------------|-------------------|-----------------------------------------------------------|
    | must_keep_origin_dtype  | origin            | all keep their dtype; the precision pass does not run     |
    |   (default)             |                   |                                                           |
    | allow_fp32_to_fp16      |                   | only ops the emulated AI Core cannot compute in float32   |
    |                         |                   | (data file "fp32": false: MatMul, BatchMatMul) run in     |
    |                         |                   | float16; every other op keeps float32                     |
    | force_fp16              | fp16              | every op that supports float16 (all of ours) runs in it   |
    | allow_mix_precision     | mixed_float16     | white-list ops float16, black-list ops float32, gray ops  |
    |   (= ..._fp16)          |                   | follow their inputs (modify_mixlist edits the lists)      |
    | allow_fp32_to_bf16      |                   | as allow_fp32_to_fp16, in bfloat16                        |
    | allow_mix_precision_bf16| mixed_bfloat16    | as allow_mix_precision, the white list in bfloat16        |

In every mode the graph's interface keeps its dtypes: Casts convert float32 inputs to the mode's low
dtype (`low_dtype`: float16, or bfloat16 for the modes that name it) before an op that runs in it and
convert back where a float32 consumer or a graph output needs the value. customize_dtypes overrides
single ops in every mode but must_keep_origin_dtype. precision_mode_v2, when set, wins over
precision_mode (CANN offers it as the newer spelling of the same choice). The names are CANN's and
MindSpore 2.x's (`ascend_config={"precision_mode": ...}`).
"""
from __future__ import annotations

import warnings

from ir.dtypes import DType

MUST_KEEP = "must_keep_origin_dtype"
ALLOW_FP32_TO_FP16 = "allow_fp32_to_fp16"
FORCE_FP16 = "force_fp16"
ALLOW_MIX = "allow_mix_precision"
ALLOW_MIX_FP16 = "allow_mix_precision_fp16"     # CANN's explicit spelling of allow_mix_precision
ALLOW_FP32_TO_BF16 = "allow_fp32_to_bf16"
ALLOW_MIX_BF16 = "allow_mix_precision_bf16"
MODES = (MUST_KEEP, ALLOW_FP32_TO_FP16, FORCE_FP16, ALLOW_MIX, ALLOW_MIX_FP16, ALLOW_FP32_TO_BF16, ALLOW_MIX_BF16)

V2_MODES = {"origin": MUST_KEEP, "fp16": FORCE_FP16, "mixed_float16": ALLOW_MIX, "mixed_bfloat16": ALLOW_MIX_BF16}

# a mode naming bfloat16 -> the float16 mode whose rules it follows
_RULES_OF = {ALLOW_MIX_FP16: ALLOW_MIX, ALLOW_FP32_TO_BF16: ALLOW_FP32_TO_FP16, ALLOW_MIX_BF16: ALLOW_MIX}


def effective_mode(precision_mode: str, precision_mode_v2: str | None) -> str:
    """The mode a compile uses: precision_mode_v2 mapped onto precision_mode when it is set."""
    return precision_mode if precision_mode_v2 is None else V2_MODES[precision_mode_v2]


def rules_of(mode: str) -> str:
    """The mode whose decisions `mode` makes (allow_mix_precision_bf16 -> allow_mix_precision)."""
    return _RULES_OF.get(mode, mode)


def low_dtype(mode: str) -> DType:
    """The dtype `mode` lowers float32 ops to: bfloat16 for the modes that name it, else float16."""
    return DType.bfloat16 if mode in (ALLOW_FP32_TO_BF16, ALLOW_MIX_BF16) else DType.float16


def pass_runs(mode: str) -> bool:
    """Whether the precision stage runs (and writes its dump): every mode but must_keep_origin_dtype."""
    return mode != MUST_KEEP


def warn_unused_files(mode: str, mixlist, customize_dtypes) -> None:
    """Warn about a modify_mixlist or customize_dtypes file that `mode` does not read (a user who set
    one and forgot precision_mode would otherwise see nothing happen)."""
    if mixlist is not None and rules_of(mode) != ALLOW_MIX:
        warnings.warn(f"modify_mixlist {mixlist.path!r} has no effect under precision_mode={mode!r} "
                      "(only under allow_mix_precision)", UserWarning, stacklevel=3)
    if customize_dtypes is not None and not pass_runs(mode):
        warnings.warn(f"customize_dtypes {customize_dtypes.path!r} has no effect under precision_mode="
                      f"{mode!r}", UserWarning, stacklevel=3)
