"""The Streamlit dashboard: app.py (`streamlit run app.py`) is the page, and the modules here are its parts.

    registry       the views, each declared once: slug, label, the function that draws it, the shared settings it
                   reads, its own settings. A new view is its folder plus one line there.
    spec, state    how a setting is declared (spec); the shared settings, `Settings` (all of them), the presets
    query          the URL parser: any link becomes valid settings plus notices saying what it repaired
    widgets        settings <-> widgets and session state, derived from the declarations
    sidebar        the preset picker and the shared settings the open view reads; the URL kept in sync
    sizes          the problem sizes offered and allowed, and the largest grid a map draws
    machine        the CPU cores and whether a GPU is there, without importing torch where it cannot be
    lock           the process-wide timing lock (timing runs take turns)
    runs           heavy work in a worker thread: progress bar, Cancel, results kept per session
    jobs           the cached sweeps behind the Benchmark, Block size, Correctness and Training views
    drawing        figures, the tile map, the rows not run, and the lines that say which settings were used

The views draw themselves (flashviz/views/<slug>/page.py, named in the registry). Nothing here runs on import.
"""
