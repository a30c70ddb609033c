"""The Streamlit dashboard, one module per tab: widgets -> cached calls -> figures from flashviz.figures.tiles/plots.

    sidebar        settings widgets, classroom presets, URL query parameters (state.py parses them, pure)
    how_it_works   animated tile map, row inspector, update equations
    benchmark      live sweep over N: memory, time, GFLOP/s, summary table, CSV
    block_size     time and modelled HBM traffic against the tile size
    io_model       HBM accesses against on-chip memory M (FA1 Theorem 2)
    correctness    max errors against SDPA and an fp64 reference
    training       forward + backward time and memory

app.py at the repository root wires them together; nothing here runs on import.
"""
