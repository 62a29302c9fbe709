"""telesrv.logs.quieted: a logger quiet for a block, then as it was."""

from __future__ import annotations

import logging

import pytest

from telesrv import logs


def test_quieted_sets_the_level_for_the_block_and_restores_it_after_an_error() -> None:
    logger = logging.getLogger("telesrv.test_quieted")
    logger.setLevel(logging.DEBUG)
    with logs.quieted("telesrv.test_quieted"):
        assert logger.level == logging.WARNING
    assert logger.level == logging.DEBUG
    with pytest.raises(RuntimeError), logs.quieted("telesrv.test_quieted", logging.ERROR):
        assert logger.level == logging.ERROR
        raise RuntimeError("the block failed")
    assert logger.level == logging.DEBUG
    logger.setLevel(logging.NOTSET)


def test_quieted_never_makes_a_logger_louder() -> None:
    logger = logging.getLogger("telesrv.test_quieted_louder")
    logger.setLevel(logging.ERROR)
    with logs.quieted("telesrv.test_quieted_louder"):
        assert logger.level == logging.ERROR
    assert logger.level == logging.ERROR
    logger.setLevel(logging.NOTSET)
