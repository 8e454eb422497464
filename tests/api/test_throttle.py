"""Login throttling on ``/api/v1/token/``: 5 requests per minute per (username, client address), then 429 in the
API's error format; other usernames and other addresses are counted apart. The endpoint takes JSON only."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

TOKEN = "/api/v1/token/"


def login(password: str, username: str = "alice", addr: str = "127.0.0.1"):
    return APIClient().post(
        TOKEN, {"username": username, "password": password}, format="json", REMOTE_ADDR=addr
    )


def test_the_sixth_attempt_in_a_minute_is_throttled_even_with_the_right_password(alice):
    for _ in range(5):
        assert login("wrong").status_code == 400
    throttled = login("pw-alice-1")
    assert throttled.status_code == 429
    (error,) = throttled.json()["errors"]
    assert error["loc"] == "" and "throttled" in error["msg"]
    assert int(throttled["Retry-After"]) > 0
    assert "token" not in throttled.json()


def test_other_usernames_and_addresses_are_counted_apart(alice, bob):
    for _ in range(5):
        login("wrong")
    assert login("wrong").status_code == 429
    assert login("pw-bob-1", username="bob").json()["token"]
    assert login("pw-alice-1", addr="127.0.0.2").json()["token"]


def test_a_correct_login_returns_the_token(alice):
    response = login("pw-alice-1")
    assert response.status_code == 200 and len(response.json()["token"]) == 40


def test_the_token_endpoint_takes_json_only(alice):
    response = APIClient().post(TOKEN, {"username": "alice", "password": "pw-alice-1"})  # multipart
    assert response.status_code == 415
    assert response.json()["errors"][0]["loc"] == "Content-Type"
