from __future__ import annotations

from django.test import Client

ROUTES = [
    "/api/projects",
    "/api/projects/upload",
    "/api/projects/{slug}",
    "/api/projects/{slug}/versions",
    "/api/projects/{slug}/files",
    "/api/projects/{slug}/files/{path}",
    "/api/projects/{slug}/diff",
    "/api/projects/{slug}/validate",
    "/api/projects/{slug}/download",
    "/api/tokens",
    "/api/tokens/{token_id}",
]


def test_it_renders_the_openapi_document(as_owner: Client) -> None:
    answer = as_owner.get("/api/openapi.json")
    assert answer.status_code == 200
    doc = answer.json()
    assert set(ROUTES) <= set(doc["paths"])
    schemes = doc["components"]["securitySchemes"]
    assert any(s.get("scheme") == "bearer" for s in schemes.values())
    for path in ROUTES:
        for operation in doc["paths"][path].values():
            assert operation.get("security"), f"{path} must be authenticated"


def test_it_renders_the_docs_page(as_owner: Client) -> None:
    answer = as_owner.get("/api/docs")
    assert answer.status_code == 200
    assert b"/static/ninja/swagger-ui-bundle.js" in answer.content and b"/api/openapi.json" in answer.content


def test_it_serves_the_docs_page_without_a_cdn(as_owner: Client) -> None:
    assert b"cdn." not in as_owner.get("/api/docs").content


def test_it_keeps_the_docs_behind_login(db: None) -> None:
    answer = Client().get("/api/docs")
    assert answer.status_code == 302 and answer["Location"].startswith("/login/")


def test_it_declares_the_one_error_shape_on_every_operation_of_every_router(as_owner: Client) -> None:
    doc = as_owner.get("/api/openapi.json").json()
    assert doc["components"]["schemas"]["ErrorOut"]["properties"] == {"detail": {"title": "Detail", "type": "string"}}
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            for status in ("401", "403", "404"):
                answer = operation["responses"].get(status)
                assert answer, f"{method} {path} declares no {status}"
                assert answer["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorOut"}


def test_it_answers_a_url_no_api_route_matches_in_the_api_shape(as_owner: Client) -> None:
    for url in ("/api/nope", "/api/projects/triage/files/a%0Ab"):
        answer = as_owner.get(url)
        assert answer.status_code == 404 and answer.json() == {"detail": "Not found"}
    page = as_owner.get("/nope/")
    assert page.status_code == 404 and page["Content-Type"].startswith("text/html")
