"""store/tuples.named behaves as collections.namedtuple does where the code relies on it."""
from __future__ import annotations

import pickle
from collections import namedtuple

import pytest

from agent_registry.store.tuples import named

Ours = named("Ours", "a b c", defaults=(3,))
Theirs = namedtuple("Theirs", "a b c", defaults=(3,))


@pytest.mark.parametrize("args,kwargs", [((1, 2), {}), ((1, 2, 4), {}), ((1,), {"b": 2}),
                                         ((), {"a": 1, "b": 2, "c": 5})])
def test_named_is_the_tuple_namedtuple_makes(args, kwargs):
    ours, theirs = Ours(*args, **kwargs), Theirs(*args, **kwargs)
    assert tuple(ours) == tuple(theirs) and ours == theirs and hash(ours) == hash(theirs)
    assert (ours.a, ours.b, ours.c) == (theirs.a, theirs.b, theirs.c)
    a, b, c = ours
    assert (a, b, c) == tuple(theirs) and ours[1:] == theirs[1:]
    assert repr(ours) == repr(theirs).replace("Theirs", "Ours")
    assert pickle.loads(pickle.dumps(ours)) == ours


@pytest.mark.parametrize("args,kwargs", [((), {}), ((1,), {}), ((1, 2, 3, 4), {}),
                                         ((1, 2), {"d": 1}), ((1, 2), {"a": 1})])
def test_named_refuses_what_namedtuple_refuses(args, kwargs):
    with pytest.raises(TypeError):
        Theirs(*args, **kwargs)
    with pytest.raises(TypeError):
        Ours(*args, **kwargs)


def test_a_field_cannot_be_set():
    with pytest.raises(AttributeError):
        Ours(1, 2).a = 5
