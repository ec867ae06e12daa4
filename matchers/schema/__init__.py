"""Event schemas: the named, typed attributes of a topic's events and where they live in XML.

A topic that routes on content declares its schema when it is created; the creation message's
``Options`` element (handed to the matcher as ``config``) carries it::

    <edn:Schema xmlns:edn="urn:wsframework:edn" xmlns:q="urn:quotes">
      <edn:Attribute name="price"  type="number"   xpath="/q:quote/q:price" min="0" max="1000"/>
      <edn:Attribute name="symbol" type="string"   xpath="/q:quote/q:symbol"/>
      <edn:Attribute name="time"   type="dateTime" xpath="/q:quote/@time"
                     min="2000-01-01T00:00:00Z" max="2100-01-01T00:00:00Z"/>
    </edn:Schema>

Prefixes in ``xpath`` come from the declarations in scope at each ``edn:Attribute``.  Numbers
and dateTimes need a domain (``min`` < ``max``); strings have an implied one (below).
A string attribute that subscriptions test by equality may ask for a Bloom-filter summary,
``summary="bloom"`` with an optional ``falsePositiveRate="0.01"`` (see
:class:`~.model.Attribute` and :meth:`matchers.RTreeMatchingEngine.summary`).

Theory of operation
    Each attribute is one dimension of a box space.  A value has two forms:

    * its **value** (exact checks): ``float`` for numbers, ``str`` for strings, ``int``
      microseconds since 1970-01-01T00:00:00Z for dateTimes (naive times are taken as UTC);
    * its **coordinate** (the R-tree): the number itself; a dateTime's seconds as a float;
      a string's first :data:`STRING_PREFIX_BYTES` UTF-8 bytes read as a base-256 fraction
      in [0, 1).  Every mapping is order-preserving (``a <= b`` implies
      ``coord(a) <= coord(b)``; UTF-8 byte order is code point order, which is Python's
      ``str`` order), so every interval of values maps onto an interval of coordinates.
      Strings sharing their first 6 bytes collide on one coordinate: candidates from the
      index are always confirmed by an exact check, so a collision costs a comparison, never
      a missed event.  Six bytes keep the fraction exact in a float64 (48 of 53 bits).

    Coordinates are clamped into the attribute's domain [min, max]; an event whose value had
    to be clamped is *unclean* and all its candidates get the exact check.  Below the domain
    sits one extra coordinate, **NULL** = min - (max - min), for "the event has no such
    attribute": a filter that does not mention an attribute spans [NULL, max] there, one that
    constrains it (or asks ``exists``) stays inside [min, max], so events lacking an attribute
    are pruned by the index instead of by exact checks.

Reading an event (:meth:`Schema.extract`)
    Each attribute's XPath is evaluated once, compiled, with the event element as the context
    node (as filters are).  Every selected node gives a value: an attribute or text node its
    string; an element its string-value, or, when that is blank and the element has ``min``
    and/or ``max`` attributes, the *range* they give (a hypercube event, eCube: see below).
    Numbers must look like numbers (``[+-]digits[.digits][e[+-]digits]``, surrounding white
    space allowed); strings are taken verbatim, white space included, as XPath compares them.
    Nodes whose value does not parse are skipped; no parseable node means the attribute is
    absent.  Several values make the event span their hull [smallest, largest].

Hypercube events (eCube)
    ``<q:price min="10" max="20"/>`` makes the event a box on that dimension (a missing bound
    is unbounded); a filter then matches when its rectangle *intersects* the event's box.
    Point subscriptions (``price = 15``) against range events give the symmetric case
    ("event notifications contain subscriptions"); both are one intersection query.

Modules
    :mod:`.model` (:class:`Attribute`, :class:`Schema` and their XML), :mod:`.codecs`
    (value types, parsing, coordinates), :mod:`.intervals` (:class:`~.intervals.Interval`),
    :mod:`.extraction` (reading an event into an :class:`~.extraction.EventBox`).
"""

from .codecs import DATETIME, NUMBER, STRING, TYPES
from .model import Attribute, InvalidSchema, Schema

__all__ = ["Schema", "Attribute", "InvalidSchema", "NUMBER", "STRING", "DATETIME", "TYPES"]
