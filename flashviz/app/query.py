"""A defensive parser for hostile query strings: any query mapping (repeated keys, non-numbers, huge, negative,
unicode) becomes valid Settings plus plain-text notices saying what was clamped and why. It never raises on input.

Each setting is parsed by the kind its Spec declares (flashviz.kit.spec); the only rules written out here are the
ones that tie two settings together (Bc follows Br while they are linked; the row stays inside 0..N-1) and the
machine's devices. Pure: imports neither streamlit nor torch, so it is fuzzed in milliseconds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from flashviz.app.state import Env, Settings, default_settings, setting_fields, spec_of
from flashviz.kit.settings import for_machine
from flashviz.kit.sizes import N_MAX
from flashviz.kit.spec import BOOL, CHOICE, INT, INTS, STRS, WINDOW, Spec, url_key
from flashviz.limits import LIST_MAX

_TRUE = {"1", "true", "yes", "on", "t", "y"}
_FALSE = {"0", "false", "no", "off", "f", "n"}
_INT = re.compile(r"[+-]?[0-9]{1,20}", re.ASCII)  # ASCII digits only: int() would accept Arabic-Indic digits too;
# at most 20, as many as a 64-bit integer has: a longer run of digits is no number a link means
_HUGE = 10 ** 12  # a number this large or larger is far past every setting's bound: its notice says "too large"
_RAW_MAX = 200  # characters of a raw value we look at; longer values are rejected unread


def shown(raw: object, limit: int = 40) -> str:
    """A raw URL value made safe to show inside inline code: printable ASCII, no backticks, truncated."""
    text = str(raw)
    safe = "".join(c if " " <= c <= "~" and c != "`" else "?" for c in text[:limit])
    return safe + ("..." if len(text) > limit else "")


def _b(x: bool) -> str:
    return "1" if x else "0"


class _Parser:
    """Collects notices while turning raw strings into clamped values."""

    def __init__(self, params: Mapping[str, object]):
        self.notices: list[str] = []
        self.raw: dict[str, str] = {}
        for key, value in params.items():
            values = list(value) if isinstance(value, (list, tuple)) else [value]
            if not values:
                continue
            if len(values) > 1:
                self.notices.append(f"`{shown(key)}` appears {len(values)} times in the link; using the last value.")
            self.raw[str(key)] = str(values[-1])

    def get(self, key: str) -> str | None:
        value = self.raw.get(key)
        if value is not None and len(value) > _RAW_MAX:
            self.notices.append(f"`{key}` is {len(value)} characters long; ignored it and kept the default.")
            return None
        return value

    def integer(self, key: str, default: int, lo: int, hi: int) -> int:
        raw = self.get(key)
        if raw is None:
            return default
        value = _to_int(raw)
        if value is None:
            self.notices.append(f"`{key}={shown(raw)}` is not a whole number; kept the default {default}.")
            return default
        return self._clamp(key, value, lo, hi)

    def _clamp(self, key: str, value: int, lo: int, hi: int) -> int:
        if value < lo or value > hi:
            clamped = min(max(value, lo), hi)
            if abs(value) >= _HUGE:  # e.g. n=99999999999999999999: a whole number, only far too large (or small)
                size = "too large" if value > hi else "too small"
                self.notices.append(f"`{key}={shown(value)}` is {size} (allowed {lo}..{hi}); clamped to {clamped}.")
            else:  # the wording links recorded before keep (tests/data/links_today.json)
                self.notices.append(f"`{key}={shown(value)}` is outside {lo}..{hi}; clamped to {clamped}.")
            return clamped
        return value

    def boolean(self, key: str, default: bool) -> bool:
        raw = self.get(key)
        if raw is None:
            return default
        text = raw.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        self.notices.append(f"`{key}={shown(raw)}` is not true/false (use 1 or 0); kept {_b(default)}.")
        return default

    def choice(self, key: str, default: str, allowed: Sequence[str]) -> str:
        raw = self.get(key)
        if raw is None:
            return default
        text = raw.strip().lower()
        if text in allowed:
            return text
        self.notices.append(f"`{key}={shown(raw)}` is not one of {', '.join(allowed)}; kept {default}.")
        return default

    def int_list(self, key: str, default: tuple[int, ...], lo: int, hi: int) -> tuple[int, ...]:
        raw = self.get(key)
        if raw is None:
            return default
        parts = [p for p in raw.split(",") if p.strip()]
        values = []
        for part in parts:
            value = _to_int(part)
            if value is None:
                self.notices.append(f"`{key}` entry `{shown(part)}` is not a whole number; dropped it.")
                continue
            values.append(self._clamp(key, value, lo, hi))
        values = sorted(set(values))
        if len(values) > LIST_MAX:
            self.notices.append(f"`{key}` lists {len(values)} values; kept the first {LIST_MAX} (sweep size cap).")
            values = values[:LIST_MAX]
        if not values:
            self.notices.append(f"`{key}={shown(raw)}` holds no usable value; kept the default.")
            return default
        return tuple(values)

    def str_list(self, key: str, default: tuple[str, ...], allowed: Sequence[str]) -> tuple[str, ...]:
        raw = self.get(key)
        if raw is None:
            return default
        wanted = {p.strip().lower() for p in raw.split(",") if p.strip()}
        bad = wanted - set(allowed)
        if bad:
            listed = ", ".join(shown(b, 15) for b in sorted(bad)[:4])
            self.notices.append(f"`{key}` names unknown entries ({listed}); allowed: {', '.join(allowed)}.")
        values = tuple(a for a in allowed if a in wanted)
        if not values:
            self.notices.append(f"`{key}` names no known entry; kept the default.")
            return default
        return values

    def window(self, key: str, default: tuple[int, int] | None) -> tuple[int, int] | None:
        raw = self.get(key)
        if raw is None:
            return default
        text = raw.strip().lower()
        if text in ("", "none", "off", "0,none", "none,none"):
            return None
        parts = text.split(",")
        if len(parts) != 2:
            self.notices.append(f"`{key}={shown(raw)}` is not `left,right` (e.g. 256,0); no window.")
            return None
        sides = []
        for side, part in zip(("left", "right"), parts, strict=True):
            if part.strip() in ("none", "inf", ""):
                sides.append(N_MAX)  # unbounded: a reach of N_MAX covers every N this dashboard allows
                continue
            value = _to_int(part)
            if value is None:
                self.notices.append(f"`{key}` {side} reach `{shown(part)}` is not a whole number; no window.")
                return None
            sides.append(self._clamp(f"{key} {side}", value, 0, N_MAX))
        return (sides[0], sides[1])


def _to_int(raw: str) -> int | None:
    text = raw.strip()
    return int(text) if _INT.fullmatch(text) else None


def parse_query(params: Mapping[str, object], env: Env | None = None) -> tuple[Settings, list[str]]:
    """Settings from URL query parameters, clamped to what this dashboard and machine allow.

    Args:
        params: query parameters, each a string or a list of strings (repeated keys: the last one wins).
        env: the machine's limits (threads, devices); None: Env()'s defaults.
    Returns:
        (settings, notices): valid settings, and one plain sentence per value that was changed or ignored.

    Example:
        >>> s, notes = parse_query({"n": "99999", "causal": "1"})
        >>> s.n, s.causal, len(notes)
        (16384, True, 1)
    """
    env = env or Env()
    p = _Parser(params)
    base = default_settings(env)
    known = {url_key(f) for f in setting_fields()}
    unknown = sorted(k for k in p.raw if k not in known)
    if unknown:
        listed = ", ".join(f"`{shown(k, 20)}`" for k in unknown[:5])
        p.notices.append(f"Ignored unknown link parameter(s): {listed}" + (" ..." if len(unknown) > 5 else "") + ".")
    values: dict[str, Any] = {}
    for f in sorted(setting_fields(), key=lambda f: f.name != "link"):  # link first: bc's default depends on it
        spec, default = for_machine(spec_of(f), env), getattr(base, f.name)
        if f.name == "bc" and values["link"]:
            default = values["br"]  # a linked link names only br
        elif f.name == "row":
            spec, default = replace(spec, hi=values["n"] - 1), min(default, values["n"] - 1)
        elif f.name == "device":
            values[f.name] = _device(p, spec.options)
            continue
        values[f.name] = _parse(p, url_key(f), spec, default)
    if values["link"] and values["bc"] != values["br"]:
        p.notices.append(f"`link=1` but `br={values['br']}` and `bc={values['bc']}` differ; unlinked them to keep "
                         "both.")
        values["link"] = False
    return Settings(**values), p.notices


def _parse(p: _Parser, key: str, spec: Spec, default: Any) -> Any:
    """One setting's value from the link, parsed as its Spec's kind declares."""
    if spec.kind == INT:
        return p.integer(key, default, spec.lo, spec.hi)
    if spec.kind == BOOL:
        return p.boolean(key, default)
    if spec.kind == CHOICE:
        return p.choice(key, default, spec.options)
    if spec.kind == INTS:
        return p.int_list(key, default, spec.lo, spec.hi)
    if spec.kind == STRS:
        return p.str_list(key, default, spec.options)
    if spec.kind == WINDOW:
        return p.window(key, default)
    raise AssertionError(f"Spec of {key!r} has unknown kind {spec.kind!r}")  # a declaration error, not user input


def _device(p: _Parser, devices: Sequence[str]) -> str:
    raw = p.get("device")
    if raw is not None and raw.strip().lower() == "cuda" and "cuda" not in devices:
        p.notices.append("`device=cuda` but this machine has no CUDA GPU; using the CPU.")
        return devices[0]
    return p.choice("device", devices[0], devices)


def parse_lesson(params: Mapping[str, object], lessons: Mapping[str, int]) -> tuple[str | None, int, list[str]]:
    """The lesson and step a link asks presenter mode for (`lesson=<slug>&step=<k>`, k from 1), repaired like any
    setting: an unknown lesson becomes the first one, a step outside 1..steps is clamped, a step that is not a
    number becomes 1, and a step without a lesson is ignored; each repair says so.

    Args:
        params: query parameters, each a string or a list of strings (other keys are not looked at).
        lessons: slug -> number of steps of every lesson there is, the first one first.
    Returns:
        (slug or None when the link asks for no lesson, step k, notices).

    Example:
        >>> parse_lesson({"lesson": "intro", "step": "99"}, {"intro": 10})
        ('intro', 10, ['`step=99` is outside 1..10; clamped to 10.'])
        >>> parse_lesson({"n": "64"}, {"intro": 10})
        (None, 1, [])
    """
    p = _Parser({key: value for key, value in params.items() if key in ("lesson", "step")})
    if p.get("lesson") is None:
        if "step" in p.raw:
            p.notices.append(f"`step={shown(p.raw['step'])}` needs a lesson (`lesson={next(iter(lessons))}`); "
                             "ignored it.")
        return None, 1, p.notices
    slug = p.choice("lesson", next(iter(lessons)), tuple(lessons))
    return slug, p.integer("step", 1, 1, lessons[slug]), p.notices
