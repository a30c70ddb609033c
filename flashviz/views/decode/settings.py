"""The Decoding view's own settings: the cache length, query and K/V heads, splits, page size and the batch's cache
lengths."""

from __future__ import annotations

from flashviz.kit.settings import view_settings
from flashviz.kit.spec import CHOICE, INT, VIEW, Spec, setting
from flashviz.limits import HEADS_MAX
from flashviz.views.bench.settings import BenchSettings

# -- Decoding
DEC_LEN_MAX = 65536  # keys in a decoding view's cache: 64 Ki tokens, a long-context model's
DEC_LEN_OPTIONS = (256, 1000, 1024, 4096, 16384, 32768, 65536)
DEC_HEADS_OPTIONS = (1, 2, 4, 8, 12, 16, 32, 64)
DEC_PAGE_OPTIONS = (0, 16, 64, 256, 1024)  # keys per page; 0 = contiguous cache
DEC_PAGE_MAX = 4096
DEC_SPLITS = {"auto": "auto (heuristic)", **{str(s): str(s) for s in (1, 2, 3, 4, 8, 16, 32)}}  # URL -> label
DEC_LENS = {  # URL name -> label: the batch's cache lengths as fractions of the longest, N
    "one": "1 sequence: N",
    "pair": "2 sequences: N, N/3",
    "four": "4 sequences: N each",
    "ragged": "4 sequences: N, 0.7N, 0.4N, 0.1N",
}


@view_settings("Decoding", reads=("d", "dtype", "device", "threads"), borrows=((BenchSettings, ("reps",)),))
class DecodeSettings:
    """The Decoding view's settings: the shared ones it reads, the ones it borrows and its own."""

    cache_len: int = setting(16384, Spec(
        INT, "select_slider", "Cache length N (keys)", lo=1, hi=DEC_LEN_MAX, options=DEC_LEN_OPTIONS, place=VIEW,
        short="cache length", help="Keys already in the longest sequence's KV cache. Every decode step reads all "
                                   "of them."), key="declen")
    q_heads: int = setting(8, Spec(
        INT, "select_slider", "Query heads H_q", lo=1, hi=HEADS_MAX, options=DEC_HEADS_OPTIONS, place=VIEW,
        short="H_q", help="Query heads per layer. Each one does 4·N·d FLOPs per decode step."), key="dechq")
    kv_heads: int = setting(2, Spec(
        INT, "selectbox", "K/V heads H_kv", lo=1, hi=HEADS_MAX, place=VIEW, short="H_kv",
        help="K/V heads in the cache; only divisors of H_q are offered. H_kv = H_q is multi-head attention "
             "(MHA), 1 is multi-query (MQA), anything between is grouped-query (GQA): g = H_q / H_kv query heads "
             "share each K/V head, so the cache and its reads shrink g-fold."), key="dechkv")
    splits: str = setting("4", Spec(
        CHOICE, "selectbox", "Splits S", options=tuple(DEC_SPLITS), labels=DEC_SPLITS, place=VIEW, short="splits",
        help="Chunks the cache is cut into, each computed independently and merged by logsumexp. Auto: "
             "flash-attn's rule on this machine's threads (split only while they are not all busy)."),
        key="decsplits")
    page_size: int = setting(0, Spec(
        INT, "select_slider", "Page size (keys)", lo=0, hi=DEC_PAGE_MAX, options=DEC_PAGE_OPTIONS, place=VIEW,
        short="page size", help="0: one contiguous cache per sequence. Otherwise the cache lives in fixed-size "
                                "pages anywhere in a shared pool, found through a block table (vLLM's "
                                "PagedAttention)."), key="decpage")
    batch_lens: str = setting("pair", Spec(
        CHOICE, "selectbox", "Batch", options=tuple(DEC_LENS), labels=DEC_LENS, place=VIEW, short="batch",
        help="Sequences decoded together and their cache lengths. The splits cut every sequence at the same key "
             "positions; a short sequence simply has nothing in the later splits."), key="declens")
