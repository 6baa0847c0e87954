"""Publishers deliver claimed outbox messages to a broker; see :mod:`.base`."""
