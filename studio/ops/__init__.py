"""Operations: the /metrics endpoint (metrics.py, views.py)."""
