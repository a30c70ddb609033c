"""Drawing the same things the same way in every view: plotly figures, the tile map, the rows a sweep did not run, the
line that says which shared settings a view reads, and the line that says which settings a result ran with."""

from __future__ import annotations

from typing import Any

import streamlit as st

from flashviz.app.registry import View, owner_of
from flashviz.app.spec import describe
from flashviz.app.state import Settings, setting_fields, spec_of
from flashviz.vocab import NOT_RUN, OK

PLOTLY_CONFIG = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 2}}
BORROWED_LISTED = 5  # a view that reads more of another view's settings than this says "its settings"


def show_figure(fig: Any, key: str) -> None:
    """Draw a plotly figure at full width with the dashboard's toolbar settings."""
    st.plotly_chart(fig, key=key, config=PLOTLY_CONFIG, theme=None)


def show_map(html: str, where: Any = st) -> None:
    """Draw a tile map built by flashviz.figures.tilemap in `where` (the page, or a placeholder to redraw): our own
    markup (SVG and CSS, no script, nothing from the user unescaped), so it may bypass markdown's HTML filter."""
    where.markdown(html, unsafe_allow_html=True)


def short_name(name: str) -> str:
    """A setting's name in a line of text: its Spec's short name, else its label."""
    spec = spec_of(name)
    return spec.short or spec.label


def uses_text(view: View) -> str:
    """One line: the shared settings the view reads (drawn in the sidebar), and other views' settings it reads.

    Example:
        >>> from flashviz.app.registry import view_of
        >>> uses_text(view_of("decode"))
        'Uses from the sidebar: d, dtype, device, threads; from the Benchmark view: repeats.'
    """
    shared = ", ".join(short_name(f.name) for f in setting_fields() if f.name in view.sidebar)
    text = f"Uses from the sidebar: {shared}" if shared else "Uses no setting of the sidebar"
    owners: dict[str, list[str]] = {}
    for name in view.borrows:
        owners.setdefault(owner_of(name).label, []).append(short_name(name))
    for label, names in owners.items():
        text += (f"; from the {label} view: {', '.join(names)}" if len(names) <= BORROWED_LISTED
                 else f"; from the {label} view: its settings")
    return text + "."


def uses_ui(view: View) -> None:
    """The view's first line: which shared settings it reads (the sidebar shows just those)."""
    st.caption(uses_text(view))


def ran_with(s: Settings, names: tuple[str, ...]) -> str:
    """The settings a result was measured with, in words (causal or not, the mask, dtype, sizes, machine).

    Example:
        >>> from flashviz.app.state import Settings
        >>> ran_with(Settings(causal=True), ("causal", "window", "dtype", "batch", "threads"))
        'causal, no window, float32, B = 1, threads = 2'
    """
    return ", ".join(describe(spec_of(name), getattr(s, name)) for name in names)


def ran_with_ui(s: Settings, names: tuple[str, ...]) -> None:
    """Say, above a result, the settings it ran with (a result is shown only for the settings that produced it)."""
    st.caption(f"**Ran with** {ran_with(s, names)}.")


def not_run_ui(df: Any) -> None:
    """List the rows a sweep refused or could not run (memory guard: with the bytes they would need)."""
    if "status" not in df:
        return
    bad = df[df["status"].astype(str) != OK]
    if len(bad) == 0:
        return
    lines = "\n".join(f"- **{r['impl']}** at N = {r['N']}" + (f", d = {r['d']}" if "d" in r else "")
                      + f": {str(r['status']).removeprefix(NOT_RUN + ': ')}" for _, r in bad.iterrows())
    st.warning(f"**{len(bad)} configuration(s) did not run** (crosses on the plots):\n{lines}", icon="🛑")


def csv_download_ui(df: Any, file_name: str, key: str, help: str, report: Any = None) -> None:
    """A CSV of a run's rows, each with the run's context (torch version, CPU model, threads, ...: the sweep's
    df.attrs["context"], flashviz.measure.context) and, given the run's RunReport (flashviz.measure.load), when it
    ran, which flashviz, the load, the thread policy and the calls set aside: a file says where its numbers come
    from."""
    from flashviz.measure.context import with_context  # torch is loaded by now: a run produced df

    out = with_context(df, {**(df.attrs.get("context") or {}), **(report.columns() if report is not None else {})})
    st.download_button("Download the measurements (CSV)", out.to_csv(index=False).encode(), file_name=file_name,
                       mime="text/csv", key=key, help=help)
