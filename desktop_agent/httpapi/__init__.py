"""The local HTTP API (``desktop-agent serve``): scripts start, watch and steer runs.

Only on 127.0.0.1, only with the bearer token (:mod:`~desktop_agent.httpapi.auth`), never
for a browser (a request with an ``Origin`` header is refused and no CORS header is ever
sent). Starlette on uvicorn; every blocking call to the client runs in a thread.
"""
