"""The Numerics tab's settings as the numerics lab's `LabSettings`: one mapping, read by the tab
(flashviz.views.numerics.page)
and by the lesson's check of that tab (flashviz.views.numerics.claims). Imports no streamlit."""

from __future__ import annotations

from flashviz.app.registry import NO_P_ROUNDING
from flashviz.app.state import Settings
from flashviz.views.numerics.data import LabSettings


def lab_settings(s: Settings) -> LabSettings:
    """The lab's settings of the tab's widgets (raises ValueError, saying why, for a combination the lab refuses).

    Example:
        >>> lab_settings(Settings(nmnq=97, nmpdtype="e4m3")).n_q, lab_settings(Settings()).p_precision
        (97, None)
    """
    p = None if s.nmpdtype == NO_P_ROUNDING else s.nmpdtype
    return LabSettings(n_q=s.nmnq, n_k=s.nmnk, precision=s.nmdtype, p_precision=p, block=s.nmblock,
                       tau=float(s.nmtau), hadamard=s.nmhad, outliers=s.nmout, causal=s.nmcausal)
