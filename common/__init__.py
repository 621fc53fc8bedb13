"""Small helpers below every app: HTTP, database routing, the broker and its queues, the request
body limit, middleware, Plotly's config and escaping, ISO weeks. It imports no app."""
