"""`edn serve dispatcher --workers N`: each worker logs in a lane of its own of the durable
log; a child of a dispatch tree, which records its
parents' positions in its log, is still refused a second worker before anything starts."""
import pytest

from edn.cli import _check_workers, main


def test_a_child_of_a_dispatch_tree_refuses_a_second_worker(tmp_path):
    with pytest.raises(SystemExit, match="child of a dispatch tree"):
        main(["serve", "dispatcher", "--data", str(tmp_path / "d"), "--workers", "2",
              "--set", "parent=http://root.example:8080"])
    assert not (tmp_path / "d").exists()  # refused before the data directory was made


def test_a_root_dispatcher_may_run_several_workers_with_its_durable_log():
    _check_workers("dispatcher", 2, {})
    _check_workers("dispatcher", 4, {"durable_log": "true"})
    _check_workers("dispatcher", 1, {"parent": "http://root.example:8080"})
