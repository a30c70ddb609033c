"""The sidebar: every setting as a widget with help text, classroom presets, and the URL kept in sync.

On a session's first run the URL's query parameters are parsed (state.parse_query: clamped, never raising) into the
widgets' session state; after that the widgets are the truth and the URL follows them, so a copied link reproduces
the view. `settings_ui()` returns the chosen Settings (the demo-self-driving `*_ui()` pattern).
"""

from __future__ import annotations

from dataclasses import fields, replace

import streamlit as st

from flashviz.limits import BATCH_MAX, HEADS_MAX
from flashviz.ui.state import (
    BLOCK_OPTIONS,
    D_OPTIONS,
    N_MAX,
    N_OPTIONS,
    ORDERS,
    PRESETS,
    VIEWS,
    Env,
    Settings,
    apply_preset,
    clamp_row,
    parse_query,
)
from flashviz.vocab import DTYPES

INIT_KEY = "_fv_initialised"  # session flag: the URL has been read
NOTICES_KEY = "_fv_notices"  # notices about clamped URL values, shown until dismissed
PRESET_KEY = "preset"  # the preset selectbox
VIEW_KEY = "view"  # the tabs' state key (holds the tab label)
WIN_ON, WIN_LEFT, WIN_RIGHT = "win_on", "win_left", "win_right"  # the window is three widgets
SCALAR_KEYS = ("n", "d", "br", "bc", "link", "causal", "order", "dtype", "batch", "heads", "device", "threads",
               "row", "reps")
LIST_KEYS = ("ns", "impls", "blocks", "cds", "cns")  # multiselects (lists in session state, tuples in Settings)
WIDGET_KEYS = (*SCALAR_KEYS, *LIST_KEYS, WIN_ON, WIN_LEFT, WIN_RIGHT, VIEW_KEY)


def write_state(s: Settings) -> None:
    """Put settings into the widgets' session state (before the widgets are drawn)."""
    ss = st.session_state
    for key in SCALAR_KEYS:
        ss[key] = getattr(s, key)
    for key in LIST_KEYS:
        ss[key] = list(getattr(s, key))
    ss[WIN_ON] = s.window is not None
    ss[WIN_LEFT], ss[WIN_RIGHT] = s.window if s.window is not None else (256, 0)
    ss[VIEW_KEY] = VIEWS[s.view]


def read_state(env: Env) -> Settings:
    """Settings from the widgets' session state (missing keys: defaults)."""
    ss = st.session_state
    base = Settings(threads=env.max_threads)
    values = {f.name: ss.get(f.name, getattr(base, f.name)) for f in fields(Settings) if f.name in SCALAR_KEYS}
    lists = {key: tuple(ss[key]) if key in ss else getattr(base, key) for key in LIST_KEYS}  # empty stays empty
    window = (int(ss.get(WIN_LEFT, 0)), int(ss.get(WIN_RIGHT, 0))) if ss.get(WIN_ON) else None
    label_to_view = {label: slug for slug, label in VIEWS.items()}
    s = replace(base, **values, **lists, window=window, view=label_to_view.get(ss.get(VIEW_KEY), "how"))
    if s.link:
        s = replace(s, bc=s.br)
    return clamp_row(s)


def init_from_url(env: Env) -> None:
    """First run of a session: read the URL into the widgets; later runs keep widget state alive across tabs."""
    ss = st.session_state
    if not ss.get(INIT_KEY):
        params = {key: st.query_params.get_all(key) for key in st.query_params}
        settings, notices = parse_query(params, env)
        write_state(settings)
        ss[NOTICES_KEY] = notices
        ss[INIT_KEY] = True
    else:
        # Widgets that were not drawn last run (closed tabs, hidden inputs) would lose their state: re-assigning a
        # key turns it into plain session state that survives until the widget comes back.
        for key in WIDGET_KEYS:
            if key in ss:
                ss[key] = ss[key]


def sync_url(s: Settings) -> None:
    """Write the settings into the URL (only if they changed, so a rerun does not touch browser history)."""
    wanted = s.to_query()
    if st.query_params.to_dict() != wanted:
        st.query_params.from_dict(wanted)


def _apply_preset(env: Env) -> None:
    """Selectbox callback: load the chosen preset into the widgets, then reset the selectbox."""
    name = st.session_state.get(PRESET_KEY)
    if name in PRESETS:
        write_state(apply_preset(read_state(env), name))
        st.session_state["_fv_preset_story"] = f"**{name}**: {PRESETS[name].story}"
    st.session_state[PRESET_KEY] = None


def _with(options: tuple[int, ...], value: int) -> list[int]:
    """Slider options plus the current value (a link may carry an odd size that the list lacks)."""
    return sorted({*options, int(value)})


def settings_ui(env: Env) -> Settings:
    """Draw the sidebar and return the chosen settings."""
    ss = st.session_state
    sb = st.sidebar
    sb.header("Settings")
    sb.selectbox(
        "Classroom preset", list(PRESETS), index=None, key=PRESET_KEY, on_change=_apply_preset, args=(env,),
        placeholder="Load a preset ...",
        help="Loads a ready-made scenario into every control below; you can change anything afterwards.",
    )
    story = ss.get("_fv_preset_story")
    if story:
        sb.caption(story)
    sb.select_slider(
        "Sequence length N", options=_with(N_OPTIONS, ss["n"]), key="n",
        help="Tokens per sequence (N_q = N_k = N). Powers of two plus odd sizes (97, 257, 1000, 1025) whose last "
             "tile is ragged. Naive attention's memory grows with N²; FlashAttention's with N.",
    )
    sb.select_slider(
        "Head dimension d", options=_with(D_OPTIONS, ss["d"]), key="d",
        help="Features per head (the width of Q, K, V). GPT-2 uses 64; odd values (59, 111) test ragged code paths.",
    )
    sb.checkbox("Link Br and Bc", key="link",
                help="Use one block size for query rows (Br) and key columns (Bc), as most kernels do.")
    if ss["link"]:
        sb.select_slider(
            "Block size Br = Bc", options=_with(BLOCK_OPTIONS, ss["br"]), key="br",
            help="Rows and columns of S per tile. One tile's Q, K, V blocks must fit in on-chip memory (SRAM).",
        )
        ss["bc"] = ss["br"]  # plain state while the Bc slider is hidden; it reappears with this value
    else:
        sb.select_slider("Block rows Br (queries per tile)", options=_with(BLOCK_OPTIONS, ss["br"]), key="br",
                         help="Query rows per tile: the height of one tile of S.")
        sb.select_slider("Block columns Bc (keys per tile)", options=_with(BLOCK_OPTIONS, ss["bc"]), key="bc",
                         help="Key columns per tile: the width of one tile of S.")
    sb.toggle("Causal mask", key="causal",
              help="Query i sees keys j ≤ i (decoder models, as SDPA's is_causal). Tiles above the diagonal are "
                   "skipped: never loaded, never computed.")
    sb.toggle("Sliding window", key=WIN_ON,
              help="Each query sees only nearby keys: i − left ≤ j ≤ i + right (flash-attn's window_size). Combined "
                   "with the causal mask by intersection.")
    if ss[WIN_ON]:
        left, right = sb.columns(2)
        left.number_input("left reach", min_value=0, max_value=N_MAX, step=64, key=WIN_LEFT,
                          help="How many earlier keys a query sees (i − left ≤ j).")
        right.number_input("right reach", min_value=0, max_value=N_MAX, step=64, key=WIN_RIGHT,
                           help="How many later keys a query sees (j ≤ i + right); irrelevant with a causal mask.")
    sb.radio("Loop order", list(ORDERS), format_func=ORDERS.get, key="order",
             help="FA1 (Algorithm 1) loops over K/V blocks outside and Q blocks inside, rewriting O, l, m in HBM "
                  "after every tile. FA2 loops over Q blocks outside and keeps O_i on chip until its row is done.")
    sb.selectbox("dtype", DTYPES, key="dtype",
                 help="Element type of Q, K, V. Accumulators stay fp32 (fp64 for float64). Half types halve the "
                      "bytes moved; on a CPU they are slower, not faster.")
    c1, c2 = sb.columns(2)
    c1.number_input("batch B", min_value=1, max_value=BATCH_MAX, step=1, key="batch",
                    help="Sequences processed together. Memory and time scale linearly with B.")
    c2.number_input("heads H", min_value=1, max_value=HEADS_MAX, step=1, key="heads",
                    help="Attention heads per layer. Memory and time scale linearly with H.")
    sb.selectbox("device", env.devices, key="device",
                 help="Where the benchmarks run. CUDA is listed only when PyTorch sees a GPU. The tile animation "
                      "always runs its small trace on the CPU.")
    sb.select_slider("CPU threads", options=list(range(1, env.max_threads + 1)), key="threads",
                     help="Intra-op threads for timing runs (set explicitly and reported with every result).")
    return read_state(env)


def notices_ui() -> None:
    """Show what the link asked for that could not be used as given (until dismissed)."""
    notices = st.session_state.get(NOTICES_KEY) or []
    if not notices:
        return
    shown_max = 10
    lines = "\n".join(f"- {n}" for n in notices[:shown_max])
    more = f"\n- ... and {len(notices) - shown_max} more" if len(notices) > shown_max else ""
    st.warning(f"**Some settings in this link were adjusted:**\n{lines}{more}", icon="⚠️")
    if st.button("Dismiss", key="_fv_dismiss"):
        st.session_state[NOTICES_KEY] = []
        st.rerun()


__all__ = ["init_from_url", "notices_ui", "settings_ui", "sync_url"]
