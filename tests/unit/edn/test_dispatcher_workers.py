"""`edn serve dispatcher --workers 2` is refused before anything starts while the durable log
is on (one process holds it: the second worker used to fail after the server answered)."""
import pytest

from edn.cli import _check_workers, main


def test_a_dispatcher_with_its_durable_log_refuses_a_second_worker(tmp_path):
    with pytest.raises(SystemExit, match="durable log is held by one process"):
        main(["serve", "dispatcher", "--data", str(tmp_path / "d"), "--workers", "2"])
    assert not (tmp_path / "d").exists()  # refused before the data directory was made


def test_without_the_durable_log_or_with_one_worker_it_is_allowed():
    _check_workers("dispatcher", 2, {"durable_log": "false"})
    _check_workers("dispatcher", 1, {})
