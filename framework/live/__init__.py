"""The edges for live trading: REST, WebSocket, scheduler, journal, recorder, node."""
