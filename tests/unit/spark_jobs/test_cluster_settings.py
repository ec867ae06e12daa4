"""What a cluster and a session decide before any JVM starts: a standalone master on
loopback keeps the driver on loopback too; a cluster needs a worker and a core."""
import pytest

from spark_jobs.cluster import StandaloneCluster
from spark_jobs.session import _on_loopback


@pytest.mark.parametrize("master,expected", [
    ("spark://127.0.0.1:7077", True), ("spark://localhost:7077", True),
    ("spark://127.0.1.1:7077", True), ("spark://10.0.0.1:7077", False),
    ("spark://spark-master.example:7077", False), ("spark://127.foo.example:7077", False),
    ("spark://127.0.0.1:7077,10.0.0.2:7077", False), ("spark://[::1]:7077", True),
    ("local[2]", False), ("yarn", False)])
def test_a_driver_stays_on_loopback_only_with_a_master_there(master, expected):
    assert _on_loopback(master) is expected


@pytest.mark.parametrize("workers,cores", [(0, 1), (1, 0), (-1, 2)])
def test_a_cluster_needs_a_worker_and_a_core(workers, cores):
    with pytest.raises(ValueError):
        StandaloneCluster(workers, cores=cores)


def test_a_cluster_names_its_master_by_its_host_and_ports(tmp_path):
    cluster = StandaloneCluster(2, host="127.0.0.1", directory=tmp_path)
    cluster.master_port, cluster.ui_port = 7077, 8080
    assert cluster.master_url == "spark://127.0.0.1:7077"
    assert cluster.ui_url == "http://127.0.0.1:8080"
    cluster.stop()  # nothing started: nothing to stop, and the given directory stays
    assert tmp_path.exists()
