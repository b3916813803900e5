"""Grid arithmetic shared by data loading, normalisers and evaluation."""

from __future__ import annotations

from opformer.errors import DataError


def stride_for(stored: int, wanted: int, periodic: bool, what: str = "data") -> int:
    """The stride that sub-samples a grid of ``stored`` points to ``wanted`` points.

    Periodic grids hold the left end of each cell (``n`` points, stride ``stored / wanted``); closed grids hold
    both ends (``n = (stored - 1) / s + 1``, as Darcy's 421 -> 211, 141, 85, 61, 43).
    """
    if wanted == stored:
        return 1
    if periodic:
        ok = 0 < wanted < stored and stored % wanted == 0
        stride = stored // wanted if ok else 0
        valid = [stored // s for s in range(1, stored + 1) if stored % s == 0]
    else:
        ok = 1 < wanted < stored and (stored - 1) % (wanted - 1) == 0
        stride = (stored - 1) // (wanted - 1) if ok else 0
        valid = [(stored - 1) // s + 1 for s in range(1, stored) if (stored - 1) % s == 0]
    if not ok:
        shown = ", ".join(str(v) for v in valid[:8]) + (", ..." if len(valid) > 8 else "")
        raise DataError(f"{what}: resolution {wanted} is not a strided sub-sample of the stored {stored} points "
                        f"(valid: {shown})")
    return stride
