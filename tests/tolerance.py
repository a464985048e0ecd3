"""The one tolerance helper every test uses.

float32: rtol 1e-5, atol 1e-6 scaled by the magnitude of the expected values; float16: rtol 1e-3;
bfloat16: rtol 8e-3 (its epsilon 2**-7 rounded up, as float16's is 2**-10); float64: rtol 1e-12;
integers and bools: exact. `bitwise=True` demands identical bits (NaNs equal).
"""
import numpy as np

from ir.dtypes import BFLOAT16_NP, is_float_array

RTOL = {np.dtype(np.float16): 1e-3, BFLOAT16_NP: 8e-3, np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-12}
ATOL = {np.dtype(np.float16): 1e-3, BFLOAT16_NP: 8e-3, np.dtype(np.float32): 1e-6, np.dtype(np.float64): 1e-13}


def assert_close(actual, expected, *, bitwise: bool = False, rtol_scale: float = 1.0, err_msg: str = ""):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"shape {actual.shape} != {expected.shape} {err_msg}"
    assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != {expected.dtype} {err_msg}"
    if bitwise or actual.dtype not in RTOL:
        if is_float_array(actual):
            same = (actual.view(f"u{actual.itemsize}") == expected.view(f"u{expected.itemsize}"))
            same |= np.isnan(actual) & np.isnan(expected)
            assert same.all(), f"not bitwise equal at {np.argwhere(~same)[:5].tolist()} {err_msg}"
        else:
            np.testing.assert_array_equal(actual, expected, err_msg=err_msg)
        return
    rtol, atol = RTOL[actual.dtype], ATOL[actual.dtype]
    if actual.dtype == BFLOAT16_NP:   # compared in float32 (numpy's tests do not know bfloat16)
        actual, expected = actual.astype(np.float32), expected.astype(np.float32)
    finite = np.isfinite(expected)
    scale = float(np.max(np.abs(expected[finite]), initial=1.0))
    np.testing.assert_allclose(actual, expected, rtol=rtol * rtol_scale,
                               atol=atol * rtol_scale * max(1.0, scale), equal_nan=True,
                               err_msg=err_msg)
