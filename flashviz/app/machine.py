"""This machine as the dashboard's settings see it: the CPU cores this process may use and the devices there are
(flashviz.kit.machine tells whether a GPU is there without importing torch where it cannot be)."""

from __future__ import annotations

import streamlit as st

from flashviz.kit.machine import cuda_available
from flashviz.kit.settings import Env
from flashviz.measure.load import cores


@st.cache_resource(show_spinner=False)
def machine_env() -> Env:
    """Threads torch may use here and the devices available (CUDA listed only when torch sees one)."""
    devices = ("cpu", "cuda") if cuda_available() else ("cpu",)
    return Env(max_threads=cpu_cores(), devices=devices)


def cpu_cores() -> int:
    """The CPU cores this process may run on (a container's --cpuset-cpus, not the host's count): the timing
    worker's count (flashviz.measure.load.cores), so the page offers the threads the worker can choose from."""
    return cores()
