"""A cache admits a key at its second sighting; first sightings are bounded."""

from __future__ import annotations

import pytest

from telesrv.services.sightings import Sightings


def test_a_key_counts_from_its_second_sighting() -> None:
    sightings = Sightings(size=4)
    assert not sightings.again((1, 2))
    assert sightings.again((1, 2))
    # the second sighting is spent: the cache keeps the key from then on
    assert not sightings.again((1, 2))
    assert not sightings.again((2, 1))


def test_first_sightings_are_bounded() -> None:
    sightings = Sightings(size=3)
    for key in range(3):  # at the limit: all remembered
        assert not sightings.again(("pair", key))
    assert len(sightings) == 3
    assert not sightings.again(("pair", 3))  # past it: emptied, then this one remembered
    assert len(sightings) == 1
    assert not sightings.again(("pair", 0))  # forgotten, so a first sighting again
    assert sightings.again(("pair", 3))


def test_size_zero_keeps_everything_at_once() -> None:
    sightings = Sightings(size=0)
    assert sightings.again("anything") and sightings.again("anything")
    assert len(sightings) == 0
    with pytest.raises(ValueError):
        Sightings(size=-1)
