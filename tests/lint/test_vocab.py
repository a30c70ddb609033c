"""The vocabulary is used, not retyped: outside flashviz/vocab.py no string constant spells one of its words.

A word is a module-level name of flashviz.vocab bound to a string ("kv_outer", "flash2", "skipped", "not run", ...).
Code names it (`KV_OUTER`), so a renamed word cannot leave an old spelling behind. Not counted: docstrings and other
bare string statements, the text parts of an f-string (prose around the values), and a label spelled like the word
it labels, right after the vocabulary's name of it (`{NAIVE: "naive"}`, `(NAIVE, "naive")`). What legitimately stays
(another word that happens to share the spelling) is in ALLOWED, with its count and why.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import flashviz.vocab as vocab

PACKAGE = Path(__file__).resolve().parents[2] / "flashviz"
WORDS = {value: name for name, value in vars(vocab).items() if name.isupper() and isinstance(value, str)}
CLAIM_FIELDS = "a claim's field name, the {placeholder} its sentence template spells: it names a number, not the word"
PHASE = "a pass's phase ('forward' or 'backward'), a word of its own that the vocabulary does not hold"
ALLOWED = {  # module under flashviz/ -> ({literal: count}, why it stays)
    "cli.py": ({"skipped": 1}, "the ring table's column heading, beside 'computed' and 'wait ms'"),
    "lesson/steps.py": ({"full": 1, "partial": 1, "skipped": 2, "naive": 1, "unmasked": 1},
                        "each step's recorded claim values: " + CLAIM_FIELDS),
    "views/how/claims.py": ({"full": 1, "partial": 1, "skipped": 2, "unmasked": 1}, CLAIM_FIELDS),
    "views/io/claims.py": ({"naive": 1}, CLAIM_FIELDS),
    "views/masks/figures.py": ({"masked": 1, "unmasked": 2},
                               "'masked': the element map's swatch for an element the mask hides, not the masked run; "
                               "'unmasked': the flag of the no-mask bar in the chart's rows"),
    "views/decode/figures.py": ({"flash": 1}, "the prefix of flash_decode's bar labels, not the implementation"),
    "views/pipeline/data.py": ({"fp8": 1, "forward": 4}, f"'fp8': the short name of float8_e4m3fn; {PHASE}"),
    "views/pipeline/figures.py": ({"fp8": 1, "forward": 1}, f"'fp8': the short name of float8_e4m3fn; {PHASE}"),
    "model/pipeline.py": ({"forward": 3}, PHASE),
    "ring/layouts.py": ({"forward": 1}, PHASE),
    "views/ring/figures.py": ({"forward": 1}, PHASE + " (flashviz.ring's, retyped: that package imports torch)"),
    "views/ring/sentences.py": ({"forward": 1}, PHASE + " (flashviz.ring's, retyped: that package imports torch)"),
    "measure/dtype_rule.py": ({"forward": 1}, "a rule row's kernel: 'forward', 'backward', 'decode' or 'ring'"),
    "views/numerics/data.py": ({"forward": 1}, "a rule row's kernel: 'forward', 'backward', 'decode' or 'ring'"),
}


def retyped(source: str) -> list[tuple[int, str]]:
    """(line, literal) of every string constant in `source` that spells a word of the vocabulary."""
    tree = ast.parse(source)
    exempt = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):  # docstrings, bare strings
            exempt.add(id(node.value))
        elif isinstance(node, ast.JoinedStr):  # an f-string's text, not its {values}
            exempt |= {id(v) for v in node.values if isinstance(v, ast.Constant)}
        elif isinstance(node, ast.FormattedValue) and node.format_spec is not None:
            exempt.add(id(node.format_spec))
        pairs = []
        if isinstance(node, ast.Dict):
            pairs = list(zip(node.keys, node.values, strict=True))
        elif isinstance(node, ast.Tuple):
            pairs = list(zip(node.elts, node.elts[1:], strict=False))
        for name, label in pairs:  # {NAIVE: "naive"}, (NAIVE, "naive"): a label that reads as the word
            if (isinstance(name, ast.Name) and isinstance(label, ast.Constant)
                    and WORDS.get(label.value) == name.id):
                exempt.add(id(label))
    return sorted((n.lineno, n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant)
                  and isinstance(n.value, str) and n.value in WORDS and id(n) not in exempt)


def test_no_module_retypes_a_word_of_the_vocabulary():
    bad, stale = [], []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == "vocab.py":
            continue
        found = retyped(path.read_text())
        counts = Counter(lit for _, lit in found)
        allowed = Counter(ALLOWED.get(rel, ({}, ""))[0])
        bad += [f"{rel}:{line}: {lit!r}, name it vocab.{WORDS[lit]}" for line, lit in found
                if counts[lit] > allowed[lit]]
        stale += [f"{rel}: {lit!r} allowed {allowed[lit]}x, found {counts[lit]}x" for lit in allowed
                  if counts[lit] < allowed[lit]]
    assert bad == [], "string literals that spell a word of flashviz.vocab:\n" + "\n".join(bad)
    assert stale == [], "ALLOWED holds more than the code does; shrink it:\n" + "\n".join(stale)


def test_every_allowed_module_exists():
    assert [rel for rel in ALLOWED if not (PACKAGE / rel).is_file()] == []


def test_the_check_sees_a_retyped_word_and_nothing_else():
    source = ('"""kv_outer"""\n'  # a docstring
              'def f(order="kv_outer"):\n'  # retyped: line 2
              '    """skipped"""\n'
              '    return order == "q_outer" or f"{order}naive"\n'  # retyped: line 4; the f-string's text is not
              'LABELS = {NAIVE: "naive", FLASH: "flash2"}\n'  # a label of its word; then retyped: line 5
              'PAIRS = ((NAIVE, "naive"), ("skipped", SKIPPED))\n'  # the label exempt; "skipped" first: retyped, line 6
              'HEAD = f"{\'skipped\':>7} {\'tiles\':>5}"\n')  # an expression inside an f-string: retyped, line 7
    assert retyped(source) == [(2, "kv_outer"), (4, "q_outer"), (5, "flash2"), (6, "skipped"), (7, "skipped")]
