"""wsframework: the messaging layer and the namespace binding layer (paper Fig. 11).

A service in three lines::

    from wsframework.service import Service, ServiceConfig
    service = Service(ServiceConfig(base_url="http://127.0.0.1:8080", data_dir=path, admin_token=t))
    outcome = service.handle_request(envelope_bytes, path="/admin", content_type="application/soap+xml")

Handlers register with the messaging layer by a filter over the message::

    service.messaging.route("echo", MessageFilter(action="urn:x/Echo"),
                            lambda message: Reply("urn:x/EchoResponse", message.body))

Modules, bottom up: ``ns`` (every URI and wire name), ``exceptions`` (SoapFault renders
itself per SOAP version), ``faults`` (the one registry turning exceptions into faults at the
edge), ``settings`` (typed role settings), ``xmlparse`` (the hardened parser), ``soap``
(envelopes), ``addressing`` (WS-Addressing 2004/08 and 1.0), ``matching`` (the matcher
contract and the registry that finds engines by URI), ``messaging`` (dispatch and reply
routing), ``store`` (SQLite), ``namespace`` (the hierarchical namespace bound to matchers),
``admin`` (authenticated, typed, extensible admin messages; the only spyne user),
``service`` (composition), ``urlpolicy`` (the one reading and judgement of every URL a peer
makes a service contact), ``transport`` (HTTP and in-process clients; HTTP connects to the
address the URL policy approved), ``client``, ``wsgi`` (the HTTP edge). The framework imports none of the packages above it (the application in
``edn`` serves it with gunicorn and adds the ``edn`` command).
"""
