"""What the tests share that is not a fixture: daemons and sessions, raw JSON-RPC, gates, fakes' waits.

Fixtures stay in ``tests/conftest.py``; test modules import helpers from here, never from each other.
"""
