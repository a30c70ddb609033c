"""The in-app lesson, above the views: its steps as data (`steps`), each step's check being the claim function of the
view it opens (`flashviz.views.<slug>.claims`); `python -m flashviz.lesson --check` runs them all."""
