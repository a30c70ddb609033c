"""What the How it works view says, pure functions of the IO model's numbers: why a loop order moves more or fewer
bytes than standard attention at the current tile sizes. Torch-free."""

from __future__ import annotations

from flashviz.units import format_bytes
from flashviz.vocab import KV_OUTER, LOOP_ORDER_SHORT


def x_standard_md(order: str, tiled: float, naive: float, n: int, d: int, br: int, bc: int) -> str:
    """Why a loop order moves more or fewer bytes than standard attention (HBM accesses per head from io_cost):
    standard attention pays 4 N^2 for S and P; a tiled pass re-reads what its outer loop cannot keep on chip, about
    3 N d for FA1 (Q, and O, l, m read and written back) once per K/V block, 2 N d for FA2 (K and V) once per Q block.
    So FA1 moves more once Bc < 3d/4, FA2 once Br < d/2.

    Example:
        >>> from flashviz.model.iomodel import io_cost
        >>> fa1 = io_cost("kv_outer", 1000, 1000, 111, 32, 32).accesses
        >>> x_standard_md("kv_outer", fa1, io_cost("naive", 1000, 1000, 111, 32, 32).accesses, 1000, 111, 32, 32)[:60]
        "**FA1 moves 2.50× standard attention's bytes here, more.** I"
    """
    ratio = tiled / naive if naive else float("inf")
    fa1 = order == KV_OUTER
    short, block, name = LOOP_ORDER_SHORT[order], bc if fa1 else br, "Bc" if fa1 else "Br"
    passes, limit = -(-n // block), (3 * d / 4 if fa1 else d / 2)
    what = "Q, and O, l, m read and written back" if fa1 else "K and V"
    per_pass = f"about {3 if fa1 else 2}Nd = {(3 if fa1 else 2) * n * d:,} elements ({what})"
    rule = (f"A pass costs less than S and P only when the tiles are wide for the head dimension: {short} needs "
            f"{name} > {'3d/4' if fa1 else 'd/2'} = {limit:.3g}, and here {name} = {block}.")
    if ratio < 1 - SAME:
        return (f"**{short} moves {ratio:.2f}× standard attention's bytes: S and P never reach HBM.** Standard "
                f"attention writes S and P (N² each) and reads them back, 4N² = {4 * n * n:,} elements; {short} "
                f"instead makes {passes} passes (one per {'K/V' if fa1 else 'Q'} block of {name} = {block}), each "
                f"re-reading {per_pass}. {rule}")
    word = "about as much" if ratio <= 1 + SAME else "more"
    return (f"**{short} moves {ratio:.2f}× standard attention's bytes here, {word}.** It never writes S or P, but at "
            f"N = {n} they are small: 4N² = {4 * n * n:,} elements, while {short}'s outer loop makes {passes} "
            f"passes (N / {name} = {n} / {block}), each re-reading {per_pass}. {rule} Wider tiles, a longer N or a "
            "smaller d turn it round; on a GPU the tiles are as wide as SRAM allows (the IO model view).")


def fa1_start_md(n: int, d: int, dtype_bytes: int, start_bytes: float, first_bytes: float,
                 naive_first_bytes: float) -> str:
    """Why FA1's counter opens above standard attention's: before its first tile, Algorithm 1 writes O, l and m to
    HBM (line 2: N d + 2N elements), which standard attention never does; "" where FA1's first tile does not open
    above standard attention's.

    Args:
        n, d, dtype_bytes: the problem (one head).
        start_bytes: the IO model's start row for FA1 (io_trace_steps' step -1).
        first_bytes, naive_first_bytes: the counters over the map on FA1's first computed tile.

    Example:
        >>> fa1_start_md(1024, 64, 4, 270336, 353280, 69632)[:64]
        "**FA1's counter opens at 345.0 KiB, standard attention's at 68.0"
    """
    if first_bytes <= naive_first_bytes:
        return ""
    return (f"**FA1's counter opens at {format_bytes(first_bytes)}, standard attention's at "
            f"{format_bytes(naive_first_bytes)}:** before its first tile, FA1 (Algorithm 1, line 2) writes O, ℓ and "
            f"m to HBM, N·d + 2N = {n * d + 2 * n:,} elements ({format_bytes(start_bytes)}), and every tile then reads "
            f"back and writes the rows of O, ℓ, m it updates. Standard attention writes O once, at the end. FA2 keeps "
            "O, ℓ and m on chip for the whole row of tiles, so its counter starts at its first tile's loads.")


SAME = 0.1  # a ratio within 10 % of 1 moves "about as much" as standard attention
