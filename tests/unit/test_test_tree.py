"""The test tree itself: pytest imports test modules by their file name (the test folders
are not packages), so two modules with one name break collection of the whole suite."""
from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_every_test_module_has_a_name_of_its_own():
    names = Counter(path.name for path in TESTS.rglob("test_*.py"))
    assert len(names) > 100  # the tree was found
    assert [name for name, count in names.items() if count > 1] == []
