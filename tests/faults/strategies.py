"""Hypothesis strategies for bad input: wrong types, huge, invalid Unicode, deep nesting."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

# Lone surrogates: what ``json.loads('"\\ud800"')`` gives, and what undecodable bytes in
# argv become (``surrogateescape``). Neither can be encoded as UTF-8.
SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)

TEXT = st.text(st.one_of(st.characters(), SURROGATES), max_size=30)

HUGE_TEXT = st.sampled_from([150_000, 1_000_000, 2_100_000]).map(lambda n: "Ω" * n)

NUMBERS = st.one_of(
    st.integers(),
    st.integers(min_value=2**63, max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
)

LEAF: st.SearchStrategy[Any] = st.one_of(st.none(), st.booleans(), NUMBERS, TEXT)


def _nest(depth: int, leaf: Any, as_dict: bool) -> Any:
    value = leaf
    for _ in range(depth):
        value = {"a": value} if as_dict else [value]
    return value


DEEP: st.SearchStrategy[Any] = st.builds(
    _nest, st.integers(min_value=20, max_value=3000), LEAF, st.booleans()
)

JSONISH: st.SearchStrategy[Any] = st.recursive(
    LEAF,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(TEXT, children, max_size=4)
    ),
    max_leaves=12,
)

VALUE: st.SearchStrategy[Any] = st.one_of(
    JSONISH, JSONISH, JSONISH, DEEP, HUGE_TEXT.filter(lambda _: True)
)


def arguments(keys: list[str]) -> st.SearchStrategy[Any]:
    """Arguments for a tool with these schema keys: some right names, wrong values."""
    known = st.dictionaries(st.sampled_from(keys), VALUE, max_size=len(keys)) if keys else None
    mixed = st.dictionaries(st.one_of(st.sampled_from(keys or ["x"]), TEXT), VALUE, max_size=4)
    options = [mixed, VALUE]  # a dict with odd keys, or not a dict at all
    if known is not None:
        options.insert(0, known)
    return st.one_of(*options)
