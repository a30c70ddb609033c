"""pytest's doctest collection of this package: the kernel and the recorder import triton, an optional extra, so
their examples are left out where it is not installed (`pip install -e ".[triton]"` brings it)."""

from flashviz.triton import available

collect_ignore = [] if available() else ["kernel.py", "record.py"]
