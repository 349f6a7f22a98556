"""bookchat.base.api: what every app's REST API shares. A strict request contract (an object, no unknown field, the
first failing field in order as the error), the one error body as the schema states it, and the caller as an app
that owns no keys asks about it (chat's clients answer)."""

from __future__ import annotations

import pytest
from rest_framework import serializers

from bookchat.base.api import ERRORS, ApiCaller, ErrorSerializer, StrictSerializer
from bookchat.base.errors import RequestError, error_body
from chat.channels.access import Client, PublisherClient
from chat.models import ApiKey


class Query(StrictSerializer):
    order = ("size", "colour")
    size = serializers.IntegerField(min_value=1)
    colour = serializers.ChoiceField(["red", "blue"])


@pytest.mark.parametrize(("data", "code", "field"), [
    ([], "invalid_body", None),
    ({"size": 2, "colour": "red", "shape": "round"}, "unknown_field", "shape"),
    ({"size": 0, "colour": "green"}, "min_value", "size"),  # both fail: the first in order is the error
    ({"size": 2, "colour": "green"}, "invalid_choice", "colour"),
])
def test_a_strict_contract_refuses_with_one_error(data, code, field):
    with pytest.raises(RequestError) as refused:
        Query(data=data).checked()
    assert (refused.value.code, refused.value.field) == (code, field)


def test_a_strict_contract_gives_the_validated_data():
    assert Query(data={"size": "3", "colour": "blue"}).checked() == {"size": 3, "colour": "blue"}


def test_every_error_status_states_the_one_error_body():
    assert set(ErrorSerializer().fields) == set(error_body("code", "message"))
    assert {400, 401, 403, 404, 429, 500, 503} <= set(ERRORS)
    assert all(response.response is ErrorSerializer for response in ERRORS.values())


def test_chats_clients_are_the_callers_other_apps_ask():
    assert isinstance(Client("api"), ApiCaller)
    assert (Client("api").key_label, Client("api").publishes) == (None, None)
    key = ApiKey(name="docs CI", kind=ApiKey.SECRET, publish_book="guide")
    key.issue()
    assert PublisherClient(key=key).publishes == "guide"
    assert Client("api", ApiKey(name="backend", kind=ApiKey.SECRET, prefix="sk_abc")).publishes is None

    class Half(ApiCaller):
        @property
        def key_label(self):
            return None

    with pytest.raises(TypeError):
        Half()  # a caller that doesn't say which book it publishes is no caller
