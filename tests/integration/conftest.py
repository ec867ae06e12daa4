import pytest

from tests.support.processes import ADMIN_TOKEN, ServerProcess
from tests.support.sink import HttpSink


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture
def source_server(tmp_path):
    with ServerProcess("source", data_dir=tmp_path / "source") as server:
        yield server


@pytest.fixture
def sink():
    with HttpSink() as s:
        yield s


@pytest.fixture
def admin_token():
    return ADMIN_TOKEN
