"""Drawing the same things the same way in every view: plotly figures, the tile map, the rows a sweep did not run
(with the controls of the view that would let them run) and the line that says which settings a result ran with.

A view is named here by its settings class (flashviz.kit.settings.view_settings): its own settings, the shared ones
it reads and those it borrows are the controls it has."""

from __future__ import annotations

from typing import Any

import streamlit as st

from flashviz.kit.settings import spec_of
from flashviz.kit.spec import describe
from flashviz.vocab import NOT_RUN, NUMERICS_KERNEL_LABELS, OK, TILED_IMPLS

PLOTLY_CONFIG = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 2}}


def show_figure(fig: Any, key: str) -> None:
    """Draw a plotly figure at full width with the dashboard's toolbar settings."""
    st.plotly_chart(fig, key=key, config=PLOTLY_CONFIG, theme=None)


def show_map(html: str, where: Any = st) -> None:
    """Draw a tile map built by flashviz.figures.tilemap in `where` (the page, or a placeholder to redraw): our own
    markup (SVG and CSS, no script, nothing from the user unescaped), so it may bypass markdown's HTML filter."""
    where.markdown(html, unsafe_allow_html=True)


def ran_with(s: Any, names: tuple[str, ...]) -> str:
    """The settings a result was measured with, in words (causal or not, the mask, dtype, sizes, machine).

    Example:
        >>> from flashviz.kit.settings import SharedSettings
        >>> ran_with(SharedSettings(causal=True), ("causal", "window", "dtype", "batch", "threads"))
        'causal, no window, float32, B = 1, threads = 2'
    """
    return ", ".join(describe(spec_of(name), getattr(s, name)) for name in names)


def ran_with_ui(s: Any, names: tuple[str, ...]) -> None:
    """Say, above a result, the settings it ran with (a result is shown only for the settings that produced it)."""
    st.caption(f"**Ran with** {ran_with(s, names)}.")


TIME_BUDGET = "time budget"  # a row the run's time budget stopped: its status starts "not run: time budget"
MEMORY = "memory budget"  # a row the memory guard refused (flashviz.measure.guards.guard): its status names this
BUDGET_WORDS = {TIME_BUDGET: (TIME_BUDGET,), MEMORY: ("memory budget", "budget ")}  # cause -> words of its status
FIXES = {  # cause -> (setting, what to do with its control), in the order worth trying; a view names those it has
    TIME_BUDGET: (("blocks", "choose fewer"), ("ns", "choose fewer or smaller"), ("correct_ds", "choose fewer"),
                  ("correct_ns", "choose fewer or smaller"), ("impls", "choose fewer"), ("reps", "lower"),
                  ("sure", "turn off"), ("n", "lower"), ("heads", "lower"), ("batch", "lower")),
    MEMORY: (("n", "lower"), ("ns", "choose smaller"), ("correct_ns", "choose smaller"), ("batch", "lower"),
             ("heads", "lower"), ("d", "lower"), ("correct_ds", "choose smaller")),
}
FIXES_NAMED = 3  # controls one line of advice names at most


def cause_of(status: str) -> str | None:
    """Why a row did not run, as a cause FIXES knows (TIME_BUDGET or MEMORY), or None (a failure: no control helps).

    Example:
        >>> cause_of("not run: time budget of 0 s used up before this row ran; lower N"), cause_of("not run: boom")
        ('time budget', None)
    """
    why = str(status).removeprefix(NOT_RUN + ": ")
    if why.startswith(TIME_BUDGET):
        return TIME_BUDGET
    return MEMORY if any(w in why for w in BUDGET_WORDS[MEMORY]) else None


def fix_controls(view: type, cause: str, here: tuple[str, ...] = ()) -> list[tuple[str, str, str]]:
    """The controls that would let a row stopped by `cause` run on the view whose settings class is `view`, (setting,
    verb, where): the view's own settings and `here` (other views' settings it draws) are on the view (where ""), the
    sidebar's are "in the sidebar", the rest of what it borrows "on the <owner> view"."""
    out = []
    for name, verb in FIXES[cause]:
        if name in view.OWN or name in here:
            out.append((name, verb, ""))
        elif name in view.READS:
            out.append((name, verb, "in the sidebar"))
        elif name in view.BORROWS:
            out.append((name, verb, f"on the {view.BORROWS[name].LABEL} view"))
    return out[:FIXES_NAMED]


def advice(view: type, cause: str | None, here: tuple[str, ...] = ()) -> str:
    """What would let a row run, naming each control by its label (empty where no control helps).

    Example:
        >>> from flashviz.views.block.settings import BlockSettings
        >>> advice(BlockSettings, TIME_BUDGET, here=("reps", "sure"))
        'To let it run: choose fewer **Block sizes Br = Bc**, lower **Repeats** or turn off **Repeat until sure**.'
    """
    if cause is None:
        return ""
    fixes = [f"{verb} **{spec_of(name).label}**" + (f" {where}" if where else "")
             for name, verb, where in fix_controls(view, cause, here)]
    if not fixes:
        return ""
    return "To let it run: " + (", ".join(fixes[:-1]) + " or " + fixes[-1] if len(fixes) > 1 else fixes[0]) + "."


def configuration(row: Any) -> str:
    """A row's configuration in words: the kernel, its tile size where it has tiles, N and d.

    Example:
        >>> configuration({"impl": "flash2", "N": 512, "d": 64, "block_q": 64, "block_k": 64})
        'FA2 at 64 × 64 tiles, N = 512, d = 64'
        >>> configuration({"impl": "naive", "N": 512, "d": 64, "block_q": 64, "block_k": 64})
        'naive at N = 512, d = 64'
    """
    impl = str(row["impl"])
    name = NUMERICS_KERNEL_LABELS.get(impl, impl)
    where = [f"N = {row['N']}"] + ([f"d = {row['d']}"] if "d" in row else [])
    if impl in TILED_IMPLS and all(k in row for k in ("block_q", "block_k")):
        return f"{name} at {int(row['block_q'])} × {int(row['block_k'])} tiles, " + ", ".join(where)
    return f"{name} at " + ", ".join(where)


def reason(status: str) -> str:
    """The status's why, without the library's own advice (which names its arguments, not the view's controls).

    Example:
        >>> reason("not run: time budget of 0 s used up before this row ran; lower N, or raise the time budget")
        "the run's time budget was used up before this row ran"
    """
    why = str(status).removeprefix(NOT_RUN + ": ")
    if why.startswith(TIME_BUDGET):
        when = why.split("; ")[0].partition(" used up ")[2] or "before it ran"
        return f"the run's time budget was used up {when}"
    return why.rsplit("; ", 1)[0] if cause_of(status) == MEMORY else why


def not_run_lines(df: Any, view: type, here: tuple[str, ...] = ()) -> list[str]:
    """One line per row a sweep refused or could not run: its configuration (tile size included), why, and the
    controls of this view that would let it run."""
    if "status" not in df:
        return []
    bad = df[df["status"].astype(str) != OK]
    return [" ".join(x for x in (f"**{configuration(r)}**: not run, {reason(r['status'])}.",
                                  advice(view, cause_of(r["status"]), here)) if x) for _, r in bad.iterrows()]


def not_run_ui(df: Any, view: type, here: tuple[str, ...] = ()) -> None:
    """List the rows a sweep refused or could not run, each with what would let it run on this view (`here`: other
    views' settings this view draws)."""
    lines = not_run_lines(df, view, here)
    if lines:
        st.warning(f"**{len(lines)} configuration(s) did not run** (crosses on the plots):\n"
                   + "\n".join(f"- {line}" for line in lines), icon="🛑")


def csv_download_ui(df: Any, file_name: str, key: str, help: str, report: Any = None) -> None:
    """A CSV of a run's rows, each with the run's context (torch version, CPU model, threads, ...: the sweep's
    df.attrs["context"], flashviz.measure.context) and, given the run's RunReport (flashviz.measure.load), when it
    ran, which flashviz, the load, the thread policy and the calls set aside: a file says where its numbers come
    from."""
    from flashviz.measure.context import with_context  # torch is loaded by now: a run produced df

    out = with_context(df, {**(df.attrs.get("context") or {}), **(report.columns() if report is not None else {})})
    st.download_button("Download the measurements (CSV)", out.to_csv(index=False).encode(), file_name=file_name,
                       mime="text/csv", key=key, help=help)
