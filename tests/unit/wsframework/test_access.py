"""Principals and per-topic permissions (wsframework.access), in process: tokens stored as
digests, grants by topic pattern, who a message is from (certificate, Bearer, Basic,
wsse:UsernameToken with its replay checks), and a source in closed mode. No sockets."""
from __future__ import annotations

import base64
import datetime
from dataclasses import dataclass, field

import pytest
from lxml import etree

from tests.support.eventing import BASE, TOKEN, Harness, quote
from wsframework.access import AccessStore, AccessRefused, Identifier
from wsframework.access.identity import (MAX_NONCE_BYTES, PASSWORD_DIGEST, PASSWORD_TEXT,
                                         REPLAY_WINDOW_S, WSSE, WSU, NonceCache)
from wsframework.access.sealing import SealBroken, SealKey
from wsframework.admin import contracts
from wsframework.exceptions import AccessDenied, SoapFault
from wsframework.store import Store

NOW = 1_800_000_000.0


@pytest.fixture
def tokens(tmp_path):
    store = Store(tmp_path / "access.db")
    yield AccessStore(store, SealKey(tmp_path / "access.key"))
    store.close()


def test_a_token_is_kept_only_as_its_digest(tokens):
    token = tokens.create_token("alice")
    assert len(token) >= 40
    assert tokens.principal_of_token(token) == "alice"
    assert tokens.token_matches("alice", token) and not tokens.token_matches("alice", token + "x")
    assert not tokens.token_matches("bob", token)
    raw = b"".join(bytes(row["digest"]) for row in tokens.store.query("SELECT digest FROM access_tokens"))
    assert token.encode() not in raw and len(raw) == 32
    again = tokens.create_token("alice")  # replaces the old one
    assert tokens.principal_of_token(token) is None and tokens.principal_of_token(again) == "alice"
    tokens.delete_token("alice")
    assert tokens.principal_of_token(again) is None and tokens.token_names() == []
    with pytest.raises(AccessRefused, match="no token"):
        tokens.delete_token("alice")


def test_grants_cover_the_topics_their_pattern_matches(tokens):
    tokens.grant("alice", "publish", "stocks.*")
    tokens.grant("bob", "subscribe", "*")
    assert tokens.allowed("alice", "publish", "stocks.eu")
    assert not tokens.allowed("alice", "publish", "stock")
    assert not tokens.allowed("alice", "subscribe", "stocks.eu")
    assert tokens.allowed("bob", "subscribe", "anything")
    tokens.revoke("alice", "publish", "stocks.*")
    assert not tokens.allowed("alice", "publish", "stocks.eu")
    assert [(g.principal, g.permission, g.pattern) for g in tokens.grants()] == [("bob", "subscribe", "*")]
    with pytest.raises(AccessRefused, match="no such grant"):
        tokens.revoke("alice", "publish", "stocks.*")


def test_a_second_worker_sees_changes_through_the_generation(tmp_path):
    store = Store(tmp_path / "access.db")
    first, second = AccessStore(store), AccessStore(store)
    assert not second.allowed("alice", "publish", "t")
    first.grant("alice", "publish", "t")
    assert second.allowed("alice", "publish", "t")
    store.close()


@pytest.mark.parametrize("principal, permission, pattern, reason", [
    ("", "publish", "*", "a principal"),
    ("-x", "publish", "*", "a principal"),
    ("a b", "publish", "*", "a principal"),
    ("x" * 129, "publish", "*", "a principal"),
    ("#network", "publish", "*", "a principal"),
    ("alice", "read", "*", "a permission"),
    ("alice", "publish", "", "a topic pattern"),
    ("alice", "publish", "a b", "a topic pattern"),
    ("alice", "publish", "[abc]", "a topic pattern"),
    ("alice", "publish", "x" * 201, "a topic pattern"),
])
def test_bad_grants_are_refused_with_their_reason(tokens, principal, permission, pattern, reason):
    with pytest.raises(AccessRefused, match=reason):
        tokens.grant(principal, permission, pattern)
    assert tokens.grants() == []


@dataclass
class Message:
    peer_principal: str | None = None
    authorization: str | None = None
    headers: dict = field(default_factory=dict)

    def header(self, qname):
        return self.headers.get(qname)


def _created(when: float) -> str:
    return datetime.datetime.fromtimestamp(when, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _username_token(name, password, *, kind=PASSWORD_TEXT, nonce=b"n" * 16,
                    created=NOW, with_freshness=True):
    security = etree.Element(f"{{{WSSE}}}Security", nsmap={"wsse": WSSE, "wsu": WSU})
    token = etree.SubElement(security, f"{{{WSSE}}}UsernameToken")
    etree.SubElement(token, f"{{{WSSE}}}Username").text = name
    etree.SubElement(token, f"{{{WSSE}}}Password", Type=kind).text = password
    if with_freshness:
        etree.SubElement(token, f"{{{WSSE}}}Nonce").text = base64.b64encode(nonce).decode()
        etree.SubElement(token, f"{{{WSU}}}Created").text = _created(created)
    return Message(headers={f"{{{WSSE}}}Security": security})


def _password_digest(nonce: bytes, created: float, token: str) -> str:
    """WSS UsernameToken Profile 1.0: Base64(SHA-1(nonce + created + password))."""
    import hashlib
    return base64.b64encode(hashlib.sha1(nonce + _created(created).encode() + token.encode())
                            .digest()).decode()


def _digest_token(name, token, *, nonce=b"d" * 16, created=NOW, **kwargs):
    return _username_token(name, _password_digest(nonce, created, token), kind=PASSWORD_DIGEST,
                           nonce=nonce, created=created, **kwargs)


@pytest.fixture
def identify(tokens):
    secret = tokens.create_token("alice")
    identifier = Identifier(tokens, clock=lambda: NOW, nonces=NonceCache())
    return identifier, secret


def test_a_message_is_from_its_certificate_token_or_username(identify):
    identifier, secret = identify
    assert identifier.principal(Message()) is None
    assert identifier.principal(Message(peer_principal="server-1")) == "server-1"
    assert identifier.principal(Message(authorization=f"Bearer {secret}")) == "alice"
    basic = base64.b64encode(f"alice:{secret}".encode()).decode()
    assert identifier.principal(Message(authorization=f"Basic {basic}")) == "alice"
    assert identifier.principal(_username_token("alice", secret)) == "alice"
    assert identifier.principal(_username_token("alice", secret, with_freshness=False)) == "alice"


@pytest.mark.parametrize("make, reason", [
    (lambda s: Message(authorization="Bearer nope"), "unknown bearer token"),
    (lambda s: Message(authorization="Basic " + base64.b64encode(b"alice:nope").decode()), "wrong name or token"),
    (lambda s: Message(authorization="Basic !!!"), "malformed Basic"),
    (lambda s: Message(authorization="Digest x"), "Bearer TOKEN or Basic"),
    (lambda s: Message(authorization="Bearer " + "x" * 600), "too long"),
    (lambda s: _username_token("alice", "nope"), "wrong name or token"),
    (lambda s: _digest_token("alice", s), "wrong name or token"),  # not made for digests
    (lambda s: _username_token("alice", s, kind=PASSWORD_DIGEST, with_freshness=False),
     "needs a wsse:Nonce"),
    (lambda s: _username_token("alice", "!!", kind=PASSWORD_DIGEST), "base64"),
    (lambda s: _username_token("alice", s, kind="urn:x"), "unknown wsse:Password Type"),
    (lambda s: _username_token("alice", s, created=NOW - REPLAY_WINDOW_S - 1), "stale or from the future"),
    (lambda s: _username_token("alice", s, created=NOW + REPLAY_WINDOW_S + 1), "stale or from the future"),
    (lambda s: _username_token("alice", s, nonce=b"x" * (MAX_NONCE_BYTES + 1)), "wsse:Nonce"),
    (lambda s: _username_token("alice", s, nonce=b"x" * 10_000), "longer than"),
])
def test_a_wrong_or_hostile_credential_is_refused_never_ignored(identify, make, reason):
    identifier, secret = identify
    with pytest.raises(AccessDenied, match=reason):
        identifier.principal(make(secret))


def test_a_username_token_nonce_is_single_use_and_only_a_members_counts(identify):
    identifier, secret = identify
    assert identifier.principal(_username_token("alice", secret, nonce=b"once")) == "alice"
    with pytest.raises(AccessDenied, match="replay"):
        identifier.principal(_username_token("alice", secret, nonce=b"once"))
    # a wrong password does not spend a nonce: nobody can burn a member's next nonce
    with pytest.raises(AccessDenied, match="wrong"):
        identifier.principal(_username_token("alice", "guess", nonce=b"next"))
    assert identifier.principal(_username_token("alice", secret, nonce=b"next")) == "alice"


def test_a_password_digest_checks_against_a_token_kept_sealed(tokens):
    identifier = Identifier(tokens, clock=lambda: NOW, nonces=NonceCache())
    secret = tokens.create_token("carol", password_digest=True)
    assert tokens.digest_token_names() == ["carol"] and tokens.token_names() == ["carol"]
    assert identifier.principal(_digest_token("carol", secret, nonce=b"1")) == "carol"
    with pytest.raises(AccessDenied, match="replay"):
        identifier.principal(_digest_token("carol", secret, nonce=b"1"))
    with pytest.raises(AccessDenied, match="wrong name or token"):
        identifier.principal(_digest_token("carol", secret + "x", nonce=b"2"))
    with pytest.raises(AccessDenied, match="stale"):
        identifier.principal(_digest_token("carol", secret, nonce=b"3", created=NOW - 3600))
    # a digest over another Created than the one sent does not match
    forged = _digest_token("carol", secret, nonce=b"4")
    created = forged.headers[f"{{{WSSE}}}Security"].find(f".//{{{WSU}}}Created")
    created.text = _created(NOW + 1)
    with pytest.raises(AccessDenied, match="wrong name or token"):
        identifier.principal(forged)
    # the token still works as text, and is stored sealed, never in clear
    assert identifier.principal(_username_token("carol", secret, nonce=b"5")) == "carol"
    raw = b"".join(bytes(r["sealed"]) for r in tokens.store.query("SELECT sealed FROM access_tokens"))
    assert secret.encode() not in raw and len(raw) > 32
    # made again without the flag, it is no longer kept
    secret = tokens.create_token("carol")
    assert tokens.digest_token_names() == []
    with pytest.raises(AccessDenied, match="wrong name or token"):
        identifier.principal(_digest_token("carol", secret, nonce=b"6"))


def test_the_seal_key_is_private_made_once_and_binds_the_name(tmp_path):
    key = SealKey(tmp_path / "k")
    sealed = key.seal("secret-token", "carol")
    assert (tmp_path / "k").stat().st_mode & 0o777 == 0o600
    assert SealKey(tmp_path / "k").open(sealed, "carol") == "secret-token"  # another worker
    with pytest.raises(SealBroken):
        key.open(sealed, "mallory")  # moved to another name
    with pytest.raises(SealBroken):
        SealKey(tmp_path / "other").open(sealed, "carol")  # another role's key
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k", "other"]  # no temporaries left


def test_a_store_without_a_seal_key_makes_no_digest_tokens(tmp_path):
    store = Store(tmp_path / "a.db")
    try:
        with pytest.raises(AccessRefused, match="no key"):
            AccessStore(store).create_token("carol", password_digest=True)
    finally:
        store.close()


def test_the_nonce_cache_is_bounded_and_forgets_after_the_window():
    cache = NonceCache(window=10, limit=3)
    assert all(cache.first_use("a", bytes([k]), 0.0) for k in range(5))
    assert cache.first_use("a", bytes([0]), 1.0)  # pushed out by the bound
    assert not cache.first_use("a", bytes([4]), 1.0)
    assert cache.first_use("a", bytes([4]), 20.0)  # the window passed


# -- a source in closed mode, through its messaging layer -----------------------------------------

def _publish_as(harness, message_headers, topic="stocks"):
    from wsframework.addressing import WsaVersion, request_headers
    from wsframework.publisher import PUBLISH_ACTION
    from wsframework.soap import SoapVersion, build_envelope
    headers = request_headers(WsaVersion.WSA10, f"{BASE}/topics/{topic}", PUBLISH_ACTION)
    envelope = build_envelope(SoapVersion.SOAP12, etree.fromstring(quote(10)),
                              [*headers, *message_headers])
    return harness.post(f"/topics/{topic}", envelope)


def _fault_text(response) -> str:
    from wsframework.soap import parse_envelope
    fault = parse_envelope(response.body).fault()
    return f"{fault.subcode} {fault.reason}"


def test_a_closed_source_needs_a_granted_principal_to_publish(tmp_path):
    harness = Harness(tmp_path, access="closed", topics=("stocks", "bonds"))
    try:
        secret = harness.service.access.store.create_token("alice")
        refused = _publish_as(harness, [])
        assert refused.status >= 400 and "needs a principal" in _fault_text(refused)
        assert contracts.FAULT_ACCESS_DENIED in _fault_text(refused)
        security = _username_token("alice", secret, with_freshness=False).headers
        header = next(iter(security.values()))
        assert "may not publish" in _fault_text(_publish_as(harness, [header]))
        harness.service.access.store.grant("alice", "publish", "sto*")
        assert _publish_as(harness, [header]).status == 202
        assert "may not publish on topic 'bonds'" in _fault_text(_publish_as(harness, [header], "bonds"))
        token = etree.Element(contracts.ADMIN_TOKEN_QNAME)
        token.text = TOKEN
        assert _publish_as(harness, [token], "bonds").status == 202  # the network may
    finally:
        harness.close()


def test_a_closed_source_needs_a_granted_principal_to_subscribe(tmp_path):
    harness = Harness(tmp_path, access="closed")
    try:
        with pytest.raises(SoapFault) as caught:
            harness.subscribe()
        assert caught.value.subcode == contracts.FAULT_ACCESS_DENIED
        assert "needs a principal" in caught.value.reason
        assert not harness.service.store.query("SELECT 1 FROM eventing_subscriptions LIMIT 1")
    finally:
        harness.close()


def test_an_open_source_serves_anyone_but_refuses_a_wrong_credential(tmp_path):
    harness = Harness(tmp_path)
    try:
        assert _publish_as(harness, []).status == 202
        header = next(iter(_username_token("mallory", "guess", with_freshness=False).headers.values()))
        assert "wrong name or token" in _fault_text(_publish_as(harness, [header]))
    finally:
        harness.close()


def test_access_is_administered_through_the_admin_endpoint(tmp_path):
    from wsframework.access import (CreateAccessToken, GrantAccess, ListAccess, RevokeAccess)
    harness = Harness(tmp_path)
    try:
        token = harness.admin.call(CreateAccessToken(Name="alice")).Token
        assert harness.service.access.store.principal_of_token(token) == "alice"
        harness.admin.call(GrantAccess(Principal="alice", Permission="publish", Pattern="s*"))
        listed = harness.admin.call(ListAccess())
        assert [(g.Principal, g.Permission, g.Pattern) for g in listed.Grant] == [("alice", "publish", "s*")]
        assert list(listed.TokenName) == ["alice"]
        harness.admin.call(RevokeAccess(Principal="alice", Permission="publish", Pattern="s*"))
        with pytest.raises(SoapFault) as caught:
            harness.admin.call(GrantAccess(Principal="alice", Permission="read", Pattern="s*"))
        assert caught.value.subcode == contracts.FAULT_INVALID_REQUEST
        assert "a permission is one of" in caught.value.reason
    finally:
        harness.close()


# -- a subscription belongs to the principal that made it -----------------------------------------

def _client_as(harness, name, secret):
    from subscription_manager.client import EventingClient
    return EventingClient("2011", transport=harness.transport, headers=lambda: [
        next(iter(_username_token(name, secret, with_freshness=False).headers.values()))])


@pytest.mark.parametrize("access", ["open", "closed"])
def test_only_the_owner_the_network_or_a_topic_admin_manage_a_subscription(tmp_path, access):
    from tests.support.eventing import SINK
    harness = Harness(tmp_path, access=access)
    store = harness.service.access.store
    try:
        secrets = {name: store.create_token(name) for name in ("alice", "bob", "carol")}
        for name in secrets:
            store.grant(name, "subscribe", "*")
        store.grant("carol", "admin", "stock*")
        alice, bob, carol = (_client_as(harness, n, secrets[n]) for n in ("alice", "bob", "carol"))
        handle = alice.subscribe(f"{BASE}/topics/stocks", SINK + "/a", expires="PT1H")
        stored = harness.service.subscription_manager.store.get(handle.id)
        assert stored.owner == "alice"
        for operation in (lambda c: c.get_status(handle), lambda c: c.renew(handle, "PT2H"),
                          lambda c: c.unsubscribe(handle)):
            with pytest.raises(SoapFault) as caught:
                operation(bob)
            assert caught.value.subcode == contracts.FAULT_ACCESS_DENIED
            assert "belongs to another principal" in caught.value.reason
        assert alice.get_status(handle) is not None
        assert carol.renew(handle, "PT2H") is not None  # an admin of the topic
        anonymous = harness.client()
        with pytest.raises(SoapFault):  # the identifier alone no longer does
            anonymous.get_status(handle)
        alice.unsubscribe(handle)
        if access == "open":  # made without a principal: managed by its identifier alone
            other = harness.subscribe(expires="PT1H")
            assert harness.client().get_status(other) is not None
    finally:
        harness.close()


def test_a_token_made_at_one_role_can_be_given_to_another(tokens, tmp_path):
    token = tokens.create_token("alice")
    other_store = Store(tmp_path / "other.db")
    try:
        other = AccessStore(other_store)
        assert other.create_token("alice", token) == token
        assert other.principal_of_token(token) == "alice"
        for bad in ("short", "x" * 257, "é" * 40, "a\nb" * 20):
            with pytest.raises(AccessRefused, match="printable ASCII"):
                other.create_token("bob", bad)
    finally:
        other_store.close()


def _admin_as(harness, request, headers):
    from wsframework.admin import action_for, render
    from wsframework.soap import SoapVersion, build_envelope
    element = render(request)
    name = etree.QName(element)
    envelope = build_envelope(SoapVersion.SOAP12, element, headers)
    return harness.post("/admin", envelope, action=action_for(name.localname, name.namespace))


def test_an_admin_grant_on_a_topic_pattern_creates_and_deletes_those_topics_only(tmp_path):
    harness = Harness(tmp_path, access="closed", topics=("stocks",))
    try:
        store = harness.service.access.store
        secret = store.create_token("ops")
        store.grant("ops", "admin", "stocks.*")
        ops = [next(iter(_username_token("ops", secret, with_freshness=False).headers.values()))]
        made = _admin_as(harness, contracts.CreateTopic(Name="stocks.eu"), ops)
        assert made.status == 200 and "stocks.eu" in harness.service.topics
        refused = _admin_as(harness, contracts.CreateTopic(Name="bonds"), ops)
        assert "ops may not administer topic 'bonds'" in _fault_text(refused)
        assert contracts.FAULT_ACCESS_DENIED in _fault_text(refused)
        assert "bonds" not in harness.service.topics
        # the grant is for topic operations only: the rest still needs the network
        stats = _admin_as(harness, contracts.GetStats(), ops)
        assert "a valid admin credential is required" in _fault_text(stats)
        # no credential, or a wrong one, is refused before the body is read
        anonymous = _admin_as(harness, contracts.CreateTopic(Name="stocks.us"), [])
        assert "a valid admin credential is required" in _fault_text(anonymous)
        wrong = [next(iter(_username_token("ops", "guess", with_freshness=False).headers.values()))]
        assert "wrong name or token" in _fault_text(
            _admin_as(harness, contracts.CreateTopic(Name="stocks.us"), wrong))
        # a principal without the grant
        store.create_token("bob")
        store.grant("bob", "publish", "stocks.*")
        assert _admin_as(harness, contracts.DeleteTopic(Name="stocks.eu"), [next(iter(
            _username_token("bob", store.create_token("bob"), with_freshness=False)
            .headers.values()))]).status >= 400
        deleted = _admin_as(harness, contracts.DeleteTopic(Name="stocks.eu"), ops)
        assert deleted.status == 200 and "stocks.eu" not in harness.service.topics
    finally:
        harness.close()
