"""The list of every run a user may see, try-it and served (/runs/, GET /api/runs).

Below runs, deployments and review in docs/architecture.md's order: it reads the rows of
all three and nothing imports it but the URLs and the API."""
