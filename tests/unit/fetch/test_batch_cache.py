"""The fetch cache's byte bound, LRU order and per-object discard, against a plain model:
whatever the sequence of puts, reads and discards, the cache holds exactly the model's
entries, its byte count is their sum and under the bound, and discarding an object
removes its entries and nothing else."""

from __future__ import annotations

from collections import OrderedDict

from hypothesis import given, settings
from hypothesis import strategies as st

from lakelog.log.fetch.cache import BatchCache

OBJECTS = ["a", "b", "c", "inline/x"]
step = st.one_of(
    st.tuples(st.just("put"), st.sampled_from(OBJECTS), st.integers(0, 5), st.integers(0, 40)),
    st.tuples(st.just("get"), st.sampled_from(OBJECTS), st.integers(0, 5), st.just(0)),
    st.tuples(st.just("discard"), st.sampled_from(OBJECTS), st.just(0), st.just(0)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(step, max_size=80), st.integers(1, 120))
def test_cache_matches_a_plain_lru_model(steps: list, max_bytes: int) -> None:
    cache = BatchCache(max_bytes)
    model: OrderedDict[tuple[str, int], bytes] = OrderedDict()
    for op, obj, offset, size in steps:
        key = (obj, offset)
        if op == "put":
            data = bytes(size)
            if size > max_bytes:
                cache.put(key, data)
                continue
            model.pop(key, None)
            model[key] = data
            while sum(map(len, model.values())) > max_bytes:
                model.popitem(last=False)
            cache.put(key, data)
        elif op == "get":
            got = cache.get(key)
            assert (got is None) == (key not in model)
            if key in model:
                model.move_to_end(key)
        else:
            for k in [k for k in model if k[0] == obj]:
                del model[k]
            cache.discard_object(obj)
        assert cache.size == sum(map(len, model.values())) <= max_bytes
        for k in list(model):
            assert cache.get(k) == model[k]
            model.move_to_end(k)  # the read refreshed it in the cache too


def test_discarding_one_of_many_objects_leaves_the_others() -> None:
    cache = BatchCache(1 << 30)
    for obj in range(2_000):
        for offset in range(0, 50, 10):
            cache.put((f"o{obj}", offset), bytes(10))
    for obj in range(0, 2_000, 2):
        cache.discard_object(f"o{obj}")
    assert cache.size == 1_000 * 5 * 10
    assert cache.get(("o0", 0)) is None and cache.get(("o1", 40)) == bytes(10)
