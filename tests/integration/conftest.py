import itertools

import pytest

from tests.support.processes import ADMIN_TOKEN, ServerProcess
from tests.support.sink import HttpSink


_databases = itertools.count(1)


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="module", autouse=True)
def roles_store(request):
    """With ``--store-backend postgresql``, every role a test module starts keeps its state
    in a database of the module's own (``$EDN_STORE``, which ``edn serve`` reads for
    ``--store``), each role in its schema ``ROLE_PORT``: a role restarted on its port finds
    its state again, also one that a module-scoped fixture started."""
    cluster = getattr(request.config, "_edn_postgres", None)
    if cluster is None:
        yield None
        return
    url = cluster.create_database(f"t_{next(_databases)}")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EDN_STORE", url)
        yield url


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
