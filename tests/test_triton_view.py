"""The Triton view: at its defaults and after Play (AppTest), its claim's values against the library, the lesson step
that opens it, and `import flashviz` and the dashboard with triton absent (a subprocess whose imports of triton fail).

Legend: N sequence length, d head dimension, Br = BLOCK_M, Bc = BLOCK_N.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from flashviz import io_cost, tile_schedule
from flashviz import triton as ft  # before triton: it sets TRITON_INTERPRET where there is no CUDA
from flashviz.app.state import Settings
from flashviz.views.triton.data import setup_of, smem_budget, smem_need
from tests._apptest import assert_clean, open_app
from tests.conftest import ROOT

pytest.importorskip("flashviz.triton.kernel")


def test_the_view_at_its_defaults_states_the_records_numbers():
    at = open_app(view="triton")
    assert_clean(at)
    texts = [m.value for m in at.markdown]
    assert any("they loaded 2, 4, 6 and 8 K blocks: 20 tiles" in t and "the same tiles as" in t for t in texts)
    cost = io_cost("flash2", 256, 256, 64, 64, 32, causal=True)
    assert any("exactly what `io_cost`'s FA2 model counts" in t and f"{cost.reads * 4 // 1024}.0 KiB read" in t
               for t in texts)
    source = [t for t in texts if 'class="fv-source"' in t]
    assert len(source) == 1 and source[0].count('class="fv-run"') == 1
    assert "q = tl.load(Q + head" in source[0].split('class="fv-run"')[1].split("</div>")[0]  # step 1: load Q


def test_play_steps_to_the_next_line_of_the_followed_program():
    at = open_app(view="triton", trn="200", trprog="3")
    assert_clean(at)
    assert at.slider(key="triton_step").value == 1
    at.button(key="triton_play").click().run()
    assert_clean(at)
    assert at.slider(key="triton_step").value == 2
    (source,) = [m.value for m in at.markdown if 'class="fv-source"' in m.value]
    running = source.split('class="fv-run"')[1].split("</div>")[0]
    assert "k = tl.load(k_head" in running  # program 3's first K block, in STAGE 1
    assert "load K block 0 (STAGE 1)" in source


def test_the_claim_holds_with_the_librarys_numbers():
    from flashviz.views.triton.claims import triton_schedule

    s = Settings(tr_n=200, tr_bm=32, tr_bn=32)
    r = triton_schedule(s)
    schedule = tile_schedule(200, 200, 32, 32, causal=True, loop_order="q_outer")
    assert r.holds, r.why
    assert r.values["tiles"] == sum(t.computed for t in schedule) == r.values["schedule_tiles"]
    assert r.values["k_blocks"] == [i + 1 for i in range(7)]  # causal, square tiles: 1 .. Tr
    assert r.values["bytes_loaded"] == io_cost("flash2", 200, 200, 64, 32, 32, causal=True).reads * 4


def test_the_smem_budget_at_the_views_settings():
    s = Settings(tr_bm=128, tr_bn=128, tr_stages=3, tr_d=128)
    setup = setup_of(s)
    rows = {r.gpu: r for r in smem_budget(setup.block_m, setup.block_n, setup.num_stages, setup.d)}
    assert smem_need(128, 128, 3, 128) == (128 + 2 * 128 * 3) * 128 * 2 == 229376
    assert (rows["A100"].fits, rows["H100"].fits) == (False, True)  # 224 KiB: over A100's 164, under H100's 227
    assert all(r.fits for r in smem_budget(64, 32, 2, 64))  # the defaults: 24 KiB


BLOCK_TRITON = textwrap.dedent("""
    import importlib.abc, sys
    class NoTriton(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "triton" or name.startswith("triton."):
                raise ModuleNotFoundError(f"No module named {name!r}")
            return None
    sys.meta_path.insert(0, NoTriton())
    import importlib.util
    importlib.util.find_spec = (lambda real: lambda name, *a: None if name.split(".")[0] == "triton"
                                else real(name, *a))(importlib.util.find_spec)
""")


def _without_triton(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCK_TRITON + textwrap.dedent(code)], cwd=ROOT, text=True,
                          capture_output=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_import_flashviz_and_the_view_work_without_triton():
    done = _without_triton("""
        import flashviz, flashviz.triton
        from flashviz import tile_schedule
        assert not flashviz.triton.available()
        assert len(tile_schedule(64, 64, 32, 32)) == 4
        try:
            flashviz.triton.attention(None, None, None)
        except ModuleNotFoundError as e:
            assert 'pip install -e ".[triton]"' in str(e)
        from streamlit.testing.v1 import AppTest
        at = AppTest.from_file("app.py", default_timeout=240)
        at.query_params.update(view="triton")
        at.run()
        assert not at.exception and not at.error, (at.exception, at.error)
        print([i.value for i in at.info])
        assert "triton" not in sys.modules
    """)
    assert done.returncode == 0, done.stderr[-3000:]
    assert 'pip install -e ".[triton]"' in done.stdout


def test_without_cuda_the_package_chose_the_interpreter():
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA is here: the kernel compiles (unless the user set TRITON_INTERPRET)")
    assert ft.interpreted() and os.environ["TRITON_INTERPRET"] == "1"


def test_where_triton_compiles_the_view_says_how_to_record_it():
    done = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import os
        os.environ["TRITON_INTERPRET"] = "0"  # as on a CUDA machine: the kernel would compile
        from streamlit.testing.v1 import AppTest
        at = AppTest.from_file("app.py", default_timeout=240)
        at.query_params.update(view="triton")
        at.run()
        assert not at.exception and not at.error, (at.exception, at.error)
        print([i.value for i in at.info])
    """)], cwd=ROOT, text=True, capture_output=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "TRITON_INTERPRET=1" in done.stdout
