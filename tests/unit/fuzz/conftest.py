"""The in-process roles the fuzz tests share (see :mod:`tests.unit.fuzz.fuzzkit`)."""
import pytest

from tests.unit.fuzz.fuzzkit import Roles


@pytest.fixture(scope="module")
def roles(tmp_path_factory):
    # The unit suite's socket guard is function-scoped; nothing here opens a socket anyway:
    # every service and the sink live on InProcessTransports.
    built = Roles(tmp_path_factory.mktemp("fuzz-roles"))
    yield built
    built.close()
