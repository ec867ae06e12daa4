"""The integration tests' sink is the product's own :class:`NotificationSink`."""
from edn.sink import NotificationSink as HttpSink, ReceivedMessage

__all__ = ["HttpSink", "ReceivedMessage"]
