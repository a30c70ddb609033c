"""The Streamlit dashboard, one module per tab: widgets -> cached calls -> figures from flashviz.figures.

    state, query, widgets  every setting declared once (state.py); the URL parser and the widgets derived from it
    sidebar        the sidebar's settings, classroom presets, the URL kept in sync
    common, jobs   the timing lock, runs in a worker thread with progress and Cancel, cached sweeps
    how_it_works   animated tile map, row inspector (the online-softmax rescale), update equations
    first_page     a new tab's first chart, the map's start frame: in the first run, and in the HTML page itself
    benchmark      live sweep over N: memory, time, GFLOP/s, summary table, causal vs no mask, CSV
    block_size     time and modelled HBM traffic against the tile size
    io_model       HBM accesses against on-chip memory M (FA1 Theorem 2), each loop order with its tile rule
    correctness    max errors against an fp64 reference, against the dtype's bar
    training       forward + backward time and memory; the price of recomputation
    roofline       naive, FA1 and FA2 on GPU rooflines and this machine's, predicted and measured speedups
    decoding       Flash-Decoding: splits, logsumexp merge, paged KV, GQA; bytes per token (+ decoding_jobs)
    masks          FlexAttention-style masks: element mask, tile map, BlockMask tensors

dashboard.py at the repository root wires them together (app.py serves it); nothing here runs on import.
"""
