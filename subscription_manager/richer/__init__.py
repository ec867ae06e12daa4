"""Richer subscriptions (issue 17): stateful range-aggregate subscriptions and notification conditions over the stateless EDN."""
