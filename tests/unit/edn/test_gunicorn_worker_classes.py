"""The worker class of each role, and what gunicorn's gevent worker needs of the roles' code.

``edn serve`` imports the roles in gunicorn's arbiter; the gevent worker monkey-patches the
process after the fork. Anything a product module bound at import time to a blocking
primitive (``time.sleep``, ``threading.Lock``, ``socket.socket``, ...) stays blocking in the
worker: one greenlet waiting there stops every request of the worker. The dispatcher's link
cap did exactly that (its ``TokenBucket`` kept ``time.sleep`` as a default argument): under
gevent every wait for the link stopped the dispatcher.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from edn.gunicorn import WORKER_CLASSES, default_worker_class, worker_class

ROLES = ("source", "server", "dispatcher")

# In a fresh interpreter: import the roles as `edn serve` does in the arbiter, patch as the
# gevent worker does, then look for gevent's saved originals held by product modules (module
# attributes, function and method defaults, dataclass default factories).
_SCAN = r"""
import dataclasses, inspect, json, sys
from edn.roles import known_roles, settings_groups
for role in known_roles():  # every registered role, a plugin's or a new one's too
    settings_groups(role)
from gevent import monkey
monkey.patch_all()
originals = {id(obj): f"{module}.{name}" for module, saved in monkey.saved.items()
             if not module.startswith("_gevent") for name, obj in saved.items()
             if callable(obj)}
product = ("wsframework", "matchers", "route_manager", "subscription_manager", "edn", "wsdl")
found = []

def check(where, value):
    if callable(value) and id(value) in originals:
        found.append(f"{where} holds the unpatched {originals[id(value)]}")

def functions(owner):
    for name, value in vars(owner).items():
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if inspect.isfunction(value):
            yield name, value

for modname, module in list(sys.modules.items()):
    if modname.split(".")[0] not in product or module is None:
        continue
    for name, value in list(vars(module).items()):
        check(f"{modname}.{name}", value)
        owners = [(name, value)] if inspect.isclass(value) and value.__module__ == modname else []
        for owner_name, owner in owners:
            for fname, function in functions(owner):
                for default in (function.__defaults__ or ()) + tuple((function.__kwdefaults__ or {}).values()):
                    check(f"{modname}.{owner_name}.{fname} (a default)", default)
            if dataclasses.is_dataclass(owner):
                for field in dataclasses.fields(owner):
                    check(f"{modname}.{owner_name}.{field.name} (default_factory)", field.default_factory)
        if inspect.isfunction(value) and value.__module__ == modname:
            for default in (value.__defaults__ or ()) + tuple((value.__kwdefaults__ or {}).values()):
                check(f"{modname}.{name} (a default)", default)
print(json.dumps(sorted(set(found))))
"""

# Known and harmless: a lock taken only around CPU-bound work that never yields (a greenlet
# cannot be switched out while holding it, so no other greenlet can block on it).
# ``calibrating`` is only ever taken with ``acquire(blocking=False)``: it cannot block at all.
_HARMLESS = {
    f"matchers.route_set.table.RoutingTable.{field} (default_factory) holds the unpatched "
    f"{primitive}"
    for field in ("_lock", "calibrating")
    for primitive in ("threading.Lock", "_thread.allocate_lock")
}


def test_the_dispatcher_defaults_to_buffered_threads_the_others_to_gevent():
    # The dispatcher's routing is CPU-bound: threads get it more CPU on a busy machine
    # (edn/gunicorn.py); its gthread worker buffers requests, so slow clients hold no thread.
    pytest.importorskip("gevent")
    assert [default_worker_class(role) for role in ROLES] == ["gevent", "gevent", "gthread"]
    from edn.gunicorn import RequestsBufferedBeforeThreads
    assert issubclass(worker_class("gthread"), RequestsBufferedBeforeThreads)


@pytest.mark.parametrize("name", WORKER_CLASSES)
def test_each_worker_class_builds(name):
    if name == "gevent":
        pytest.importorskip("gevent")
    assert worker_class(name).__name__.startswith("Edn")


def test_no_product_module_binds_a_blocking_primitive_before_the_gevent_patch():
    pytest.importorskip("gevent")
    result = subprocess.run([sys.executable, "-W", "ignore", "-c", _SCAN], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    found = set(json.loads(result.stdout.strip().splitlines()[-1])) - _HARMLESS
    assert not found, sorted(found)


def test_the_scan_finds_a_sleep_bound_at_import():
    # The bug the scan guards against, as it was: a default argument bound to time.sleep.
    pytest.importorskip("gevent")
    planted = _SCAN.replace("from gevent import monkey",
                            "import time, types\n"
                            "m = types.ModuleType('route_manager.planted')\n"
                            "exec('import time\\nclass Bucket:\\n"
                            "    def __init__(self, sleep=time.sleep): pass', m.__dict__)\n"
                            "m.Bucket.__module__ = 'route_manager.planted'\n"
                            "sys.modules['route_manager.planted'] = m\n"
                            "from gevent import monkey", 1)
    result = subprocess.run([sys.executable, "-W", "ignore", "-c", planted],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert "route_manager.planted.Bucket.__init__ (a default) holds the unpatched time.sleep" \
        in found, found


def _undo_the_worker_load(built, thresholds) -> None:
    """What ``GunicornServer.load`` did to this process, undone for the tests after."""
    import gc

    from edn import gunicorn as launcher
    gc.unfreeze()
    gc.set_threshold(*thresholds)
    for service in built:
        service.close()
    launcher._services.clear()


def test_a_worker_freezes_what_it_built_out_of_the_collector(monkeypatch):
    import gc

    from edn import gunicorn as launcher
    from wsframework.service import Service, ServiceConfig

    built = []

    def factory():
        service = Service(ServiceConfig("http://x.test", ":memory:", "tok"))
        built.append(service)
        return service

    frozen_before = gc.get_freeze_count()
    thresholds = gc.get_threshold()
    try:
        server = launcher.GunicornServer(factory, host="127.0.0.1", port=0)
        application = server.load()
        assert application is not None and built
        assert gc.get_freeze_count() > frozen_before  # the service's objects among them
        assert gc.get_threshold() == launcher._GC_THRESHOLDS
    finally:
        _undo_the_worker_load(built, thresholds)


@pytest.mark.parametrize("collected_by_the_load", [True, False])
def test_a_worker_collects_before_freezing_unless_its_load_just_did(monkeypatch,
                                                                  collected_by_the_load):
    import gc

    from edn import gunicorn as launcher
    from wsframework.service import Service, ServiceConfig

    built, collections = [], []
    real_collect = gc.collect

    def factory():
        service = Service(ServiceConfig("http://x.test", ":memory:", "tok"))
        built.append(service)
        garbage = [[index] for index in range(30_000)]  # young collections promote some
        del garbage
        if collected_by_the_load:
            real_collect()  # as a large start does once it has loaded
        return service

    thresholds = gc.get_threshold()
    gc.set_threshold(700, 10, 10)  # Python's own (a test before may have changed them)
    monkeypatch.setattr(gc, "collect", lambda *args: collections.append(args) or 0)
    try:
        application = launcher.GunicornServer(factory, host="127.0.0.1", port=0).load()
        assert application is not None and built
        assert len(collections) == (0 if collected_by_the_load else 1)
    finally:
        _undo_the_worker_load(built, thresholds)
