"""The dashboard's shell: app.py (`streamlit run app.py`) is the page, and the modules here compose the views above
them (flashviz/views/<slug>/, each built with flashviz.kit).

    registry       the views, each declared once: slug, the function that draws it, its settings class. A new view is
                   its folder (settings.py, page.py) plus one line there
    state          `Settings`: every setting (the open view, the shared ones, each view's own) composed from the
                   views' settings classes, for the URL; `settings_of` hands a view its own; the presets
    query          the URL parser: any link becomes valid settings plus notices saying what it repaired
    session        the settings <-> the widgets' session state; the sidebar's widgets
    sidebar        the preset picker and the shared settings the open view reads; the URL kept in sync
    machine        the CPU cores and devices the settings offer here
    presenter      the lesson's steps on the page (flashviz.lesson), slides: each step's one picture

Nothing here runs on import.
"""
