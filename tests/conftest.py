import sys
from pathlib import Path

# Make `tests.support` importable however pytest is invoked.
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


# -- the store's backend: every store-backed test runs on SQLite (default) and PostgreSQL --
def pytest_addoption(parser):
    parser.addoption("--store-backend", choices=("sqlite", "postgresql"), default="sqlite",
                     help="where the tests' stores live: SQLite files (default), or schemas "
                          "of a throwaway PostgreSQL cluster started for the session")


def pytest_configure(config):
    config.addinivalue_line("markers", "sqlite_only(reason): the test is about SQLite's files "
                                       "(skipped with --store-backend postgresql)")
    if config.getoption("store_backend") != "postgresql":
        return
    from tests.support.postgres import start_test_database
    config._edn_postgres = start_test_database()


def pytest_unconfigure(config):
    cluster = getattr(config, "_edn_postgres", None)
    if cluster is not None:
        from wsframework.store import use_postgresql
        use_postgresql(None)
        cluster.close()


def pytest_collection_modifyitems(config, items):
    if config.getoption("store_backend") != "postgresql":
        return
    import pytest
    for item in items:
        marker = item.get_closest_marker("sqlite_only")
        if marker is not None:
            reason = marker.args[0] if marker.args else "about SQLite's files"
            item.add_marker(pytest.mark.skip(reason=f"SQLite only: {reason}"))
