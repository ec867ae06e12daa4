"""spyne's description of admin operations, used only to generate WSDL.

:func:`spyne_wsdl` builds a spyne ``Application`` whose service has one document/literal
operation per ``(name, request contract, response contract)`` and returns the WSDL spyne
writes for it. ``wsdl.admin.admin_wsdl`` turns that into the document a service serves (it
lives in the ``wsdl`` package, which must not import spyne itself).
"""
from __future__ import annotations

import functools
import warnings

from spyne import Application, ServiceBase, srpc
from spyne.interface.wsdl import Wsdl11
from spyne.util.appreg import unregister_application

from .. import ns
from .contracts import OPERATIONS, AdminToken

with warnings.catch_warnings():
    # spyne's SOAP protocol imports ``cgi`` (deprecated, gone in 3.13); we are pinned below
    # 3.12 for spyne anyway, so the warning tells nobody anything.
    warnings.filterwarnings("ignore", "'cgi' is deprecated", DeprecationWarning)
    from spyne.protocol.soap import Soap11, Soap12

__all__ = ["SOAP_HTTP_TRANSPORT", "spyne_wsdl"]

SOAP_HTTP_TRANSPORT = "http://schemas.xmlsoap.org/soap/http"


@functools.lru_cache(maxsize=None)
def _application(soap_version, operations):
    def operation(name, request, response):
        def handler(_request):  # never called: the application only describes itself
            raise NotImplementedError(name)
        handler.__name__ = handler.__qualname__ = name  # spyne keys methods by name
        return srpc(request, _returns=response, _body_style="bare",
                    _in_header=(AdminToken,), _operation_name=name)(handler)

    service = type("AdminService", (ServiceBase,),
                   {name: operation(name, req, resp) for name, req, resp in operations})
    protocol = {"1.1": Soap11, "1.2": Soap12}[soap_version]
    app = Application([service], tns=ns.ADMIN, name="AdminService",
                      in_protocol=protocol(), out_protocol=protocol())
    app.transport = SOAP_HTTP_TRANSPORT
    # spyne's global registry keys applications by (tns, name); ours only describe
    # themselves, and two SOAP versions would otherwise overwrite each other noisily.
    unregister_application(app)
    return app


def spyne_wsdl(address: str, soap_version: str = "1.1", operations: tuple = OPERATIONS) -> bytes:
    """spyne's own WSDL for ``operations`` (default: the base contracts; one SOAP binding,
    operation names as soapAction); ``wsdl.admin.admin_wsdl`` is the finished document."""
    wsdl = Wsdl11(_application(soap_version, tuple(operations)).interface)
    wsdl.build_interface_document(address)
    return wsdl.get_interface_document()
