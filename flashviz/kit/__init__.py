"""The dashboard's kit: what a view is built with, below the views (nothing here imports a view or the shell).

    settings       the shared settings (one small dataclass) and `view_settings`, which makes a view's settings class
    spec, sizes    how a setting is declared (its Spec); the problem sizes offered and allowed
    widgets        a setting's widget, drawn where it belongs
    drawing        figures, the tile map, the rows not run (with the view's controls that would let them run), the
                   line that says which settings a result ran with
    runs           heavy work in the timing worker: progress bar, Cancel, results kept per session
    jobs           the cached sweeps behind the Benchmark, Block size, Correctness and Training views
    lock           the server's timing worker (timed runs take turns in its queue)
    machine        whether this machine has a GPU, without importing torch where it cannot

The shell above the views (flashviz.app) composes them: registry, URL, sidebar, presenter, slides.
"""
