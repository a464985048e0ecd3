"""The one tolerance helper every test uses.

float32: rtol 1e-5, atol 1e-6 scaled by the magnitude of the expected values; float16: rtol 1e-3;
float64: rtol 1e-12; integers and bools: exact. `bitwise=True` demands identical bits (NaNs equal).
"""
import numpy as np

RTOL = {np.dtype(np.float16): 1e-3, np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-12}
ATOL = {np.dtype(np.float16): 1e-3, np.dtype(np.float32): 1e-6, np.dtype(np.float64): 1e-13}


def assert_close(actual, expected, *, bitwise: bool = False, rtol_scale: float = 1.0, err_msg: str = ""):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"shape {actual.shape} != {expected.shape} {err_msg}"
    assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != {expected.dtype} {err_msg}"
    if bitwise or actual.dtype not in RTOL:
        if actual.dtype.kind == "f":
            same = (actual.view(f"u{actual.itemsize}") == expected.view(f"u{expected.itemsize}"))
            same |= np.isnan(actual) & np.isnan(expected)
            assert same.all(), f"not bitwise equal at {np.argwhere(~same)[:5].tolist()} {err_msg}"
        else:
            np.testing.assert_array_equal(actual, expected, err_msg=err_msg)
        return
    finite = np.isfinite(expected)
    scale = float(np.max(np.abs(expected[finite]), initial=1.0))
    np.testing.assert_allclose(actual, expected, rtol=RTOL[actual.dtype] * rtol_scale,
                               atol=ATOL[actual.dtype] * rtol_scale * max(1.0, scale), equal_nan=True,
                               err_msg=err_msg)
